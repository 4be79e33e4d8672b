package gateway_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/planner"
)

// readEpochs reads epochs [0, n) in order, one batch at a time, as one
// training job would, and waits for each epoch's optimum to be computed.
func readEpochs(t *testing.T, url string, n, batches int) {
	t.Helper()
	for e := range n {
		for m := range batches {
			if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d", url, e, m)); resp.StatusCode != 200 {
				t.Fatalf("epoch %d batch %d: %d %s", e, m, resp.StatusCode, body)
			}
		}
	}
}

func epochStats(t *testing.T, g *gateway.Gateway, wantOptimal int) map[uint64]api.EpochStat {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := map[uint64]api.EpochStat{}
		n := 0
		for _, s := range g.EpochStats() {
			out[s.Epoch] = s
			if s.Optimal != nil {
				n++
			}
		}
		if n >= wantOptimal {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("optimal hit ratio computed for %d epochs, want %d: %+v", n, wantOptimal, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestScheduleBeatsLRU runs the same job through a schedule-policy gateway
// and an LRU one with the cache at half the dataset and compares backend
// traffic per warm epoch, and the live hit ratio with the optimum computed
// on the same requests.
func TestScheduleBeatsLRU(t *testing.T) {
	f := newFixture(t, 24, 8) // 192 samples in 24 chunks
	var total int64
	for c := range f.index.NumChunks() {
		total += f.index.Chunk(c).Size
	}
	defaults := gateway.Defaults{BatchSize: 8, Window: 2, Seed: 77}
	run := func(policy string) map[uint64]api.EpochStat {
		g, srv := start(t, f.store, func(c *gateway.Config) {
			c.CacheSize = total / 2
			c.CachePolicy = policy
			c.Defaults = defaults
			c.PrefetchConcurrency = -1 // compare eviction alone
		})
		readEpochs(t, srv.URL, 4, 24)
		return epochStats(t, g, 3)
	}
	sched, lru := run("schedule"), run("lru")
	// Within one chunk access of the optimum: an epoch here is 48 chunk
	// accesses (24 batches over windows of two chunks), so one access is
	// 0.0208 of the hit ratio. The live policy ranks the chunks of the
	// window a stream is in by its clock; on a loaded machine (CI runs two
	// test packages at once) that costs at most about one access — a
	// bound of 0.02 failed once in 30 runs by exactly one.
	const tolerance = 0.025
	for e := uint64(1); e <= 2; e++ {
		s, l := sched[e], lru[e]
		t.Logf("epoch %d: schedule %d bytes (hit %.3f, optimal %.3f); lru %d bytes (hit %.3f)", e, s.BackendBytes, s.HitRatio, *s.Optimal, l.BackendBytes, l.HitRatio)
		if s.BackendBytes >= l.BackendBytes {
			t.Errorf("epoch %d: schedule read %d bytes, LRU %d: schedule should read less", e, s.BackendBytes, l.BackendBytes)
		}
		if d := *s.Optimal - s.HitRatio; d > tolerance || d < -tolerance {
			t.Errorf("epoch %d: live hit ratio %.3f is not within one chunk access (%.3f) of the optimum %.3f on the same requests", e, s.HitRatio, tolerance, *s.Optimal)
		}
	}

	// The planner, simulating the job without serving it, agrees.
	_, srv := start(t, f.store, func(c *gateway.Config) { c.Defaults = defaults })
	resp, body := get(t, fmt.Sprintf("%s/plan?cache_size=%d&epochs=4", srv.URL, total/2))
	if resp.StatusCode != 200 {
		t.Fatalf("/plan: %d %s", resp.StatusCode, body)
	}
	var plan planner.Plan
	if err := json.Unmarshal(body, &plan); err != nil {
		t.Fatal(err)
	}
	for e := 1; e <= 2; e++ {
		if got, want := sched[uint64(e)].HitRatio, plan.Optimal.Epochs[e].HitRatio; got-want > tolerance || want-got > tolerance {
			t.Errorf("epoch %d: live hit ratio %.3f, planner's optimum %.3f", e, got, want)
		}
		// LRU within one chunk access too: the live run and the
		// planner's model of it differed by exactly one (0.583 against
		// 0.562) in one CI run under load; the cause was not pinned down.
		if got, want := lru[uint64(e)].HitRatio, plan.LRU.Epochs[e].HitRatio; got-want > tolerance || want-got > tolerance {
			t.Errorf("epoch %d: live LRU hit ratio %.3f, planner's LRU %.3f", e, got, want)
		}
	}
}
