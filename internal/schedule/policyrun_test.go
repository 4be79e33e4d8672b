package schedule

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// policyRun reads jobs over one dataset through a schedule and a chunk
// cache evicting by the schedule's policy or by LRU, without prefetch (as
// a gateway with prefetch off does, so that eviction alone is compared):
// each batch laid out, begun, its stream advanced, its chunks acquired and
// released, finished, on a clock that moves a step per batch. It counts
// per epoch the chunk accesses of the batches, the hits among them, and
// the bytes the loader read.
type policyRun struct {
	t      *testing.T
	s      *Schedule
	cache  *chunkcache.Cache
	orders *order.Orders
	ds     *catalog.Dataset
	now    atomic.Int64 // the clock, in ns since the Unix epoch
	epoch  uint64       // the epoch being read, which loads count for
	stats  map[uint64]*epochCounts
}

type epochCounts struct {
	accesses, hits int
	bytes          int64
}

func (c *epochCounts) hitRatio() float64 { return float64(c.hits) / float64(c.accesses) }

// newPolicyRun is a run over ds with a cache of capacity bytes evicting
// by policy, "schedule" or "lru".
func newPolicyRun(t *testing.T, ds *catalog.Dataset, capacity int64, policy string) *policyRun {
	t.Helper()
	r := &policyRun{t: t, orders: order.New(nil), ds: ds, stats: map[uint64]*epochCounts{}}
	r.s = New(Config{Orders: r.orders, Local: allLocal, Capacity: capacity})
	r.now.Store(r.s.zero.Add(time.Second).UnixNano())
	r.s.clock = func() time.Time { return time.Unix(0, r.now.Load()) }
	var p chunkcache.Policy = NewPolicy(r.s.Table, r.s.Ticks)
	if policy == "lru" {
		p = chunkcache.NewLRU()
	}
	r.cache = chunkcache.New(chunkcache.Config{Capacity: capacity, Policy: p,
		Loader: chunkcache.LoaderFunc(func(_ context.Context, _ chunkcache.Key, buf []byte) error {
			r.counts(r.epoch).bytes += int64(len(buf)) // loads run while the run waits in Acquire
			return nil
		})})
	t.Cleanup(r.cache.Close)
	return r
}

func (r *policyRun) counts(epoch uint64) *epochCounts {
	if r.stats[epoch] == nil {
		r.stats[epoch] = &epochCounts{}
	}
	return r.stats[epoch]
}

// batch reads batch m of epoch of job.
func (r *policyRun) batch(job api.Job, epoch, m uint64) {
	r.t.Helper()
	b, err := r.orders.Layout(context.Background(), order.Source{DS: r.ds}, job, epoch, m)
	if err != nil {
		r.t.Fatal(err)
	}
	var toks []Inflight
	for _, p := range b.Parts {
		f, err := r.s.Begin(p.Stream, p.Epoch, p.First, p.Share, 0)
		if err != nil {
			r.t.Fatal(err)
		}
		toks = append(toks, f)
		r.s.Advance(p.Stream, p.Epoch, p.End, 1)
	}
	reqs := chunksOf(b)
	r.epoch = epoch
	c := r.counts(epoch)
	for _, q := range reqs {
		c.accesses++
		if r.cache.Contains(q.Key) {
			c.hits++
		}
	}
	lease, err := r.cache.Acquire(context.Background(), reqs)
	if err != nil {
		r.t.Fatal(err)
	}
	lease.Release()
	for _, f := range toks {
		r.s.Finish(f)
	}
	r.now.Add(int64(switchStepTime))
}

// TestScheduleBeatsLRU reads the same job through the schedule's policy
// and LRU with the cache at half the dataset: the schedule reads less from
// the store every warm epoch, its hit ratio within one chunk access of
// the optimum the planner computes on the same requests, and LRU's within
// one access of the planner's LRU.
func TestScheduleBeatsLRU(t *testing.T) {
	ix := testIndex(t, 24, 8) // 192 samples in 24 chunks
	ds := catalog.NewDataset("d", "", nil, ix)
	job := api.Job{Params: shuffle.Params{BatchSize: 8, World: 1, Window: 2, Seed: 77}}
	const epochs = 4
	run := func(policy string) map[uint64]*epochCounts {
		r := newPolicyRun(t, ds, ix.TotalBytes()/2, policy)
		for e := range uint64(epochs) {
			for m := range uint64(ix.NumSamples() / job.BatchSize) {
				r.batch(job, e, m)
			}
		}
		return r.stats
	}
	sched, lru := run("schedule"), run("lru")
	plan, err := planner.MakePlan(context.Background(), planner.PlanInput{Dataset: planner.DatasetOf(ix),
		Job: planner.Job{Params: job.Params, Epochs: epochs}, CacheBytes: ix.TotalBytes() / 2, BackendBytesPerSec: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	// One chunk access of an epoch of 24 batches over windows of two
	// chunks (48 accesses) is 0.0208 of the hit ratio.
	const tolerance = 0.025
	for e := uint64(1); e <= 2; e++ {
		s, l := sched[e], lru[e]
		opt, plru := plan.Optimal.Epochs[e].HitRatio, plan.LRU.Epochs[e].HitRatio
		t.Logf("epoch %d: schedule %d bytes (hit %.3f, optimal %.3f); lru %d bytes (hit %.3f, planned %.3f)", e, s.bytes, s.hitRatio(), opt, l.bytes, l.hitRatio(), plru)
		if s.bytes >= l.bytes {
			t.Errorf("epoch %d: schedule read %d bytes, LRU %d: schedule should read less", e, s.bytes, l.bytes)
		}
		for _, c := range []struct {
			what      string
			got, want float64
		}{{"the schedule's hit ratio, the optimum", s.hitRatio(), opt}, {"LRU's hit ratio, the planner's LRU", l.hitRatio(), plru}} {
			if d := c.got - c.want; d > tolerance || d < -tolerance {
				t.Errorf("epoch %d: %s: %.3f, %.3f: more than one chunk access (%.3f) apart", e, c.what, c.got, c.want, tolerance)
			}
		}
	}
	if sched[0].accesses != lru[0].accesses {
		t.Errorf("the runs made %d and %d accesses in epoch 0: not the same requests", sched[0].accesses, lru[0].accesses)
	}
}
