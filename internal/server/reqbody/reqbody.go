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
// The deadline bounds the body's whole read: the waits for memory below
// are within it, so a body is never held past it, whatever it waits for.
//
// Handlers need no change: a read past the deadline returns an error
// wrapping ErrDeadline (and os.ErrDeadlineExceeded) from the body, naming
// the deadline, and a read past the bound one that wraps ErrTooLarge.
//
// # Memory
//
// A body's bytes, and what its handler makes of them (a JSON list's
// strings, the edit stored from them), are memory the node's budget must
// count, or a few large bodies at once take the process past
// --memory-limit (four exclusion lists of 252 MB peaked at 2.2 GB under a
// 1 GiB limit). A route whose Bound names Memory reserves PerByte bytes of
// it for each byte of its body before the byte is read: a declared
// length all at once, before any of the body is read, so that
// concurrent large bodies wait for each other (and past their wait are
// refused, the share's Busy error: 503 with Retry-After) rather than each
// holding part of what it needs; a body without a length in steps as it
// arrives, never more than maxAhead (1 MiB) of body beyond what has
// arrived, so that bodies still arriving hold about what they sent. A body that would need more than the whole share is refused
// at once (ErrTooLarge), naming the memory it needs and the share's
// size. The reservation is held until the handler returns (the release
// Apply returns), since the parsed form lives as long as the handler.
//
// Bodies hold their share below its other holders, and fairly between
// clients (memory.Account.Hold): a wait for room is at most Bound.Wait
// and never past the deadline; and a body still being read whose room
// another needs — a decode that serves a batch, or the body of a client
// within its part of the share while this body's client holds more —
// gives it way: its reads fail at once with the share's Busy error, and
// its handler returns and lets go. Those failures answer the request
// whatever the handler wraps them in (internal/server/httperr.Status):
// 503, retry. A body read whole gives no way: it is being applied.
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
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrTooLarge marks a request body over its route's bound, refused.
var ErrTooLarge = errkind.New(errkind.Invalid, "request body too large")

// ErrDeadline marks a request body not read whole within its route's
// deadline (Bound.Timeout), its waits for memory included: refused, its
// connection closed.
var ErrDeadline = errkind.New(errkind.Invalid, "request body not read within its deadline")

// Bound is what a route's request body may be.
type Bound struct {
	// Bytes is the most a body may hold; 0: the route takes no body.
	Bytes int64
	// Timeout bounds the body's whole read, from when the route's
	// handler starts (Apply) to its last byte, every wait for Memory
	// included: past it, the read fails (ErrDeadline).
	Timeout time.Duration
	// Memory, if set, is the share of the node's memory the body is
	// read and decoded in (see the package doc); PerByte (at least 1) is
	// what a byte of the body takes of it while the handler runs: the
	// byte, and its part of what the handler decodes and makes of it.
	Memory  Memory
	PerByte int64
	// Client names who sends the body, for Memory's share per client
	// (the gateway's: the bearer token's digest and the remote address).
	Client string
	// Wait bounds each wait for room in Memory; the deadline bounds it
	// too, and alone where Wait is 0.
	Wait time.Duration
}

// Memory is a share of the node's memory budget that bodies hold below
// its other holders (memory.Account's Hold): its size, and one body's
// hold on it — grow reserves n more bytes, waiting at most wait and never
// past ctx; release gives back all it holds; giveWay is called, never
// after release, when another needs the room, and reports whether the
// body gives it (false once it is read whole). Safe for concurrent use.
type Memory interface {
	Size() int64
	Hold(client string, giveWay func(error) bool) (grow func(ctx context.Context, n int64, wait time.Duration) error, release func())
}

// firstStep is the least a body without a declared length reserves at a
// time: steps double from it, so that a large body makes few
// reservations, up to maxAhead.
const firstStep = 64 << 10

// maxAhead bounds a step: what a body without a declared length holds
// beyond the bytes that have arrived. Steps that doubled without bound
// held as much again as a slow body had sent: 12 bodies of one client
// that sent 4 MiB and then a byte a second reserved 8 MiB of body each
// at its next byte, and held the whole decodes share while a few hundred
// bytes of that client's next edit waited its 2 s and were refused
// (issue 98, item 11). A body of 150 MB makes about 150 reservations.
const maxAhead = 1 << 20

// linger is how long a refused request's connection may still read (and
// drop) the body its client is sending before it is closed: closing a
// connection with unread bytes in its receive buffer resets it, and a
// client sending its body might then lose the answer before reading it
// (net/http waits as long for a body too large to drain).
const linger = 500 * time.Millisecond

// Apply bounds r's body by b before a handler reads it: a declared length
// over b.Bytes is refused (Refuse, and an error wrapping ErrTooLarge for
// the caller to answer); otherwise the body's deadline is set, b.Timeout
// from now, and with b.Memory the memory a declared length needs is
// reserved (waiting at most b.Wait and never past the deadline, refused
// as the share refuses, and refused at once wrapping ErrTooLarge if it
// needs more than the whole share); r.Body is replaced by one that
// refuses a byte past b.Bytes, reserves the memory of a body without a
// declared length as it is read, fails at the deadline (ErrDeadline) or
// when its memory is asked for by another (the share's Busy error), and
// lifts the deadline at its end. A request without a body is left as it
// is. release gives back what was reserved, and is never nil: call it
// once the handler is done with the body and all it decoded from it.
func Apply(w http.ResponseWriter, r *http.Request, b Bound) (release func(), err error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return func() {}, nil
	}
	if r.ContentLength > b.Bytes {
		Refuse(w, r)
		return func() {}, tooLarge(r.ContentLength, b.Bytes)
	}
	body := &bounded{r: r.Body, most: b.Bytes, left: b.Bytes, w: w, req: r,
		timeout: b.Timeout, deadline: time.Now().Add(b.Timeout), wait: b.Wait, mem: b.Memory, perByte: max(b.PerByte, 1)}
	body.rc = http.NewResponseController(w)
	// Not every ResponseWriter takes a deadline (a test's recorder does
	// not); the body is bounded in size all the same. The deadline is set
	// before any wait for memory: it bounds the whole read.
	_ = body.rc.SetReadDeadline(body.deadline)
	if b.Memory != nil {
		body.grow, body.give = b.Memory.Hold(b.Client, body.giveWay)
		if r.ContentLength > 0 {
			if err := body.reserve(r.ContentLength); err != nil {
				Refuse(w, r)
				return body.release, err
			}
		}
	}
	if b.Bytes == 0 {
		// A body of unknown length where none belongs: it must end at
		// once. Its first byte is read here, under the deadline.
		var one [1]byte
		_, err := io.ReadFull(body, one[:])
		if errors.Is(err, io.EOF) {
			return body.release, nil
		}
		Refuse(w, r)
		if errors.Is(err, ErrTooLarge) {
			return body.release, err
		}
		return body.release, fmt.Errorf("%w: this endpoint takes no request body, and reading one failed: %w", ErrTooLarge, err)
	}
	r.Body = body
	return body.release, nil
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

// Unread reports whether r has body its handler has not read to the end.
// An answer given then (a query refused before the body is read) should
// Refuse first: the server otherwise reads the rest of the body before
// the answer's header goes out, as long as the client takes to send it,
// up to the body's deadline.
func Unread(r *http.Request) bool {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return false
	}
	if b, ok := r.Body.(*bounded); ok {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.ended
	}
	return true
}

func tooLarge(n, most int64) error {
	if most == 0 {
		return fmt.Errorf("%w: this endpoint takes no request body", ErrTooLarge)
	}
	return fmt.Errorf("%w: a body of %d bytes is over %d bytes, the most this endpoint takes", ErrTooLarge, n, most)
}

// failure is a body's own failure as it is read — its deadline, the
// memory it waited for past its bound or gave way to another: the
// request's answer whatever a handler wraps it in (httperr.Status), so
// that a body that gave its room way is a 503 its client retries, not
// the 400 of "the body is not one JSON object: …".
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

// BodyFailure is the error the request is answered by.
func (f failure) BodyFailure() error { return f.err }

// bounded is a request body read under its route's bound.
type bounded struct {
	r          io.ReadCloser
	most, left int64 // the bound, and the bytes it still allows
	w          http.ResponseWriter
	req        *http.Request
	rc         *http.ResponseController
	err        error

	// The body's deadline: timeout from the handler's start, and the
	// most a wait for memory takes (0: until the deadline).
	timeout  time.Duration
	deadline time.Time
	wait     time.Duration

	// mem is where the body's memory is held (grow, give), perByte
	// bytes a byte of it; covered is the bytes of body reserved for.
	mem     Memory
	grow    func(ctx context.Context, n int64, wait time.Duration) error
	give    func()
	perByte int64
	covered int64

	// mu guards what giveWay, called from another request's goroutine,
	// shares with the reads: whether the body is read whole, and why it
	// gave its memory way.
	mu    sync.Mutex
	ended bool
	gave  error
}

// reserve reserves the memory of n bytes of body beyond those covered:
// refused at once (ErrTooLarge) past the share's size, else as the share
// refuses a wait past its bound, or at the body's deadline.
func (b *bounded) reserve(n int64) error {
	need := (b.covered + n) * b.perByte
	if size := b.mem.Size(); need > size {
		return fmt.Errorf("%w: a body of %d bytes or more takes %d bytes of memory to read and decode here, more than the %d bytes of the node's memory budget (--memory-limit) bodies are decoded in; send a smaller body (in parts, where the endpoint takes parts) or raise --memory-limit",
			ErrTooLarge, b.covered+n, need, size)
	}
	wait := time.Until(b.deadline)
	if b.wait > 0 {
		wait = min(wait, b.wait)
	}
	ctx, cancel := context.WithDeadline(b.req.Context(), b.deadline)
	defer cancel()
	if err := b.grow(ctx, n*b.perByte, wait); err != nil {
		if b.req.Context().Err() == nil && !time.Now().Before(b.deadline) {
			// The deadline came first, or with the wait it bounds.
			return b.late(nil)
		}
		return failure{err}
	}
	b.covered += n
	return nil
}

// late is the body's refusal at its deadline; cause, if any, is the
// read's own error.
func (b *bounded) late(cause error) error {
	err := fmt.Errorf("%w: %s from when its route's handler started, waits for memory included (docs/http-api.md, \"Bounds and timeouts\"); send it faster, or smaller", ErrDeadline, b.timeout)
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return failure{err}
}

// giveWay is the body's answer to another that needs its memory: unless
// it is read whole, its reads fail from now on, the one under way at
// once, with err.
func (b *bounded) giveWay(err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return false
	}
	b.gave = failure{err}
	_ = b.rc.SetReadDeadline(time.Now())
	return true
}

// release gives back the memory held for the body.
func (b *bounded) release() {
	if b.give != nil {
		b.give()
	}
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		// One byte past the bound tells a body at its bound from one over it.
		p = p[:b.left+1]
	}
	if read := b.most - b.left; b.mem != nil && b.req.ContentLength < 0 && read+int64(len(p)) > b.covered {
		// A body without a declared length: reserve the next step, as
		// much as is covered already (within the bound and the share),
		// before reading into it.
		step := min(max(b.covered, firstStep), maxAhead, b.most+1-b.covered)
		room := b.mem.Size()/b.perByte - b.covered
		if room <= 0 {
			// The share is covered whole: a byte more tells a body
			// that ends here from one that needs more than the share.
			return b.past(p[:1])
		}
		if err := b.reserve(min(step, room)); err != nil {
			return 0, b.fail(err)
		}
		p = p[:min(int64(len(p)), b.covered-read)]
	}
	n, err := b.r.Read(p)
	return b.count(n, err)
}

// fail ends the body's reads with err: its handler answers it, and the
// rest of the body is not read.
func (b *bounded) fail(err error) error {
	b.err = err
	Refuse(b.w, b.req)
	return err
}

// past reads into p, one byte, past the memory the share holds: its end,
// or its refusal.
func (b *bounded) past(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		return 0, b.fail(b.reserve(int64(n))) // more than the share: refused
	}
	return b.count(n, err)
}

// count takes n bytes read off the body's bound, refusing a byte past it,
// tells a read past the deadline (or cut short for another's memory), and
// lifts the deadline at the body's end.
func (b *bounded) count(n int, err error) (int, error) {
	if int64(n) > b.left {
		n, b.left = int(b.left), 0
		return n, b.fail(fmt.Errorf("%w: a body over %d bytes, the most this endpoint takes", ErrTooLarge, b.most))
	}
	b.left -= int64(n)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.mu.Lock()
		gave := b.gave
		b.mu.Unlock()
		if gave != nil {
			return n, b.fail(gave)
		}
		return n, b.fail(b.late(err))
	case errors.Is(err, io.EOF):
		b.mu.Lock()
		ended := b.ended
		b.ended = true
		b.mu.Unlock()
		if !ended {
			// The body is read whole: the connection's next read is the
			// server's own (a client gone, the next request), which no
			// deadline of this body's may cut.
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

func (b *bounded) Close() error { return b.r.Close() }
