package visit_test

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
)

// heapAfterGC is the live heap after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// seriesOf counts the series of the metrics whose names start with
// prefix that the stages export (a gauge's or counter's lines on
// /metrics).
func seriesOf(t *testing.T, s *stagetest.Stages, prefix string) (n int) {
	t.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), prefix) {
			n += len(mf.GetMetric())
		}
	}
	return n
}

// TestStatsBounded: the stages of a node serve 1,000 short epochs of
// one job, and a flood of 500 seeds; the per-epoch figures (/stats'
// epochs: the 16 highest of each of the 16 jobs served last) and their
// metric series stay bounded, and so does the heap. (The bounds' rule:
// internal/job/livestats's TestBoundedJobsAndEpochs; the gateway's
// handlers keep nothing per epoch.)
func TestStatsBounded(t *testing.T) {
	set := packTar(t, "test", "", 4, 4, 0) // 16 samples: one batch an epoch
	s := stagetest.New(t, stagetest.Config{Datasets: []stagetest.Spec{set.spec}, Defaults: query.Defaults{BatchSize: 16, Window: 2, Seed: 1}})
	serve := func(from, to int, seed func(int) int) {
		for e := from; e < to; e++ {
			if _, _, err := s.Batch(context.Background(), fmt.Sprintf("seed=%d", seed(e)), uint64(e), 0); err != nil {
				t.Fatalf("epoch %d: %v", e, err)
			}
		}
	}
	serve(0, 100, func(int) int { return 1 })
	before := heapAfterGC()
	serve(100, 1000, func(int) int { return 1 })
	if st := s.Stats.Snapshot(); len(st) != 16 || st[0].Epoch != 984 || st[15].Epoch != 999 {
		t.Errorf("after 1,000 epochs of one job: %d epochs kept, from %d; want its 16 highest, 984..999", len(st), st[0].Epoch)
	}
	serve(0, 500, func(e int) int { return 1000 + e }) // 500 distinct seeds
	after := heapAfterGC()
	if n := len(s.Stats.Snapshot()); n > 16*16 {
		t.Errorf("%d epochs kept in the statistics, want at most 256 (16 jobs × 16 epochs)", n)
	}
	if n := len(s.Stats.Jobs()); n != 16 {
		t.Errorf("%d jobs kept in the statistics, want the 16 served last", n)
	}
	series := seriesOf(t, s, "brand_epoch_")
	if series > 3*16*16 {
		t.Errorf("%d per-epoch series, want at most %d", series, 3*16*16)
	}
	if jobSeries := seriesOf(t, s, "brand_job_"); jobSeries > 3*16 {
		t.Errorf("%d per-job series, want at most %d", jobSeries, 3*16)
	}
	t.Logf("heap %d → %d bytes; %d epoch stats; %d per-epoch series", before, after, len(s.Stats.Snapshot()), series)
	if after > before+8<<20 {
		t.Errorf("heap grew from %d to %d bytes over 1,400 more epochs", before, after)
	}
}

// manySourcesCache is the cache of TestManySourcesConstantCost's
// stages: the chunks it holds are memory that the bytes read decide,
// bounded by it, whatever the sources.
const manySourcesCache = 2 << 20

// TestManySourcesConstantCost: a schedule over 100 sources costs the
// stages of a node the goroutines of one over 2, and, for the same
// samples read, memory beyond the sources' indexes (loaded before the
// epoch) and the cache's chunks (at most its size) of the same order: no
// per-source readers, pools or buffers. The gateway's handlers keep
// nothing per source; what a batch over many sources allocates through
// them is the gateway's TestManySourcesGarbagePerBatch, the goroutines
// over S3 integration's TestManySourcesOverS3ConstantGoroutines.
func TestManySourcesConstantCost(t *testing.T) {
	type cost struct {
		goroutines   int
		heap, loaded uint64
	}
	var costs []cost
	for _, n := range []int{2, 100} {
		// Each in a subtest of its own, so that its stages are closed
		// before the next is measured.
		t.Run(fmt.Sprintf("%d sources", n), func(t *testing.T) {
			var c cost
			c.goroutines, c.heap, c.loaded = sourcesCost(t, n)
			costs = append(costs, c)
		})
	}
	if len(costs) != 2 {
		t.Fatal("a measurement failed")
	}
	c2, c100 := costs[0], costs[1]
	t.Logf("2 sources: %d goroutines, heap %d KiB loaded, %d KiB after an epoch; 100 sources: %d goroutines, %d KiB loaded, %d KiB after",
		c2.goroutines, c2.loaded>>10, c2.heap>>10, c100.goroutines, c100.loaded>>10, c100.heap>>10)
	if c100.goroutines > c2.goroutines+8 {
		t.Errorf("100 sources hold %d goroutines against 2 sources' %d: something runs per source", c100.goroutines, c2.goroutines)
	}
	grew2, grew100 := int64(c2.heap)-int64(c2.loaded), int64(c100.heap)-int64(c100.loaded)
	if grew100 > grew2+manySourcesCache+(1<<20) {
		t.Errorf("serving an epoch grew the heap %d KiB with 100 sources, %d KiB with 2", grew100>>10, grew2>>10)
	}
}

// sourcesCost wires the stages over n small datasets of 1,200 samples
// in all, reads an epoch of a two-phase schedule over all of them (75
// batches of 16, whatever n, the phase changing halfway), and returns
// the goroutines and live heap bytes they hold afterwards, and the heap
// before the epoch (the datasets loaded).
func sourcesCost(t *testing.T, n int) (goroutines int, heap, loaded uint64) {
	t.Helper()
	var specs []stagetest.Spec
	var w0, w1 []string
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		specs = append(specs, packTar(t, name, name+"-", 200/n, 6, 256).spec)
		w0 = append(w0, fmt.Sprintf("%s:%d", name, 1+i%3))
		w1 = append(w1, fmt.Sprintf("%s:%d", name, 1+(i+1)%4))
	}
	s := stagetest.New(t, stagetest.Config{Datasets: specs, CacheSize: manySourcesCache, Defaults: query.Defaults{BatchSize: 16, Window: 2, Seed: 5}})
	raw := "mix_schedule=" + url.QueryEscape("0:"+strings.Join(w0, ",")+";37:"+strings.Join(w1, ","))
	loaded = heapAfterGC()
	for m := range uint64(1200 / 16) {
		if _, _, err := s.Batch(context.Background(), raw, 0, m); err != nil {
			t.Fatalf("batch %d: %v", m, err)
		}
	}
	// Goroutines that end with a batch take a moment to go: count once
	// they have.
	deadline := time.Now().Add(5 * time.Second)
	goroutines = runtime.NumGoroutine()
	for prev := -1; goroutines != prev && time.Now().Before(deadline); {
		prev = goroutines
		time.Sleep(50 * time.Millisecond)
		goroutines = runtime.NumGoroutine()
	}
	return goroutines, heapAfterGC(), loaded
}
