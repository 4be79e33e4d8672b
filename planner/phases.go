package planner

import (
	"sort"
)

// PhaseResult is one phase's share of a Result over a schedule's trace
// (Plan.Mix.Phases, in the same order): the accesses of the global
// batches whose step falls in the phase, and what the cache's misses
// among them read.
type PhaseResult struct {
	Phase        int     `json:"phase"` // its index in Plan.Mix.Phases
	Accesses     int     `json:"accesses"`
	Hits         int     `json:"hits"`
	HitRatio     float64 `json:"hit_ratio"`
	BackendBytes int64   `json:"backend_bytes"`
	DiskBytes    int64   `json:"disk_bytes,omitempty"`
}

// phaseTags tells, for a schedule's plan, the phase of each global batch
// the walk of its simulated epochs visits, in the walk's order, and keeps
// each phase's working set: the largest of the batches' working sets
// (mixWorkingSet) in it. A batch's phase is that of its step, the
// mixing block it starts in, numbered across epochs as the schedule
// numbers them.
type phaseTags struct {
	ms    *mixSchedule
	from  []uint64 // each phase's first step, ascending
	nb    int      // global batches an epoch
	batch int      // the batches visited so far
	most  []int64  // per phase: its working set
}

func newPhaseTags(ms *mixSchedule) *phaseTags {
	ph := ms.sched.Phases()
	t := &phaseTags{ms: ms, from: make([]uint64, len(ph)), nb: ms.merged.numBatches(), most: make([]int64, len(ph))}
	for n, p := range ph {
		t.from[n] = p.Step
	}
	return t
}

// of returns the phase of the k-th global batch of the simulated epochs.
func (t *phaseTags) of(k int) int {
	e, b := t.ms.j.FirstEpoch+k/t.nb, k%t.nb
	start, _, err := t.ms.merged.cut().GlobalBatch(t.ms.merged.n, b)
	if err != nil {
		return 0 // the walk refused this batch first
	}
	step := uint64(e)*uint64(t.ms.sched.EpochBlocks()) + uint64(start/t.ms.sched.Block())
	return sort.Search(len(t.from), func(n int) bool { return t.from[n] > step }) - 1
}

// add counts the next batch's working set, ws's after it took the
// batch's spans, toward its phase's.
func (t *phaseTags) add(ws *mixWorkingSet) {
	n := t.of(t.batch)
	t.batch++
	t.most[n] = max(t.most[n], ws.bytes)
}

// accesses returns the phase of every access of trace, a trace of the
// walk's batches (each batch's first access marked Start).
func (t *phaseTags) accesses(trace []Access) []uint16 {
	out := make([]uint16, len(trace))
	k, n := -1, 0
	for i, a := range trace {
		if a.Start {
			k++
			n = t.of(k)
		}
		out[i] = uint16(n)
	}
	return out
}

// byPhase makes every run count its figures per phase too
// (Result.Phases): access i is of phase tags[i], of n phases.
func (s *simulator) byPhase(tags []uint16, n int) {
	s.phase, s.nphase = tags, n
}

// phaseResults finishes the per-phase figures of a run.
func phaseResults(phases []PhaseResult) []PhaseResult {
	for n := range phases {
		phases[n].Phase = n
		phases[n].HitRatio = ratio(phases[n].Hits, phases[n].Accesses)
	}
	return phases
}
