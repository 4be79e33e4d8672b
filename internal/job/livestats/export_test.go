package livestats

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
)

// What the black-box tests read through: those that serve mixtures
// (internal/batch/units/mixture, which imports this package) are of
// package livestats_test.

// FourChunks is a dataset of 4 chunks of 4 samples; chunk c is (c+1) ×
// 4 KiB (fourChunks).
func FourChunks(t *testing.T, name string) *catalog.Dataset { return fourChunks(t, name) }

// Series returns the value of every series of metric name whose labels
// include want (series).
func Series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) []float64 {
	t.Helper()
	return series(t, reg, name, want)
}

// Traced is the demand trace's batches, oldest first, each the chunks it
// names.
func Traced(s *Stats) [][]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]int32, len(s.trace))
	for i, b := range s.trace {
		out[i] = slices.Clone(b.chunks)
	}
	return out
}

// EpochCounts are job stream js's chunk accesses and loads in epoch (0
// and 0 if it is not kept).
func EpochCounts(s *Stats, js layout.Stream, epoch uint64) (accesses, loads int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[js]
	if !ok {
		return 0, 0
	}
	c, ok := j.epochs[epoch]
	if !ok {
		return 0, 0
	}
	return c.accesses, c.loads
}
