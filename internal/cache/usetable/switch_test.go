package usetable_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/shuffle"
)

// switchRun is a two-rank job over a schedule whose second source's
// weight jumps at a step, read through a schedule, a prefetcher and a
// chunk cache as the gateway wires them (internal/batch/visit's calls, in its
// order), on a clock the run moves: each global step's two batches begin
// together, then each is read and finished; between steps the queued
// prefetches are all read (a store that answers at once), and the clock
// moves a training step.
type switchRun struct {
	t      *testing.T
	s      *usetable.Table
	cache  *chunkcache.Cache
	p      *usetable.Prefetcher
	orders *layout.Orders
	src    layout.Source
	job    api.Job
	// now is the run's clock, in ns since the Unix epoch: the cache's
	// loads read it (through the policy) on goroutines of their own.
	now atomic.Int64
	// onDemand counts, per dataset, the chunks a batch loaded itself.
	onDemand map[string]int
}

const switchStepTime = 20 * time.Millisecond

func newSwitchRun(t *testing.T, capacity int64, sched string) *switchRun {
	t.Helper()
	// 32 chunks of 16 samples (9,216 bytes) each.
	a := catalog.NewDataset("a", "", nil, usetable.IndexOf(t, 32, 16))
	b := catalog.NewDataset("b", "", nil, usetable.IndexOf(t, 32, 16))
	sc, err := api.ParseSchedule(sched)
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Params: shuffle.Params{BatchSize: 8, World: 2, Window: 4, Seed: 7}, Mix: sc[0].Mix, Schedule: sc}
	orders := units.Orders(nil)
	mixed, err := orders.Compose(orders.UnitOf(features.Requested(job)), []*catalog.Dataset{a, b}, job)
	if err != nil {
		t.Fatal(err)
	}
	return wireSwitchRun(t, orders, mixed, job, capacity)
}

// wireSwitchRun is a run of job over mixture mixed: a schedule, a cache
// of capacity bytes under its policy that loads nothing, and a
// prefetcher whose queue the run reads itself (no workers run).
func wireSwitchRun(t *testing.T, orders *layout.Orders, mixed layout.Composite, job api.Job, capacity int64) *switchRun {
	r := &switchRun{t: t, orders: orders, src: layout.Source{Unit: mixed}, job: job, onDemand: map[string]int{}}
	// The table's time frame starts now, on the run's clock; the run
	// starts a second into it.
	r.now.Store(time.Now().UnixNano())
	r.s = usetable.New(usetable.Config{Orders: orders, Local: usetable.AllLocal, Capacity: capacity, Clock: r.clock})
	r.now.Add(int64(time.Second))
	r.cache = chunkcache.New(chunkcache.Config{Capacity: capacity, Policy: usetable.NewPolicy(r.s.Snapshot, r.s.Ticks),
		Loader: chunkcache.LoaderFunc(func(context.Context, chunkcache.Key, []byte) error { return nil })})
	t.Cleanup(r.cache.Close)
	r.p = usetable.NewIdlePrefetcher(t, r.s, r.cache)
	return r
}

func (r *switchRun) clock() time.Time { return time.Unix(0, r.now.Load()) }

// layout lays out rank's batch of global step m (epoch 0).
func (r *switchRun) layout(m, rank int) *layout.Batch {
	r.t.Helper()
	job := r.job
	job.Rank = rank
	b, err := r.orders.Layout(context.Background(), r.src, job, 0, uint64(m))
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// chunks are the chunk requests of a batch.
func chunksOf(b *layout.Batch) []chunkcache.Request {
	var out []chunkcache.Request
	for _, p := range b.Parts {
		for _, c := range p.Samples.Chunks {
			out = append(out, p.Samples.DS.ChunkRequest(c))
		}
	}
	return out
}

// step reads global step m.
func (r *switchRun) step(m int) {
	r.t.Helper()
	var batches []*layout.Batch
	var toks [][]usetable.Inflight
	for rank := range r.job.World {
		b := r.layout(m, rank)
		var tk []usetable.Inflight
		for _, part := range b.Parts {
			f, err := r.s.Begin(part.Stream, part.Epoch, part.First, part.Drawn, part.Share, 0, usetable.Rank{})
			if err != nil {
				r.t.Fatal(err)
			}
			tk = append(tk, f)
		}
		for _, part := range b.Parts {
			r.p.Enqueue(r.s.Advance(part.Stream, part.Epoch, part.End, 1))
		}
		batches, toks = append(batches, b), append(toks, tk)
	}
	for i, b := range batches {
		reqs := chunksOf(b)
		for _, q := range reqs {
			if !r.cache.Contains(q.Key) {
				r.onDemand[q.Key.Dataset]++
			}
		}
		lease, err := r.cache.Acquire(context.Background(), reqs)
		if err != nil {
			r.t.Fatal(err)
		}
		lease.Release()
		for _, f := range toks[i] {
			r.s.Finish(f)
		}
	}
	r.p.FetchQueued()
	r.now.Add(int64(switchStepTime))
}

// TestPrefetchWarmsThePhaseAhead: at a sharp switch that the schedule
// names, the chunks the rising source's first batches after it read are
// in the cache when the switch comes — read ahead during the phase
// before, in a cache that cannot hold both sources — so that no batch
// after the switch loads one of them itself. The reproduction of issue
// 43's bench (brand-bench schedule: 25 of the 100 steps after source c's
// jump from 0.1 to 0.8 waited on the store; the prefetcher queued 3,985
// chunks and dropped 3,687): before, b's chunks after the switch were
// loaded on demand, since prefetch listed only b's next window (one
// chunk, at its weight before the switch) and, in a full cache of chunks
// every one of which some stream needs, could displace nothing but for
// a chunk needed by the first stream's crossing.
func TestPrefetchWarmsThePhaseAhead(t *testing.T) {
	const (
		chunk   = 18 * 512
		switch1 = 40
		after   = 8 // steps after the switch checked
	)
	// b from 1 sample of a global batch of 16 to 14: its pace times 14.
	r := newSwitchRun(t, 20*chunk, fmt.Sprintf("0:a:15,b:1;%d:a:2,b:14", switch1))
	for m := range switch1 {
		r.step(m)
	}
	r.warmAtSwitch(t, "b", switch1, after)
}

// warmAtSwitch checks, the run having read every step before switch, that
// the chunks of dataset ds that the after steps from switch read are in
// the cache at the switch, then reads those steps and checks none of them
// loaded a chunk of ds on demand.
func (r *switchRun) warmAtSwitch(t *testing.T, ds string, switch1, after int) {
	t.Helper()
	need := map[chunkcache.Key]bool{}
	for m := switch1; m < switch1+after; m++ {
		for rank := range r.job.World {
			for _, q := range chunksOf(r.layout(m, rank)) {
				if q.Key.Dataset == ds {
					need[q.Key] = true
				}
			}
		}
	}
	if len(need) < 4 {
		t.Fatalf("the %d steps after the switch read %d chunks of %s: the test shows nothing", after, len(need), ds)
	}
	var cold []string
	for k := range need {
		if !r.cache.Contains(k) {
			cold = append(cold, k.Object)
		}
	}
	if len(cold) > 0 {
		t.Errorf("at the switch, %d of the %d chunks of %s that the next %d steps read are not in the cache: %v (prefetch dropped %v)",
			len(cold), len(need), ds, after, cold, testutil.ToFloat64(r.p.Dropped()))
	}
	before := r.onDemand[ds]
	for m := switch1; m < switch1+after; m++ {
		r.step(m)
	}
	if n := r.onDemand[ds] - before; n > 0 {
		t.Errorf("the %d steps after the switch loaded %d chunks of %s on demand", after, n, ds)
	}
}
