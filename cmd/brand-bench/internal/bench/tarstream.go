package bench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/brandgw/brand/client"
)

// item is a decoded sample on its way to the consuming loop, with the body
// buffer its files point into (nil if the sample owns its bytes).
type item struct {
	s    *client.Sample
	body *pooledBody
}

// done tells the sample's body that the loop is finished with the sample.
func (it item) done() {
	if it.body != nil {
		it.body.release()
	}
}

// pooledBody is one response body's buffer, shared by the samples decoded
// from it and handed back to its pool when the last of them is done.
type pooledBody struct {
	buf  []byte
	left atomic.Int64 // samples not done yet
	pool *bodyPool
}

func (b *pooledBody) release() {
	if b.left.Add(-1) == 0 {
		b.pool.put(b.buf)
	}
}

// bodyPool lends body buffers to the limits' clients, as
// Brand's client reuses the buffers of released batches (Batch.Release):
// with it, every configuration reads into reused memory, and none pays for
// zeroing fresh buffers or for the collections they cause while the others
// do not.
type bodyPool struct{ p sync.Pool }

// get returns an empty buffer with room for at least n bytes. A nil pool
// allocates each one, and put drops it.
func (p *bodyPool) get(n int) []byte {
	if p == nil {
		return make([]byte, 0, n)
	}
	if v, _ := p.p.Get().(*[]byte); v != nil && cap(*v) >= n {
		return (*v)[:0]
	}
	return make([]byte, 0, n+n/8)
}

func (p *bodyPool) put(b []byte) {
	if p != nil {
		p.p.Put(&b)
	}
}

// decodeBody reads a whole WebDataset tar body (size bytes expected) into a
// buffer from pool (nil: a new one) and hands its samples to emit in order; the buffer goes
// back to the pool when the consuming loop is done with the last of them.
// It decodes exactly as Brand's client decodes a batch — one buffer per
// body, read with a few large reads, and client.DecodeTar over it — so that
// every configuration pays the same client-side cost per byte and per
// sample, and the comparison is of how the bytes arrive, not of two
// decoders.
func decodeBody(r io.Reader, size int64, pool *bodyPool, emit func(item) error) error {
	b, err := readInto(r, pool.get(int(max(size, 0))+1))
	if err != nil {
		pool.put(b)
		return err
	}
	samples, err := client.DecodeTar(b)
	if err != nil {
		pool.put(b)
		return fmt.Errorf("decoding %d bytes: %w", len(b), err)
	}
	if len(samples) == 0 {
		pool.put(b)
		return nil
	}
	body := &pooledBody{buf: b, pool: pool}
	body.left.Store(int64(len(samples)))
	for i := range samples {
		if err := emit(item{&samples[i], body}); err != nil {
			return err
		}
	}
	return nil
}
