package client

import "sync"

// buffers lends the memory of released batches (Batch.Release) to later
// ones. A training loop reads batch after batch of about the same size, so
// without reuse every batch is a fresh allocation the runtime must zero
// and, with only a few batches alive at a time, the collector runs every
// few batches: with 10 KiB samples that was a seventh of the client's CPU
// in the benchmark, measured at c752cb6.
type buffers struct {
	pool sync.Pool // of *[]byte
}

// get returns a buffer of n bytes, reused if a released one is large
// enough. A fresh one has an eighth more capacity than asked, so that a
// slightly larger batch later can still reuse it. A nil *buffers always
// allocates.
func (p *buffers) get(n int) []byte {
	if p == nil {
		return make([]byte, n)
	}
	if v, _ := p.pool.Get().(*[]byte); v != nil && cap(*v) >= n {
		return (*v)[:n]
	}
	// A released buffer too small for this batch is dropped.
	return make([]byte, n, n+n/8)
}

// put makes b available to get; the caller must not use b afterwards.
func (p *buffers) put(b []byte) {
	if p != nil && cap(b) > 0 {
		p.pool.Put(&b)
	}
}
