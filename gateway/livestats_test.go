package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/planner"
)

// TestOptimumOfInterleavedEpochs is the reproduction of a wrong optimum:
// on a fresh gateway, batch 0 of epoch 0, then batch 0 of epoch 1, then the
// rest of epoch 0. Epoch 0's optimum must be computed on its whole demand
// (it was computed on batch 0 alone and showed 0), in /stats and in
// /metrics; and epoch 1, barely begun, must not show a negative hit ratio
// from chunks prefetched for it.
func TestOptimumOfInterleavedEpochs(t *testing.T) {
	f := newFixture(t, 12, 8) // 96 samples in 12 chunks
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 2, Seed: 3}
	})
	// The demand trace, from each batch's manifest: its distinct chunks in
	// first-use order.
	var trace []planner.Access
	batch := func(e, m int) {
		t.Helper()
		if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d", srv.URL, e, m)); resp.StatusCode != 200 {
			t.Fatalf("epoch %d batch %d: %d %s", e, m, resp.StatusCode, body)
		}
		_, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d/manifest", srv.URL, e, m))
		var man api.Manifest
		if err := json.Unmarshal(body, &man); err != nil {
			t.Fatal(err)
		}
		seen := map[int32]bool{}
		for _, s := range man.Samples {
			id, _ := f.index.Lookup(s.Key)
			c, _, _, _ := f.index.SampleRange(id)
			if !seen[int32(c)] {
				trace = append(trace, planner.Access{Chunk: int32(c), Epoch: int32(e), Start: len(seen) == 0})
				seen[int32(c)] = true
			}
		}
	}
	batch(0, 0)
	batch(1, 0)
	for m := 1; m < 12; m++ {
		batch(0, m)
	}
	stats := epochStats(t, g, 1)
	e0, e1 := stats[0], stats[1]
	if e0.Optimal == nil || !e0.Complete || e0.Accesses == 0 {
		t.Fatalf("epoch 0: %+v, want a complete epoch with its optimum", e0)
	}
	// The optimum is Belady's on the whole demand as it arrived.
	sizes := make([]int64, f.index.NumChunks())
	for c := range sizes {
		sizes[c] = f.index.Chunk(c).Size
	}
	want := planner.Simulate(trace, sizes, 64<<20, planner.Belady).Epochs[0].HitRatio
	if *e0.Optimal != want || want <= 0 {
		t.Errorf("epoch 0: optimum %.3f, want Belady's %.3f on the whole trace (live %.3f)", *e0.Optimal, want, e0.HitRatio)
	}
	if e1.HitRatio < 0 || e1.Loads > e1.Accesses || e1.Complete || e1.Optimal != nil {
		t.Errorf("epoch 1, one batch served: %+v; want loads within accesses, not complete, no optimum", e1)
	}
	metrics := scrape(t, srv.URL)
	line := fmt.Sprintf(`brand_epoch_hit_ratio{dataset="test",epoch="0",index="%s",job="",policy="optimal",seed="3",snapshot="",window="2"} %g`, e0.Index, *e0.Optimal)
	if !strings.Contains(metrics, line) {
		t.Errorf("/metrics lacks %s:\n%s", line, grepLines(metrics, "brand_epoch_hit_ratio"))
	}
	if strings.Contains(metrics, `epoch="1",policy="optimal"`) {
		t.Errorf("/metrics has an optimum for the incomplete epoch 1:\n%s", grepLines(metrics, "brand_epoch_hit_ratio"))
	}
}

// TestStatsBounded serves 1,000 short epochs, and a flood of seeds, and
// checks that the per-epoch figures and their metric series stay bounded,
// and so does the heap.
func TestStatsBounded(t *testing.T) {
	f := newFixture(t, 4, 4) // 16 samples: one batch an epoch
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.Defaults = gateway.Defaults{BatchSize: 16, Window: 2, Seed: 1}
	})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	client := srv.Client()
	serve := func(from, to int, seed func(int) int) {
		for e := from; e < to; e++ {
			resp, err := client.Get(fmt.Sprintf("%s/epoch/%d/batch/0?seed=%d", srv.URL, e, seed(e)))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("epoch %d: %d", e, resp.StatusCode)
			}
		}
	}
	serve(0, 100, func(int) int { return 1 })
	before := heap()
	serve(100, 1000, func(int) int { return 1 })
	if st := g.EpochStats(); len(st) != 16 || st[0].Epoch != 984 || st[15].Epoch != 999 {
		t.Errorf("after 1,000 epochs of one job: %d epochs kept, from %d; want its 16 highest, 984..999", len(st), st[0].Epoch)
	}
	serve(0, 500, func(e int) int { return 1000 + e }) // 500 distinct seeds
	after := heap()
	if n := len(g.EpochStats()); n > 16*16 {
		t.Errorf("%d epochs kept in the statistics, want at most 256 (16 jobs × 16 epochs)", n)
	}
	if n := len(g.JobStats()); n != 16 {
		t.Errorf("%d jobs kept in the statistics, want the 16 served last", n)
	}
	metrics := scrape(t, srv.URL)
	series := strings.Count(metrics, "\nbrand_epoch_")
	if series > 3*16*16 {
		t.Errorf("/metrics has %d per-epoch series, want at most %d", series, 3*16*16)
	}
	if jobSeries := strings.Count(metrics, "\nbrand_job_"); jobSeries > 3*16 {
		t.Errorf("/metrics has %d per-job series, want at most %d", jobSeries, 3*16)
	}
	t.Logf("heap %d → %d bytes; %d epoch stats; %d per-epoch series", before, after, len(g.EpochStats()), series)
	if after > before+8<<20 {
		t.Errorf("heap grew from %d to %d bytes over 1,400 more epochs", before, after)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	_, body := get(t, url+"/metrics")
	return string(body)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
