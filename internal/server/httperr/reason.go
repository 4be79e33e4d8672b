package httperr

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/brandgw/brand/internal/errkind"
)

// reasons are the names errors carry (errkind.Named) for the operator to
// tell apart errors that share a status: a 503 for want of cache room
// (raise --cache-size or --copy-bytes) is not one for an unavailable
// store; a 400 for a batch over --max-batch-bytes is not a malformed
// request. They are the only names brand_http_errors_total counts beside
// the statuses', so the metric stays small. An error carrying several is
// counted under the first of them here.
var reasons = []string{
	"not_ready",
	"stalled",
	"cache_busy",
	"transform_busy",
	"shutting_down",
	"store_unavailable",
	"feedback_busy",
	"plan_busy",
	"plan_budget",
	"task_window",
	"task_step",
	"task_jobs",
	"member_unasked",
	"too_large",
	"unknown_pipeline",
	"needs_turbojpeg",
	"no_video_decoder",
	"bad_video",
	"bad_image",
	"index_version",
	"members_version",
	"damaged_chunk",
	"store_mismatch",
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
// brand_http_errors_total metric: by the name err carries (errkind.Named;
// err is nil when none is known), else by the deadline or the client gone,
// else by the status. The names are few and fixed, so a metric labelled
// with them stays small.
func Reason(status int, err error) string {
	if err != nil {
		best := -1
		for _, name := range errkind.Names(err) {
			if i := slices.Index(reasons, name); i >= 0 && (best < 0 || i < best) {
				best = i
			}
		}
		switch {
		case best >= 0:
			return reasons[best]
		case errors.Is(err, context.DeadlineExceeded):
			return "timeout"
		case errors.Is(err, context.Canceled):
			return "client_gone"
		}
	}
	if name, ok := statusReasons[status]; ok {
		return name
	}
	return "status_" + strconv.Itoa(status)
}
