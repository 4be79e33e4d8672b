package planner

import (
	"fmt"
	"slices"

	"github.com/brandgw/brand/internal/cache/assembly"
)

// Policy is a cache eviction policy to simulate.
type Policy int

const (
	// LRU evicts the least recently used chunks until the new one fits.
	LRU Policy = iota
	// Belady evicts the chunk whose next use is furthest in the future
	// (chunks never used again first) until the new one fits: Belady's MIN,
	// optimal for equal-size chunks, a near-optimal heuristic otherwise.
	Belady
	// ImportanceAware is the gateway's eviction for a job reading by
	// importance: Belady on the uses left in the current epoch, and the
	// chunks not needed again this epoch first, lightest importance
	// weight first. It needs each chunk's weight, so it is simulated by
	// simulateImportance (or a plan's importance mode), not Simulate.
	ImportanceAware
	// NextUse is the gateway's next-use policy as its use table keys
	// one job's chunks: by window, the windows the job is in least
	// recently used first (windows.go). It needs the orders' windows, so
	// it is simulated by ForGateway.TracePlan, not Simulate.
	NextUse
)

// String returns the policy's name: "lru", "belady", "importance" or
// "next-use".
func (p Policy) String() string {
	switch p {
	case LRU:
		return "lru"
	case Belady:
		return "belady"
	case ImportanceAware:
		return "importance"
	case NextUse:
		return "next-use"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// MarshalText implements encoding.TextMarshaler, so that a Policy is its
// name in JSON and flag.TextVar works.
func (p Policy) MarshalText() ([]byte, error) {
	if p != LRU && p != Belady && p != ImportanceAware && p != NextUse {
		return nil, fmt.Errorf("%w: unknown policy %d", ErrInvalid, int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: "lru", "belady"
// ("optimal" is accepted for Belady), "importance" or "next-use"
// ("schedule", its old name, is accepted for NextUse).
func (p *Policy) UnmarshalText(b []byte) error {
	switch string(b) {
	case "lru":
		*p = LRU
	case "belady", "optimal":
		*p = Belady
	case "importance":
		*p = ImportanceAware
	case "next-use", "schedule":
		*p = NextUse
	default:
		return fmt.Errorf("%w: policy %q; want lru, belady, importance or next-use", ErrInvalid, b)
	}
	return nil
}

// EpochResult is one epoch's figures: chunk accesses, how many hit, and the
// bytes the misses read from the backend. With a disk tier below the cache
// (a plan's DiskCacheBytes) BackendBytes are the misses read from the store, and
// DiskBytes those read from the disk; without one DiskBytes is 0, and
// absent from the JSON.
type EpochResult struct {
	Epoch        int     `json:"epoch"`
	Accesses     int     `json:"accesses"`
	Hits         int     `json:"hits"`
	HitRatio     float64 `json:"hit_ratio"`
	BackendBytes int64   `json:"backend_bytes"`
	DiskBytes    int64   `json:"disk_bytes,omitempty"`
	// StoreReads are the chunk loads from the store (the misses not read
	// from a disk), StoreGETs the GETs they take (Dataset.GETs; absent
	// where the dataset does not say).
	StoreReads int   `json:"store_reads"`
	StoreGETs  int64 `json:"store_gets,omitempty"`
}

// Result is what a cache of CacheBytes under Policy does with a trace: per
// epoch (ascending by epoch number) and in total. A hit ratio with no
// accesses is 0. A trace of several jobs (SharedTrace) has its figures per
// job in Jobs, and per epoch number summed over the jobs in Epochs.
// DiskCacheBytes is the disk tier below the cache (a plan's), 0 for
// none.
type Result struct {
	Policy         Policy        `json:"policy"`
	CacheBytes     int64         `json:"cache_bytes"`
	DiskCacheBytes int64         `json:"disk_cache_bytes,omitempty"`
	Epochs         []EpochResult `json:"epochs"`
	Hits           int           `json:"hits"`
	Accesses       int           `json:"accesses"`
	HitRatio       float64       `json:"hit_ratio"`
	BackendBytes   int64         `json:"backend_bytes"`
	DiskBytes      int64         `json:"disk_bytes,omitempty"`
	StoreReads     int           `json:"store_reads"`
	StoreGETs      int64         `json:"store_gets,omitempty"`
	Jobs           []JobResult   `json:"jobs,omitempty"`
	// Components is a mixture's figures per component (a trace of a
	// mixture's chunks: Plan.Mix), absent otherwise.
	Components []ComponentResult `json:"components,omitempty"`
	// Phases is a schedule's figures per phase (Plan.Mix.Phases, in the
	// same order; a single gateway's plan), absent otherwise.
	Phases []PhaseResult `json:"phases,omitempty"`
}

// JobResult is one job's share of a Result over a trace of several jobs:
// its epochs' figures (ascending) and their totals. A chunk read for one
// job and then hit by another counts as the first job's backend bytes and
// the second's hit.
type JobResult struct {
	Job          int           `json:"job"` // its index in the trace (Access.Job)
	Epochs       []EpochResult `json:"epochs"`
	Hits         int           `json:"hits"`
	Accesses     int           `json:"accesses"`
	HitRatio     float64       `json:"hit_ratio"`
	BackendBytes int64         `json:"backend_bytes"`
	DiskBytes    int64         `json:"disk_bytes,omitempty"`
}

// ComponentResult is one mixture component's share of a Result: the
// accesses to its chunks, their hits and the bytes their misses read, per
// epoch (ascending, every epoch of the trace, an epoch that reads none of
// the component's chunks included) and in total.
type ComponentResult struct {
	Component    int           `json:"component"` // its index in Plan.Mix.Components
	Epochs       []EpochResult `json:"epochs"`
	Hits         int           `json:"hits"`
	Accesses     int           `json:"accesses"`
	HitRatio     float64       `json:"hit_ratio"`
	BackendBytes int64         `json:"backend_bytes"`
	DiskBytes    int64         `json:"disk_bytes,omitempty"`
}

// Simulate replays trace through a cache of cacheBytes bytes, initially
// empty, under policy p, where sizes[c] is chunk c's size in bytes. Every
// miss reads the whole chunk (its bytes count as backend bytes) and admits
// it, evicting by the policy until it fits; a chunk larger than the whole
// cache is a miss that is read but not admitted. The accesses of one batch
// (see Access.Start) are served as the gateway serves them: the batch's
// resident chunks are hits and are pinned, the others are read, evicting
// only chunks outside the batch (a chunk that finds no room beside the
// batch's pinned chunks is read but not admitted), and the batch's chunks
// become evictable again, in order of use, when it ends. A cacheBytes below
// zero is taken as zero.
//
// Simulate costs O(len(trace)) for LRU and O(len(trace) × log(resident
// chunks)) for Belady, plus O(len(sizes)) memory and, for Belady, 8 bytes an
// access. It panics if p is not LRU or Belady (ImportanceAware needs the
// chunks' weights: a plan's importance mode), if a size is negative or if an
// access names a chunk outside sizes: those are programming errors, and
// MakePlan validates its input before it simulates.
func Simulate(trace []Access, sizes []int64, cacheBytes int64, p Policy) Result {
	return simulateTiers(trace, sizes, cacheBytes, 0, p)
}

// simulateTiers is Simulate with a disk tier of diskBytes bytes below the
// cache, as `brand serve --disk-cache-size` keeps one (docs/planner.md,
// "Two tiers: RAM and disk"). The cache (RAM) behaves exactly as in
// Simulate; a miss is read from the disk if the disk holds the chunk
// (Result.DiskBytes), else from the store (Result.BackendBytes), and a
// chunk read from the store is then offered to the disk, which admits it
// as diskTier.offer describes, ranking its chunks by p's rule. A diskBytes
// of 0 (or below) is no disk: Simulate's figures exactly.
//
// It costs what Simulate does plus O(log chunks on disk) an access, and
// for LRU the next-use pass Belady needs is not made.
func simulateTiers(trace []Access, sizes []int64, cacheBytes, diskBytes int64, p Policy) Result {
	// Without a meter nothing stops a run.
	r, _ := newSimulator(trace, sizes, nil, nil).runTiers(max(cacheBytes, 0), max(diskBytes, 0), p)
	return r
}

// simulator holds what every run over one trace shares: its epoch runs and,
// once a Belady run needed them, its next uses. MakePlan runs it at many
// cache sizes.
type simulator struct {
	trace []Access
	// sizes are the chunks' bytes in the cache (and on a disk tier),
	// store their bytes read from the store (Dataset.StoreSizes): a miss
	// read from the store counts store[c] as backend bytes, one read from
	// the disk sizes[c].
	sizes []int64
	store []int64
	// gets, if not nil, are the GETs a load of each chunk takes.
	gets  []int32
	slots []slotKey  // distinct (job, epoch) pairs, ascending
	runs  []epochRun // maximal runs of accesses of one epoch of one job
	next  []int      // next[i]: index of the next access to trace[i].Chunk, or never
	// comp, if not nil, is each chunk's mixture component (byComponent),
	// whose figures every run then also counts.
	comp  []int32
	ncomp int
	// phase, if not nil, is each access's schedule phase (byPhase), of
	// nphase, whose figures every run then also counts.
	phase  []uint16
	nphase int
	// meter counts the accesses every run simulates and stops a run when
	// the plan's budget runs out or its context is done; nil for none.
	meter *meter
}

// byComponent makes every run count its figures per mixture component
// too (Result.Components): component i's chunks are [first[i],
// first[i+1]).
func (s *simulator) byComponent(first []int) {
	s.ncomp = len(first) - 1
	s.comp = make([]int32, len(s.sizes))
	for i := range s.ncomp {
		for c := first[i]; c < first[i+1]; c++ {
			s.comp[c] = int32(i)
		}
	}
}

// slotKey names the figures of one epoch of one job.
type slotKey struct {
	job   uint16
	epoch int32
}

func (a slotKey) compare(b slotKey) int {
	if a.job != b.job {
		return int(a.job) - int(b.job)
	}
	return int(a.epoch) - int(b.epoch)
}

// epochRun is trace[start:end], all of one epoch of one job, whose figures
// go to slot slots[slot].
type epochRun struct {
	start, end, slot int
}

// never is the next use of a chunk that is not used again: further than any.
const never = int(^uint(0) >> 1)

// withGets makes s count the GETs of each load, gets[c] for chunk c
// (nil: none counted).
func (s *simulator) withGets(gets []int32) *simulator {
	if len(gets) == len(s.sizes) {
		s.gets = gets
	}
	return s
}

// newSimulator returns the simulator of trace over chunks of sizes bytes
// in the cache, each read from the store at store bytes (nil: sizes),
// counting on m (nil: nothing stops a run).
func newSimulator(trace []Access, sizes, store []int64, m *meter) *simulator {
	for c, size := range sizes {
		if size < 0 {
			panic(fmt.Sprintf("planner: chunk %d size %d bytes; must be >= 0", c, size))
		}
	}
	if store == nil {
		store = sizes
	}
	if len(store) != len(sizes) {
		panic(fmt.Sprintf("planner: %d store sizes for %d chunks", len(store), len(sizes)))
	}
	for i, a := range trace {
		if a.Chunk < 0 || int(a.Chunk) >= len(sizes) {
			panic(fmt.Sprintf("planner: access %d names chunk %d; sizes cover [0, %d)", i, a.Chunk, len(sizes)))
		}
	}
	s := &simulator{trace: trace, sizes: sizes, store: store, meter: m}
	// Traces from Trace are in epoch order, but a recorded trace (the
	// gateway's) may interleave epochs, and a shared trace interleaves
	// jobs batch by batch; runs keep the per-access cost of the
	// bookkeeping to nothing either way.
	seen := map[slotKey]bool{}
	keyOf := func(a Access) slotKey { return slotKey{a.Job, a.Epoch} }
	for i := 0; i < len(trace); {
		k := keyOf(trace[i])
		j := i + 1
		for j < len(trace) && keyOf(trace[j]) == k {
			j++
		}
		s.runs = append(s.runs, epochRun{start: i, end: j})
		if !seen[k] {
			seen[k] = true
			s.slots = append(s.slots, k)
		}
		i = j
	}
	slices.SortFunc(s.slots, slotKey.compare)
	for r := range s.runs {
		s.runs[r].slot, _ = slices.BinarySearchFunc(s.slots, keyOf(trace[s.runs[r].start]), slotKey.compare)
	}
	return s
}

// nextUses computes, once, the index of each access's next access to the
// same chunk by a backward pass over the trace.
func (s *simulator) nextUses() []int {
	if s.next != nil || len(s.trace) == 0 {
		return s.next
	}
	s.next = make([]int, len(s.trace))
	last := make([]int, len(s.sizes))
	for c := range last {
		last[c] = never
	}
	for i := len(s.trace) - 1; i >= 0; i-- {
		c := s.trace[i].Chunk
		s.next[i] = last[c]
		last[c] = i
	}
	return s.next
}

// cache is a simulated cache under one policy. A batch is served in three
// steps: pin(i, c) for each access of the batch, which reports whether the
// chunk is resident and, if so, pins it; admit(c) for each that was not,
// which makes room by evicting unpinned chunks and reports whether the
// chunk could be admitted (pinned); and release(i, c) for each admitted or
// pinned chunk in order of use, which makes it evictable again as used by
// access i.
type cache interface {
	pin(i int, c int32) (hit bool)
	admit(c int32) bool
	release(i int, c int32)
}

// batches calls fn with the bounds of each batch of trace[start:end]: runs
// that begin at an access with Start set, or single accesses if batched is
// false.
func batches(trace []Access, start, end int, batched bool, fn func(start, end int)) {
	for i := start; i < end; {
		j := i + 1
		for batched && j < end && !trace[j].Start {
			j++
		}
		fn(i, j)
		i = j
	}
}

// run simulates a cache of cacheBytes alone, with no disk below it.
func (s *simulator) run(cacheBytes int64, p Policy) (Result, error) {
	return s.runTiers(cacheBytes, 0, p)
}

// runTiers simulates a cache of cacheBytes with a disk of diskBytes below
// it (0: none) under policy p, LRU or Belady. Its error is the meter's.
func (s *simulator) runTiers(cacheBytes, diskBytes int64, p Policy) (Result, error) {
	var cc cache
	switch p {
	case LRU:
		cc = newLRUCache(s.sizes, cacheBytes)
	case Belady:
		cc = newBeladyCache(s.sizes, cacheBytes, s.nextUses())
	case ImportanceAware:
		panic("planner: the importance-aware policy needs chunk weights; use runAware")
	case NextUse:
		panic("planner: the next-use policy needs the orders' windows; use ForGateway.TracePlan")
	default:
		panic(fmt.Sprintf("planner: unknown policy %d", int(p)))
	}
	return s.serve(cc, cacheBytes, s.disk(diskBytes, p, nil), p)
}

// epochStarter is a cache whose eviction order depends on the epoch being
// served: the simulation tells it, before the first access of each run of
// one epoch's accesses, the index of that access.
type epochStarter interface {
	startEpoch(i int)
}

// serve replays the trace through cc, a cache of cacheBytes under policy
// p, with the disk tier d below it, batch by batch, and counts hits,
// store (backend) bytes and disk bytes per epoch. A hit in cc moves the
// chunk's rank on the disk if the disk holds it; a miss is read from the
// disk if it holds the chunk, else from the store and offered to the disk,
// before cc admits it. It counts every batch on the simulator's meter and
// stops with the meter's error.
func (s *simulator) serve(cc cache, cacheBytes int64, d *diskTier, p Policy) (Result, error) {
	slots := make([]EpochResult, len(s.slots))
	for i, k := range s.slots {
		slots[i].Epoch = int(k.epoch)
	}
	batched := slices.ContainsFunc(s.trace, func(a Access) bool { return a.Start })
	var pinned []bool // per access of the current batch: its chunk is pinned
	starter, _ := cc.(epochStarter)
	var comps [][]EpochResult // per component, per slot
	var sink EpochResult      // where a trace not split by component counts them
	var phases []PhaseResult  // per phase of a schedule (byPhase)
	if s.phase != nil {
		phases = make([]PhaseResult, s.nphase)
	}
	var phaseSink PhaseResult // where a trace not split by phase counts them
	phaseOf := func(i int) *PhaseResult {
		if phases == nil {
			return &phaseSink
		}
		return &phases[s.phase[i]]
	}
	if s.comp != nil {
		comps = make([][]EpochResult, s.ncomp)
		for i := range comps {
			comps[i] = make([]EpochResult, len(s.slots))
		}
	}
	for _, r := range s.runs {
		if starter != nil {
			starter.startEpoch(r.start)
		}
		d.startEpoch(r.start)
		er := &slots[r.slot]
		// process serves accesses [start, end) as one pinned group.
		process := func(start, end int) {
			pinned = pinned[:0]
			for i := start; i < end; i++ {
				c := s.trace[i].Chunk
				hit := cc.pin(i, c)
				pinned = append(pinned, hit)
				ph := phaseOf(i)
				ph.Accesses++
				if hit {
					er.Hits++
					ph.Hits++
					d.hit(i, c)
				}
				if comps != nil {
					ce := &comps[s.comp[c]][r.slot]
					ce.Accesses++
					if hit {
						ce.Hits++
					}
				}
			}
			for i := start; i < end; i++ {
				if c := s.trace[i].Chunk; !pinned[i-start] {
					ce := &sink
					if comps != nil {
						ce = &comps[s.comp[c]][r.slot]
					}
					ph := phaseOf(i)
					if d.read(i, c) {
						er.DiskBytes += s.sizes[c]
						ce.DiskBytes += s.sizes[c]
						ph.DiskBytes += s.sizes[c]
					} else {
						er.BackendBytes += s.store[c]
						ce.BackendBytes += s.store[c]
						ph.BackendBytes += s.store[c]
						er.StoreReads++
						if s.gets != nil {
							er.StoreGETs += int64(s.gets[c])
						}
						d.offer(i, c)
					}
					pinned[i-start] = cc.admit(c)
				}
			}
			for i := start; i < end; i++ {
				if pinned[i-start] {
					cc.release(i, s.trace[i].Chunk)
				}
			}
		}
		var err error
		batches(s.trace, r.start, r.end, batched, func(start, end int) {
			if err != nil {
				return
			}
			if err = s.meter.simulate(end - start); err != nil {
				return
			}
			size := int64(0)
			for i := start; i < end; i++ {
				size += s.sizes[s.trace[i].Chunk]
			}
			if size <= cacheBytes {
				process(start, end)
				return
			}
			// A batch whose chunks do not fit together is pinned a group
			// at a time, by the reader's rule.
			for g := range assembly.Groups(end-start, func(i int) int64 { return s.sizes[s.trace[start+i].Chunk] }, cacheBytes) {
				process(start+g.From, start+g.To)
			}
		})
		if err != nil {
			return Result{}, err
		}
		er.Accesses += r.end - r.start
	}
	res := s.result(p, cacheBytes, slots)
	res.DiskCacheBytes = d.capacity
	if comps != nil {
		res.Components = s.componentResults(comps)
	}
	if phases != nil {
		res.Phases = phaseResults(phases)
	}
	return res, nil
}

// componentResults gathers the per-component, per-slot figures of a run
// over a mixture's trace (one job) into ComponentResults.
func (s *simulator) componentResults(comps [][]EpochResult) []ComponentResult {
	out := make([]ComponentResult, len(comps))
	for i, slots := range comps {
		cr := ComponentResult{Component: i, Epochs: []EpochResult{}}
		for k, er := range slots {
			er.Epoch = int(s.slots[k].epoch)
			er.HitRatio = ratio(er.Hits, er.Accesses)
			cr.Epochs = append(cr.Epochs, er)
			cr.Hits += er.Hits
			cr.Accesses += er.Accesses
			cr.BackendBytes += er.BackendBytes
			cr.DiskBytes += er.DiskBytes
		}
		cr.HitRatio = ratio(cr.Hits, cr.Accesses)
		out[i] = cr
	}
	return out
}

// result gathers the per-slot figures of a run into a Result: per job if
// the trace has several, and per epoch number over all of them.
func (s *simulator) result(p Policy, cacheBytes int64, slots []EpochResult) Result {
	res := Result{Policy: p, CacheBytes: cacheBytes, Epochs: []EpochResult{}}
	var jobs []JobResult
	for i, k := range s.slots {
		er := slots[i]
		er.HitRatio = ratio(er.Hits, er.Accesses)
		if len(jobs) == 0 || jobs[len(jobs)-1].Job != int(k.job) {
			jobs = append(jobs, JobResult{Job: int(k.job)})
		}
		j := &jobs[len(jobs)-1]
		j.Epochs = append(j.Epochs, er)
		j.Hits += er.Hits
		j.Accesses += er.Accesses
		j.BackendBytes += er.BackendBytes
		j.DiskBytes += er.DiskBytes
		at, found := slices.BinarySearchFunc(res.Epochs, er.Epoch, func(e EpochResult, n int) int { return e.Epoch - n })
		if !found {
			res.Epochs = slices.Insert(res.Epochs, at, EpochResult{Epoch: er.Epoch})
		}
		sum := &res.Epochs[at]
		sum.Accesses += er.Accesses
		sum.Hits += er.Hits
		sum.BackendBytes += er.BackendBytes
		sum.DiskBytes += er.DiskBytes
		sum.StoreReads += er.StoreReads
		sum.StoreGETs += er.StoreGETs
	}
	for i := range res.Epochs {
		er := &res.Epochs[i]
		er.HitRatio = ratio(er.Hits, er.Accesses)
		res.Hits += er.Hits
		res.Accesses += er.Accesses
		res.BackendBytes += er.BackendBytes
		res.DiskBytes += er.DiskBytes
		res.StoreReads += er.StoreReads
		res.StoreGETs += er.StoreGETs
	}
	res.HitRatio = ratio(res.Hits, res.Accesses)
	if len(jobs) > 1 {
		for i := range jobs {
			jobs[i].HitRatio = ratio(jobs[i].Hits, jobs[i].Accesses)
		}
		res.Jobs = jobs
	}
	return res
}

func ratio(hits, accesses int) float64 {
	if accesses == 0 {
		return 0
	}
	return float64(hits) / float64(accesses)
}
