package planner

import (
	"context"
	"fmt"
	"math"

	"github.com/brandgw/brand/api"
)

// PlanInput is what MakePlan plans for: a dataset, a job (at least two
// epochs: the first is cold, the others show the steady state), a cache
// size, and the rates that decide whether the trainer waits.
type PlanInput struct {
	Dataset    Dataset
	Job        Job
	CacheBytes int64 // the cache size to report on, >= 0
	// DiskCacheBytes is a disk tier below the cache to report on too
	// (Plan.Disk), >= 0; 0 means none.
	DiskCacheBytes int64

	// BackendBytesPerSec is the bandwidth at which the gateway reads chunks
	// from the store, > 0.
	BackendBytesPerSec float64
	// ConsumeBytesPerSec is the rate at which the trainer reads samples, >= 0;
	// 0 means as fast as the backend delivers.
	ConsumeBytesPerSec float64
	// PrefetchWindows is how many windows past the current one the gateway
	// prefetches, >= 0; 0 means the default, 1.
	PrefetchWindows int

	// Importance, if not nil, adds the figures of the same job and cache
	// in importance mode (Plan.Importance).
	Importance *Importance

	// Mix, if not nil, plans the job over a mixture of datasets instead of
	// Dataset, which must then be empty (Plan.Mix); it has no importance
	// mode.
	Mix *Mix

	// Prices bill the plan's store reads (Plan.Bill).
	Prices api.Prices

	// Budget bounds the plan's work; zero is no bound.
	Budget Budget
}

// Plan is MakePlan's report. Its JSON form is what the gateway's GET /plan
// returns; WriteText renders it for the CLI.
type Plan struct {
	Job Job `json:"job"`
	// Mix describes the mixture a plan of one (PlanInput.Mix) is of; the
	// figures below are then the mixture's: Chunks and DatasetBytes its
	// components' together, Samples an epoch's. Its per-component cache
	// figures are LRU's and Optimal's Components.
	Mix *MixPlan `json:"mix,omitempty"`

	// Chunks and Samples are the dataset's, the version a job's appends
	// grew it to (a mixture's as Mix says).
	Chunks  int `json:"chunks"`
	Samples int `json:"samples"`
	// BatchesPerEpoch is the global batches of the first epoch planned
	// (Epochs[0]'s), and Epochs each planned epoch's samples and global
	// batches as the gateway serves them (api.PlanEpoch): a job's edits make
	// them differ from epoch to epoch, and from the dataset's.
	BatchesPerEpoch int             `json:"batches_per_epoch"`
	Epochs          []api.PlanEpoch `json:"epochs"`
	CacheBytes      int64           `json:"cache_bytes"`
	// DatasetBytes is the dataset's bytes in the cache: its chunks'
	// sizes summed (for a dataset served in place, their resident bounds
	// with the fields the job reads). DatasetStoreBytes is its bytes in
	// the store, the chunks' store sizes summed (Dataset.StoreSizes), for
	// a dataset that has them; absent (0) when they are DatasetBytes. The
	// backend bytes below are store bytes, the cache and disk sizes and
	// the working set cache bytes.
	DatasetBytes      int64 `json:"dataset_bytes"`
	DatasetStoreBytes int64 `json:"dataset_store_bytes,omitempty"`
	// EpochBytes is what the trainer reads in the first planned epoch: the
	// dataset's bytes in proportion to the samples the epoch serves (its
	// order's under the job's edits, Epochs[0]; fewer with drop_last), as
	// BatchesPerEpoch is its batches. EpochStoreBytes is the same of its
	// bytes in the store, with DatasetStoreBytes: what the backend reads
	// for those samples, each chunk once. The stall verdicts weigh each
	// epoch by its own (epochBytes).
	EpochBytes         int64   `json:"epoch_bytes"`
	EpochStoreBytes    int64   `json:"epoch_store_bytes,omitempty"`
	BackendBytesPerSec float64 `json:"backend_bytes_per_sec"`
	ConsumeBytesPerSec float64 `json:"consume_bytes_per_sec"` // 0: as fast as the backend
	PrefetchWindows    int     `json:"prefetch_windows"`

	// LRU and Optimal are the per-epoch hit ratios and backend bytes at
	// CacheBytes under LRU and under Belady's next-use rule.
	LRU     Result `json:"lru"`
	Optimal Result `json:"optimal"`

	// WorkingSetBytes is the largest total size of the chunks of the
	// windows one global batch spans and the PrefetchWindows windows after
	// them, across epoch boundaries (into the epoch after the last simulated
	// one): the least cache with which a batch's chunks can all be pinned
	// while prefetch never has to displace a chunk still needed.
	WorkingSetBytes int64 `json:"working_set_bytes"`
	// MinNoStallCacheBytes is the smallest cache, never below
	// WorkingSetBytes, with which every steady-state epoch (all but the
	// first simulated) reads under the optimal policy no more bytes than
	// the backend delivers while the trainer consumes an epoch. It is -1
	// when even a cache of the whole dataset cannot, which happens only when
	// steady epochs read chunks no earlier epoch did (drop_last) faster than
	// the backend allows.
	MinNoStallCacheBytes int64 `json:"min_no_stall_cache_bytes"`
	// SteadyEpochsStall reports whether CacheBytes stalls the trainer in the
	// steady state: it is below WorkingSetBytes, or a steady epoch's
	// optimal backend bytes take longer to read than the epoch to consume.
	SteadyEpochsStall bool `json:"steady_epochs_stall"`
	// ColdEpochStalls reports whether the first epoch stalls whatever the
	// cache: it reads the whole dataset once, so it keeps up only if the
	// backend is at least as fast as the trainer (for a dataset with store
	// sizes: reads its store bytes in no longer than the trainer takes
	// over its bytes).
	ColdEpochStalls bool `json:"cold_epoch_stalls"`

	Quality     Quality `json:"quality"`      // the job's window
	FullShuffle Quality `json:"full_shuffle"` // window = number of chunks

	// Disk is the store and disk reads with a disk tier below the cache,
	// when PlanInput.DiskCacheBytes asked for one. The figures above are
	// the cache's alone: with no disk, every miss reads the store.
	Disk *DiskPlan `json:"disk,omitempty"`

	// Importance is the same job read by importance from one snapshot,
	// when PlanInput.Importance asked for it; the figures above are the
	// uniform shuffle's.
	Importance *ImportancePlan `json:"importance,omitempty"`

	// Transform is the answer for a pipeline (PlanTransform), when asked.
	Transform *TransformPlan `json:"transform,omitempty"`

	// Bill is what the store reads of Optimal cost (a gateway's plan).
	Bill *Bill `json:"bill,omitempty"`
}

// MakePlan simulates in.Job on in.Dataset and reports what in.CacheBytes
// achieves, the cache sizes that matter, and the shuffle quality. It costs
// a trace of the job, a pass over the epochs with a full shuffle, and
// O(log(dataset bytes / g)) Belady simulations of the trace, g being the
// chunk sizes' greatest common divisor; see the package documentation.
//
// A job's epochs of no batches (drop_last and fewer samples than one
// global batch) are planned as the gateway serves them: nothing read.
//
// Invalid input, or input over in.Budget up front, yields an error
// wrapping ErrInvalid that names the field or the bound; a plan that runs
// out of its budget as it computes, one wrapping ErrBudget. It gives up
// when ctx is done, for a server whose client may leave while a large
// plan computes, checking ctx inside its walks and simulations, and
// returns ctx's error.
func MakePlan(ctx context.Context, in PlanInput) (*Plan, error) {
	return makePlan(newMeter(ctx, in.Budget), in)
}

// makePlan is MakePlan counting on m.
func makePlan(m *meter, in PlanInput) (*Plan, error) {
	if in.Mix != nil {
		return makeMixPlan(m, in)
	}
	s, err := newSchedule(in.Dataset, in.Job)
	if err != nil {
		return nil, err
	}
	prefetch, err := validatePlanInput(in)
	if err != nil {
		return nil, err
	}
	if in.Importance != nil {
		if in.Job.Edit != nil {
			return nil, fmt.Errorf("%w: a job's edits apply to the uniform shuffle, not to importance sampling", ErrInvalid)
		}
		if err := in.Importance.validate(s.n); err != nil {
			return nil, err
		}
	}
	nb := s.numBatches()
	sizes, err := s.epochSizes()
	if err != nil {
		return nil, err
	}
	chunks := len(in.Dataset.Counts)
	fullPass := in.Job.Window < chunks
	passes := 1 // the job's order, a full shuffle's and an importance order's
	if fullPass {
		passes++
	}
	traces := int64(1)
	if in.Importance != nil {
		passes++
		traces++
	}
	epochs := int64(in.Job.Epochs)
	if err := m.admit(epochs*int64(s.n)*int64(passes), epochs*int64(nb)*traces); err != nil {
		return nil, err
	}

	quality := newQualityMeter(chunks, in.Job.BatchSize)
	trace, err := s.trace(m, quality.add)
	if err != nil {
		return nil, err
	}
	full := quality
	if fullPass {
		// A window of all chunks (or more) is the same order for any
		// window size, so only a smaller window needs its own pass.
		full = newQualityMeter(chunks, in.Job.BatchSize)
		if err := s.walk(m, chunks, full.add); err != nil {
			return nil, err
		}
	}

	datasetBytes := sum(in.Dataset.ChunkSizes)
	p := &Plan{
		Job:                in.Job,
		Chunks:             chunks,
		Samples:            s.n,
		BatchesPerEpoch:    sizes[0].Batches,
		Epochs:             sizes,
		CacheBytes:         in.CacheBytes,
		DatasetBytes:       datasetBytes,
		DatasetStoreBytes:  in.Dataset.storeBytes(),
		BackendBytesPerSec: in.BackendBytesPerSec,
		ConsumeBytesPerSec: in.ConsumeBytesPerSec,
		PrefetchWindows:    prefetch,
		Quality:            quality.quality(),
		FullShuffle:        full.quality(),
	}
	p.EpochBytes, p.EpochStoreBytes = p.servedBytes(sizes[0].Samples)
	p.ColdEpochStalls = p.coldStalls()
	if p.WorkingSetBytes, err = workingSet(m, s, prefetch); err != nil {
		return nil, err
	}

	if err := p.simulate(m, in, newSimulator(trace, in.Dataset.ChunkSizes, in.Dataset.StoreSizes, m).withGets(in.Dataset.GETs), in.Dataset); err != nil {
		return nil, err
	}
	p.Bill = gatewayBill(p.Optimal, in.Prices)
	if in.Importance != nil {
		if p.Importance, err = planImportance(m, s, in.Importance, in.CacheBytes, in.DiskCacheBytes); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// simulate fills in the plan's cache figures from sim, the simulator of
// its trace over the chunks of d (the dataset, or a mixture's components
// merged), counting on m: LRU and the optimum at in.CacheBytes, the stall
// verdict, the smallest no-stall cache and, with in.DiskCacheBytes, the
// disk tier. The plan's WorkingSetBytes and rates must be set.
func (p *Plan) simulate(m *meter, in PlanInput, sim *simulator, d Dataset) error {
	var err error
	if p.LRU, err = sim.run(in.CacheBytes, LRU); err != nil {
		return err
	}
	if p.Optimal, err = sim.run(in.CacheBytes, Belady); err != nil {
		return err
	}
	fits := p.steadyFits
	p.SteadyEpochsStall = in.CacheBytes < p.WorkingSetBytes || !fits(p.Optimal)
	if p.MinNoStallCacheBytes, err = minNoStall(sim, d, p.WorkingSetBytes, fits); err != nil {
		return err
	}
	if in.DiskCacheBytes > 0 {
		run := func(pol Policy) (Result, error) { return sim.runTiers(in.CacheBytes, in.DiskCacheBytes, pol) }
		if p.Disk, err = newDiskPlan(in.DiskCacheBytes, p.DatasetBytes, p.storeBytes(), run, LRU, Belady); err != nil {
			return err
		}
	}
	return nil
}

// steady returns the steady-state epochs of r: all but the first.
func steady(r Result) []EpochResult {
	return r.Epochs[min(1, len(r.Epochs)):]
}

func validatePlanInput(in PlanInput) (prefetch int, err error) {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case in.Job.Epochs < 2:
		return 0, fmt.Errorf("%w: %d epochs; a plan needs >= 2 (the first is cold, the rest are the steady state)",
			ErrInvalid, in.Job.Epochs)
	case in.CacheBytes < 0:
		return 0, fmt.Errorf("%w: cache size %d bytes; must be >= 0", ErrInvalid, in.CacheBytes)
	case in.DiskCacheBytes < 0:
		return 0, fmt.Errorf("%w: disk cache size %d bytes; must be >= 0 (0: no disk tier)", ErrInvalid, in.DiskCacheBytes)
	case !finite(in.BackendBytesPerSec) || in.BackendBytesPerSec <= 0:
		return 0, fmt.Errorf("%w: backend bandwidth %v bytes/s; must be a finite number > 0", ErrInvalid, in.BackendBytesPerSec)
	case !finite(in.ConsumeBytesPerSec) || in.ConsumeBytesPerSec < 0:
		return 0, fmt.Errorf("%w: consume rate %v bytes/s; must be a finite number >= 0 (0: as fast as the backend)",
			ErrInvalid, in.ConsumeBytesPerSec)
	case in.PrefetchWindows < 0:
		return 0, fmt.Errorf("%w: prefetch windows %d; must be >= 0 (0: the default, 1)", ErrInvalid, in.PrefetchWindows)
	case in.PrefetchWindows == 0:
		return 1, nil
	}
	return in.PrefetchWindows, nil
}

// storeBytes is the dataset's bytes in the store: DatasetStoreBytes, or
// DatasetBytes for a dataset without store sizes.
func (p *Plan) storeBytes() int64 {
	if p.DatasetStoreBytes == 0 {
		return p.DatasetBytes
	}
	return p.DatasetStoreBytes
}

// epochBytes is what the trainer reads in the plan's epoch i (Epochs[i]),
// in its bytes and its store bytes (0 for a dataset without store
// sizes): under a job's edits, that epoch's own (servedBytes), since an
// exclusion's epochs serve fewer samples and an append's more; else
// EpochBytes and EpochStoreBytes, every epoch's (a mixture's computed
// its own way), as they are of a plan read without its epochs.
func (p *Plan) epochBytes(i int) (bytes, store int64) {
	if p.Job.Edit == nil || i < 0 || i >= len(p.Epochs) {
		return p.EpochBytes, p.EpochStoreBytes
	}
	return p.servedBytes(p.Epochs[i].Samples)
}

// servedBytes is what an epoch of samples serves of the dataset: its
// bytes in proportion to the samples the epoch's batches carry (fewer
// with drop_last), and the same of its store bytes (0 without).
func (p *Plan) servedBytes(samples int) (bytes, store int64) {
	if p.Samples == 0 {
		return 0, 0
	}
	f := float64(served(p.Job.Params, samples)) / float64(p.Samples)
	bytes = int64(math.Round(float64(p.DatasetBytes) * f))
	if p.DatasetStoreBytes != 0 {
		store = int64(math.Round(float64(p.DatasetStoreBytes) * f))
	}
	return bytes, store
}

// steadyBudget is the most bytes the plan's epoch i may read from the
// backend without stalling: what the backend delivers in the time the
// trainer takes to consume the epoch (epochBytes: under the job's edits,
// its own). A trainer as fast as the backend takes the time the backend
// takes to read the epoch's bytes once: their store bytes, for a dataset
// that has store sizes.
func (p *Plan) steadyBudget(i int) float64 {
	bytes, store := p.epochBytes(i)
	if p.ConsumeBytesPerSec == 0 {
		if p.DatasetStoreBytes != 0 {
			return float64(store)
		}
		return float64(bytes)
	}
	return float64(bytes) * p.BackendBytesPerSec / p.ConsumeBytesPerSec
}

// coldStalls reports whether the first epoch, which reads every chunk
// once, stalls the trainer (one that serves nothing never does): the
// backend is slower than the trainer or, for a dataset with store sizes,
// reads the epoch's store bytes in longer than the trainer takes over
// its bytes.
func (p *Plan) coldStalls() bool {
	if p.ConsumeBytesPerSec <= 0 || p.EpochBytes == 0 {
		return false
	}
	if p.DatasetStoreBytes == 0 {
		return p.BackendBytesPerSec < p.ConsumeBytesPerSec
	}
	return p.BackendBytesPerSec*float64(p.EpochBytes) < p.ConsumeBytesPerSec*float64(p.EpochStoreBytes)
}

// steadyFits reports whether every steady-state epoch of r (all but the
// first; Result.Epochs is ascending and a plan's trace has every epoch)
// reads within its budget.
func (p *Plan) steadyFits(r Result) bool {
	for _, e := range steady(r) {
		if float64(e.BackendBytes) > p.steadyBudget(e.Epoch-p.Job.FirstEpoch) {
			return false
		}
	}
	return true
}

// minNoStall finds the smallest cache, not below workingSet, at which fits
// holds for a Belady simulation, or -1 if even all the chunks the job reads
// do not suffice.
//
// The search is over multiples of g, the greatest common divisor of the
// sizes of the chunks the job reads: every sum of such sizes is a multiple
// of g, so whether a chunk fits, and therefore the whole simulation, is the
// same at any cache size as at its round-down to a multiple of g. For equal
// chunk sizes that makes the search run over chunk counts, and since MIN is
// a stack algorithm (a larger cache holds a superset, access by access)
// fits is monotone and the binary search exact. With unequal sizes the
// heuristic is not guaranteed monotone: the result is a size that fits
// with the next multiple of g below it failing, not necessarily the least.
func minNoStall(sim *simulator, d Dataset, workingSet int64, fits func(Result) bool) (int64, error) {
	var read, g int64 // bytes of the chunks with samples, and their sizes' GCD
	for c, size := range d.ChunkSizes {
		if d.Counts[c] > 0 {
			read += size
			g = gcd(g, size)
		}
	}
	ok := func(cache int64) (bool, error) {
		r, err := sim.run(cache, Belady)
		return err == nil && fits(r), err
	}
	if fit, err := ok(workingSet); fit || err != nil {
		return workingSet, err
	}
	if read <= workingSet {
		return -1, nil
	}
	if fit, err := ok(read); !fit || err != nil {
		return -1, err
	}
	// ok(lo·g) is false (it equals ok(workingSet)), ok(hi·g) is true.
	lo, hi := workingSet/g, read/g
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		fit, err := ok(mid * g)
		if err != nil {
			return 0, err
		}
		if fit {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi * g, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// workingSet returns the largest total size of the chunks (with samples) of
// the windows from the first one a global batch of a simulated epoch
// touches through prefetch windows past the last one it touches,
// continuing into the following epochs' windows. A batch within one window
// spans prefetch+1 windows; one that straddles windows spans more, and the
// gateway pins all of its chunks at once.
func workingSet(m *meter, s *schedule, prefetch int) (int64, error) {
	// Consecutive windows of one epoch are disjoint and together hold every
	// chunk, so prefetch windows past a batch never need to reach beyond
	// the epoch after the last simulated one.
	nw := (len(s.d.Counts) + s.j.Window - 1) / s.j.Window
	prefetch = min(prefetch, nw)
	var windows [][]int // every window of the simulated epochs and the next
	type span struct{ first, last int }
	var spans []span // per global batch, its windows' indexes in windows
	cut := s.cut()
	for e := s.j.FirstEpoch; e <= s.j.FirstEpoch+s.j.Epochs; e++ {
		if err := m.err(); err != nil {
			return 0, err
		}
		ep, err := s.order(e, s.j.Window)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		n := ep.NumSamples() // a job's edits make its epochs differ
		nb := cut.NumBatches(n)
		base := len(windows)
		for w := range ep.NumWindows() {
			windows = append(windows, ep.WindowChunks(w))
		}
		if e == s.j.FirstEpoch+s.j.Epochs {
			break // the next epoch only extends the last spans
		}
		for b := range nb {
			start, end, err := cut.GlobalBatch(n, b)
			if err != nil {
				return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			spans = append(spans, span{base + ep.WindowOf(start), base + ep.WindowOf(end-1)})
		}
	}
	// Slide over the spans, whose ends never move backwards, counting each
	// chunk's occurrences in the windows covered so that a chunk in two of
	// them (across an epoch boundary) counts once.
	refs := make([]int32, len(s.d.Counts))
	var bytes, most int64
	add := func(w []int, delta int32) {
		for _, c := range w {
			if s.d.Counts[c] == 0 {
				continue // never read, never cached
			}
			if delta > 0 && refs[c] == 0 {
				bytes += s.d.ChunkSizes[c]
			}
			refs[c] += delta
			if delta < 0 && refs[c] == 0 {
				bytes -= s.d.ChunkSizes[c]
			}
		}
	}
	lo, hi := 0, 0 // windows[lo:hi] are counted
	for _, sp := range spans {
		end := min(sp.last+prefetch+1, len(windows))
		for ; hi < end; hi++ {
			add(windows[hi], 1)
		}
		for ; lo < sp.first; lo++ {
			add(windows[lo], -1)
		}
		most = max(most, bytes)
	}
	return most, nil
}
