package httperr

import "context"

// Note carries to a request's access log line what its response does not
// show: the error behind a 5xx answer told only Public's message, the
// route of a handler that routes by itself (the S3 face), where no router
// pattern names it, and why an error answer was given (Reason). The access log middleware makes one per request
// (WithNote) and reads it once the handler returns; handlers write it
// through the request's context.
type Note struct {
	err    error
	route  string
	reason string
}

type noteKey struct{}

// WithNote returns ctx carrying a new Note, and the Note.
func WithNote(ctx context.Context) (context.Context, *Note) {
	n := &Note{}
	return context.WithValue(ctx, noteKey{}, n), n
}

// Err is the error noted, or nil.
func (n *Note) Err() error { return n.err }

// Route is the route noted, or "".
func (n *Note) Route() string { return n.route }

// Reason is the reason noted, or "".
func (n *Note) Reason() string { return n.reason }

// NoteError records err for the log line of the request ctx belongs to;
// without a Note in ctx it does nothing.
func NoteError(ctx context.Context, err error) {
	if n, ok := ctx.Value(noteKey{}).(*Note); ok {
		n.err = err
	}
}

// NoteRoute names the route of the request ctx belongs to, for its log
// line and metrics.
func NoteRoute(ctx context.Context, route string) {
	if n, ok := ctx.Value(noteKey{}).(*Note); ok {
		n.route = route
	}
}

// NoteReason records why the request ctx belongs to was answered with an
// error (Reason), for its metrics; the error itself is noted only when
// the response does not show it, since a client's error may carry
// everything it sent.
func NoteReason(ctx context.Context, reason string) {
	if n, ok := ctx.Value(noteKey{}).(*Note); ok {
		n.reason = reason
	}
}
