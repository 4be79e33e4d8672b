package planner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/brandgw/brand/importance"
)

// MaxSharedJobs bounds the jobs of a shared plan: a gateway follows at most
// 64 job streams (internal/cache/usetable), so a plan of more describes a cache
// no gateway runs.
const MaxSharedJobs = 64

// SharedJob is one of several jobs that read one dataset through one
// gateway's cache: its schedule, how fast it reads relative to the others,
// and when it starts.
//
// Time is counted in epochs of a job of speed 1: a job of Speed s reads an
// epoch in 1/s units, and one with Start t sends its first batch at time t.
// Jobs whose batches fall at the same time are served in the order given.
type SharedJob struct {
	Job
	Name  string  `json:"name,omitempty"`
	Speed float64 `json:"speed"` // > 0; 0 means 1
	Start float64 `json:"start"` // >= 0
}

// speed is j's speed, 1 if unset.
func (j SharedJob) speed() float64 {
	if j.Speed == 0 {
		return 1
	}
	return j.Speed
}

func validateShared(d Dataset, jobs []SharedJob) ([]*schedule, error) {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case len(jobs) == 0:
		return nil, fmt.Errorf("%w: no jobs", ErrInvalid)
	case len(jobs) > MaxSharedJobs:
		return nil, fmt.Errorf("%w: %d jobs; at most %d share a gateway's schedule", ErrInvalid, len(jobs), MaxSharedJobs)
	}
	out := make([]*schedule, len(jobs))
	for i, j := range jobs {
		switch {
		case !finite(j.Speed) || j.Speed < 0:
			return nil, fmt.Errorf("%w: job %d: speed %v; must be a finite number > 0 (0: 1)", ErrInvalid, i, j.Speed)
		case !finite(j.Start) || j.Start < 0:
			return nil, fmt.Errorf("%w: job %d: start %v; must be a finite number >= 0", ErrInvalid, i, j.Start)
		}
		s, err := newSchedule(d, j.Job)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		out[i] = s
	}
	return out, nil
}

// SharedTrace returns the demand trace a gateway sees when jobs read d
// through it at once: each job's global batches (as Trace gives them),
// timed by the job's speed and start, merged in time order. Every access
// carries its job's index in jobs (Access.Job), so a simulation of the
// trace reports each job's figures (Result.Jobs).
//
// The model is the one of Trace, extended in time: each job's batches are
// evenly spaced through its epochs, and a batch's chunks are pinned while
// it is served, one batch at a time. A live gateway overlaps the batches of
// different jobs; the figures of a simulation are those of a gateway that
// serves them one after another in the order they arrive.
func SharedTrace(d Dataset, jobs []SharedJob) ([]Access, error) {
	scheds, err := validateShared(d, jobs)
	if err != nil {
		return nil, err
	}
	merged, _, err := sharedTrace(nil, scheds, jobs)
	return merged, err
}

// sharedTrace returns the merged trace of jobs, whose schedules
// validateShared returned, and each job's own trace, counting on m.
func sharedTrace(m *meter, scheds []*schedule, jobs []SharedJob) (merged []Access, each [][]Access, err error) {
	type batch struct {
		at         float64
		job        int
		start, end int // in the job's trace
	}
	traces := make([][]Access, len(jobs))
	var batches []batch
	total := 0
	for i, s := range scheds {
		t, err := s.trace(m, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		traces[i] = t
		total += len(t)
		// Batch k of the job's e-th epoch is served at e + k/(the epoch's
		// batches) epochs from its start: an epoch a job's edits make
		// shorter or longer takes its own batches' time.
		sizes, err := s.epochSizes()
		if err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		k, epoch := 0, int32(-1)
		for a := 0; a < len(t); {
			b := a + 1
			for b < len(t) && !t[b].Start {
				b++
			}
			if t[a].Epoch != epoch {
				k, epoch = 0, t[a].Epoch
			}
			e := int(epoch) - s.j.FirstEpoch
			nb := float64(sizes[e].Batches)
			batches = append(batches, batch{at: jobs[i].Start + (float64(e)*nb+float64(k))/(nb*jobs[i].speed()), job: i, start: a, end: b})
			k++
			a = b
		}
	}
	slices.SortStableFunc(batches, func(a, b batch) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return a.job - b.job
	})
	if err := m.trace(total); err != nil {
		return nil, nil, err
	}
	out := make([]Access, 0, total)
	for _, b := range batches {
		for _, a := range traces[b.job][b.start:b.end] {
			a.Job = uint16(b.job)
			out = append(out, a)
		}
	}
	return out, traces, nil
}

// SharedInput is what MakeSharedPlan plans for: several jobs reading one
// dataset through one cache of CacheBytes.
type SharedInput struct {
	Dataset    Dataset
	Jobs       []SharedJob
	CacheBytes int64 // >= 0

	// Budget bounds the plan's work; zero is no bound.
	Budget Budget
}

// SharedPlan is MakeSharedPlan's report. Its JSON form is what the
// gateway's POST /plan returns for several jobs; WriteText renders it for
// the CLI.
//
// Reads are counted in datasets per job-epoch: the bytes read from the
// store over all the jobs' epochs, divided by the dataset's size in the
// store (DatasetStoreBytes, else DatasetBytes) and by the number of
// job-epochs. A job alone with a cache of the whole dataset
// reads 1 in its first epoch and 0 after; jobs that share nothing read 1
// each; jobs that share perfectly read 1/J in all.
type SharedPlan struct {
	Jobs         []SharedJob `json:"jobs"`
	Chunks       int         `json:"chunks"`
	Samples      int         `json:"samples"`
	CacheBytes   int64       `json:"cache_bytes"`
	DatasetBytes int64       `json:"dataset_bytes"`
	// DatasetStoreBytes is the dataset's bytes in the store, as in Plan:
	// the backend bytes below are store sizes; absent (0) when it is
	// DatasetBytes.
	DatasetStoreBytes int64 `json:"dataset_store_bytes,omitempty"`
	JobEpochs         int   `json:"job_epochs"`

	// LRU and Optimal are the merged trace under LRU and under Belady's
	// next-use rule over every job's future: what the gateway's schedule
	// policy aims at. Each has its figures per job.
	LRU     Result `json:"lru"`
	Optimal Result `json:"optimal"`
	// Partitioned is each job alone with an equal share of the cache
	// (CacheBytes / jobs) under Belady: what a cache that divides its
	// room among jobs achieves at best, without sharing a chunk.
	Partitioned Result `json:"partitioned"`

	// Reads per job-epoch under each, as defined above.
	LRUReads         float64 `json:"lru_reads_per_job_epoch"`
	OptimalReads     float64 `json:"optimal_reads_per_job_epoch"`
	PartitionedReads float64 `json:"partitioned_reads_per_job_epoch"`
	// WindowBytes is, over the jobs, the sum of each one's largest window:
	// what the jobs pin at once when every one is inside a window. A cache
	// below it serves some batches in parts.
	WindowBytes int64 `json:"window_bytes"`
}

// MakeSharedPlan simulates the jobs' merged trace (SharedTrace) at
// in.CacheBytes under LRU and under Belady, and each job alone with an
// equal share of the cache. It costs a trace per job and two simulations
// of their merge, and one of each job's trace. Its errors are MakePlan's.
func MakeSharedPlan(ctx context.Context, in SharedInput) (*SharedPlan, error) {
	m := newMeter(ctx, in.Budget)
	if in.CacheBytes < 0 {
		return nil, fmt.Errorf("%w: cache size %d bytes; must be >= 0", ErrInvalid, in.CacheBytes)
	}
	scheds, err := validateShared(in.Dataset, in.Jobs)
	if err != nil {
		return nil, err
	}
	var walk, batches int64
	for _, s := range scheds {
		epochs := int64(s.j.Epochs)
		walk += epochs * int64(s.n)
		batches += 2 * epochs * int64(s.numBatches()) // its trace, and its part of the merge
	}
	if err := m.admit(walk, batches); err != nil {
		return nil, err
	}
	trace, each, err := sharedTrace(m, scheds, in.Jobs)
	if err != nil {
		return nil, err
	}
	p := &SharedPlan{Jobs: in.Jobs, Chunks: len(in.Dataset.Counts), CacheBytes: in.CacheBytes}
	for _, c := range in.Dataset.Counts {
		p.Samples += c
	}
	p.DatasetBytes, p.DatasetStoreBytes = sum(in.Dataset.ChunkSizes), in.Dataset.storeBytes()
	sim := newSimulator(trace, in.Dataset.ChunkSizes, in.Dataset.StoreSizes, m)
	if p.LRU, err = sim.run(in.CacheBytes, LRU); err != nil {
		return nil, err
	}
	if p.Optimal, err = sim.run(in.CacheBytes, Belady); err != nil {
		return nil, err
	}
	for _, r := range []*Result{&p.LRU, &p.Optimal} {
		everyJob(r, trace, len(in.Jobs))
	}
	p.Partitioned = Result{Policy: Belady, CacheBytes: in.CacheBytes, Epochs: []EpochResult{}}
	share := in.CacheBytes / int64(len(in.Jobs))
	for i, j := range in.Jobs {
		// Each job's own trace is Trace's: the merge only labels copies.
		r, err := newSimulator(each[i], in.Dataset.ChunkSizes, in.Dataset.StoreSizes, m).run(share, Belady)
		if err != nil {
			return nil, err
		}
		p.Partitioned.Jobs = append(p.Partitioned.Jobs, JobResult{Job: i, Epochs: r.Epochs, Hits: r.Hits, Accesses: r.Accesses, HitRatio: r.HitRatio, BackendBytes: r.BackendBytes})
		p.Partitioned.Hits += r.Hits
		p.Partitioned.Accesses += r.Accesses
		p.Partitioned.BackendBytes += r.BackendBytes
		p.JobEpochs += j.Epochs
		ws, err := largestWindow(scheds[i])
		if err != nil {
			return nil, err
		}
		p.WindowBytes += ws
	}
	p.Partitioned.HitRatio = ratio(p.Partitioned.Hits, p.Partitioned.Accesses)
	per := func(r Result) float64 {
		return float64(r.BackendBytes) / float64(max(p.storeBytes(), 1)) / float64(max(p.JobEpochs, 1))
	}
	p.LRUReads, p.OptimalReads, p.PartitionedReads = per(p.LRU), per(p.Optimal), per(p.Partitioned)
	return p, nil
}

// everyJob gives r, a simulation of trace, its figures for each of n
// jobs, in their order: a simulation names jobs only when it sees
// several, and sees none of a job of no batches (drop_last and fewer
// samples than one global batch), which reads nothing.
func everyJob(r *Result, trace []Access, n int) {
	if len(r.Jobs) == 0 && len(trace) > 0 {
		r.Jobs = []JobResult{{Job: int(trace[0].Job), Epochs: r.Epochs, Hits: r.Hits, Accesses: r.Accesses, HitRatio: r.HitRatio,
			BackendBytes: r.BackendBytes, DiskBytes: r.DiskBytes}}
	}
	jobs := make([]JobResult, n)
	for i := range jobs {
		jobs[i] = JobResult{Job: i, Epochs: []EpochResult{}}
	}
	for _, j := range r.Jobs {
		jobs[j.Job] = j
	}
	r.Jobs = jobs
}

// JobReads is job i's reads per epoch in r, in datasets.
func (p *SharedPlan) JobReads(r Result, i int) float64 {
	if i >= len(r.Jobs) || i >= len(p.Jobs) {
		return 0
	}
	return float64(r.Jobs[i].BackendBytes) / float64(max(p.storeBytes(), 1)) / float64(max(p.Jobs[i].Epochs, 1))
}

// storeBytes is the dataset's bytes in the store: DatasetStoreBytes, or
// DatasetBytes for a dataset without store sizes.
func (p *SharedPlan) storeBytes() int64 {
	if p.DatasetStoreBytes == 0 {
		return p.DatasetBytes
	}
	return p.DatasetStoreBytes
}

// largestWindow is the bytes of the largest window of s's first epoch:
// windows are cut from a shuffled chunk order, so every epoch's largest is
// about the same.
func largestWindow(s *schedule) (int64, error) {
	var most int64
	ep, err := importance.NewOrder(s.spec(s.j.FirstEpoch, s.j.Window))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for w := range ep.NumWindows() {
		var b int64
		for _, c := range ep.WindowChunks(w) {
			if s.d.Counts[c] > 0 { // a chunk with no samples is never read nor pinned
				b += s.d.ChunkSizes[c]
			}
		}
		most = max(most, b)
	}
	return most, nil
}
