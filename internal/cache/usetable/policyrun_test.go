package usetable_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// policyRun reads jobs over one dataset through a schedule and a chunk
// cache evicting by the schedule's policy or by LRU, without prefetch (as
// a gateway with prefetch off does, so that eviction alone is compared),
// each batch as internal/batch/visit reads it: laid out, begun, its streams
// advanced, its job's turn waited for (with turns on), its chunks acquired
// and released, finished; then the job's training step. It runs in a
// synctest bubble, whose clock moves only when every job waits: what a
// job waits is the schedule's decision, however loaded the machine. It
// counts per epoch the chunk accesses of the batches, the hits among them,
// and the bytes the loader read.
type policyRun struct {
	t      *testing.T
	s      *usetable.Table
	cache  *chunkcache.Cache
	orders *layout.Orders
	ds     *catalog.Dataset

	loader chunkcache.Loader // the cache's

	mu    sync.Mutex
	epoch uint64 // the epoch of the batch being read, which loads count for
	stats map[uint64]*epochCounts
}

type epochCounts struct {
	accesses, hits int
	bytes          int64 // loaded from the store
	disk           int64 // loaded from the disk tier below the cache (diskLoader)
}

func (c *epochCounts) hitRatio() float64 { return float64(c.hits) / float64(c.accesses) }

// newPolicyRun is a run over ds with a cache of capacity bytes evicting
// by policy, "schedule" or "lru", and turns of at most maxTurnWait (0:
// none, as with LRU); with disk > 0, a disk tier of disk bytes below the
// cache (diskLoader), placing chunks by the schedule's next use under its
// policy and by recency under LRU, as a gateway's is.
func newPolicyRun(t *testing.T, ds *catalog.Dataset, capacity int64, policy string, maxTurnWait time.Duration, disk int64) *policyRun {
	t.Helper()
	r := &policyRun{t: t, orders: units.Orders(nil), ds: ds, stats: map[uint64]*epochCounts{}}
	r.s = usetable.New(usetable.Config{Orders: r.orders, Local: usetable.AllLocal, Capacity: capacity, MaxTurnWait: maxTurnWait})
	var p chunkcache.Policy = usetable.NewPolicy(r.s.Snapshot, r.s.Ticks)
	distance := r.s.Distance
	if policy == "lru" {
		p, distance = chunkcache.NewLRU(), nil
	}
	r.loader = chunkcache.LoaderFunc(r.fromStore)
	if disk > 0 {
		r.loader = newDiskLoader(t, r, disk, distance)
	}
	r.cache = chunkcache.New(chunkcache.Config{Capacity: capacity, Policy: p, Loader: r.loader})
	t.Cleanup(r.cache.Close)
	return r
}

// fromStore is a load from the store: counted, its bytes storeBytes'.
func (r *policyRun) fromStore(_ context.Context, k chunkcache.Key, buf []byte) error {
	r.mu.Lock()
	r.counts(r.epoch).bytes += int64(len(buf))
	r.mu.Unlock()
	storeBytes(k, buf)
	return nil
}

// storeBytes fills buf with chunk k's bytes as the store holds them.
func storeBytes(k chunkcache.Key, buf []byte) {
	for i := range buf {
		buf[i] = byte(len(k.Object)*7 + int(k.Object[len(k.Object)-5]) + i)
	}
}

// counts are epoch's; r.mu is held.
func (r *policyRun) counts(epoch uint64) *epochCounts {
	if r.stats[epoch] == nil {
		r.stats[epoch] = &epochCounts{}
	}
	return r.stats[epoch]
}

// loaded is the bytes the loader read in all.
func (r *policyRun) loaded() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, c := range r.stats {
		n += c.bytes
	}
	return n
}

// batch reads batch m of epoch of job and returns what it waited (for
// its turn and its chunks) and the keys of its samples.
func (r *policyRun) batch(job api.Job, epoch, m uint64) (time.Duration, []string) {
	r.t.Helper()
	b, err := r.orders.Layout(context.Background(), layout.Source{DS: r.ds}, job, epoch, m)
	if err != nil {
		r.t.Fatal(err)
	}
	var toks []usetable.Inflight
	for _, p := range b.Parts {
		f, err := r.s.Begin(p.Stream, p.Epoch, p.First, p.Drawn, p.Share, job.Weight, usetable.Rank{Rank: job.Rank, World: max(job.World, 1)})
		if err != nil {
			r.t.Fatal(err)
		}
		toks = append(toks, f)
		r.s.Advance(p.Stream, p.Epoch, p.End, 1)
	}
	began := time.Now()
	if err := r.s.Turn(context.Background(), toks[0]); err != nil {
		r.t.Fatal(err)
	}
	reqs := chunksOf(b)
	r.mu.Lock()
	r.epoch = epoch
	c := r.counts(epoch)
	for _, q := range reqs {
		c.accesses++
		if r.cache.Contains(q.Key) {
			c.hits++
		}
	}
	r.mu.Unlock()
	lease, err := r.cache.Acquire(context.Background(), reqs)
	if err != nil {
		r.t.Fatal(err)
	}
	lease.Release()
	wait := time.Since(began)
	for _, f := range toks {
		r.s.Finish(f)
	}
	var keys []string
	for _, p := range b.Parts {
		for _, in := range p.Samples.Info {
			keys = append(keys, in.Key)
		}
	}
	time.Sleep(switchStepTime) // the job's training step
	return wait, keys
}

// jobs reads epochs [0, epochs) of each job, each from its own goroutine,
// every job but the first starting lag steps after it, and returns what
// each waited in all. Each job's epoch 0 must hold every sample once.
func (r *policyRun) jobs(jobs []api.Job, epochs, lag int) []time.Duration {
	r.t.Helper()
	return r.jobsAfter(jobs, epochs, time.Duration(lag)*switchStepTime)
}

// jobsAfter is jobs with every job but the first starting delay after it.
func (r *policyRun) jobsAfter(jobs []api.Job, epochs int, delay time.Duration) []time.Duration {
	r.t.Helper()
	batches := uint64((r.ds.Index.NumSamples() + jobs[0].BatchSize - 1) / jobs[0].BatchSize)
	waits := make([]time.Duration, len(jobs))
	seen := make([]map[string]int, len(jobs))
	var wg sync.WaitGroup
	for j, job := range jobs {
		seen[j] = map[string]int{}
		wg.Go(func() {
			if j > 0 {
				time.Sleep(delay)
			}
			for e := range uint64(epochs) {
				for m := range batches {
					w, keys := r.batch(job, e, m)
					waits[j] += w
					if e == 0 {
						for _, k := range keys {
							seen[j][k]++
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for j := range jobs {
		if len(seen[j]) != r.ds.Index.NumSamples() {
			r.t.Errorf("job %d: %d distinct samples in epoch 0, want %d", j, len(seen[j]), r.ds.Index.NumSamples())
		}
		for k, n := range seen[j] {
			if n != 1 {
				r.t.Fatalf("job %d: sample %s %d times in epoch 0", j, k, n)
			}
		}
	}
	return waits
}

// TestScheduleBeatsLRU reads the same job through the schedule's policy
// and LRU with the cache at half the dataset: the schedule reads less from
// the store every warm epoch, its hit ratio within one chunk access of
// the optimum the planner computes on the same requests, and LRU's within
// one access of the planner's LRU.
func TestScheduleBeatsLRU(t *testing.T) { synctest.Test(t, testScheduleBeatsLRU) }

func testScheduleBeatsLRU(t *testing.T) {
	ix := usetable.IndexOf(t, 24, 8) // 192 samples in 24 chunks
	ds := catalog.NewDataset("d", "", nil, ix)
	job := api.Job{Params: shuffle.Params{BatchSize: 8, World: 1, Window: 2, Seed: 77}}
	const epochs = 4
	run := func(policy string) map[uint64]*epochCounts {
		turns := 10 * time.Second
		if policy == "lru" {
			turns = 0
		}
		r := newPolicyRun(t, ds, ix.TotalBytes()/2, policy, turns, 0)
		r.jobs([]api.Job{job}, epochs, 0)
		return r.stats
	}
	sched, lru := run("next-use"), run("lru")
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

// TestPlanPredictsSmallCacheBytes: with a cache below what a batch across
// a window boundary needs (a window is 8 chunks, a batch across two needs
// up to 16, the cache holds 10), the planner's prediction of the bytes
// read from the store (the optimal policy's, which the schedule's
// follows) is within 5 % of what the schedule's policy reads over the
// epochs planned, without prefetch (the plan's figures are for demand
// reads).
func TestPlanPredictsSmallCacheBytes(t *testing.T) { synctest.Test(t, testPlanPredictsSmallCacheBytes) }

func testPlanPredictsSmallCacheBytes(t *testing.T) {
	ix := usetable.IndexOf(t, 19, 16) // 304 samples
	cache := 10 * ix.Chunk(0).Size
	job := api.Job{Params: shuffle.Params{BatchSize: 32, World: 1, Window: 8, Seed: 5}}
	r := newPolicyRun(t, catalog.NewDataset("d", "", nil, ix), cache, "schedule", 10*time.Second, 0)
	r.jobs([]api.Job{job}, 3, 0)
	plan, err := planner.MakePlan(context.Background(), planner.PlanInput{Dataset: planner.DatasetOf(ix),
		Job: planner.Job{Params: job.Params, Epochs: 3}, CacheBytes: cache, BackendBytesPerSec: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	var got, want int64
	for e := range uint64(3) {
		t.Logf("epoch %d: read %d bytes, the plan predicts %d", e, r.stats[e].bytes, plan.Optimal.Epochs[e].BackendBytes)
		got += r.stats[e].bytes
		want += plan.Optimal.Epochs[e].BackendBytes
	}
	if d := float64(got-want) / float64(want); d > 0.05 || d < -0.05 {
		t.Errorf("3 epochs: read %d bytes, the plan predicts %d (%.1f %% off)", got, want, 100*d)
	}
}
