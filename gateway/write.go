package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// writeSegment is the most bytes a response is written in under one
// deadline (see writeBody).
const writeSegment = 4 << 20

// stallProbe is how often a response still being written from pinned
// chunks looks whether the cache is under pressure, and slowWrite how long
// a client may take to read one segment of it (writeSegment) before it
// counts as holding the cache (see writeBody): a client reading slower
// than 40 MB/s. A segment takes about 3 ms on loopback, about 35 ms at
// 1 Gbit/s; under the race detector about 40 ms. A rule on the whole
// body's time instead copied every large batch read over a 1 Gbit/s link
// or by a process under the race detector.
const (
	stallProbe = 5 * time.Millisecond
	slowWrite  = 100 * time.Millisecond
)

// payload is a response body that carries samples: its parts, its length,
// and, for a body written from pinned chunks, how to give the pins back
// mid-write (reader.Result.Relieve; nil: nothing to give back).
type payload struct {
	parts   net.Buffers
	n       int64
	relieve func(rest net.Buffers) (net.Buffers, bool)
	status  int // 0 is 200; the S3 face answers a range 206
}

// writeBody sends a complete, verified body — status 200, contentType,
// Content-Length and the headers the caller set — as the one way every
// response that carries samples is written: batches, samples, peers'
// requests.
//
// It is written in segments of at most writeSegment bytes, each under a
// write deadline of WriteTimeout plus the time to send it at MinWriteRate
// from when it starts. A client that stops reading is cut off within that
// bound of its last progress, and with it go the pins or the copy its
// response holds; a small response fits in the kernel's socket buffer and
// holds nothing once written, whoever reads it. A client reading at any
// rate above MinWriteRate is never cut off, however large the body.
//
// A body written from pinned chunks holds them while the client reads.
// Most clients read as fast as the body is written; for one that does
// not, the pins are given back when others wait for room in the cache, or
// when one segment of the body has taken longer than slowWrite and
// responses pin over half the cache: every stallProbe the write looks at the cache, and
// under pressure the rest of the body is copied out (payload.relieve,
// within the copy budget) and written from the copy. Over plain HTTP/1 the write is
// interrupted for it (a deadline in the past) and resumed from where it
// stopped; over TLS or HTTP/2, where an interrupted write cannot be
// resumed, a body under pressure is copied before its first byte.
func (g *Gateway) writeBody(w http.ResponseWriter, r *http.Request, contentType string, p payload) (int64, error) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.FormatInt(p.n, 10))
	status := p.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	parts := p.parts
	relieved := p.relieve == nil
	resumable := r.TLS == nil && r.ProtoMajor == 1
	if !relieved && !resumable && g.reader.UnderPressure(true) {
		parts, _ = p.relieve(parts)
		relieved = true
	}
	// The write may be interrupted only once the headers are out (the
	// connection hands the body to WriteTo after flushing them): net/http
	// takes a failed flush of its own for a broken connection.
	var interrupted, armed atomic.Bool
	stop, done := make(chan struct{}), make(chan struct{})
	var segStart atomic.Int64 // when the segment being written began, in Unix ns
	segStart.Store(time.Now().UnixNano())
	if !relieved && resumable {
		go func() {
			defer close(done)
			t := time.NewTicker(stallProbe)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case now := <-t.C:
					if armed.Load() && g.reader.UnderPressure(now.Sub(time.Unix(0, segStart.Load())) >= slowWrite) {
						interrupted.Store(true)
						_ = rc.SetWriteDeadline(time.Now())
						return
					}
				}
			}
		}()
	} else {
		close(done)
	}
	var written int64
	var err error
	for len(parts) > 0 {
		var seg net.Buffers
		seg, parts = cut(parts, writeSegment)
		d := g.cfg.WriteTimeout + time.Duration(float64(segmentLen(seg))/float64(g.cfg.MinWriteRate)*float64(time.Second))
		// Not every ResponseWriter supports deadlines (a test recorder
		// does not); without one the server's own timeouts apply.
		_ = rc.SetWriteDeadline(time.Now().Add(d))
		segStart.Store(time.Now().UnixNano())
		b := &body{parts: seg, pool: g.coalesce, started: &armed}
		var m int64
		m, err = writeParts(w, b)
		written += m
		if err != nil && !relieved && interrupted.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			// Interrupted to give the pins back: resume from where the
			// write stopped, from a copy if the budget allows.
			parts, _ = p.relieve(append(b.parts, parts...))
			relieved, err = true, nil
			continue
		}
		if err != nil {
			break
		}
	}
	close(stop)
	<-done
	if interrupted.Load() {
		// The interruption may have come after the last write: the
		// server's own flush of the response must not meet it.
		_ = rc.SetWriteDeadline(time.Now().Add(g.cfg.WriteTimeout))
	}
	g.metrics.bytesServed.Add(float64(written))
	switch {
	case err != nil:
		return written, fmt.Errorf("writing a response: %w", err)
	case written != p.n:
		return written, fmt.Errorf("writing a response: wrote %d of %d bytes", written, p.n)
	}
	return written, nil
}

// cut splits parts after at most size bytes, splitting a part if it must
// (the tail's first part is then changed in place).
func cut(parts net.Buffers, size int) (head, tail net.Buffers) {
	for i, p := range parts {
		if size == 0 {
			return parts[:i], parts[i:]
		}
		if len(p) > size {
			head = append(parts[:i:i], p[:size])
			parts[i] = p[size:]
			return head, parts[i:]
		}
		size -= len(p)
	}
	return parts, nil
}

func segmentLen(seg net.Buffers) (n int64) {
	for _, p := range seg {
		n += int64(len(p))
	}
	return n
}

// writeParts writes b after the status line: through the connection's
// ReadFrom, and so writev, where the ResponseWriter has one.
func writeParts(w http.ResponseWriter, b *body) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(b)
	}
	return b.WriteTo(w)
}

// body is a response body (or a segment of one): each sample's tar
// member, straight from its cached chunk or its copy.
//
// The handler hands it to the response's ReadFrom. net/http's HTTP/1.1
// response then flushes the headers and passes it the connection itself,
// and WriteTo gathers the scattered samples into writev calls (net.Buffers):
// no copy in user space and one system call per 1,024 samples. Anywhere
// else (TLS, HTTP/2, a test recorder) WriteTo gets a plain writer and
// coalesces small samples into 1 MiB writes instead (docs/benchmarks.md
// measures both).
type body struct {
	parts   net.Buffers
	pool    *sync.Pool   // of coalescing buffers
	started *atomic.Bool // set when WriteTo is first called; may be nil
}

// Read copies the body out; net/http reads the first 512 bytes this way
// before it hands over the connection.
func (b *body) Read(p []byte) (int, error) { return b.parts.Read(p) }

// WriteTo writes what Read has not returned yet.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	if b.started != nil {
		b.started.Store(true)
	}
	if _, ok := w.(syscall.Conn); ok {
		// A socket: net.Buffers writes with writev.
		return b.parts.WriteTo(w)
	}
	bw := &bodyWriter{w: w, buf: (*b.pool.Get().(*[]byte))[:0], pool: b.pool}
	defer bw.release()
	for _, part := range b.parts {
		if err := bw.write(part); err != nil {
			return bw.n, err
		}
	}
	b.parts = nil
	return bw.n, bw.flush()
}

// Where a body cannot be written with writev (see body), samples smaller
// than coalesceBelow are copied into a buffer of coalesceBuffer bytes and
// written with their neighbours; larger ones are written straight from
// the cached chunk. A batch is many scattered samples, and on the
// benchmark machine (a VM, where a system call is dear) copying them into
// 1 MiB writes cost less CPU than a write call each, for 10 KiB samples
// and for 100 KiB ones alike (docs/benchmarks.md).
const (
	coalesceBelow  = 1 << 20
	coalesceBuffer = 1 << 20
)

// newCoalescePool returns the pool of buffers bodyWriter coalesces into.
func newCoalescePool() *sync.Pool {
	return &sync.Pool{New: func() any {
		b := make([]byte, 0, coalesceBuffer)
		return &b
	}}
}

// bodyWriter writes a body's samples to a response, coalescing small ones.
type bodyWriter struct {
	w    io.Writer
	buf  []byte
	n    int64 // bytes written to w
	pool *sync.Pool
}

func (b *bodyWriter) write(p []byte) error {
	if len(p) >= coalesceBelow {
		if err := b.flush(); err != nil {
			return err
		}
		n, err := b.w.Write(p)
		b.n += int64(n)
		return err
	}
	if len(b.buf)+len(p) > cap(b.buf) {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.buf = append(b.buf, p...)
	return nil
}

func (b *bodyWriter) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	n, err := b.w.Write(b.buf)
	b.n += int64(n)
	b.buf = b.buf[:0]
	return err
}

// release returns the buffer to the pool; b must not be used after.
func (b *bodyWriter) release() {
	buf := b.buf[:0]
	b.pool.Put(&buf)
	b.buf = nil
}
