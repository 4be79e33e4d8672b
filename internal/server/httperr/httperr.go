// Package httperr is where an error meets HTTP: the status a client sees
// for it (Status), what a client may be told of a failure on the server's
// side (Public), and the note that carries the error a response does not
// show, and the route of a handler that routes by itself, to the request's
// access log line (Note).
//
// Every sentinel error of the parts the gateway and the S3 face wire is
// mapped here, once: both faces answer the same error with the same
// status (the S3 face then names it with S3's code), and both keep the
// store's endpoint, bucket and paths out of what they tell a client.
package httperr

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// Errors of the faces' own, beside those of the parts they wire (each
// part's package names its own).
var (
	// ErrStalled means requests wait for cache room, or for room to
	// assemble or copy a batch, and none is let through: the server
	// cannot make progress for now.
	ErrStalled = errors.New("not ready: stalled")
	// ErrNotImplemented marks a feature the server was built without, or
	// a request it does not model.
	ErrNotImplemented = errors.New("not implemented")
	// ErrPlanBusy means every plan slot stayed taken while a plan waited
	// for one.
	ErrPlanBusy = errors.New("busy: plans")
)

// RetryAfter is what 503 responses advise; clients back off at least this.
const RetryAfter = 2 * time.Second

// Status maps an error to the HTTP status a client should see.
func Status(err error) int {
	switch {
	case errors.Is(err, peercred.ErrUnauthenticated):
		// First: a peer's body that is not the one its credential covers
		// fails the read that a 400 would otherwise report.
		return http.StatusUnauthorized
	case errors.Is(err, query.ErrBadRequest), errors.Is(err, shuffle.ErrInvalid), errors.Is(err, chunkcache.ErrTooLarge),
		errors.Is(err, reader.ErrTooLarge), errors.Is(err, importance.ErrBadFeedback), errors.Is(err, importance.ErrMismatch),
		errors.Is(err, transform.ErrUnknownPipeline), errors.Is(err, tensorize.ErrTooLarge), errors.Is(err, catalog.ErrSelect),
		errors.Is(err, reqbody.ErrTooLarge), errors.Is(err, reqbody.ErrBadJSON), errors.Is(err, seqpack.ErrInvalid), errors.Is(err, sequences.ErrTooLarge),
		errors.Is(err, balance.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, video.ErrNoDecoder):
		// A clip job on a build without libavcodec (-tags brand_libav).
		return http.StatusNotImplemented
	case errors.Is(err, transform.ErrDecode), errors.Is(err, transform.ErrTooLarge), errors.Is(err, sequences.ErrTokenID),
		errors.Is(err, video.ErrCodec), errors.Is(err, video.ErrTooLarge), errors.Is(err, video.ErrDecode), errors.Is(err, video.ErrRun):
		// A video's: a codec this build does not decode, frames over the
		// bound (or a decode over the node's memory for decodes), packets
		// that do not decode to the frames the index names.
		// The batch holds an image its pipeline cannot transform: the
		// request is well formed and the store matches its index, but
		// the content cannot be processed; retrying will not help.
		return http.StatusUnprocessableEntity
	case errors.Is(err, query.ErrOutOfRange), errors.Is(err, layout.ErrOutOfRange), errors.Is(err, shuffle.ErrOutOfRange),
		errors.Is(err, catalog.ErrUnknown), errors.Is(err, layout.ErrNoSnapshot), errors.Is(err, jobsched.ErrUnknown):
		return http.StatusNotFound
	case errors.Is(err, catalog.ErrVersion), errors.Is(err, feedback.ErrSealed), errors.Is(err, feedback.ErrNoFeedback),
		errors.Is(err, feedback.ErrStale), errors.Is(err, membership.ErrUnknownMembers), errors.Is(err, jobsched.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, catalog.ErrNotReady), errors.Is(err, ErrStalled), errors.Is(err, catalog.ErrGrown), errors.Is(err, s3backend.ErrUnavailable), errors.Is(err, chunkcache.ErrBusy),
		errors.Is(err, feedback.ErrBusy), errors.Is(err, ErrPlanBusy), errors.Is(err, api.ErrPlanBudget), errors.Is(err, tensorize.ErrClosed),
		errors.Is(err, tensorize.ErrBusy), errors.Is(err, jobsched.ErrUnasked):
		return http.StatusServiceUnavailable
	case errors.Is(err, s3backend.ErrChanged), errors.Is(err, catalog.ErrCorrupt), errors.Is(err, s3backend.ErrNotFound),
		errors.Is(err, s3backend.ErrOutOfRange), errors.Is(err, chunkindex.ErrCorrupt), errors.Is(err, sequences.ErrDocument),
		errors.Is(err, dataset.ErrChecksum):
		// The store no longer matches the index (a chunk, or a sample
		// table a node read from the stored index; an object shorter
		// than the index says; a token document not as indexed; a file
		// served in place whose bytes fail the index's checksums):
		// retrying will not help.
		return http.StatusBadGateway
	case errors.Is(err, ErrNotImplemented):
		return http.StatusNotImplemented
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		return 499 // client went away; only ever seen in logs
	default:
		return http.StatusInternalServerError
	}
}

// Public is what a client is told of a failure on the server's side, or
// "" when err's own message may be sent: a client learns what it did
// wrong (4xx) in full, and the server's own 5xx answers — not ready,
// stalled, busy, not implemented — say nothing internal. Any other
// failure's error names the store's endpoint, bucket, prefix or local
// paths, which are the operator's business: the caller notes it for the
// access log (NoteError) and sends this instead.
func Public(status int, err error) string {
	switch {
	case status < 500, errors.Is(err, catalog.ErrNotReady), errors.Is(err, ErrStalled),
		errors.Is(err, chunkcache.ErrBusy), errors.Is(err, feedback.ErrBusy), errors.Is(err, ErrNotImplemented), errors.Is(err, video.ErrNoDecoder),
		errors.Is(err, ErrPlanBusy), errors.Is(err, api.ErrPlanBudget), errors.Is(err, tensorize.ErrClosed), errors.Is(err, tensorize.ErrBusy),
		errors.Is(err, jobsched.ErrUnasked): // names a member, as GET /cluster does
		return ""
	case isDamaged(err):
		// The dataset, the chunk and the cause, in words that name no
		// store (DamagedChunkError.Public): what the operator must repair.
		dce, _ := errors.AsType[*catalog.DamagedChunkError](err)
		return dce.Public()
	case errors.Is(err, catalog.ErrCorrupt):
		return "a chunk failed its checksum: the store no longer matches the dataset's index"
	case status == http.StatusBadGateway:
		return "the store no longer matches the dataset's index: a chunk changed or vanished; rebuild the index with brand index"
	case status == http.StatusServiceUnavailable:
		return "the object store is unavailable; retry later"
	case status == http.StatusGatewayTimeout:
		return "the object store did not answer in time"
	default:
		return "internal error"
	}
}

// isDamaged reports whether err is a chunk damaged at rest.
func isDamaged(err error) bool {
	_, ok := errors.AsType[*catalog.DamagedChunkError](err)
	return ok
}
