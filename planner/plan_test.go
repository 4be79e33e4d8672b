package planner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

func equalDataset(chunks, per int, size int64) Dataset {
	counts := make([]int, chunks)
	for c := range counts {
		counts[c] = per
	}
	return Dataset{ChunkSizes: equalSizes(chunks, size), Counts: counts}
}

// unevenDataset has chunk sizes and counts that vary, and one chunk with no
// samples (which is never read).
func unevenDataset() Dataset {
	d := Dataset{}
	for c := range 30 {
		d.ChunkSizes = append(d.ChunkSizes, 1000+int64(c*389%700))
		d.Counts = append(d.Counts, 5+c*7%13)
	}
	d.Counts[17] = 0
	return d
}

func mustPlan(t *testing.T, in PlanInput) *Plan {
	t.Helper()
	p, err := MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// steadyOK recomputes from scratch, with Trace and Simulate, whether a
// cache of cache bytes keeps every steady epoch of in within the backend's
// budget.
func steadyOK(t *testing.T, in PlanInput, cache int64) bool {
	t.Helper()
	tr, err := Trace(in.Dataset, in.Job)
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	n := 0
	for c, size := range in.Dataset.ChunkSizes {
		bytes += size
		n += in.Dataset.Counts[c]
	}
	served := min(n, shuffle.NumBatches(n, in.Job.BatchSize, in.Job.World, in.Job.DropLast)*in.Job.BatchSize*in.Job.World)
	budget := math.Round(float64(bytes) * float64(served) / float64(n))
	if in.ConsumeBytesPerSec > 0 {
		budget *= in.BackendBytesPerSec / in.ConsumeBytesPerSec
	}
	r := Simulate(tr, in.Dataset.ChunkSizes, cache, Belady)
	for _, e := range r.Epochs[1:] {
		if float64(e.BackendBytes) > budget {
			return false
		}
	}
	return true
}

func TestMakePlanInvalid(t *testing.T) {
	good := PlanInput{
		Dataset:            equalDataset(4, 10, 100),
		Job:                Job{Params: shuffle.Params{Window: 2, BatchSize: 4, World: 1}, Epochs: 2},
		CacheBytes:         200,
		BackendBytesPerSec: 100,
	}
	if _, err := MakePlan(context.Background(), good); err != nil {
		t.Fatalf("valid input: %v", err)
	}
	tests := []struct {
		name   string
		change func(in *PlanInput)
	}{
		{"dataset", func(in *PlanInput) { in.Dataset.Counts = in.Dataset.Counts[:3] }},
		{"job", func(in *PlanInput) { in.Job.Window = 0 }},
		{"one epoch", func(in *PlanInput) { in.Job.Epochs = 1 }},
		{"negative cache", func(in *PlanInput) { in.CacheBytes = -1 }},
		{"zero backend", func(in *PlanInput) { in.BackendBytesPerSec = 0 }},
		{"NaN backend", func(in *PlanInput) { in.BackendBytesPerSec = math.NaN() }},
		{"infinite backend", func(in *PlanInput) { in.BackendBytesPerSec = math.Inf(1) }},
		{"negative consume", func(in *PlanInput) { in.ConsumeBytesPerSec = -1 }},
		{"infinite consume", func(in *PlanInput) { in.ConsumeBytesPerSec = math.Inf(1) }},
		{"negative prefetch", func(in *PlanInput) { in.PrefetchWindows = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := good
			in.Dataset = Dataset{ChunkSizes: good.Dataset.ChunkSizes, Counts: good.Dataset.Counts}
			tt.change(&in)
			if p, err := MakePlan(context.Background(), in); !errors.Is(err, ErrInvalid) {
				t.Errorf("MakePlan = %v, %v; want an error wrapping ErrInvalid", p, err)
			}
		})
	}
}

// TestPlanWholeDatasetCached: with the whole dataset in cache, the first
// epoch reads every chunk once and later epochs read nothing, under either
// policy.
func TestPlanWholeDatasetCached(t *testing.T) {
	for name, d := range map[string]Dataset{"equal": equalDataset(20, 16, 500), "uneven": unevenDataset()} {
		t.Run(name, func(t *testing.T) {
			var total, read int64
			for c, size := range d.ChunkSizes {
				total += size
				if d.Counts[c] > 0 {
					read += size
				}
			}
			p := mustPlan(t, PlanInput{Dataset: d, Job: Job{Params: shuffle.Params{Seed: 3, Window: 4, BatchSize: 8, World: 3}, Epochs: 4},
				CacheBytes: total, BackendBytesPerSec: 1, ConsumeBytesPerSec: 1e9})
			for _, r := range []Result{p.LRU, p.Optimal} {
				if len(r.Epochs) != 4 || r.Epochs[0].BackendBytes != read {
					t.Errorf("%v: epochs %+v; want 4, the first reading %d bytes", r.Policy, r.Epochs, read)
				}
				for _, e := range r.Epochs[1:] {
					if e.HitRatio != 1 || e.BackendBytes != 0 {
						t.Errorf("%v: steady epoch %+v; want hit ratio 1 and no backend bytes", r.Policy, e)
					}
				}
			}
			if p.SteadyEpochsStall || !p.ColdEpochStalls {
				t.Errorf("SteadyEpochsStall %t ColdEpochStalls %t; want false, true", p.SteadyEpochsStall, p.ColdEpochStalls)
			}
		})
	}
}

// TestPlanCacheBelowOneChunk: nothing is ever admitted, every access misses.
func TestPlanCacheBelowOneChunk(t *testing.T) {
	d := unevenDataset()
	in := PlanInput{Dataset: d, Job: Job{Params: shuffle.Params{Seed: 9, Window: 3, BatchSize: 10, World: 2}, Epochs: 3},
		CacheBytes: 999, BackendBytesPerSec: 1}
	p := mustPlan(t, in)
	tr, err := Trace(in.Dataset, in.Job)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, a := range tr {
		want += d.ChunkSizes[a.Chunk]
	}
	for _, r := range []Result{p.LRU, p.Optimal} {
		if r.Hits != 0 || r.Accesses != len(tr) || r.BackendBytes != want {
			t.Errorf("%v: %d hits of %d accesses, %d bytes; want 0 of %d, %d bytes",
				r.Policy, r.Hits, r.Accesses, r.BackendBytes, len(tr), want)
		}
	}
	if !p.SteadyEpochsStall {
		t.Error("a cache below the working set must stall")
	}
}

// referenceWorkingSet is the working set by brute force: for each global
// batch of each simulated epoch, the union of the windows from the first
// it touches through prefetch windows past the last (continuing into later
// epochs), as a set.
func referenceWorkingSet(t *testing.T, d Dataset, j Job, prefetch int) int64 {
	t.Helper()
	var windows [][]int
	var spans [][2]int
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs+prefetch+1; e++ {
		ep, err := shuffle.NewEpoch(d.Counts, j.Seed, uint64(e), j.Window)
		if err != nil {
			t.Fatal(err)
		}
		base := len(windows)
		for w := range ep.NumWindows() {
			windows = append(windows, ep.WindowChunks(w))
		}
		if e >= j.FirstEpoch+j.Epochs {
			continue
		}
		g, n := j.BatchSize*j.World, ep.NumSamples()
		for m := range shuffle.NumBatches(n, j.BatchSize, j.World, j.DropLast) {
			spans = append(spans, [2]int{base + ep.WindowOf(m*g), base + ep.WindowOf(min((m+1)*g, n)-1)})
		}
	}
	var most int64
	for _, sp := range spans {
		set := map[int]bool{}
		for _, w := range windows[sp[0] : sp[1]+prefetch+1] {
			for _, c := range w {
				set[c] = d.Counts[c] > 0
			}
		}
		var bytes int64
		for c, read := range set {
			if read {
				bytes += d.ChunkSizes[c]
			}
		}
		most = max(most, bytes)
	}
	return most
}

func TestWorkingSet(t *testing.T) {
	for name, d := range map[string]Dataset{"equal": equalDataset(13, 4, 10), "uneven": unevenDataset()} {
		for _, window := range []int{1, 2, 5, 13, 40} {
			for _, prefetch := range []int{0, 1, 2, 3, 7, 30} {
				j := Job{Params: shuffle.Params{Seed: uint64(window), Window: window, BatchSize: 3, World: 2}, FirstEpoch: 2, Epochs: 3}
				t.Run(fmt.Sprintf("%s/window=%d/prefetch=%d", name, window, prefetch), func(t *testing.T) {
					p := mustPlan(t, PlanInput{Dataset: d, Job: j, CacheBytes: 100, BackendBytesPerSec: 1, PrefetchWindows: prefetch})
					wantPrefetch := max(prefetch, 1)
					if p.PrefetchWindows != wantPrefetch {
						t.Errorf("PrefetchWindows = %d, want %d", p.PrefetchWindows, wantPrefetch)
					}
					if want := referenceWorkingSet(t, d, j, wantPrefetch); p.WorkingSetBytes != want {
						t.Errorf("WorkingSetBytes = %d, want %d", p.WorkingSetBytes, want)
					}
				})
			}
		}
	}
	// By hand: 12 equal chunks of 5 samples and 100 bytes in windows of 3
	// (15 samples), batches of 5 that never straddle a window, one window of
	// prefetch: two windows, 600 bytes, however the epochs meet. Batches of
	// 4 straddle windows (positions 12-15), so they span three: 900 bytes.
	p := mustPlan(t, PlanInput{Dataset: equalDataset(12, 5, 100), Job: Job{Params: shuffle.Params{Window: 3, BatchSize: 5, World: 1}, Epochs: 2},
		BackendBytesPerSec: 1})
	if p.WorkingSetBytes != 600 {
		t.Errorf("12 chunks, window 3, batch 5, prefetch 1: working set %d, want 600", p.WorkingSetBytes)
	}
	p = mustPlan(t, PlanInput{Dataset: equalDataset(12, 5, 100), Job: Job{Params: shuffle.Params{Window: 3, BatchSize: 4, World: 1}, Epochs: 2},
		BackendBytesPerSec: 1})
	if p.WorkingSetBytes != 900 {
		t.Errorf("12 chunks, window 3, batch 4, prefetch 1: working set %d, want 900", p.WorkingSetBytes)
	}
}

// rates are backend/consume pairs from a trainer far faster than the
// backend to one slower; consume 0 means as fast as the backend.
var rates = []struct{ backend, consume float64 }{
	{1, 1e6}, {1, 100}, {1, 10}, {1, 4}, {1, 2}, {2, 3}, {1, 1}, {3, 2}, {1, 0}, {5, 1},
}

// TestMinNoStallExact compares, for equal chunk sizes, the binary search
// with a linear scan over every cache size from the working set up.
func TestMinNoStallExact(t *testing.T) {
	const size = 100
	d := equalDataset(16, 12, size)
	for _, j := range []Job{
		{Params: shuffle.Params{Seed: 1, Window: 2, BatchSize: 8, World: 2}, Epochs: 3},
		{Params: shuffle.Params{Seed: 2, Window: 4, BatchSize: 5, World: 1}, Epochs: 2, FirstEpoch: 3},
		{Params: shuffle.Params{Seed: 3, Window: 16, BatchSize: 16, World: 1}, Epochs: 3},
	} {
		for _, r := range rates {
			in := PlanInput{Dataset: d, Job: j, CacheBytes: 500, BackendBytesPerSec: r.backend, ConsumeBytesPerSec: r.consume}
			p := mustPlan(t, in)
			want := int64(-1)
			for cache := p.WorkingSetBytes; cache <= 16*size; cache += size {
				if steadyOK(t, in, cache) {
					want = cache
					break
				}
			}
			if p.MinNoStallCacheBytes != want {
				t.Errorf("window %d, rates %v: MinNoStallCacheBytes %d, linear scan %d",
					j.Window, r, p.MinNoStallCacheBytes, want)
			}
		}
	}
}

// TestMinNoStallProperties checks, on equal and unequal sizes, what the
// figure promises: the cache it names keeps up, the next size below it on
// the search grid does not, it is never below the working set, and it is at
// most the bytes the job reads.
func TestMinNoStallProperties(t *testing.T) {
	for name, d := range map[string]Dataset{"equal": equalDataset(24, 7, 64), "uneven": unevenDataset()} {
		var read, g int64
		for c, size := range d.ChunkSizes {
			if d.Counts[c] > 0 {
				read += size
				g = gcd(g, size)
			}
		}
		for _, window := range []int{1, 3, 8} {
			for _, r := range rates {
				in := PlanInput{Dataset: d, Job: Job{Params: shuffle.Params{Seed: 5, Window: window, BatchSize: 6, World: 2}, Epochs: 3},
					BackendBytesPerSec: r.backend, ConsumeBytesPerSec: r.consume}
				p := mustPlan(t, in)
				m := p.MinNoStallCacheBytes
				switch {
				case m == -1:
					if steadyOK(t, in, read) {
						t.Errorf("%s window %d rates %v: -1, yet caching everything keeps up", name, window, r)
					}
				case m < p.WorkingSetBytes || m > read:
					t.Errorf("%s window %d rates %v: %d outside [working set %d, read bytes %d]",
						name, window, r, m, p.WorkingSetBytes, read)
				case !steadyOK(t, in, m):
					t.Errorf("%s window %d rates %v: %d stalls", name, window, r, m)
				case m > p.WorkingSetBytes && steadyOK(t, in, m-g):
					t.Errorf("%s window %d rates %v: %d, yet %d keeps up", name, window, r, m, m-g)
				}
				if r.consume == 0 && m != p.WorkingSetBytes {
					// As fast as the backend: reading each chunk at most
					// once an epoch, which the working set ensures, is enough.
					t.Errorf("%s window %d, consume 0: %d, want the working set %d", name, window, m, p.WorkingSetBytes)
				}
				if r.consume/r.backend >= 1e6 && m != read {
					// Hardly any steady reads allowed: everything cached.
					t.Errorf("%s window %d, backend 1e-6 of the trainer: %d, want all %d bytes", name, window, m, read)
				}
			}
		}
	}
}

// TestMinNoStallMonotone: a faster backend never needs more cache, a faster
// trainer or more prefetch never less (equal sizes, where the search is
// exact).
func TestMinNoStallMonotone(t *testing.T) {
	d := equalDataset(32, 9, 50)
	job := Job{Params: shuffle.Params{Seed: 8, Window: 2, BatchSize: 7, World: 3}, Epochs: 3}
	at := func(backend, consume float64, prefetch int) int64 {
		m := mustPlan(t, PlanInput{Dataset: d, Job: job, BackendBytesPerSec: backend,
			ConsumeBytesPerSec: consume, PrefetchWindows: prefetch}).MinNoStallCacheBytes
		if m < 0 {
			t.Fatalf("backend %v consume %v: no cache keeps up", backend, consume)
		}
		return m
	}
	prev := int64(math.MaxInt64)
	for _, backend := range []float64{0.01, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2} {
		m := at(backend, 1, 1)
		if m > prev {
			t.Errorf("backend %v: %d, more than %d at a slower backend", backend, m, prev)
		}
		prev = m
	}
	prev = 0
	for _, consume := range []float64{0.5, 1, 2, 4, 8, 16, 100} {
		m := at(1, consume, 1)
		if m < prev {
			t.Errorf("consume %v: %d, less than %d at a slower trainer", consume, m, prev)
		}
		prev = m
	}
	prev = 0
	for prefetch := range 6 {
		m := at(1, 3, prefetch)
		if m < prev {
			t.Errorf("prefetch %d: %d, less than %d with less prefetch", prefetch, m, prev)
		}
		prev = m
	}
}

// TestMinNoStallImpossible builds the one case no cache fixes: with
// drop_last, the first epoch drops a chunk that a later epoch reads, and the
// backend is too slow to read even that one chunk in an epoch's time.
func TestMinNoStallImpossible(t *testing.T) {
	// Window 1, 10 chunks of 10 samples, batches of 30 with drop_last: each
	// epoch serves 90 samples and drops the last chunk in its order.
	d := equalDataset(10, 10, 1000)
	for seed := uint64(0); seed < 100; seed++ {
		e0, err0 := shuffle.NewEpoch(d.Counts, seed, 0, 1)
		e1, err1 := shuffle.NewEpoch(d.Counts, seed, 1, 1)
		if err0 != nil || err1 != nil {
			t.Fatal(err0, err1)
		}
		if e0.ChunkOrder()[9] == e1.ChunkOrder()[9] {
			continue // both epochs drop the same chunk: caching works
		}
		in := PlanInput{Dataset: d, Job: Job{Params: shuffle.Params{Seed: seed, Window: 1, BatchSize: 30, World: 1, DropLast: true}, Epochs: 2},
			CacheBytes: 10_000, BackendBytesPerSec: 1, ConsumeBytesPerSec: 1000}
		p := mustPlan(t, in)
		if p.MinNoStallCacheBytes != -1 || !p.SteadyEpochsStall {
			t.Errorf("seed %d: MinNoStallCacheBytes %d, SteadyEpochsStall %t; want -1, true",
				seed, p.MinNoStallCacheBytes, p.SteadyEpochsStall)
		}
		if p.EpochBytes != 9000 {
			t.Errorf("EpochBytes %d, want 9000 (90 of 100 samples served)", p.EpochBytes)
		}
		return
	}
	t.Fatal("no seed below 100 drops different chunks in epochs 0 and 1")
}

func TestSteadyEpochsStall(t *testing.T) {
	const size = 100
	d := equalDataset(16, 12, size)
	in := PlanInput{Dataset: d, Job: Job{Params: shuffle.Params{Seed: 4, Window: 2, BatchSize: 8, World: 1}, Epochs: 3},
		BackendBytesPerSec: 1, ConsumeBytesPerSec: 3}
	m := mustPlan(t, in).MinNoStallCacheBytes
	if m <= 4*size {
		t.Fatalf("MinNoStallCacheBytes %d: want a case above the working set", m)
	}
	for _, tt := range []struct {
		cache int64
		stall bool
	}{{0, true}, {m - size, true}, {m - 1, true}, {m, false}, {m + size, false}, {16 * size, false}} {
		in.CacheBytes = tt.cache
		if p := mustPlan(t, in); p.SteadyEpochsStall != tt.stall {
			t.Errorf("cache %d (no-stall %d): SteadyEpochsStall %t, want %t", tt.cache, m, p.SteadyEpochsStall, tt.stall)
		}
	}
}

func TestColdEpochStalls(t *testing.T) {
	for _, tt := range []struct {
		backend, consume float64
		stalls           bool
	}{{1, 0, false}, {1, 1, false}, {2, 1, false}, {1, 2, true}, {1e9, 1e9 + 1, true}} {
		p := mustPlan(t, PlanInput{Dataset: equalDataset(4, 4, 10), Job: Job{Params: shuffle.Params{Window: 1, BatchSize: 2, World: 1}, Epochs: 2},
			BackendBytesPerSec: tt.backend, ConsumeBytesPerSec: tt.consume})
		if p.ColdEpochStalls != tt.stalls {
			t.Errorf("backend %v consume %v: ColdEpochStalls %t, want %t", tt.backend, tt.consume, p.ColdEpochStalls, tt.stalls)
		}
	}
}

// countdownCtx is a context whose Err turns to Canceled at its n-th call, to
// cancel MakePlanContext deterministically at every point it checks.
type countdownCtx struct {
	context.Context
	n int
}

func (c *countdownCtx) Err() error {
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

func TestMakePlanContextCanceled(t *testing.T) {
	in := PlanInput{Dataset: equalDataset(16, 12, 100), Job: Job{Params: shuffle.Params{Seed: 1, Window: 2, BatchSize: 8, World: 2}, Epochs: 3},
		CacheBytes: 500, BackendBytesPerSec: 1, ConsumeBytesPerSec: 3}
	// Count the checks of a complete plan, then cancel at each of them.
	counter := &countdownCtx{Context: context.Background(), n: math.MaxInt}
	want, err := MakePlan(counter, in)
	if err != nil {
		t.Fatal(err)
	}
	checks := math.MaxInt - counter.n
	if checks < 8 { // 3 epochs traced, 3 for the full shuffle, 2+ simulations
		t.Fatalf("only %d context checks in a plan", checks)
	}
	for n := 1; n <= checks; n++ {
		p, err := MakePlan(&countdownCtx{Context: context.Background(), n: n}, in)
		if !errors.Is(err, context.Canceled) || p != nil {
			t.Errorf("canceled at check %d of %d: %v, %v; want nil, context.Canceled", n, checks, p, err)
		}
	}
	if got, _ := MakePlan(context.Background(), in); got.MinNoStallCacheBytes != want.MinNoStallCacheBytes {
		t.Errorf("MakePlan and MakePlanContext disagree: %d, %d", got.MinNoStallCacheBytes, want.MinNoStallCacheBytes)
	}
}
