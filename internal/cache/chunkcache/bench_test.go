package chunkcache_test

import (
	"context"
	"testing"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// noopLoader stands in for the store so the benchmarks time the cache.
var noopLoader = chunkcache.LoaderFunc(func(context.Context, chunkcache.Key, []byte) error { return nil })

// BenchmarkAcquireHit is the warm path: a batch's 8 chunks all resident.
func BenchmarkAcquireHit(b *testing.B) {
	c := chunkcache.New(chunkcache.Config{Capacity: 1 << 30, Loader: noopLoader})
	reqs := make([]chunkcache.Request, 8)
	for i := range reqs {
		reqs[i] = req(i, 1<<20)
	}
	ctx := context.Background()
	l, _ := c.Acquire(ctx, reqs)
	l.Release()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Acquire(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// BenchmarkAcquireMissEvict is the cold path without I/O: every Acquire
// loads a new chunk and evicts one, reusing its buffer.
func BenchmarkAcquireMissEvict(b *testing.B) {
	for _, p := range []struct {
		name   string
		policy func() chunkcache.Policy
	}{{"lru", func() chunkcache.Policy { return chunkcache.NewLRU() }}} {
		b.Run(p.name, func(b *testing.B) {
			const size = 1 << 20
			c := chunkcache.New(chunkcache.Config{Capacity: 64 * size, Loader: noopLoader, Policy: p.policy()})
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l, err := c.Acquire(ctx, []chunkcache.Request{req(i, size)})
				if err != nil {
					b.Fatal(err)
				}
				l.Release()
				i++
			}
		})
	}
}
