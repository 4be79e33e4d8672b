package respond

import (
	"cmp"
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/internal/errkind"
)

// Segment is the most bytes a response is written in under one deadline.
const Segment = 4 << 20

// stallProbe is how often a response still being written from pinned
// chunks looks whether the cache is under pressure, and DefaultSlowWrite
// how long a client may take to read one segment of it before it counts
// as holding the cache (Config.SlowWrite): a client reading slower than
// 40 MB/s. A segment takes about
// 3 ms on loopback, about 35 ms at 1 Gbit/s; under the race detector
// about 40 ms. A rule on the whole body's time instead copied every large
// batch read over a 1 Gbit/s link or by a process under the race
// detector.
const (
	stallProbe       = 5 * time.Millisecond
	DefaultSlowWrite = 100 * time.Millisecond
)

// Defaults of Config's bounds.
const (
	DefaultWriteTimeout = 10 * time.Second
	DefaultMinWriteRate = 1 << 20
)

// Config configures a Writer.
type Config struct {
	// WriteTimeout and MinWriteRate bound the writing of one segment:
	// WriteTimeout plus the time to send it at MinWriteRate bytes a
	// second. Zero: DefaultWriteTimeout, DefaultMinWriteRate.
	WriteTimeout time.Duration
	MinWriteRate int64
	// Pressure reports whether the cache is under pressure, so that a
	// body still being written from pinned chunks should give them back
	// (memory.Manager.UnderPressure): after is true once one segment has
	// taken longer than a fast client takes. nil: never.
	Pressure func(after bool) bool
	// SlowWrite is how long a client may take to read one segment of a
	// body written from pinned chunks before it counts as holding the
	// cache; 0: DefaultSlowWrite.
	SlowWrite time.Duration
	// Served, if set, counts the body bytes written.
	Served prometheus.Counter
	// Buffers are the node's pools (memory.Manager), which the buffers
	// that coalesce small parts come from; nil: each is allocated.
	Buffers Buffers
}

// Buffers are pooled buffers (memory.Manager's Get and Put).
type Buffers interface {
	Get(n int64) []byte
	Put(b []byte)
}

// unpooled allocates every buffer.
type unpooled struct{}

func (unpooled) Get(n int64) []byte { return make([]byte, 0, n) }
func (unpooled) Put([]byte)         {}

// Writer writes responses that carry samples. Safe for concurrent use.
type Writer struct {
	timeout  time.Duration
	rate     int64
	pressure func(after bool) bool
	slow     time.Duration // Config.SlowWrite
	served   prometheus.Counter
	buffers  Buffers // of the coalescing buffers
}

// New returns a Writer.
func New(c Config) *Writer {
	w := &Writer{timeout: c.WriteTimeout, rate: c.MinWriteRate, pressure: c.Pressure, slow: cmp.Or(c.SlowWrite, DefaultSlowWrite),
		served: c.Served, buffers: c.Buffers}
	if w.buffers == nil {
		w.buffers = unpooled{}
	}
	if w.timeout <= 0 {
		w.timeout = DefaultWriteTimeout
	}
	if w.rate <= 0 {
		w.rate = DefaultMinWriteRate
	}
	if w.pressure == nil {
		w.pressure = func(bool) bool { return false }
	}
	return w
}

// Payload is a response body that carries samples.
type Payload struct {
	// Parts are the body's bytes, in order.
	Parts net.Buffers
	// N is the body's length: Parts' and what Next returns, in all.
	N int64
	// Relieve, for a body written from pinned chunks, copies what is not
	// written yet out of them and gives the pins back, returning the
	// parts to write instead (reader.Result.Relieve); nil: nothing to
	// give back.
	Relieve func(rest net.Buffers) (net.Buffers, bool)
	// Next, if set, returns the body's further parts once those before
	// are written, and what releases them once they are written in turn;
	// nil parts end the body. An error ends the write: the status line is
	// out, so the client learns of it only by a body shorter than its
	// Content-Length.
	Next func() (net.Buffers, func(), error)
	// Status is 200 when zero (the S3 face answers a range 206).
	Status int
}

// ErrShort marks a body whose Next failed after the status line was sent.
var ErrShort = errkind.New(errkind.Internal, "response body cut short")

// Write sends a complete, verified body — Status, contentType,
// Content-Length and the headers the caller set — in segments under
// write deadlines (see the package doc). It returns the body bytes
// written; an error means the client did not receive all of them.
func (wr *Writer) Write(w http.ResponseWriter, r *http.Request, contentType string, p Payload) (int64, error) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.FormatInt(p.N, 10))
	status := p.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	parts := p.Parts
	relieved := p.Relieve == nil
	resumable := r.TLS == nil && r.ProtoMajor == 1
	if !relieved && !resumable && wr.pressure(true) {
		parts, _ = p.Relieve(parts)
		relieved = true
	}
	// The write may be interrupted only once the headers are out (the
	// connection hands the body to WriteTo after flushing them): net/http
	// takes a failed flush of its own for a broken connection.
	var armed atomic.Bool
	var segStart atomic.Int64 // when the segment being written began, in Unix ns
	segStart.Store(time.Now().UnixNano())
	var pr *probe
	if !relieved && resumable {
		pr = wr.startProbe(rc, &armed, &segStart)
	}
	var written int64
	var err error
	var release func() // of the parts Next returned last
	for {
		if len(parts) == 0 {
			if release != nil {
				release()
				release = nil
			}
			if p.Next == nil {
				break
			}
			var next net.Buffers
			next, release, err = p.Next()
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrShort, err)
				break
			}
			if next == nil {
				break
			}
			parts = next
			continue
		}
		var seg net.Buffers
		seg, parts = cut(parts, Segment)
		d := wr.timeout + time.Duration(float64(segmentLen(seg))/float64(wr.rate)*float64(time.Second))
		// Not every ResponseWriter supports deadlines (a test recorder
		// does not); without one the server's own timeouts apply.
		_ = rc.SetWriteDeadline(time.Now().Add(d))
		segStart.Store(time.Now().UnixNano())
		b := &body{parts: seg, buffers: wr.buffers, started: &armed}
		var m int64
		m, err = writeParts(w, b)
		written += m
		if err != nil && !relieved && pr.interrupted() && errors.Is(err, os.ErrDeadlineExceeded) {
			// Interrupted to give the pins back: resume from where the
			// write stopped, from a copy if the budget allows.
			parts, _ = p.Relieve(append(b.parts, parts...))
			relieved, err = true, nil
			continue
		}
		if err != nil {
			break
		}
	}
	if release != nil {
		release()
	}
	if pr.stop() {
		// The interruption may have come after the last write: the
		// server's own flush of the response must not meet it.
		_ = rc.SetWriteDeadline(time.Now().Add(wr.timeout))
	}
	if wr.served != nil {
		wr.served.Add(float64(written))
	}
	switch {
	case err != nil:
		return written, fmt.Errorf("writing a response: %w", err)
	case written != p.N:
		return written, fmt.Errorf("writing a response: wrote %d of %d bytes", written, p.N)
	}
	return written, nil
}

// probe looks every stallProbe, while a body is written from pinned
// chunks, whether the cache is under pressure, and if so interrupts the
// write by its deadline. It is a timer rather than a goroutine of its
// own: a batch written within stallProbe, as nearly every one is, starts
// no goroutine and wakes no thread to run one.
type probe struct {
	mu    sync.Mutex // held while the timer's function runs
	t     *time.Timer
	ended bool // set by stop: the timer's function does nothing more
	cut   atomic.Bool
}

// startProbe starts the probe of a write through rc; armed says the
// headers are out, segStart when the segment being written began.
func (wr *Writer) startProbe(rc *http.ResponseController, armed *atomic.Bool, segStart *atomic.Int64) *probe {
	p := &probe{}
	p.mu.Lock() // the timer's function reads p.t
	defer p.mu.Unlock()
	p.t = time.AfterFunc(stallProbe, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ended {
			return
		}
		if armed.Load() && wr.pressure(time.Since(time.Unix(0, segStart.Load())) >= wr.slow) {
			p.cut.Store(true)
			_ = rc.SetWriteDeadline(time.Now())
			return
		}
		p.t.Reset(stallProbe)
	})
	return p
}

// interrupted reports whether the probe interrupted the write; a nil
// probe never does.
func (p *probe) interrupted() bool { return p != nil && p.cut.Load() }

// stop ends the probe, waiting for its timer's function if it is
// running, and reports whether it interrupted the write.
func (p *probe) stop() bool {
	if p == nil {
		return false
	}
	p.t.Stop()
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	return p.cut.Load()
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

// body is a response body (or a segment of one): each sample's bytes,
// straight from its cached chunk or its copy.
//
// Write hands it to the response's ReadFrom. net/http's HTTP/1.1
// response then flushes the headers and passes it the connection itself,
// and WriteTo gathers the scattered parts into writev calls (net.Buffers):
// no copy in user space and one system call per 1,024 parts. Anywhere
// else (TLS, HTTP/2, a test recorder) WriteTo gets a plain writer and
// coalesces small parts into 1 MiB writes instead (both measured at
// 9742b24).
type body struct {
	parts   net.Buffers
	buffers Buffers      // of coalescing buffers
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
	bw := &bodyWriter{w: w, buf: b.buffers.Get(coalesceBuffer), buffers: b.buffers}
	defer bw.release()
	for _, part := range b.parts {
		if err := bw.write(part); err != nil {
			return bw.n, err
		}
	}
	b.parts = nil
	return bw.n, bw.flush()
}

// Where a body cannot be written with writev (see body), parts smaller
// than coalesceBelow are copied into a buffer of coalesceBuffer bytes and
// written with their neighbours; larger ones are written straight from
// the cached chunk. A batch is many scattered samples, and on the
// benchmark machine (a VM, where a system call is dear) copying them into
// 1 MiB writes cost less CPU than a write call each, for 10 KiB samples
// and for 100 KiB ones alike (measured at 70ad47c).
const (
	coalesceBelow  = 1 << 20
	coalesceBuffer = 1 << 20
)

// bodyWriter writes a body's parts to a response, coalescing small ones.
type bodyWriter struct {
	w       io.Writer
	buf     []byte
	n       int64 // bytes written to w
	buffers Buffers
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
	if len(b.buf)+len(p) > coalesceBuffer {
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

// release gives the buffer back; b must not be used after.
func (b *bodyWriter) release() {
	b.buffers.Put(b.buf)
	b.buf = nil
}
