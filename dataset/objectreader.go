package dataset

import (
	"context"
	"fmt"
	"io"

	"github.com/brandgw/brand/s3backend"
)

// ReadPartSize is the size of the ranged reads IndexShards and Verify
// stream objects with: large enough that per-request latency is amortised,
// small enough that a few concurrent readers stay within tens of MiB.
const ReadPartSize = 8 << 20

// partBuffers holds the ReadPartSize buffers of at most n reads running at
// once, each taken by a read and given back when it ends, so a run over
// many objects allocates n buffers, not one an object.
type partBuffers chan []byte

func newPartBuffers(n int) partBuffers { return make(partBuffers, n) }

// take returns a buffer given back earlier, or a new one.
func (p partBuffers) take() []byte {
	select {
	case b := <-p:
		return b
	default:
		return make([]byte, ReadPartSize)
	}
}

// give returns b for the next read; at most n reads may hold one.
func (p partBuffers) give(b []byte) { p <- b }

// objectReader reads one object front to back as an io.Reader, through
// ranged reads of up to len(buf) bytes, each pinned to the same ETag: if the
// object is replaced while it is read the next part fails with
// s3backend.ErrChanged, so the reader never yields bytes of two versions.
//
// It holds a context because io.Reader has no place for one; it lives only
// as long as the call that made it.
type objectReader struct {
	ctx       context.Context
	st        s3backend.Store
	key, etag string
	size      int64  // the object size; Read returns io.EOF there
	next      int64  // object offset of the next part to read
	buf       []byte // one part; buf[pos:end] is not served yet
	pos, end  int
	onRead    func(n int64) // called with the size of each part read, if set
}

func newObjectReader(ctx context.Context, st s3backend.Store, info s3backend.ObjectInfo, buf []byte, onRead func(int64)) *objectReader {
	return &objectReader{ctx: ctx, st: st, key: info.Key, etag: info.ETag, size: info.Size, buf: buf, onRead: onRead}
}

// Read implements io.Reader. It returns io.EOF at the object size the
// reader was created with.
func (r *objectReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.pos == r.end {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.pos:r.end])
	r.pos += n
	return n, nil
}

// fill reads the next part into buf.
func (r *objectReader) fill() error {
	if r.next >= r.size {
		return io.EOF
	}
	n := int(min(int64(len(r.buf)), r.size-r.next))
	if err := r.st.ReadRange(r.ctx, r.key, r.etag, r.next, r.buf[:n]); err != nil {
		return fmt.Errorf("reading %s at offset %d: %w", r.key, r.next, err)
	}
	r.next += int64(n)
	r.pos, r.end = 0, n
	if r.onRead != nil {
		r.onRead(int64(n))
	}
	return nil
}
