// Package httperr is where an error meets HTTP: the status a client sees
// for it (Status), what a client may be told of a failure on the server's
// side (Public), and the note that carries the error a response does not
// show, and the route of a handler that routes by itself, to the request's
// access log line (Note).
//
// Every error is answered here, once, by its kind: each part says the
// kind of its sentinel errors where it defines them (internal/errkind),
// so this package knows none of the parts, and a new sentinel is answered
// by its kind. Both faces answer the same error with the same status (the
// S3 face then names it with S3's code), and both keep the store's
// endpoint, bucket and paths out of what they tell a client.
package httperr

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/brandgw/brand/internal/errkind"
)

// Errors of the faces' own, beside those of the parts they wire (each
// part's package names its own, with its kind).
var (
	// ErrStalled means requests wait for cache room, or for room to
	// assemble or copy a batch, and none is let through: the server
	// cannot make progress for now.
	ErrStalled = errkind.Named(errkind.Busy, "stalled", "not ready: stalled")
	// ErrNotImplemented marks a feature the server was built without, or
	// a request it does not model.
	ErrNotImplemented = errkind.New(errkind.NotImplemented, "not implemented")
	// ErrPlanBusy means every plan slot stayed taken while a plan waited
	// for one.
	ErrPlanBusy = errkind.Named(errkind.Busy, "plan_busy", "busy: plans")
)

// RetryAfter is what 503 responses advise; clients back off at least this.
const RetryAfter = 2 * time.Second

// Status maps an error to the HTTP status a client should see, by the
// kinds of the errors it wraps (errkind). An error wrapping several is
// answered by the first of these that it has; one wrapping a request
// body's own failure, by that failure alone.
func Status(err error) int {
	if f, ok := errors.AsType[bodyFailure](err); ok {
		err = f.BodyFailure()
	}
	switch {
	case errkind.Has(err, errkind.Unauthenticated):
		// First: a peer's body that is not the one its credential covers
		// fails the read that a 400 would otherwise report.
		return http.StatusUnauthorized
	case errkind.Has(err, errkind.Forbidden):
		// Before the rest: a refusal is decided before anything is done.
		return http.StatusForbidden
	case errkind.Has(err, errkind.Invalid):
		return http.StatusBadRequest
	case errkind.Has(err, errkind.Unprocessable):
		// The batch holds an image its pipeline cannot transform: the
		// request is well formed and the store matches its index, but
		// the content cannot be processed; retrying will not help.
		return http.StatusUnprocessableEntity
	case errkind.Has(err, errkind.NotFound):
		return http.StatusNotFound
	case errkind.Has(err, errkind.Conflict):
		return http.StatusConflict
	case errkind.Has(err, errkind.Busy), errkind.Has(err, errkind.Unavailable):
		return http.StatusServiceUnavailable
	case errkind.Has(err, errkind.Upstream), errkind.Has(err, errkind.Corrupt):
		// The store no longer matches the index (a chunk, or a sample
		// table a node read from the stored index; an object shorter
		// than the index says; a token document not as indexed; a file
		// served in place whose bytes fail the index's checksums):
		// retrying will not help.
		return http.StatusBadGateway
	case errkind.Has(err, errkind.NotImplemented):
		return http.StatusNotImplemented
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		return 499 // client went away; only ever seen in logs
	default:
		// errkind.Internal, and errors of no kind.
		return http.StatusInternalServerError
	}
}

// Public is what a client is told of a failure on the server's side, or
// "" when err's own message may be sent: a client learns what it did
// wrong (4xx) in full, and the server's own 5xx answers — not ready,
// stalled, busy, not implemented (errkind.Busy, errkind.NotImplemented) —
// say nothing internal. Any other failure's error names the store's
// endpoint, bucket, prefix or local paths, which are the operator's
// business: the caller notes it for the access log (NoteError) and sends
// this instead.
func Public(status int, err error) string {
	switch {
	case status < 500, errkind.Has(err, errkind.Busy), errkind.Has(err, errkind.NotImplemented):
		return ""
	case isTold(err):
		// An error that says what a client may be told of it, in words
		// that name no store (catalog.DamagedChunkError: the dataset, the
		// chunk and the cause, what the operator must repair).
		t, _ := errors.AsType[told](err)
		return t.Public()
	case errkind.Has(err, errkind.Corrupt):
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

// bodyFailure is a request body's own failure as it was read
// (internal/server/reqbody: past its deadline, waiting past its bound for
// the memory it is decoded in, or giving that memory way): it answers
// the request whatever a handler wrapped it in — a handler's "the body
// is not one JSON object: %w" would make a body that gave its memory way
// a 400, which no client retries, where it is a 503.
type bodyFailure interface {
	error
	BodyFailure() error
}

// told is an error that says itself what a client may be told of it (a
// chunk damaged at rest, catalog.DamagedChunkError).
type told interface {
	error
	Public() string
}

// isTold reports whether err, or an error it wraps, is told.
func isTold(err error) bool {
	_, ok := errors.AsType[told](err)
	return ok
}
