// Package reqbody bounds how a server reads request bodies: each route
// says how large its body may be and how long it may take to arrive
// (Bound), and a request refused before its body is read — no
// credential, a write to a read-only face, a declared length over the
// route's bound — is answered at once, with its connection closed and
// none of its body read (Refuse).
//
// # Why
//
// net/http bounds a request's headers (Server.ReadHeaderTimeout) but not
// its body: a client that declares a body and sends a byte of it every
// few seconds holds a connection and a goroutine for as long as it
// likes, and an answer written before the body was read (a 401, a 404)
// waits, in the server, for the whole body to be drained.
// Server.ReadTimeout is one bound for every request of a listener, from
// its first byte: the same for a 64 KiB plan and 8 MiB of importance
// feedback. So the deadline is set per route, when the route's handler
// starts (http.ResponseController.SetReadDeadline), and lifted once the
// body's last byte is read, so that it never cuts the server's own
// reads that follow (net/http watches the connection for the client
// going away while the handler writes). A body never read to its end is
// drained by net/http after the handler under the same deadline, or the
// connection closed.
//
// # Bounds
//
// A request without a body (Content-Length 0, which every GET of the
// clients sends) takes no deadline at all: nothing of it is left to
// read. A declared Content-Length over the bound is refused before a
// byte of the body is read; a body without one (chunked) is counted as it
// is read and refused at the first byte past the bound. A route that
// takes no body reads a chunked body's first byte itself, under the
// deadline, to see that it is empty.
//
// Handlers need no change: a read past the deadline returns an error
// (os.ErrDeadlineExceeded) from the body, and a read past the bound one
// that wraps ErrTooLarge.
//
// # JSON bodies
//
// Every route that takes a JSON body reads it through DecodeJSON (or, for
// a reader of its own grammar, ends it with End): one object, no member
// twice, no unknown field, and nothing but white space after it — a body
// with data after its object is refused (ErrBadJSON, 400), never applied
// with the rest ignored.
package reqbody

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrTooLarge marks a request body over its route's bound, refused.
var ErrTooLarge = errors.New("request body too large")

// Bound is what a route's request body may be.
type Bound struct {
	// Bytes is the most a body may hold; 0: the route takes no body.
	Bytes int64
	// Timeout bounds the reading of the body, from when the route's
	// handler starts to its last byte.
	Timeout time.Duration
}

// linger is how long a refused request's connection may still read (and
// drop) the body its client is sending before it is closed: closing a
// connection with unread bytes in its receive buffer resets it, and a
// client sending its body might then lose the answer before reading it
// (net/http waits as long for a body too large to drain).
const linger = 500 * time.Millisecond

// Apply bounds r's body by b before a handler reads it: a declared length
// over b.Bytes is refused (Refuse, and an error wrapping ErrTooLarge for
// the caller to answer); otherwise the connection's read deadline is set
// to b.Timeout from now and r.Body replaced by one that refuses a byte
// past b.Bytes and lifts the deadline at its end. A request without a
// body is left as it is.
func Apply(w http.ResponseWriter, r *http.Request, b Bound) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	if r.ContentLength > b.Bytes {
		Refuse(w, r)
		return tooLarge(r.ContentLength, b.Bytes)
	}
	rc := http.NewResponseController(w)
	// Not every ResponseWriter takes a deadline (a test's recorder does
	// not); the body is bounded in size all the same.
	_ = rc.SetReadDeadline(time.Now().Add(b.Timeout))
	body := &bounded{r: r.Body, most: b.Bytes, left: b.Bytes, w: w, req: r, rc: rc}
	if b.Bytes == 0 {
		// A body of unknown length where none belongs: it must end at
		// once. Its first byte is read here, under the deadline.
		var one [1]byte
		_, err := io.ReadFull(body, one[:])
		if errors.Is(err, io.EOF) {
			return nil
		}
		Refuse(w, r)
		if errors.Is(err, ErrTooLarge) {
			return err
		}
		return fmt.Errorf("%w: this endpoint takes no request body, and reading one failed: %w", ErrTooLarge, err)
	}
	r.Body = body
	return nil
}

// Refuse makes the response the last of its connection, answered without
// reading any more of the request's body: the server neither drains the
// body before the answer nor keeps the connection for another request,
// and reads (and drops) what the client is sending for at most a short
// linger while the answer goes out. Over HTTP/2 the connection is shut
// down gracefully (a GOAWAY), the request's stream reset. Call it before
// the answer's header is written.
func Refuse(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(linger))
	}
}

func tooLarge(n, most int64) error {
	if most == 0 {
		return fmt.Errorf("%w: this endpoint takes no request body", ErrTooLarge)
	}
	return fmt.Errorf("%w: a body of %d bytes is over %d bytes, the most this endpoint takes", ErrTooLarge, n, most)
}

// bounded is a request body read under its route's bound.
type bounded struct {
	r          io.ReadCloser
	most, left int64 // the bound, and the bytes it still allows
	w          http.ResponseWriter
	req        *http.Request
	rc         *http.ResponseController
	ended      bool
	err        error
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		// One byte past the bound tells a body at its bound from one over it.
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	if int64(n) > b.left {
		n, b.left = int(b.left), 0
		b.err = fmt.Errorf("%w: a body over %d bytes, the most this endpoint takes", ErrTooLarge, b.most)
		// The handler answers the error; the rest of the body is not read.
		Refuse(b.w, b.req)
		return n, b.err
	}
	b.left -= int64(n)
	if errors.Is(err, io.EOF) && !b.ended {
		// The body is read whole: the connection's next read is the
		// server's own (a client gone, the next request), which no
		// deadline of this body's may cut.
		b.ended = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *bounded) Close() error { return b.r.Close() }
