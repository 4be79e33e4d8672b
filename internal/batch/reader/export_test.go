package reader

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// What the black-box tests read through: those that lay batches out
// with the node's kinds of batch (internal/batch/units, which imports
// this package) are of package reader_test.

// Store is the tests' store (store): sample i of chunk c of dataset d is
// sampleSize copies of a byte of (d, c, i).
type Store = store

// Loads is the chunks s has loaded.
func (s *store) Loads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// SampleBytes is the bytes of sample id of ds as a Store holds them.
func SampleBytes(ds *catalog.Dataset, id int) []byte { return want(ds, id) }

// NewCachedReader is a reader over a cache of capacity bytes loading with
// st on a single gateway (newReader).
func NewCachedReader(t *testing.T, capacity int64, st chunkcache.Loader, skip bool) (*Reader, *chunkcache.Cache, *prometheus.Registry) {
	t.Helper()
	return newReader(t, capacity, st, skip)
}

// AssembledInParts counts r's batches assembled a group of chunks at a
// time (brand_batches_assembled_in_parts_total).
func AssembledInParts(r *Reader) prometheus.Counter { return r.inParts }
