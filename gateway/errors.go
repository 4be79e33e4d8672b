package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/feedback"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/internal/peer"
	"github.com/brandgw/brand/internal/query"
	"github.com/brandgw/brand/internal/reader"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// Errors of the gateway's own, beside those of the parts it wires (each
// part's package names its own). Everything that reaches a client is
// translated to an HTTP status in one place, statusOf.
var (
	// ErrStalled means requests wait for cache room, or for room to
	// assemble or copy a batch, and none is let through: the gateway
	// cannot make progress for now.
	ErrStalled = errors.New("not ready: stalled")
	// ErrNotImplemented marks a feature this gateway was built without.
	ErrNotImplemented = errors.New("not implemented")
)

var errStalled = fmt.Errorf("%w: requests are waiting for cache room or for room to assemble a batch, and none has been let through for %s", ErrStalled, stallNotReady)

// retryAfter is what 503 responses advise; clients back off at least this.
const retryAfter = 2 * time.Second

// statusOf maps an error to the HTTP status a client should see.
func statusOf(err error) int {
	switch {
	case errors.Is(err, query.ErrBadRequest), errors.Is(err, shuffle.ErrInvalid), errors.Is(err, chunkcache.ErrTooLarge),
		errors.Is(err, reader.ErrTooLarge), errors.Is(err, importance.ErrBadFeedback), errors.Is(err, importance.ErrMismatch):
		return http.StatusBadRequest
	case errors.Is(err, peer.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, query.ErrOutOfRange), errors.Is(err, order.ErrOutOfRange), errors.Is(err, shuffle.ErrOutOfRange),
		errors.Is(err, catalog.ErrUnknown), errors.Is(err, order.ErrNoSnapshot):
		return http.StatusNotFound
	case errors.Is(err, catalog.ErrVersion), errors.Is(err, feedback.ErrSealed), errors.Is(err, feedback.ErrNoFeedback),
		errors.Is(err, feedback.ErrStale):
		return http.StatusConflict
	case errors.Is(err, catalog.ErrNotReady), errors.Is(err, ErrStalled), errors.Is(err, s3backend.ErrUnavailable), errors.Is(err, chunkcache.ErrBusy),
		errors.Is(err, feedback.ErrBusy), errors.Is(err, ErrPlanBusy), errors.Is(err, api.ErrPlanBudget):
		return http.StatusServiceUnavailable
	case errors.Is(err, s3backend.ErrChanged), errors.Is(err, catalog.ErrCorrupt), errors.Is(err, s3backend.ErrNotFound),
		errors.Is(err, chunkindex.ErrCorrupt):
		// The store no longer matches the index (a chunk, or a sample
		// table a node read from the stored index): retrying will not
		// help.
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

// writeError sends err as a JSON error with the status statusOf gives.
//
// A client learns what it did wrong (4xx) in full. Of a failure on the
// gateway's side (5xx) it learns the kind and the request ID: the error
// itself names the store's endpoint, bucket, prefix or local paths, which
// are the operator's business, so it goes to the access log line of that
// request ID instead (see logRequests). The gateway's own 5xx answers —
// not ready, stalled, busy, not implemented — say nothing internal and are
// sent as they are.
func writeError(ctx context.Context, w http.ResponseWriter, err error) {
	status := statusOf(err)
	switch status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="brand"`)
	}
	msg := err.Error()
	if public := publicMessage(status, err); public != "" {
		noteError(ctx, err)
		msg = fmt.Sprintf("%s (request %s; the gateway's log has the details)", public, middleware.GetReqID(ctx))
	}
	writeJSON(w, status, api.Error{Error: msg, Status: status})
}

// publicMessage is what a client is told of a failure on the gateway's
// side, or "" when err's own message may be sent.
func publicMessage(status int, err error) string {
	switch {
	case status < 500, errors.Is(err, catalog.ErrNotReady), errors.Is(err, ErrStalled),
		errors.Is(err, chunkcache.ErrBusy), errors.Is(err, feedback.ErrBusy), errors.Is(err, ErrNotImplemented),
		errors.Is(err, ErrPlanBusy), errors.Is(err, api.ErrPlanBudget):
		return ""
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, fmt.Sprintf("encoding response: %v", err), http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
