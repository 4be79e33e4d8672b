package gateway

import (
	"io"
	"net"
	"sync"
	"syscall"
)

// batchBody is a batch's response body: each sample's tar member, straight
// from its cached chunk, then the end-of-archive blocks.
//
// The handler hands it to the response's ReadFrom. net/http's HTTP/1.1
// response then flushes the headers and passes it the connection itself,
// and WriteTo gathers the scattered samples into writev calls (net.Buffers):
// no copy in user space and one system call per 1,024 samples. Anywhere
// else (TLS, HTTP/2, a test recorder) WriteTo gets a plain writer and
// coalesces small samples into 1 MiB writes instead (docs/benchmarks.md
// measures both).
type batchBody struct {
	parts net.Buffers
	pool  *sync.Pool // of coalescing buffers
}

// Read copies the body out; net/http reads the first 512 bytes this way
// before it hands over the connection.
func (b *batchBody) Read(p []byte) (int, error) { return b.parts.Read(p) }

// WriteTo writes what Read has not returned yet.
func (b *batchBody) WriteTo(w io.Writer) (int64, error) {
	if _, ok := w.(syscall.Conn); ok {
		// A socket: net.Buffers writes with writev.
		return b.parts.WriteTo(w)
	}
	bw := &batchWriter{w: w, buf: (*b.pool.Get().(*[]byte))[:0], pool: b.pool}
	defer bw.release()
	for _, part := range b.parts {
		if err := bw.write(part); err != nil {
			return bw.n, err
		}
	}
	b.parts = nil
	return bw.n, bw.flush()
}

// Where a batch cannot be written with writev (see batchBody), samples
// smaller than coalesceBelow are copied into a buffer of coalesceBuffer
// bytes and written with their neighbours; larger ones are written
// straight from the cached chunk. A batch is many scattered samples, and
// on the benchmark machine (a VM, where a system call is dear) copying them
// into 1 MiB writes cost less CPU than a write call each, for 10 KiB
// samples and for 100 KiB ones alike (docs/benchmarks.md).
const (
	coalesceBelow  = 1 << 20
	coalesceBuffer = 1 << 20
)

// newCoalescePool returns the pool of buffers batchWriter coalesces into.
func newCoalescePool() *sync.Pool {
	return &sync.Pool{New: func() any {
		b := make([]byte, 0, coalesceBuffer)
		return &b
	}}
}

// batchWriter writes a batch's samples to a response, coalescing small ones.
type batchWriter struct {
	w    io.Writer
	buf  []byte
	n    int64 // bytes written to w
	pool *sync.Pool
}

func (b *batchWriter) write(p []byte) error {
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

func (b *batchWriter) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	n, err := b.w.Write(b.buf)
	b.n += int64(n)
	b.buf = b.buf[:0]
	return err
}

// release returns the buffer to the pool; b must not be used after.
func (b *batchWriter) release() {
	buf := b.buf[:0]
	b.pool.Put(&buf)
	b.buf = nil
}
