package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// Errors the gateway raises itself. Everything that reaches a client is
// translated to an HTTP status in one place, statusOf.
var (
	// ErrBadRequest marks a malformed or out-of-bounds parameter.
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound marks an unknown dataset, sample, or an epoch, batch or
	// rank outside its valid range.
	ErrNotFound = errors.New("not found")
	// ErrNotReady means Load has not finished. The catalog wraps it with
	// what Load is doing (reading the indexes, allocating the cache).
	ErrNotReady = errors.New("not ready")
	// ErrCorrupt means a chunk's bytes did not match the index's CRC32C.
	ErrCorrupt = errors.New("chunk failed its checksum")
	// ErrNotImplemented marks a feature this gateway was built without.
	ErrNotImplemented = errors.New("not implemented")
)

// retryAfter is what 503 responses advise; clients back off at least this.
const retryAfter = 2 * time.Second

// statusOf maps an error to the HTTP status a client should see.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, shuffle.ErrInvalid), errors.Is(err, chunkcache.ErrTooLarge):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound), errors.Is(err, shuffle.ErrOutOfRange):
		return http.StatusNotFound
	case errors.Is(err, ErrNotReady), errors.Is(err, s3backend.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, s3backend.ErrChanged), errors.Is(err, ErrCorrupt), errors.Is(err, s3backend.ErrNotFound):
		// The store no longer matches the index: retrying will not help.
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
func writeError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error: " + msg
	}
	writeJSON(w, status, api.Error{Error: msg, Status: status})
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
