package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/brandgw/brand/planner"
)

// PolicyReport compares the lru and next-use cache policies on one job
// with the cache at a fraction of the dataset, beside the planner's
// simulation of the same demand trace under LRU and under Belady's rule
// (the optimum).
type PolicyReport struct {
	CacheBytes    int64         `json:"cache_bytes"`
	CacheFraction float64       `json:"cache_fraction"`
	Epochs        []PolicyEpoch `json:"epochs"` // epochs 1..PolicyEpochs
	// Backend bytes over Epochs: live under each policy, and simulated.
	LRUBytes     int64 `json:"lru_bytes"`
	NextUseBytes int64 `json:"next_use_bytes"`
	SimLRUBytes  int64 `json:"sim_lru_bytes"`
	OptimalBytes int64 `json:"optimal_bytes"`
	// Boundaries are the latencies around each epoch boundary of both runs.
	Boundaries []Boundary `json:"boundaries"`
}

// PolicyEpoch is one epoch's backend bytes and hit ratios, live and
// simulated. Live hit ratios are the gateway's 1 − chunk loads ÷ chunk
// accesses, prefetched chunks counting as misses, which is what the
// simulation computes.
type PolicyEpoch struct {
	Epoch           int     `json:"epoch"`
	LRUBytes        int64   `json:"lru_bytes"`
	NextUseBytes    int64   `json:"next_use_bytes"`
	SimLRUBytes     int64   `json:"sim_lru_bytes"`
	OptimalBytes    int64   `json:"optimal_bytes"`
	LRUHit          float64 `json:"lru_hit_ratio"`
	NextUseHit      float64 `json:"next_use_hit_ratio"`
	SimLRUHit       float64 `json:"sim_lru_hit_ratio"`
	OptimalHit      float64 `json:"optimal_hit_ratio"`
	LRUAccesses     int64   `json:"lru_accesses"`
	NextUseAccesses int64   `json:"next_use_accesses"`
	SimAccesses     int     `json:"sim_accesses"`
}

// Boundary is the latency of the batches around the start of an epoch:
// the last five of the epoch before and the first five of Epoch, as the
// p99 of those ten over the median of Epoch. It is measured on the batch
// requests' latency (the target's measure) and, for comparison, on the
// loop's wait. Control is the same ratio for ten consecutive batches in
// the middle of the epoch (the median over all such runs): a boundary is
// only worse than the rest of the epoch by Ratio ÷ Control.
type Boundary struct {
	Policy       string    `json:"policy"`
	Epoch        int       `json:"epoch"` // the epoch entered
	P99Ms        float64   `json:"p99_ms"`
	MedianMs     float64   `json:"epoch_median_ms"`
	Ratio        float64   `json:"ratio"`
	Control      float64   `json:"control_ratio"`
	RequestsMs   []float64 `json:"requests_ms"` // the ten, in order
	WaitP99Ms    float64   `json:"wait_p99_ms"`
	WaitMedianMs float64   `json:"wait_epoch_median_ms"`
	WaitRatio    float64   `json:"wait_ratio"`
	WaitControl  float64   `json:"wait_control_ratio"`
	WaitsMs      []float64 `json:"waits_ms"`
}

// boundaryBatches is how many batches on each side of a boundary count.
const boundaryBatches = 5

// runPolicyGroup runs the lru and next-use gateways at the policy cache
// fraction (reusing the brand group's next-use run) and simulates the same
// job with the planner.
func (r *runner) runPolicyGroup(ctx context.Context) error {
	epochs := r.cfg.Policy.Epochs + 1
	sched, err := r.brandRun(ctx, r.cfg.Policy.Cache, "next-use", epochs, GroupPolicy)
	if err != nil {
		return err
	}
	lru, err := r.brandRun(ctx, r.cfg.Policy.Cache, "lru", epochs, GroupPolicy)
	if err != nil {
		return err
	}
	trace, err := planner.Trace(r.planDS, r.plannerJob(epochs))
	if err != nil {
		return fmt.Errorf("bench: planner trace: %w", err)
	}
	cache := r.cacheBytes(r.cfg.Policy.Cache)
	simLRU := planner.Simulate(trace, r.planDS.ChunkSizes, cache, planner.LRU)
	opt := planner.Simulate(trace, r.planDS.ChunkSizes, cache, planner.Belady)
	rep := &PolicyReport{CacheBytes: cache, CacheFraction: r.cfg.Policy.Cache}
	for e := 1; e < epochs; e++ {
		l, s := lru.stats.epoch(e), sched.stats.epoch(e)
		sl, so := simEpoch(simLRU, e), simEpoch(opt, e)
		pe := PolicyEpoch{
			Epoch: e, LRUBytes: l.BackendBytes, NextUseBytes: s.BackendBytes, SimLRUBytes: sl.BackendBytes, OptimalBytes: so.BackendBytes,
			LRUHit: l.HitRatio, NextUseHit: s.HitRatio, SimLRUHit: sl.HitRatio, OptimalHit: so.HitRatio,
			LRUAccesses: l.Accesses, NextUseAccesses: s.Accesses, SimAccesses: so.Accesses,
		}
		rep.Epochs = append(rep.Epochs, pe)
		rep.LRUBytes += pe.LRUBytes
		rep.NextUseBytes += pe.NextUseBytes
		rep.SimLRUBytes += pe.SimLRUBytes
		rep.OptimalBytes += pe.OptimalBytes
	}
	for _, run := range []*brandRun{lru, sched} {
		rep.Boundaries = append(rep.Boundaries, run.boundaries(epochs)...)
	}
	r.rep.Policy = rep
	r.logf("policies at cache %s: backend bytes over epochs 1-%d: lru %s, next-use %s, optimum %s",
		percentString(r.cfg.Policy.Cache), epochs-1, sizeString(rep.LRUBytes), sizeString(rep.NextUseBytes), sizeString(rep.OptimalBytes))
	return nil
}

// simEpoch returns epoch e's simulated figures.
func simEpoch(res planner.Result, e int) planner.EpochResult {
	for _, er := range res.Epochs {
		if er.Epoch == e {
			return er
		}
	}
	return planner.EpochResult{Epoch: e}
}

// boundaries measures the batches around the start of each epoch 1..n-1.
func (run *brandRun) boundaries(n int) []Boundary {
	var out []Boundary
	for e := 1; e < n && e < len(run.epochs); e++ {
		b := Boundary{Policy: run.policy, Epoch: e}
		var around []time.Duration
		b.P99Ms, b.MedianMs, b.Ratio, b.Control, around = boundaryRatio(run.epochs[e-1].requests, run.epochs[e].requests)
		b.RequestsMs = roundMs(around)
		b.WaitP99Ms, b.WaitMedianMs, b.WaitRatio, b.WaitControl, around = boundaryRatio(run.epochs[e-1].waits, run.epochs[e].waits)
		b.WaitsMs = roundMs(around)
		out = append(out, b)
	}
	return out
}

// boundaryRatio computes, for the batches of two consecutive epochs, the
// p99 of the ten around the boundary over the median of the second epoch,
// and the control: the median of the same ratio over every run of ten
// consecutive batches of the second epoch away from its ends.
func boundaryRatio(prev, cur []time.Duration) (p99, median, r, control float64, around []time.Duration) {
	around = append(around, prev[max(len(prev)-boundaryBatches, 0):]...)
	around = append(around, cur[:min(boundaryBatches, len(cur))]...)
	med := percentile(cur, 50)
	p99, median = ms(percentile(around, 99)), ms(med)
	r = ratio(p99, median)
	var controls []time.Duration // ratios, as durations to reuse percentile
	for i := boundaryBatches; i+2*boundaryBatches <= len(cur)-boundaryBatches; i++ {
		w := percentile(cur[i:i+2*boundaryBatches], 99)
		controls = append(controls, time.Duration(ratio(float64(w), float64(med))*1e6))
	}
	control = float64(percentile(controls, 50)) / 1e6
	return p99, median, r, control, around
}

func roundMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = math.Round(100*ms(d)) / 100
	}
	return out
}
