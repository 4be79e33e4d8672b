package buckets

import (
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
)

// A staged bucket job (api.Buckets.Stages: buckets=, budget= or
// budget_tokens= of STEP@VALUE|…) changes its buckets and budget at
// stated global steps, counted from the job's first step across its
// epochs (a bucketed mixture's: its source's steps among the mixture's
// global steps, counted by the mixture's rule; Components). A pass
// (an epoch of the job's order; a source's pass in a mixture) is cut
// where a stage starts into segments: each segment's images are those
// the steps before it left, bucketed by its stage's list, their steps
// interleaved by its budget's batch sizes (bucket.Steps) — so a stage
// change never serves an image twice in a pass, nor loses one. A
// resume point's legs (another world) cut the pass too, as in an
// unstaged job. The plan's buckets are its segments' buckets one after
// another (each segment's its own, numbered on), so that a step is laid
// out as an unstaged job's is.

// run is a run of a pass's steps at one world: a leg of the resume
// point (steps of them), or the request's (steps -1: to the pass's end),
// of which the first skip are not served (a leg at the request's world
// before it, which it continues: the uninterrupted run's steps).
type run struct {
	steps, world, skip int
	served             bool
}

// staging is how a pass's steps are cut: the job's stages, and where
// each starts in the pass's steps counted from the stream's first
// (stageAt).
type staging struct {
	stages []api.BucketStage
	// starts[k] is the stream's steps before stage k starts (starts[0]
	// is 0): the global step of a job of one dataset, a source's count
	// of the mixture's steps before it.
	starts []uint64
	// worlds are, for a source of a bucketed mixture resumed at another
	// world, where each world of its steps starts in its stream (the
	// first at 0; the request's the last), and its passes are cut there;
	// nil for a job of one dataset, whose epoch's legs are its resume
	// point's.
	worlds []worldCut
	// cuts are, for a pass its job's edits cut (edits.go), its orders
	// and where each starts; nil for none.
	cuts *passCuts
}

// A worldCut is where a world of a stream's steps starts.
type worldCut struct {
	at    uint64
	world int
}

// worldAt is the world of the stream's step x, and the steps until the
// next world starts (-1: none does).
func (s staging) worldAt(x uint64) (world, left int) {
	for k := len(s.worlds) - 1; k >= 0; k-- {
		if s.worlds[k].at <= x {
			if k+1 < len(s.worlds) {
				return s.worlds[k].world, int(s.worlds[k+1].at - x)
			}
			return s.worlds[k].world, -1
		}
	}
	return s.worlds[0].world, -1
}

// key names the cuts of a pass starting at its stream's step first.
func (s staging) key(first uint64) string {
	k := fmt.Sprint(first, s.starts, s.worlds)
	if s.cuts != nil {
		k += "|cuts=" + s.cuts.key
	}
	return k
}

// stageAt is the stage in force at the stream's step x, and the steps
// until the next stage starts (-1: none does).
func (s staging) stageAt(x uint64) (stage, left int) {
	for k := len(s.starts) - 1; k >= 0; k-- {
		if s.starts[k] <= x {
			if k+1 < len(s.starts) {
				return k, int(s.starts[k+1] - x)
			}
			return k, -1
		}
	}
	return 0, -1
}

// makeStaged is makePlan for a staged job: the pass's steps from the
// stream's step first, at world world, after the resume point's legs
// (which apply to a job of one dataset).
func (pl *planner) makeStaged(ds *catalog.Dataset, job api.Job, s layout.Stream, epoch uint64, e *layout.EpochOrder, st staging, first uint64) (*epochPlan, error) {
	world := max(job.World, 1)
	p := &epochPlan{world: world, n: e.NumSamples(), staged: true}
	var order []int
	ids := p.n // a bound on the orders' sample IDs
	if st.cuts != nil {
		order, ids = st.cuts.orders[0], st.cuts.ids
	} else {
		order = pl.base.AppendRange(make([]int, 0, p.n), s, e, epoch, 0, p.n)
		for _, id := range order {
			ids = max(ids, id+1)
		}
	}
	legs, err := bucket.ParseResume(job.Buckets.Resume)
	if err != nil {
		return nil, err
	}
	// The pass's runs: the legs' worlds (one run a world in a row), then
	// the request's, which continues a leg at its world before it; or a
	// mixture's source's worlds, every step of its pass laid out (its
	// items of the steps at the request's world are asked).
	var runs []run
	if st.worlds != nil {
		legs = nil
		for at := first; ; {
			w, left := st.worldAt(at)
			runs = append(runs, run{steps: left, world: w, served: true})
			if left < 0 {
				break
			}
			at += uint64(left)
		}
	}
	for _, l := range legs {
		p.skipped += l.Steps
		if k := len(runs); k > 0 && runs[k-1].world == l.World {
			runs[k-1].steps += l.Steps
			continue
		}
		runs = append(runs, run{steps: l.Steps, world: l.World})
	}
	if st.worlds == nil {
		last := run{steps: -1, world: world, served: true}
		if k := len(runs); k > 0 && runs[k-1].world == world {
			last.skip = runs[k-1].steps
			runs = runs[:k-1]
		}
		runs = append(runs, last)
	}
	taken := make([]bool, ids) // by sample ID
	at := first                // the stream's step
	for ri, r := range runs {
		left, done := r.steps, 0
		for left != 0 {
			stage, toNext := st.stageAt(at)
			if st.cuts != nil {
				// The order in force at the pass's step: an edit's from
				// its step on.
				var toCut int
				order, toCut = st.cuts.orderAt(int(at - first))
				p.n = len(order)
				if toCut >= 0 && (toNext < 0 || toCut < toNext) {
					toNext = toCut
				}
			}
			n := left
			if toNext >= 0 && (n < 0 || toNext < n) {
				n = toNext
			}
			skip := -1 // served from its step skip on (-1: none)
			if r.served {
				skip = max(r.skip-done, 0)
			}
			took, err := pl.segment(ds, job, p, st.stages[stage], order, taken, epoch, r.world, n, skip, at == first)
			if err != nil {
				return nil, err
			}
			at += uint64(took)
			done += took
			if left > 0 {
				left -= took
			}
			if took < n || n < 0 {
				break // the pass's images are all taken
			}
		}
		if left > 0 && st.worlds == nil {
			return nil, fmt.Errorf("%w: leg %d of the resume point takes %d steps at world %d, where %d remain", bucket.ErrSpec, ri+1, r.steps, r.world, done)
		}
		if left > 0 {
			break // the pass ended within the run: the next pass goes on
		}
		if r.served && r.skip > done {
			return nil, fmt.Errorf("%w: the resume point's last leg takes %d steps at world %d, where %d remain", bucket.ErrSpec, r.skip, r.world, done)
		}
	}
	if len(p.steps) == 0 && len(legs) == 0 {
		return nil, fmt.Errorf("%w: epoch %d of dataset %s has no step: no stage's buckets hold a step's images (a budget that holds fewer samples a rank, or a smaller world, makes steps)", ErrFitsNone, epoch, ds.Name)
	}
	return p, nil
}

// segment adds to p a segment of at most n steps (n < 0: as many as
// its images make) of the pass's images not yet taken (of its order
// order, taken by sample ID), bucketed by stage st's list at world
// world: its buckets (numbered after p's), and its steps from step skip
// on (skip < 0: none, a leg's). It returns how many steps it took, and
// marks their images taken. first: the pass's first segment, whose
// images that fit no bucket are counted in p.
func (pl *planner) segment(ds *catalog.Dataset, job api.Job, p *epochPlan, st api.BucketStage, order []int, taken []bool, epoch uint64, world, n, skip int, first bool) (int, error) {
	b := st.B
	shapes, budget, per, err := b.Shaped()
	if err != nil {
		return 0, err
	}
	sj := job
	sj.Buckets = b
	seg := &epochPlan{world: world}
	assign, err := pl.kindOf(sj).assigner(ds, sj, shapes, seg)
	if err != nil {
		return 0, err
	}
	if p.space == nil {
		p.space = seg.space
	}
	ids, pos := make([][]int32, len(shapes)), make([][]int32, len(shapes))
	for at, id := range order {
		if taken[id] {
			continue
		}
		bk, fit, err := assign(id)
		if err != nil {
			return 0, err
		}
		if first {
			switch fit {
			case bucket.NoImage:
				p.noImage++
			case bucket.TooSmall:
				p.tooSmall++
			}
		}
		if fit != bucket.Fits {
			if b.Fails() && fit != bucket.TooShort {
				return 0, fmt.Errorf("%w: epoch %d of dataset %s: a sample fits no bucket of the stage from step %d (the first: %s); small=skip leaves such samples out",
					ErrFitsNone, epoch, ds.Name, st.From, pl.kindOf(sj).name(ds, seg, id))
			}
			continue
		}
		ids[bk] = append(ids[bk], int32(id))
		pos[bk] = append(pos[bk], int32(at))
	}
	if first {
		p.tooShort = seg.tooShort
	}
	counts := make([]int, len(shapes))
	for k := range shapes {
		counts[k] = len(ids[k])
	}
	steps := bucket.Steps(counts, per, world, job.Seed, epoch)
	if n >= 0 && len(steps) > n {
		steps = steps[:n]
	}
	for _, s := range steps {
		k := per[s.Bucket] * world
		for j := s.First; j < s.First+k; j++ {
			taken[ids[s.Bucket][j]] = true
		}
	}
	if skip >= 0 && skip < len(steps) {
		off := len(p.shapes)
		for k, sh := range shapes {
			p.shapes = append(p.shapes, sh)
			p.per = append(p.per, per[k])
			p.budgets = append(p.budgets, budget)
			p.stageFrom = append(p.stageFrom, st.From)
			p.segOf = append(p.segOf, p.segs)
			p.ids = append(p.ids, ids[k])
			p.pos = append(p.pos, pos[k])
			p.from = append(p.from, 0)
			p.taken = append(p.taken, 0)
		}
		p.budget = budget
		for _, s := range steps[skip:] {
			p.steps = append(p.steps, bucket.Step{Bucket: off + s.Bucket, First: s.First})
		}
		p.segs++
	}
	return len(steps), nil
}
