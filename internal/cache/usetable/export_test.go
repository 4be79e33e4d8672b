package usetable

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// What the black-box tests read through: those that lay batches out
// with the node's kinds of batch (internal/batch/units, which imports
// this package) are of package usetable_test.

// IndexOf is an index of chunks chunks of perChunk samples of 512 bytes
// each (testIndex).
func IndexOf(t testing.TB, chunks, perChunk int) *chunkindex.Index {
	return testIndex(t, chunks, perChunk)
}

// AllLocal reads every chunk on this node (allLocal).
func AllLocal(ds *catalog.Dataset, c int) bool { return allLocal(ds, c) }

// NewIdlePrefetcher is a prefetcher of s's uses into cache, on s's clock,
// whose queue no worker reads (newPrefetcher): the test fetches what it
// queued itself (FetchQueued).
func NewIdlePrefetcher(t *testing.T, s *Table, cache *chunkcache.Cache) *Prefetcher {
	return newPrefetcher(t, s, cache)
}

// FetchQueued fetches every chunk p has queued, one after another.
func (p *Prefetcher) FetchQueued() {
	for len(p.queue) > 0 {
		p.fetch(<-p.queue)
	}
}

// Dropped counts the prefetches p dropped (brand_prefetch_dropped_total).
func (p *Prefetcher) Dropped() prometheus.Counter { return p.dropped }
