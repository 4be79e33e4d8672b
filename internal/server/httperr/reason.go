package httperr

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// reasons name the errors an operator acts on differently although they
// share a status: a 503 for want of cache room (raise --cache-size or
// --copy-bytes) is not one for an unavailable store; a 400 for a batch
// over --max-batch-bytes is not a malformed request. First match wins.
var reasons = []struct {
	err  error
	name string
}{
	{catalog.ErrNotReady, "not_ready"},
	{ErrStalled, "stalled"},
	{chunkcache.ErrBusy, "cache_busy"},
	{tensorize.ErrBusy, "transform_busy"},
	{tensorize.ErrClosed, "shutting_down"},
	{s3backend.ErrUnavailable, "store_unavailable"},
	{feedback.ErrBusy, "feedback_busy"},
	{ErrPlanBusy, "plan_busy"},
	{api.ErrPlanBudget, "plan_budget"},
	{jobsched.ErrUnasked, "member_unasked"},
	{chunkcache.ErrTooLarge, "too_large"},
	{reader.ErrTooLarge, "too_large"},
	{tensorize.ErrTooLarge, "too_large"},
	{transform.ErrUnknownPipeline, "unknown_pipeline"},
	{video.ErrNoDecoder, "no_video_decoder"},
	{video.ErrCodec, "bad_video"},
	{video.ErrTooLarge, "bad_video"},
	{video.ErrDecode, "bad_video"},
	{video.ErrRun, "bad_video"},
	{transform.ErrDecode, "bad_image"},
	{transform.ErrTooLarge, "bad_image"},
	{catalog.ErrVersion, "index_version"},
	{membership.ErrUnknownMembers, "members_version"},
	{catalog.ErrCorrupt, "store_mismatch"},
	{s3backend.ErrChanged, "store_mismatch"},
	{dataset.ErrChecksum, "store_mismatch"},
	{s3backend.ErrNotFound, "store_mismatch"},
	{s3backend.ErrOutOfRange, "store_mismatch"},
	{context.DeadlineExceeded, "timeout"},
	{context.Canceled, "client_gone"},
}

// statusReasons name the other errors by their status.
var statusReasons = map[int]string{
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          "unauthenticated",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              "conflict",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnprocessableEntity:   "unprocessable",
	http.StatusTooManyRequests:       "too_many_requests",
	499:                              "client_gone",
	http.StatusInternalServerError:   "internal",
	http.StatusNotImplemented:        "not_implemented",
	http.StatusBadGateway:            "store_mismatch",
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusGatewayTimeout:        "timeout",
}

// Reason names why a request was answered with an error status, for the
// brand_http_errors_total metric: err's, when known (nil otherwise), else
// the status's. The names are few and fixed, so a
// metric labelled with them stays small.
func Reason(status int, err error) string {
	if isDamaged(err) {
		// A chunk damaged at rest is repaired, not re-indexed: told apart
		// from the store's other mismatches.
		return "damaged_chunk"
	}
	if err != nil {
		for _, r := range reasons {
			if errors.Is(err, r.err) {
				return r.name
			}
		}
	}
	if name, ok := statusReasons[status]; ok {
		return name
	}
	return "status_" + strconv.Itoa(status)
}
