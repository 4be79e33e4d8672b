package planner

import (
	"fmt"
	"math"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/shuffle"
)

// Mix is a mixture of datasets to plan for instead of one dataset
// (PlanInput.Mix, ClusterInput.Mix), as the gateway serves mix=: the epoch
// order shuffle.Mixture interleaves, component i's pass p being its
// dataset's ordinary epoch order for epoch p with the job's seed and
// window (docs/shuffle.md §11).
//
// The plan numbers the components' chunks one after another, component by
// component: component i's chunk c is chunk first_i + c of the plan, first_i
// the chunks of the components before it. Each is a cache entry of its own,
// with its own size, as the gateway keys a chunk by its dataset.
type Mix struct {
	Components []MixComponent
	// Block is the mixing block K, in samples; 0 means BatchSize × World,
	// as api.Job.Block.
	Block int
	// Samples is the mixture epoch's length L, rounded up to whole
	// blocks; 0 means the components' samples summed.
	Samples int
	// Phases, when not empty, make the mixture a schedule (mix_schedule=,
	// docs/shuffle.md §11.9): the weights by global step, each phase's
	// weights one per component (0 allowed); the components' Weight is
	// then not read.
	Phases []shuffle.SchedulePhase
}

// MixComponent is one dataset of a Mix.
type MixComponent struct {
	Name string // for the report
	// Weight is the component's integer weight; only the weights' ratios
	// matter (api.Mix.IntWeights turns 0.7,0.3 into 7,3).
	Weight  uint64
	Dataset Dataset
	// IndexKey is cluster.IndexKey of the component's index ID, on which a
	// cluster plan's chunk ownership depends (ClusterInput.IndexKey); a
	// single gateway's plan ignores it.
	IndexKey uint64
}

// MixPlan is what a plan of a mixture reports of it (Plan.Mix,
// ClusterPlan.Mix). A Plan's per-component cache figures are its results'
// Components, in the same order.
type MixPlan struct {
	Block      int                `json:"block"` // K, samples in a mixing block
	Components []MixComponentPlan `json:"components"`
	// Phases is, for a schedule, what the simulated epochs read in each
	// phase: its steps, and per component the samples and their bytes
	// (the store's reads of a cold cache, which the plan's cache
	// simulation then cuts by what it keeps).
	Phases []MixPhasePlan `json:"phases,omitempty"`
}

// MixPhasePlan is one phase of a planned schedule over the simulated
// epochs.
type MixPhasePlan struct {
	FromStep uint64 `json:"from_step"`
	// ToStep is the step the next phase starts at; absent for the last.
	ToStep     uint64   `json:"to_step,omitempty"`
	RampTo     uint64   `json:"ramp_to,omitempty"` // a ramp's end
	Weights    []uint64 `json:"weights"`
	Steps      int      `json:"steps"`   // of the simulated epochs
	Samples    []int    `json:"samples"` // per component
	Bytes      int64    `json:"bytes"`   // the samples' bytes (their chunks' in the cache, by share)
	StoreBytes int64    `json:"store_bytes,omitempty"`
	// WorkingSetBytes is the largest working set (Plan.WorkingSetBytes)
	// of the phase's batches: the windows they span and the prefetch
	// windows past them, of every component, with the windows the batches
	// before a switch left in use. A cache below it loads chunks on demand
	// in the phase whatever prefetch does, most of all in the steps after
	// its switch; Stalls says so. Both are a single gateway's plan's.
	WorkingSetBytes int64 `json:"working_set_bytes,omitempty"`
	Stalls          bool  `json:"stalls,omitempty"`
}

// MixComponentPlan is one component of a planned mixture.
type MixComponentPlan struct {
	Name   string `json:"name"`
	Weight uint64 `json:"weight"` // reduced: divided by the weights' GCD
	// FirstChunk is the plan's number of its chunk 0: its chunks are
	// [FirstChunk, FirstChunk+Chunks) in the plan's traces.
	FirstChunk   int   `json:"first_chunk"`
	Chunks       int   `json:"chunks"`
	Samples      int   `json:"samples"` // in one pass of its dataset
	DatasetBytes int64 `json:"dataset_bytes"`
	// DatasetStoreBytes is its bytes in the store, for a dataset with
	// store sizes (Dataset.StoreSizes); absent (0) otherwise.
	DatasetStoreBytes int64 `json:"dataset_store_bytes,omitempty"`
	// EpochSamples is how many of its samples the first simulated
	// mixture epoch reads (where the epoch is not a whole number of the
	// mixture's periods each epoch's is within two of its share and may
	// differ from the next's; a schedule's follow its phases).
	EpochSamples int `json:"epoch_samples"`
	// FirstPass and LastPass are the passes (epochs of its dataset) the
	// simulated epochs read; a component no epoch reads has both at the
	// pass it would start with.
	FirstPass uint64 `json:"first_pass"`
	LastPass  uint64 `json:"last_pass"`
}

// mixTrace is Trace for a mixture: the demand sequence of chunk accesses of
// j over m, each global batch's distinct chunks in order of first use, the
// chunks numbered as Mix describes. Invalid input yields an error wrapping
// ErrInvalid.
func mixTrace(m Mix, j Job) ([]Access, error) {
	ms, err := newMixSchedule(m, j)
	if err != nil {
		return nil, err
	}
	order := ms.plainOrder(ms.window)
	return ms.merged.traceOf(nil, func(visit func(epoch int, chunks []int32)) error {
		return ms.walk(nil, order, visit, nil)
	}, nil)
}

// maxMixPass is the last pass of a component a plan reads: passes are
// epochs of the component's dataset, which the gateway keeps in 31 bits
// and refuses to serve beyond.
const maxMixPass = math.MaxInt32

// mixDraws is how many of a span's draws the walk of a mixture reads at
// once: a span's draws cost a few thousand positions counted to reach
// their first, which reading them by global batch would pay per batch.
const mixDraws = 1 << 14

// mixSchedule is a validated mixture and job.
type mixSchedule struct {
	j     Job
	mix   Mix
	order *shuffle.Mixture
	comps []*schedule // per component: its dataset's sample → chunk tables
	first []int       // first[i]: component i's first chunk in the plan; len components+1
	// merged is the components' chunks as one dataset, numbered as the
	// plan numbers them, with n the mixture epoch's length: the batch
	// counts, traceOf and the cluster walker work on it as on one
	// dataset's schedule. Its sample tables are not built (walk maps
	// samples to chunks by component), so merged.walk must not be called.
	merged *schedule
	// pass0 is where each component's stream stands at the first
	// simulated epoch: the pass of its first sample.
	pass0 []uint64
	// sched is the schedule the mixture follows (Mix.Phases), nil for
	// fixed weights, whose mixture is fixed; order is the first simulated
	// epoch's of either.
	sched *shuffle.Schedule
	fixed *shuffle.Mixture
}

// orderAt is epoch e's order: the mixture's or the schedule's epoch e,
// its counts on the global block index and its streams continued.
func (ms *mixSchedule) orderAt(e int) (*shuffle.Mixture, error) {
	if ms.sched == nil {
		return ms.fixed.Epoch(uint64(e)), nil
	}
	mo, err := ms.sched.Epoch(uint64(e))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return mo, nil
}

func newMixSchedule(m Mix, j Job) (*mixSchedule, error) {
	if err := validateJob(j); err != nil {
		return nil, err
	}
	k := len(m.Components)
	switch {
	case k == 0:
		return nil, fmt.Errorf("%w: a mixture with no components", ErrInvalid)
	case m.Block < 0:
		return nil, fmt.Errorf("%w: mixing block %d samples; must be >= 0 (0: batch size × world size)", ErrInvalid, m.Block)
	case m.Samples < 0:
		return nil, fmt.Errorf("%w: mixture epoch of %d samples; must be >= 0 (0: the components' samples summed)", ErrInvalid, m.Samples)
	}
	ms := &mixSchedule{j: j, mix: m, first: make([]int, k+1), pass0: make([]uint64, k)}
	weights, sizes := make([]uint64, k), make([]int, k)
	var merged Dataset
	stored := false // some component has store sizes: the merge has them too
	gets := true    // every component's loads are counted in GETs: the merge's are
	for _, c := range m.Components {
		stored = stored || c.Dataset.StoreSizes != nil
		gets = gets && c.Dataset.GETs != nil
	}
	for i, c := range m.Components {
		if c.Name == "" {
			return nil, fmt.Errorf("%w: mixture component %d has no name", ErrInvalid, i)
		}
		s, err := newSchedule(c.Dataset, j)
		if err != nil {
			return nil, fmt.Errorf("mixture component %s: %w", c.Name, err)
		}
		if len(c.Dataset.Counts) > math.MaxInt32-ms.first[i] {
			return nil, fmt.Errorf("%w: the mixture's components have more than %d chunks in all", ErrInvalid, math.MaxInt32)
		}
		ms.comps = append(ms.comps, s)
		ms.first[i+1] = ms.first[i] + len(c.Dataset.Counts)
		merged.ChunkSizes = append(merged.ChunkSizes, c.Dataset.ChunkSizes...)
		merged.Counts = append(merged.Counts, c.Dataset.Counts...)
		if stored {
			merged.StoreSizes = append(merged.StoreSizes, c.Dataset.stores()...)
		}
		if gets {
			merged.GETs = append(merged.GETs, c.Dataset.GETs...)
		}
		weights[i], sizes[i] = c.Weight, s.n
	}
	block := m.Block
	if block == 0 {
		block = j.BatchSize * j.World // validateJob rules out an overflow
	}
	var order *shuffle.Mixture
	var err error
	if len(m.Phases) > 0 {
		passes := make([]shuffle.Passes, k)
		for i, n := range sizes {
			passes[i] = shuffle.EqualPasses(n)
		}
		if ms.sched, err = shuffle.NewSchedule(m.Phases, passes, block, m.Samples); err == nil {
			order, err = ms.sched.Epoch(uint64(j.FirstEpoch))
		}
	} else if ms.fixed, err = shuffle.NewMixture(weights, sizes, block, m.Samples); err == nil {
		order = ms.fixed.Epoch(uint64(j.FirstEpoch))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ms.order = order
	ms.merged = &schedule{d: merged, j: j, n: order.NumSamples()}
	for i := range k {
		d := order.Start(i, uint64(j.FirstEpoch))
		pass := d.Pass
		if pass == math.MaxUint64 || pass > maxMixPass {
			return nil, fmt.Errorf("%w: epoch %d of the mixture reads %s past pass %d", ErrInvalid, j.FirstEpoch, m.Components[i].Name, maxMixPass)
		}
		ms.pass0[i] = pass
	}
	return ms, nil
}

// window is component i's shuffle window: the job's split by weight
// (shuffle.Mixture.ComponentWindow), as the gateway orders its passes.
func (ms *mixSchedule) window(i int) int { return ms.order.ComponentWindow(i, ms.j.Window) }

// passOrder is a component's pass order: component i's order for pass.
type passOrder func(i int, pass uint64) (importance.Order, error)

// plainOrder is a single gateway's pass orders, component i's in windows
// of window(i) chunks: the job's window, or all its chunks for a full
// shuffle.
func (ms *mixSchedule) plainOrder(window func(i int) int) passOrder {
	return func(i int, pass uint64) (importance.Order, error) {
		return importance.NewOrder(ms.comps[i].spec(int(pass), window(i)))
	}
}

// span is the windows [first, last] of a component's passes (numbered one
// pass after another from the component's first pass) that a global batch
// keeps busy; first < 0 for none.
type span struct{ first, last int }

// walk calls visit for every global batch of every simulated epoch of the
// mixture, in order, with the plan's chunk of each of its samples in epoch
// order, component i's passes in order(i, pass)'s order, and before each
// visit calls spans, if not nil, with each component's span in the batch:
// the windows its samples in the batch touch, or the window of its latest
// sample if the batch reads none of them, or none before its first. Both
// slices are reused after the calls return. The global batches are
// shuffle's cut of the mixture's epoch, as for one dataset.
//
// It keeps one window's sample IDs per component, one global batch and
// one span of the mixture's epoch (shuffle.MixSpan, a byte a position) in
// memory, and counts the draws it walks on m: a mixture epoch's length is
// the caller's to choose.
func (ms *mixSchedule) walk(m *meter, order passOrder, visit func(epoch int, chunks []int32), spans func([]span)) error {
	k := len(ms.comps)
	cut := ms.merged.cut()
	nb := ms.merged.numBatches()
	n := ms.merged.n
	block, spanBlocks := ms.order.Block(), ms.order.SpanBlocks()
	blocks := n / block
	readers := make([]passReader, k)
	for i := range readers {
		readers[i] = passReader{s: ms.comps[i], i: i, offset: int32(ms.first[i]), pass0: ms.pass0[i], order: order}
	}
	cur := make([]span, k)  // the current batch's
	last := make([]int, k)  // each component's latest window
	held := make([]span, k) // what spans is given
	for i := range k {
		cur[i], last[i] = span{-1, -1}, -1
	}
	buf := make([]int32, 0, min(cut.BatchSize*cut.World, n))
	var draws []shuffle.Draw
	for e := ms.j.FirstEpoch; e < ms.j.FirstEpoch+ms.j.Epochs; e++ {
		if err := m.err(); err != nil {
			return err
		}
		mo, err := ms.orderAt(e)
		if err != nil {
			return err
		}
		var sp *shuffle.MixSpan
		ds, de := 0, 0 // draws holds positions [ds, de)
		for b := range nb {
			start, end, err := cut.GlobalBatch(n, b)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			buf = buf[:0]
			for pos := start; pos < end; {
				if pos >= de {
					if sp == nil || pos >= sp.End() {
						first := pos / block
						sp = mo.Span(ms.j.Seed, uint64(e), first, min(spanBlocks, blocks-first))
					}
					ds, de = pos, min(pos+mixDraws, sp.End())
					draws = sp.AppendRange(draws[:0], ds, de)
				}
				hi := min(end, de)
				for _, d := range draws[pos-ds : hi-ds] {
					c, w, err := readers[d.Component].read(d.Pass, d.Index)
					if err != nil {
						return err
					}
					buf = append(buf, c)
					if sp := &cur[d.Component]; sp.first < 0 {
						*sp = span{w, w}
					} else {
						sp.last = w
					}
				}
				pos = hi
			}
			if err := m.walk(len(buf)); err != nil {
				return err
			}
			if spans != nil {
				for i, sp := range cur {
					if sp.first >= 0 {
						last[i] = sp.last
						held[i] = sp
					} else {
						held[i] = span{last[i], last[i]}
					}
					cur[i] = span{-1, -1}
				}
				spans(held)
			}
			visit(e, buf)
		}
	}
	return m.err()
}

// passReader reads one component's stream: the plan's chunk holding the
// sample at an index of a pass's order, and the window holding it,
// numbered across passes from pass0. It keeps one window's sample IDs:
// reading a pass's indexes in order, as a mixture does, computes each
// window's permutation once.
type passReader struct {
	s      *schedule // the component's
	i      int
	offset int32 // the plan's number of the component's chunk 0
	pass0  uint64
	order  passOrder

	ep         importance.Order // pass's order; nil before the first read
	pass       uint64
	w          int   // the window ids holds
	start, end int   // its positions
	ids        []int // its sample IDs in epoch order
}

func (r *passReader) read(pass uint64, x int) (chunk int32, window int, err error) {
	if r.ep == nil || pass != r.pass {
		if pass > maxMixPass {
			return 0, 0, fmt.Errorf("%w: the mixture reads pass %d of component %d, past the last epoch number (%d)", ErrInvalid, pass, r.i, maxMixPass)
		}
		ep, err := r.order(r.i, pass)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		r.ep, r.pass = ep, pass
		r.start, r.end = 0, 0
	}
	if x < r.start || x >= r.end {
		r.w = r.ep.WindowOf(x)
		r.start, r.end = r.ep.WindowStart(r.w), r.ep.WindowStart(r.w+1)
		r.ids = r.ep.Window(r.w)
	}
	return r.offset + r.s.chunkOf(r.ids[x-r.start]), int(pass-r.pass0)*r.ep.NumWindows() + r.w, nil
}

// mixWorkingSet finds a mixture's working set, Plan.WorkingSetBytes: the
// largest total size of the chunks (with samples) of every component's
// windows from the first a global batch keeps busy through prefetch
// windows past the last (the windows of its span), continuing into the
// component's following passes. Each component is a stream of its own to
// the gateway, prefetched by its own windows; a component the batch does
// not read holds the window of its latest sample.
type mixWorkingSet struct {
	ms       *mixSchedule
	order    passOrder
	prefetch []int   // per component: prefetch windows, at most a pass's
	refs     []int32 // per plan chunk: the counted windows holding it
	lo, hi   []int   // per component: windows [lo, hi) are counted; -1 before its first span
	memo     [][]passEpoch
	bytes    int64
	most     int64
	err      error
}

// passEpoch is a pass's order, memoised.
type passEpoch struct {
	pass uint64
	ep   importance.Order
}

// mixMemoPasses is how many passes' orders the working set keeps per
// component: those its counted windows span, usually one or two.
const mixMemoPasses = 4

func newMixWorkingSet(ms *mixSchedule, order passOrder, prefetch int) *mixWorkingSet {
	k := len(ms.comps)
	ws := &mixWorkingSet{ms: ms, order: order, prefetch: make([]int, k), refs: make([]int32, len(ms.merged.d.Counts)),
		lo: make([]int, k), hi: make([]int, k), memo: make([][]passEpoch, k)}
	for i, s := range ms.comps {
		nw := (len(s.d.Counts) + ms.window(i) - 1) / ms.window(i)
		ws.prefetch[i] = min(prefetch, nw)
		ws.lo[i], ws.hi[i] = -1, -1
	}
	return ws
}

// add takes the components' spans in one global batch.
func (ws *mixWorkingSet) add(spans []span) {
	if ws.err != nil {
		return
	}
	for i, sp := range spans {
		if sp.first < 0 {
			continue
		}
		if ws.lo[i] < 0 {
			ws.lo[i], ws.hi[i] = sp.first, sp.first
		}
		for end := sp.last + ws.prefetch[i] + 1; ws.hi[i] < end; ws.hi[i]++ {
			ws.count(i, ws.hi[i], 1)
		}
		for ; ws.lo[i] < sp.first; ws.lo[i]++ {
			ws.count(i, ws.lo[i], -1)
		}
	}
	ws.most = max(ws.most, ws.bytes)
}

// count adds delta to the windows counted holding each chunk of component
// i's window w (numbered across passes), counting a chunk's bytes while
// any counted window holds it.
func (ws *mixWorkingSet) count(i, w int, delta int32) {
	s := ws.ms.comps[i]
	nw := (len(s.d.Counts) + ws.ms.window(i) - 1) / ws.ms.window(i)
	ep, err := ws.pass(i, ws.ms.pass0[i]+uint64(w/nw))
	if err != nil {
		ws.err = err
		return
	}
	for _, c := range ep.WindowChunks(w % nw) {
		if s.d.Counts[c] == 0 {
			continue // never read, never cached
		}
		m := ws.ms.first[i] + c
		if delta > 0 && ws.refs[m] == 0 {
			ws.bytes += s.d.ChunkSizes[c]
		}
		ws.refs[m] += delta
		if delta < 0 && ws.refs[m] == 0 {
			ws.bytes -= s.d.ChunkSizes[c]
		}
	}
}

// pass returns component i's order for a pass, from the few it keeps.
func (ws *mixWorkingSet) pass(i int, pass uint64) (importance.Order, error) {
	for _, m := range ws.memo[i] {
		if m.pass == pass {
			return m.ep, nil
		}
	}
	ep, err := ws.order(i, pass)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(ws.memo[i]) == mixMemoPasses {
		ws.memo[i] = append(ws.memo[i][:0], ws.memo[i][1:]...)
	}
	ws.memo[i] = append(ws.memo[i], passEpoch{pass, ep})
	return ep, nil
}

// report describes the mixture for a plan.
func (ms *mixSchedule) report() *MixPlan {
	mp := &MixPlan{Block: ms.order.Block()}
	end := uint64(ms.j.FirstEpoch + ms.j.Epochs)
	for i, c := range ms.mix.Components {
		s := ms.comps[i]
		per := ms.order.EpochSamples(i)
		last := ms.pass0[i]
		// Where the epoch after the last simulated one starts, less one.
		if after, err := ms.orderAt(int(end)); err == nil {
			d := after.Start(i, end)
			if q := d.Pass*uint64(s.n) + uint64(d.Index); q > 0 && d.Pass != math.MaxUint64 {
				last = (q - 1) / uint64(s.n)
			}
		}
		mp.Components = append(mp.Components, MixComponentPlan{
			Name:              c.Name,
			Weight:            ms.order.Weights()[i],
			FirstChunk:        ms.first[i],
			Chunks:            len(s.d.Counts),
			Samples:           s.n,
			DatasetBytes:      sum(s.d.ChunkSizes),
			DatasetStoreBytes: s.d.storeBytes(),
			EpochSamples:      per,
			FirstPass:         ms.pass0[i],
			LastPass:          last,
		})
	}
	if ms.sched != nil {
		mp.Phases = ms.phases()
	}
	return mp
}

// phases is what the simulated epochs of a schedule read in each phase:
// its steps and, per component, the samples, from the block counts at
// the phase's boundaries within each epoch, and their bytes by the
// component's bytes per sample.
func (ms *mixSchedule) phases() []MixPhasePlan {
	ph := ms.sched.Phases()
	k := len(ms.comps)
	out := make([]MixPhasePlan, len(ph))
	for n, p := range ph {
		out[n] = MixPhasePlan{FromStep: p.Step, Weights: p.Weights, Samples: make([]int, k)}
		if p.Ramp() {
			out[n].RampTo = p.End
		}
		if n+1 < len(ph) {
			out[n].ToStep = ph[n+1].Step
		}
	}
	per := uint64(ms.sched.EpochBlocks())
	for e := ms.j.FirstEpoch; e < ms.j.FirstEpoch+ms.j.Epochs; e++ {
		mo, err := ms.orderAt(e)
		if err != nil {
			return out
		}
		g0 := uint64(e) * per
		for n := range out {
			from, to := max(out[n].FromStep, g0), g0+per
			if out[n].ToStep != 0 {
				to = min(to, out[n].ToStep)
			}
			if from >= to {
				continue
			}
			out[n].Steps += int(to - from)
			for i := range k {
				out[n].Samples[i] += mo.Cumulative(int(to-g0), i) - mo.Cumulative(int(from-g0), i)
			}
		}
	}
	for n := range out {
		var bytes, store float64
		for i, s := range ms.comps {
			x := float64(out[n].Samples[i]) / float64(s.n)
			bytes += x * float64(sum(s.d.ChunkSizes))
			store += x * float64(sum(s.d.stores()))
		}
		out[n].Bytes = int64(math.Round(bytes))
		if ms.comps[0].d.StoreSizes != nil || ms.merged.d.StoreSizes != nil {
			out[n].StoreBytes = int64(math.Round(store))
		}
	}
	return out
}

// readBytes is the bytes an epoch of the mixture reads, before drop_last:
// each component's bytes in proportion to the samples of it an epoch
// reads. For one component whose passes are the epochs it is the
// dataset's bytes exactly, as in a plan of the dataset alone. With store,
// the same of the components' bytes in the store.
func (ms *mixSchedule) readBytes(store bool) float64 {
	var read float64
	for i, s := range ms.comps {
		sizes := s.d.ChunkSizes
		if store {
			sizes = s.d.stores()
		}
		read += float64(sum(sizes)) * (ms.epochSamples(i) / float64(s.n))
	}
	return read
}

// epochSamples is the samples of component i an epoch reads, averaged
// over the simulated epochs (a mixture's epochs may differ where its
// epoch is not a whole number of periods).
func (ms *mixSchedule) epochSamples(i int) float64 {
	var n float64
	for e := ms.j.FirstEpoch; e < ms.j.FirstEpoch+ms.j.Epochs; e++ {
		if mo, err := ms.orderAt(e); err == nil {
			n += float64(mo.EpochSamples(i))
		}
	}
	return n / float64(max(ms.j.Epochs, 1))
}

// makeMixPlan is MakePlan for in.Mix, counting on m.
func makeMixPlan(m *meter, in PlanInput) (*Plan, error) {
	switch {
	case len(in.Dataset.Counts) > 0 || len(in.Dataset.ChunkSizes) > 0:
		return nil, fmt.Errorf("%w: a plan of a mixture takes its datasets from its components; leave Dataset empty", ErrInvalid)
	case in.Importance != nil:
		return nil, fmt.Errorf("%w: %s", ErrInvalid, importanceOfMixture())
	}
	ms, err := newMixSchedule(*in.Mix, in.Job)
	if err != nil {
		return nil, err
	}
	prefetch, err := validatePlanInput(in)
	if err != nil {
		return nil, err
	}
	s := ms.merged
	nb := s.numBatches()
	sizes, err := s.epochSizes() // a mixture's epochs are all of its length
	if err != nil {
		return nil, err
	}

	fullPass := false
	for i, c := range ms.comps {
		// As for one dataset: only a window smaller than some
		// component's chunks orders that component differently.
		fullPass = fullPass || ms.window(i) < len(c.d.Counts)
	}
	passes := int64(1)
	if fullPass {
		passes++
	}
	epochs := int64(in.Job.Epochs)
	if err := m.admit(passes*epochs*int64(s.n), epochs*int64(nb)); err != nil {
		return nil, err
	}

	chunks := len(s.d.Counts)
	quality := newQualityMeter(chunks, in.Job.BatchSize)
	ws := newMixWorkingSet(ms, ms.plainOrder(ms.window), prefetch)
	add := ws.add
	var tags *phaseTags // a schedule's phases
	if ms.sched != nil {
		tags = newPhaseTags(ms)
		add = func(sp []span) {
			ws.add(sp)
			tags.add(ws)
		}
	}
	trace, err := s.traceOf(m, func(visit func(epoch int, chunks []int32)) error {
		return ms.walk(m, ws.order, visit, add)
	}, quality.add)
	if err != nil {
		return nil, err
	}
	if ws.err != nil {
		return nil, ws.err
	}
	full := quality
	if fullPass {
		full = newQualityMeter(chunks, in.Job.BatchSize)
		order := ms.plainOrder(func(i int) int { return len(ms.comps[i].d.Counts) })
		if err := ms.walk(m, order, full.add, nil); err != nil {
			return nil, err
		}
	}

	p := &Plan{
		Job:                in.Job,
		Mix:                ms.report(),
		Chunks:             chunks,
		Samples:            s.n,
		BatchesPerEpoch:    nb,
		Epochs:             sizes,
		CacheBytes:         in.CacheBytes,
		DatasetBytes:       sum(s.d.ChunkSizes),
		DatasetStoreBytes:  s.d.storeBytes(),
		EpochBytes:         int64(math.Round(ms.readBytes(false) * float64(s.servedSamples()) / float64(s.n))),
		BackendBytesPerSec: in.BackendBytesPerSec,
		ConsumeBytesPerSec: in.ConsumeBytesPerSec,
		PrefetchWindows:    prefetch,
		WorkingSetBytes:    ws.most,
		Quality:            quality.quality(),
		FullShuffle:        full.quality(),
	}
	if s.d.StoreSizes != nil {
		p.EpochStoreBytes = int64(math.Round(ms.readBytes(true) * float64(s.servedSamples()) / float64(s.n)))
	}
	p.ColdEpochStalls = p.coldStalls()
	sim := newSimulator(trace, s.d.ChunkSizes, s.d.StoreSizes, m).withGets(s.d.GETs)
	sim.byComponent(ms.first)
	if tags != nil {
		sim.byPhase(tags.accesses(trace), len(tags.from))
		for n := range p.Mix.Phases {
			p.Mix.Phases[n].WorkingSetBytes = tags.most[n]
			p.Mix.Phases[n].Stalls = in.CacheBytes < tags.most[n]
		}
	}
	if err := p.simulate(m, in, sim, s.d); err != nil {
		return nil, err
	}
	p.Bill = gatewayBill(p.Optimal, in.Prices)
	return p, nil
}

// makeMixClusterPlan is MakeClusterPlan for in.Mix, counting on m: each component's
// chunks owned as the gateway's catalog owns them (by the component's own
// index key), each component's passes in the job's own order (as on one
// gateway), and the mixture's global batches assigned to ranks as those
// of one dataset are.
func makeMixClusterPlan(m *meter, in ClusterInput) (*ClusterPlan, error) {
	if len(in.Dataset.Counts) > 0 || len(in.Dataset.ChunkSizes) > 0 {
		return nil, fmt.Errorf("%w: a prediction for a mixture takes its datasets from its components; leave Dataset empty", ErrInvalid)
	}
	if in.Importance != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, importanceOfMixture())
	}
	ms, err := newMixSchedule(*in.Mix, in.Job)
	if err != nil {
		return nil, err
	}
	s := ms.merged
	if err := validateClusterInput(in, s); err != nil {
		return nil, err
	}
	if err := admitCluster(m, in, s, 1); err != nil {
		return nil, err
	}
	owner := make([][]int, len(ms.comps))
	var merged []int
	for i, c := range in.Mix.Components {
		owner[i] = owners(ms.comps[i].d, c.IndexKey, in.ids())
		merged = append(merged, owner[i]...)
	}
	l := layoutOf(s.d, merged, in.Nodes)
	order := func(i int, pass uint64) (importance.Order, error) {
		return importance.NewOrder(ms.comps[i].spec(int(pass), ms.window(i)))
	}
	p, err := clusterPlan(m, in, s, l, func(visit func(epoch int, chunks []int32)) error {
		return ms.walk(m, order, visit, nil)
	}, ms.readBytes(false))
	if err != nil {
		return nil, err
	}
	p.Mix = ms.report()
	return p, nil
}

// importanceOfMixture is why a plan of a mixture is not drawn by
// importance: the table's refusal of the pair (package features), which the
// gateway answers a request of both with; a planner that does not model
// it, should the table come to take it.
func importanceOfMixture() string {
	if c := features.Lookup(features.Mix, features.Importance); c.Verdict == features.Refuse {
		return c.Message
	}
	return "importance sampling of a mixture is not modelled"
}
