package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/planner"
)

// TestSmallCacheServesWholeEpochs is the reproduction of jobs dying for
// lack of cache: with a window of 8 chunks and a cache of one chunk (and of
// half a chunk, smaller than any chunk), every batch used to be refused
// with 400. Every batch must be served, whole and correct, and every
// sample exactly once per epoch.
func TestSmallCacheServesWholeEpochs(t *testing.T) {
	f := newFixture(t, 19, 16) // 304 samples
	var largest int64
	for c := range f.index.NumChunks() {
		largest = max(largest, f.index.Chunk(c).Size)
	}
	for _, tt := range []struct {
		name  string
		cache int64
		batch int
	}{
		{"one chunk, batch 32", largest, 32},
		{"one chunk, batch 64 across windows", largest, 64},
		{"half a chunk", largest / 2, 32},
		{"three chunks", 3 * largest, 48},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := start(t, f.store, func(c *gateway.Config) {
				c.CacheSize = tt.cache
				c.Defaults = gateway.Defaults{BatchSize: tt.batch, Window: 8, Seed: 9}
			})
			for epoch := range 2 {
				seen := map[string]int{}
				batches := (304 + tt.batch - 1) / tt.batch
				for m := range batches {
					resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d", srv.URL, epoch, m))
					if resp.StatusCode != 200 {
						t.Fatalf("epoch %d batch %d: %d %s", epoch, m, resp.StatusCode, body)
					}
					f.verify(t, readTar(t, body), seen)
				}
				exactlyOnce(t, seen, 304, fmt.Sprintf("epoch %d", epoch))
			}
			if m := scrape(t, srv.URL); tt.cache < 8*largest && strings.Contains(m, "\nbrand_batches_assembled_in_parts_total 0\n") {
				t.Errorf("no batch was assembled in parts with a cache of %d bytes", tt.cache)
			}
		})
	}
}

// TestPlanPredictsSmallCacheBytes: with a cache below what a batch across
// a window boundary needs, the planner's prediction of the bytes read from
// the store (the optimal policy's, which the schedule policy follows) is
// within 5 % of what the gateway then reads over the epochs planned.
func TestPlanPredictsSmallCacheBytes(t *testing.T) {
	f := newFixture(t, 19, 16)
	var largest int64
	for c := range f.index.NumChunks() {
		largest = max(largest, f.index.Chunk(c).Size)
	}
	cache := 10 * largest // a window is 8 chunks; a batch across two needs up to 16
	defaults := gateway.Defaults{BatchSize: 32, Window: 8, Seed: 5}
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.CacheSize = cache
		c.Defaults = defaults
		c.PrefetchConcurrency = -1 // the plan's figures are for demand reads
	})
	readEpochs(t, srv.URL, 3, (304+31)/32)
	resp, body := get(t, fmt.Sprintf("%s/plan?cache_size=%d&epochs=3", srv.URL, cache))
	if resp.StatusCode != 200 {
		t.Fatalf("/plan: %d %s", resp.StatusCode, body)
	}
	var plan planner.Plan
	if err := json.Unmarshal(body, &plan); err != nil {
		t.Fatal(err)
	}
	live := map[uint64]int64{}
	for _, s := range g.EpochStats() {
		live[s.Epoch] = s.BackendBytes
	}
	var got, want int64
	for e := range 3 {
		t.Logf("epoch %d: gateway read %d bytes, the plan predicts %d", e, live[uint64(e)], plan.Optimal.Epochs[e].BackendBytes)
		got += live[uint64(e)]
		want += plan.Optimal.Epochs[e].BackendBytes
	}
	if d := float64(got-want) / float64(want); d > 0.05 || d < -0.05 {
		t.Errorf("3 epochs: gateway read %d bytes, the plan predicts %d (%.1f %% off)", got, want, 100*d)
	}
}
