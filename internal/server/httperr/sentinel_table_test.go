package httperr_test

import (
	"net/http"

	"github.com/brandgw/brand/bucket"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/lance"
	fvideo "github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/units/buckets"
	clipunit "github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/batch/units/runs"
	"github.com/brandgw/brand/internal/batch/units/tokens"
	visionunit "github.com/brandgw/brand/internal/batch/units/vision"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/disktier"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/cluster/storepath"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/task"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/shuffle/gopshuffle"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/transform"
	videodec "github.com/brandgw/brand/transform/video"
	"github.com/brandgw/brand/vision"
)

// served are the exported sentinels of the packages the server links
// (cmd/brand), with the status, reason and message a client meets them
// with.
var served = []sentinelCase{
	{"api.ErrClip", api.ErrClip, http.StatusBadRequest, "bad_request", false},
	{"api.ErrMix", api.ErrMix, http.StatusInternalServerError, "internal", true},
	{"api.ErrPlanBudget", api.ErrPlanBudget, http.StatusServiceUnavailable, "plan_budget", false},
	{"balance.ErrInvalid", balance.ErrInvalid, http.StatusBadRequest, "bad_request", false},
	{"chunkindex.ErrCorrupt", chunkindex.ErrCorrupt, http.StatusBadGateway, "store_mismatch", true},
	{"chunkindex.ErrDuplicateKey", chunkindex.ErrDuplicateKey, http.StatusInternalServerError, "internal", true},
	{"chunkindex.ErrInvalid", chunkindex.ErrInvalid, http.StatusInternalServerError, "internal", true},
	{"chunkindex.ErrTruncated", chunkindex.ErrTruncated, http.StatusInternalServerError, "internal", true},
	{"chunkindex.ErrUnsupportedMember", chunkindex.ErrUnsupportedMember, http.StatusInternalServerError, "internal", true},
	{"chunkindex.ErrVersion", chunkindex.ErrVersion, http.StatusInternalServerError, "internal", true},
	{"chunkindex.ErrWriterClosed", chunkindex.ErrWriterClosed, http.StatusInternalServerError, "internal", true},
	{"cluster.ErrConfig", cluster.ErrConfig, http.StatusInternalServerError, "internal", true},
	{"dataset.ErrCannotAppend", dataset.ErrCannotAppend, http.StatusBadRequest, "bad_request", false},
	{"dataset.ErrEmpty", dataset.ErrEmpty, http.StatusInternalServerError, "internal", true},
	{"dataset.ErrExists", dataset.ErrExists, http.StatusInternalServerError, "internal", true},
	{"dataset.ErrNoFormat", dataset.ErrNoFormat, http.StatusInternalServerError, "internal", true},
	{"dataset.ErrNothingNew", dataset.ErrNothingNew, http.StatusBadRequest, "bad_request", false},
	{"dataset.ErrSkipUnsupported", dataset.ErrSkipUnsupported, http.StatusBadRequest, "bad_request", false},
	{"dataset/stored.ErrChecksum", stored.ErrChecksum, http.StatusBadGateway, "store_mismatch", true},
	{"dataset/stored.ErrNoMembers", stored.ErrNoMembers, http.StatusInternalServerError, "internal", true},
	{"format.ErrDamaged", format.ErrDamaged, http.StatusInternalServerError, "internal", true},
	{"format.ErrInvalid", format.ErrInvalid, http.StatusInternalServerError, "internal", true},
	{"format.ErrNotImageText", format.ErrNotImageText, http.StatusBadRequest, "bad_request", false},
	{"format.ErrNotStreamed", format.ErrNotStreamed, http.StatusInternalServerError, "internal", true},
	{"format.ErrOverBound", format.ErrOverBound, http.StatusInternalServerError, "internal", true},
	{"format.ErrUnsupported", format.ErrUnsupported, http.StatusInternalServerError, "internal", true},
	{"format/lance.ErrOverLimit", lance.ErrOverLimit, http.StatusInternalServerError, "internal", true},
	{"format/video.ErrColumn", fvideo.ErrColumn, http.StatusInternalServerError, "internal", true},
	{"format/video/clips.ErrInvalid", clips.ErrInvalid, http.StatusInternalServerError, "internal", true},
	{"format/video/mp4.ErrInvalid", mp4.ErrInvalid, http.StatusInternalServerError, "internal", true},
	{"format/video/mp4.ErrLimit", mp4.ErrLimit, http.StatusInternalServerError, "internal", true},
	{"format/video/mp4.ErrNoVideo", mp4.ErrNoVideo, http.StatusInternalServerError, "internal", true},
	{"format/video/mp4.ErrUnsupported", mp4.ErrUnsupported, http.StatusInternalServerError, "internal", true},
	{"gateway.ErrNotImplemented", gateway.ErrNotImplemented, http.StatusNotImplemented, "not_implemented", false},
	{"gateway.ErrPlanBusy", gateway.ErrPlanBusy, http.StatusServiceUnavailable, "plan_busy", false},
	{"gateway.ErrStalled", gateway.ErrStalled, http.StatusServiceUnavailable, "stalled", false},
	{"bucket.ErrSpec", bucket.ErrSpec, http.StatusBadRequest, "bad_request", false},
	{"imagesize.ErrFile", imagesize.ErrFile, http.StatusBadGateway, "store_mismatch", true},
	{"importance.ErrBadFeedback", importance.ErrBadFeedback, http.StatusBadRequest, "bad_request", false},
	{"importance.ErrCorrupt", importance.ErrCorrupt, http.StatusInternalServerError, "internal", true},
	{"importance.ErrInvalid", importance.ErrInvalid, http.StatusInternalServerError, "internal", true},
	{"importance.ErrMismatch", importance.ErrMismatch, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/layout.ErrBeforePrevious", layout.ErrBeforePrevious, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/layout.ErrNoEdit", layout.ErrNoEdit, http.StatusNotFound, "not_found", false},
	{"internal/batch/layout.ErrNoSnapshot", layout.ErrNoSnapshot, http.StatusNotFound, "not_found", false},
	{"internal/batch/layout.ErrNoUnit", layout.ErrNoUnit, http.StatusNotImplemented, "not_implemented", false},
	{"internal/batch/layout.ErrOutOfRange", layout.ErrOutOfRange, http.StatusNotFound, "not_found", false},
	{"internal/batch/reader.ErrNotTogether", reader.ErrNotTogether, http.StatusInternalServerError, "internal", true},
	{"internal/batch/reader.ErrTooLarge", reader.ErrTooLarge, http.StatusBadRequest, "too_large", false},
	{"internal/batch/respond.ErrShort", respond.ErrShort, http.StatusInternalServerError, "internal", true},
	{"internal/batch/sequences.ErrDocument", sequences.ErrDocument, http.StatusBadGateway, "store_mismatch", true},
	{"internal/batch/units/buckets.ErrFitsNone", buckets.ErrFitsNone, http.StatusUnprocessableEntity, "unprocessable", false},
	{"internal/batch/reader.ErrUnread", reader.ErrUnread, http.StatusUnprocessableEntity, "unprocessable", false},
	{"internal/batch/sequences.ErrTokenID", sequences.ErrTokenID, http.StatusUnprocessableEntity, "unprocessable", false},
	{"internal/batch/sequences.ErrTooLarge", sequences.ErrTooLarge, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/tensorize.ErrBusy", tensorize.ErrBusy, http.StatusServiceUnavailable, "transform_busy", false},
	{"internal/batch/tensorize.ErrClipInput", tensorize.ErrClipInput, http.StatusUnprocessableEntity, "bad_video", false},
	{"internal/batch/tensorize.ErrClosed", tensorize.ErrClosed, http.StatusServiceUnavailable, "shutting_down", false},
	{"internal/batch/tensorize.ErrTooLarge", tensorize.ErrTooLarge, http.StatusBadRequest, "too_large", false},
	{"internal/batch/units/clips.ErrClips", clipunit.ErrClips, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/units/mixture.ErrNotMixable", mixture.ErrNotMixable, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/units/runs.ErrRuns", runs.ErrRuns, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/units/tokens.ErrTokens", tokens.ErrTokens, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/units/vision.ErrVision", visionunit.ErrVision, http.StatusBadRequest, "bad_request", false},
	{"internal/batch/units/vision.ErrVisionMissing", visionunit.ErrVisionMissing, http.StatusBadGateway, "store_mismatch", true},
	{"internal/batch/visit.ErrFingerprint", visit.ErrFingerprint, http.StatusBadRequest, "bad_request", false},
	{"internal/cache/chunkcache.ErrBusy", chunkcache.ErrBusy, http.StatusServiceUnavailable, "cache_busy", false},
	{"internal/cache/chunkcache.ErrClosed", chunkcache.ErrClosed, http.StatusInternalServerError, "internal", true},
	{"internal/cache/chunkcache.ErrTooLarge", chunkcache.ErrTooLarge, http.StatusBadRequest, "too_large", false},
	{"internal/cache/disktier.ErrUnchecked", disktier.ErrUnchecked, http.StatusInternalServerError, "internal", true},
	{"internal/cache/usetable.ErrRankBusy", usetable.ErrRankBusy, http.StatusServiceUnavailable, "cache_busy", false},
	{"internal/cache/usetable.ErrStreamBusy", usetable.ErrStreamBusy, http.StatusServiceUnavailable, "cache_busy", false},
	{"internal/cli.ErrUsage", cli.ErrUsage, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/membership.ErrEmpty", membership.ErrEmpty, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/membership.ErrUnknownMembers", membership.ErrUnknownMembers, http.StatusConflict, "members_version", false},
	{"internal/cluster/peercred.ErrNotMember", peercred.ErrNotMember, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/peercred.ErrOtherBoot", peercred.ErrOtherBoot, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/peercred.ErrUnauthenticated", peercred.ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated", false},
	{"internal/cluster/storepath.ErrUnreachable", storepath.ErrUnreachable, http.StatusServiceUnavailable, "store_unavailable", true},
	{"internal/cluster/transport.ErrBadRequest", transport.ErrBadRequest, http.StatusBadRequest, "bad_request", false},
	{"internal/cluster/transport.ErrDown", transport.ErrDown, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/transport.ErrNotHeld", transport.ErrNotHeld, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/transport.ErrPeerStoreUnreachable", transport.ErrPeerStoreUnreachable, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/transport.ErrRefused", transport.ErrRefused, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/transport.ErrTimeout", transport.ErrTimeout, http.StatusInternalServerError, "internal", true},
	{"internal/cluster/transport.ErrVersion", transport.ErrVersion, http.StatusInternalServerError, "internal", true},
	{"internal/codec/npy.ErrFormat", npy.ErrFormat, http.StatusInternalServerError, "internal", true},
	{"internal/codec/npy.ErrTooLong", npy.ErrTooLong, http.StatusInternalServerError, "internal", true},
	{"internal/codec/ustar.ErrTime", ustar.ErrTime, http.StatusInternalServerError, "internal", true},
	{"internal/job/catalog.ErrCorrupt", catalog.ErrCorrupt, http.StatusBadGateway, "store_mismatch", true},
	{"internal/job/catalog.ErrGrown", catalog.ErrGrown, http.StatusServiceUnavailable, "unavailable", true},
	{"internal/job/catalog.ErrNoSizes", catalog.ErrNoSizes, http.StatusBadRequest, "bad_request", false},
	{"internal/job/catalog.ErrNoVisionFacts", catalog.ErrNoVisionFacts, http.StatusBadRequest, "bad_request", false},
	{"internal/job/catalog.ErrNotReady", catalog.ErrNotReady, http.StatusServiceUnavailable, "not_ready", false},
	{"internal/job/catalog.ErrSelect", catalog.ErrSelect, http.StatusBadRequest, "bad_request", false},
	{"internal/job/catalog.ErrUnknown", catalog.ErrUnknown, http.StatusNotFound, "not_found", false},
	{"internal/job/catalog.ErrVersion", catalog.ErrVersion, http.StatusConflict, "index_version", false},
	{"internal/job/feedback.ErrBadFeedback", feedback.ErrBadFeedback, http.StatusBadRequest, "bad_request", false},
	{"internal/job/feedback.ErrBusy", feedback.ErrBusy, http.StatusServiceUnavailable, "feedback_busy", false},
	{"internal/job/feedback.ErrNoFeedback", feedback.ErrNoFeedback, http.StatusConflict, "conflict", false},
	{"internal/job/feedback.ErrSealed", feedback.ErrSealed, http.StatusConflict, "conflict", false},
	{"internal/job/feedback.ErrStale", feedback.ErrStale, http.StatusConflict, "conflict", false},
	{"internal/job/chain.ErrConflict", chain.ErrConflict, http.StatusConflict, "conflict", false},
	{"internal/job/chain.ErrNotExtending", chain.ErrNotExtending, http.StatusUnprocessableEntity, "unprocessable", false},
	{"internal/job/chain.ErrNotOfVersion", chain.ErrNotOfVersion, http.StatusConflict, "conflict", false},
	{"internal/job/chain.ErrTooMany", chain.ErrTooMany, http.StatusUnprocessableEntity, "unprocessable", false},
	{"internal/job/chain.ErrUnknown", chain.ErrUnknown, http.StatusNotFound, "not_found", false},
	{"internal/job/chain.ErrUnknownKeys", chain.ErrUnknownKeys, http.StatusUnprocessableEntity, "unprocessable", false},
	{"internal/job/features.ErrIncompatible", features.ErrIncompatible, http.StatusBadRequest, "bad_request", false},
	{"internal/job/features.ErrNotPlanned", features.ErrNotPlanned, http.StatusNotImplemented, "not_implemented", false},
	{"internal/job/query.ErrNotServed", query.ErrNotServed, http.StatusNotImplemented, "not_implemented", false},
	{"internal/job/jobsched.ErrConflict", jobsched.ErrConflict, http.StatusConflict, "conflict", false},
	{"internal/job/jobsched.ErrUnasked", jobsched.ErrUnasked, http.StatusServiceUnavailable, "member_unasked", false},
	{"internal/job/jobsched.ErrUnknown", jobsched.ErrUnknown, http.StatusNotFound, "not_found", false},
	{"internal/job/plans.ErrBusy", plans.ErrBusy, http.StatusServiceUnavailable, "plan_busy", false},
	{"internal/task.ErrDamaged", task.ErrDamaged, http.StatusBadGateway, "store_mismatch", true},
	{"internal/task.ErrBadAnswer", task.ErrBadAnswer, http.StatusUnprocessableEntity, "unprocessable", false},
	{"internal/task.ErrBadRequest", task.ErrBadRequest, http.StatusBadRequest, "bad_request", false},
	{"internal/task.ErrBadSpec", task.ErrBadSpec, http.StatusBadRequest, "bad_request", false},
	{"internal/task.ErrDone", task.ErrDone, http.StatusNotFound, "not_found", false},
	{"internal/task.ErrEditStep", task.ErrEditStep, http.StatusConflict, "conflict", false},
	{"internal/task.ErrExists", task.ErrExists, http.StatusConflict, "conflict", false},
	{"internal/task.ErrForgotten", task.ErrForgotten, http.StatusNotFound, "not_found", false},
	{"internal/task.ErrLease", task.ErrLease, http.StatusConflict, "conflict", false},
	{"internal/task.ErrNotFull", task.ErrNotFull, http.StatusServiceUnavailable, "task_step", false},
	{"internal/task.ErrStore", task.ErrStore, http.StatusServiceUnavailable, "unavailable", true},
	{"internal/task.ErrTaskJob", task.ErrTaskJob, http.StatusConflict, "conflict", false},
	{"internal/task.ErrTooManyJobs", task.ErrTooManyJobs, http.StatusServiceUnavailable, "task_jobs", false},
	{"internal/task.ErrUnknownJob", task.ErrUnknownJob, http.StatusNotFound, "not_found", false},
	{"internal/task.ErrWindow", task.ErrWindow, http.StatusServiceUnavailable, "task_window", false},
	{"internal/job/query.ErrBadRequest", query.ErrBadRequest, http.StatusBadRequest, "bad_request", false},
	{"internal/job/query.ErrOutOfRange", query.ErrOutOfRange, http.StatusNotFound, "not_found", false},
	{"internal/s3face/s3auth.ErrCredentials", s3auth.ErrCredentials, http.StatusInternalServerError, "internal", true},
	{"internal/server/httperr.ErrNotImplemented", httperr.ErrNotImplemented, http.StatusNotImplemented, "not_implemented", false},
	{"internal/server/httperr.ErrPlanBusy", httperr.ErrPlanBusy, http.StatusServiceUnavailable, "plan_busy", false},
	{"internal/server/httperr.ErrStalled", httperr.ErrStalled, http.StatusServiceUnavailable, "stalled", false},
	{"internal/server/reqbody.ErrBadJSON", reqbody.ErrBadJSON, http.StatusBadRequest, "bad_request", false},
	{"internal/server/reqbody.ErrDeadline", reqbody.ErrDeadline, http.StatusBadRequest, "bad_request", false},
	{"internal/server/reqbody.ErrTooLarge", reqbody.ErrTooLarge, http.StatusBadRequest, "bad_request", false},
	{"planner.ErrBudget", planner.ErrBudget, http.StatusServiceUnavailable, "plan_budget", false},
	{"planner.ErrInvalid", planner.ErrInvalid, http.StatusInternalServerError, "internal", true},
	{"s3backend.ErrBudget", s3backend.ErrBudget, http.StatusBadRequest, "bad_request", false},
	{"s3backend.ErrChanged", s3backend.ErrChanged, http.StatusBadGateway, "store_mismatch", true},
	{"s3backend.ErrExists", s3backend.ErrExists, http.StatusInternalServerError, "internal", true},
	{"s3backend.ErrInvalidKey", s3backend.ErrInvalidKey, http.StatusInternalServerError, "internal", true},
	{"s3backend.ErrNoBucket", s3backend.ErrNoBucket, http.StatusInternalServerError, "internal", true},
	{"s3backend.ErrNotFound", s3backend.ErrNotFound, http.StatusBadGateway, "store_mismatch", true},
	{"s3backend.ErrOutOfRange", s3backend.ErrOutOfRange, http.StatusBadGateway, "store_mismatch", true},
	{"s3backend.ErrOutside", s3backend.ErrOutside, http.StatusBadGateway, "store_mismatch", true},
	{"s3backend.ErrUnavailable", s3backend.ErrUnavailable, http.StatusServiceUnavailable, "store_unavailable", true},
	{"seqpack.ErrInvalid", seqpack.ErrInvalid, http.StatusBadRequest, "bad_request", false},
	{"shuffle.ErrInvalid", shuffle.ErrInvalid, http.StatusBadRequest, "bad_request", false},
	{"shuffle.ErrOutOfRange", shuffle.ErrOutOfRange, http.StatusNotFound, "not_found", false},
	{"shuffle/gopshuffle.ErrInvalid", gopshuffle.ErrInvalid, http.StatusInternalServerError, "internal", true},
	{"tokenize.ErrDamagedModel", tokenize.ErrDamagedModel, http.StatusInternalServerError, "internal", true},
	{"tokenize.ErrNotModel", tokenize.ErrNotModel, http.StatusInternalServerError, "internal", true},
	{"tokenize.ErrPattern", tokenize.ErrPattern, http.StatusInternalServerError, "internal", true},
	{"tokenize.ErrTextTooLong", tokenize.ErrTextTooLong, http.StatusInternalServerError, "internal", true},
	{"tokenize.ErrTooLarge", tokenize.ErrTooLarge, http.StatusInternalServerError, "internal", true},
	{"tokenize.ErrUnsupported", tokenize.ErrUnsupported, http.StatusInternalServerError, "internal", true},
	{"transform.ErrDecode", transform.ErrDecode, http.StatusUnprocessableEntity, "bad_image", false},
	{"transform.ErrSpec", transform.ErrSpec, http.StatusInternalServerError, "internal", true},
	{"transform.ErrTooLarge", transform.ErrTooLarge, http.StatusUnprocessableEntity, "bad_image", false},
	{"transform.ErrUnknownPipeline", transform.ErrUnknownPipeline, http.StatusBadRequest, "unknown_pipeline", false},
	{"transform.ErrNeedsTurboJPEG", transform.ErrNeedsTurboJPEG, http.StatusBadRequest, "needs_turbojpeg", false},
	{"vision.ErrBadImage", vision.ErrBadImage, http.StatusUnprocessableEntity, "bad_image", false},
	{"vision.ErrFactsFile", vision.ErrFactsFile, http.StatusBadGateway, "store_mismatch", true},
	{"vision.ErrImageBounds", vision.ErrImageBounds, http.StatusUnprocessableEntity, "bad_image", false},
	{"vision.ErrPlaceholders", vision.ErrPlaceholders, http.StatusUnprocessableEntity, "unprocessable", false},
	{"vision.ErrRule", vision.ErrRule, http.StatusBadRequest, "bad_request", false},
	{"vision.ErrSample", vision.ErrSample, http.StatusUnprocessableEntity, "unprocessable", false},
	{"vision.ErrSequence", vision.ErrSequence, http.StatusInternalServerError, "internal", true},
	{"vision.ErrTooLong", vision.ErrTooLong, http.StatusUnprocessableEntity, "unprocessable", false},
	{"transform/video.ErrCodec", videodec.ErrCodec, http.StatusUnprocessableEntity, "bad_video", false},
	{"transform/video.ErrDecode", videodec.ErrDecode, http.StatusUnprocessableEntity, "bad_video", false},
	{"transform/video.ErrNoDecoder", videodec.ErrNoDecoder, http.StatusNotImplemented, "no_video_decoder", false},
	{"transform/video.ErrRun", videodec.ErrRun, http.StatusUnprocessableEntity, "bad_video", false},
	{"transform/video.ErrTooLarge", videodec.ErrTooLarge, http.StatusUnprocessableEntity, "bad_video", false},
}

// elsewhere are the exported sentinels of the packages the server does
// not link: a client's, the harness's.
var elsewhere = []namedError{
	{"client.ErrBadResponse", client.ErrBadResponse},
	{"client.ErrIndexChanged", client.ErrIndexChanged},
	{"client.ErrInvalid", client.ErrInvalid},
	{"client.ErrMembersUnknown", client.ErrMembersUnknown},
	{"client.ErrNoImportanceJob", client.ErrNoImportanceJob},
	{"client.ErrNoJobName", client.ErrNoJobName},
	{"client.ErrShortBody", client.ErrShortBody},
}
