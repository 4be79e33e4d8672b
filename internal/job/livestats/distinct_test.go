package livestats

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/batch/layout"
)

// TestDistinctJobsHoldNoMemory: 20,000 jobs, each served one batch and
// never again (a client that names a new job, mixture or schedule in
// every request), leave the statistics holding what they keep of the
// last statsJobs jobs and the demand trace alone: the heap after a
// collection grows by less than 2 MiB over the second 10,000, the
// trace's few bytes a batch.
//
// The reproduction: the trace held each batch's job, and with it the
// job's labels, counters, gauges and epochs after its series were
// deleted: 45 MiB over the second 10,000 here (5 MB per 1,000 mixtures
// through a gateway, not levelling off).
func TestDistinctJobsHoldNoMemory(t *testing.T) {
	ds := fourChunks(t, "d")
	s := New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	const n = 20000
	var half int64
	for i := range n {
		js := layout.Stream{DS: ds, Seed: uint64(i), Window: 2, Name: fmt.Sprintf("job-%d", i)}
		s.Batch(Served{Stream: js, EpochSamples: 16, Samples: 4, Chunks: []int{i % 4}, Loads: 1, LoadedBytes: 4096, StoreBytes: 4096, Wait: time.Millisecond})
		if i+1 == n/2 {
			half = heap()
		}
	}
	grew := heap() - half
	t.Logf("the second %d of %d distinct jobs: heap +%.2f MiB", n/2, n, float64(grew)/(1<<20))
	if grew > 2<<20 {
		t.Errorf("the heap grew by %.2f MiB over the second %d distinct jobs; want under 2 MiB", float64(grew)/(1<<20), n/2)
	}
	if got := len(s.Jobs()); got > statsJobs {
		t.Errorf("%d jobs kept, want at most %d", got, statsJobs)
	}
}

// TestTraceBoundedInBatches: the demand trace keeps at most its bound of
// batches, however few accesses each holds, dropping its older half.
func TestTraceBoundedInBatches(t *testing.T) {
	s := New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	s.traceBatches = 64
	js := layout.Stream{DS: fourChunks(t, "d"), Seed: 1, Window: 2}
	for i := range 1000 {
		s.Batch(Served{Stream: js, EpochSamples: 4000, Samples: 4, Chunks: []int{i % 4}})
		if len(s.trace) > s.traceBatches {
			t.Fatalf("after %d batches the trace holds %d, over its bound of %d", i+1, len(s.trace), s.traceBatches)
		}
	}
	if len(s.trace) < s.traceBatches/2 {
		t.Fatalf("the trace holds %d batches, under half its bound", len(s.trace))
	}
}
