package buckets

import (
	"fmt"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	clipunit "github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/job/catalog"
)

// memoKey names an epoch's plan: the stream's order, the epoch, the
// job's bucket parameters and its world size (the steps are cut for it).
type memoKey struct {
	s       layout.Stream
	epoch   uint64
	buckets api.Buckets
	world   int
	// staging names a staged pass's cuts (staging.key): its first step
	// in its stream and where each stage starts there.
	staging string
}

// epochPlan is one epoch of a bucket job: each bucket's images in the
// job's order, and the steps from its resume point on.
type epochPlan struct {
	shapes []bucket.Shape
	per    []int // each bucket's batch size a rank
	budget bucket.Budget
	// ids and pos are each bucket's images (sample IDs) in the epoch's
	// order, and their positions in it.
	ids, pos [][]int32
	taken    []int // of each bucket, by the resume point
	from     []int // of each bucket, where the steps' First count from
	steps    []bucket.Step
	// skipped are the steps of the pass before steps: the resume
	// point's (its legs', or a staged job's global steps in the epoch).
	skipped  int
	world    int
	n        int // the epoch's positions
	tooSmall int
	noImage  int
	tooShort int
	// space is a clip bucket job's base clip space (one clip a video, its
	// samples the videos long enough for some bucket); nil for images.
	space *clipunit.ClipSpace
	// staged: a staged job's plan (stages.go), whose buckets are its
	// segments', each with its budget, stage and segment.
	staged    bool
	budgets   []bucket.Budget
	stageFrom []uint64 // the global step its stage starts at
	segOf     []int    // its segment of the pass
	segs      int      // the segments served
}

// budgetOf is bucket b's budget: its segment's, for a staged job.
func (p *epochPlan) budgetOf(b int) bucket.Budget {
	if p.budgets != nil {
		return p.budgets[b]
	}
	return p.budget
}

// plan returns (memoised) the plan of an epoch of job over ds, whose
// base order is e.
func (pl *planner) plan(ds *catalog.Dataset, job api.Job, epoch uint64, e *layout.EpochOrder) (*epochPlan, error) {
	return pl.planOf(ds, job, layout.StreamOf(ds, job), epoch, e)
}

// planOf is plan of stream s's order (a mixture's component stream: its
// window the job's split by weight). A staged job's epoch is cut where
// its stages start, its global steps counted over the epochs before it
// (stepsBefore).
func (pl *planner) planOf(ds *catalog.Dataset, job api.Job, s layout.Stream, epoch uint64, e *layout.EpochOrder) (*epochPlan, error) {
	cuts, err := pl.cutsOf(ds, job, epoch)
	if err != nil {
		return nil, err
	}
	if !job.Buckets.Staged() && cuts == nil {
		return pl.memoPlan(ds, job, s, epoch, e, nil, 0)
	}
	stages, err := job.Buckets.Stages()
	if err != nil {
		return nil, err
	}
	st := staging{stages: stages, starts: make([]uint64, len(stages))}
	for k, x := range stages {
		st.starts[k] = x.From
	}
	var first uint64
	var taken uint64 // a staged job's global steps its resume point took
	if job.Buckets.Staged() {
		// A staged job's resume point names the worlds of its global
		// steps from its first, across its epochs, as a bucketed
		// mixture's does: each epoch is laid out at those worlds, so
		// that its stages start at the steps they name whatever world a
		// run resumes at.
		legs, err := bucket.ParseResume(job.Buckets.Resume)
		if err != nil {
			return nil, err
		}
		var at uint64
		for _, l := range legs {
			if k := len(st.worlds); k == 0 || st.worlds[k-1].world != l.World {
				st.worlds = append(st.worlds, worldCut{at: at, world: l.World})
			}
			at += uint64(l.Steps)
		}
		if k := len(st.worlds); k == 0 || st.worlds[k-1].world != max(job.World, 1) {
			st.worlds = append(st.worlds, worldCut{at: at, world: max(job.World, 1)})
		}
		taken = at
		if first, err = pl.stepsBefore(ds, job, s, epoch, st); err != nil {
			return nil, err
		}
	}
	st.cuts = cuts
	p, err := pl.memoPlan(ds, job, s, epoch, e, &st, first)
	if err != nil || taken <= first {
		return p, err
	}
	// The steps of the epoch after those the resume point took.
	v := *p
	v.skipped = int(min(taken-first, uint64(len(p.steps))))
	v.steps = p.steps[v.skipped:]
	return &v, nil
}

// memoPlan is the plan of an epoch (or pass) of job over stream s:
// memoised, made as an unstaged job's (st nil) or a staged one's whose
// pass starts at its stream's step first.
func (pl *planner) memoPlan(ds *catalog.Dataset, job api.Job, s layout.Stream, epoch uint64, e *layout.EpochOrder, st *staging, first uint64) (*epochPlan, error) {
	k := memoKey{s: s.Order(), epoch: epoch, buckets: job.Buckets, world: max(job.World, 1)}
	if st != nil {
		k.staging = st.key(first)
	}
	if p, ok := pl.memo.Get(k); ok {
		return p, nil
	}
	var p *epochPlan
	var err error
	if st != nil {
		p, err = pl.makeStaged(ds, job, s, epoch, e, *st, first)
	} else {
		p, err = pl.makePlan(ds, job, s, epoch, e)
	}
	if err != nil {
		return nil, err
	}
	pl.memo.Add(k, p)
	return p, nil
}

// stepsBefore is a staged job's global steps before epoch epoch: the
// steps of every epoch before it, at the request's world from their
// starts (a resume point's legs are the request's epoch's). Once they
// reach the last stage's start the count goes no further: every later
// step is of the last stage.
func (pl *planner) stepsBefore(ds *catalog.Dataset, job api.Job, s layout.Stream, epoch uint64, st staging) (uint64, error) {
	last := st.starts[len(st.starts)-1]
	whole := job
	whole.Buckets.Resume = ""
	var n uint64
	for e := uint64(0); e < epoch && n < last; e++ {
		eo, err := pl.base.Epoch(s, e)
		if err != nil {
			return 0, err
		}
		if st.cuts, err = pl.cutsOf(ds, whole, e); err != nil {
			return 0, err
		}
		p, err := pl.memoPlan(ds, whole, s, e, eo, &st, n)
		if err != nil {
			return 0, err
		}
		n += uint64(len(p.steps))
	}
	return n, nil
}

func (pl *planner) makePlan(ds *catalog.Dataset, job api.Job, s layout.Stream, epoch uint64, e *layout.EpochOrder) (*epochPlan, error) {
	shapes, budget, per, err := job.Buckets.Shaped()
	if err != nil {
		return nil, err
	}
	p := &epochPlan{shapes: shapes, per: per, budget: budget, world: max(job.World, 1), n: e.NumSamples(),
		ids: make([][]int32, len(shapes)), pos: make([][]int32, len(shapes))}
	order := pl.base.AppendRange(make([]int, 0, p.n), s, e, epoch, 0, p.n)
	up := job.Buckets.Upscale()
	assign, err := pl.kindOf(job).assigner(ds, job, shapes, p)
	if err != nil {
		return nil, err
	}
	firstBad := -1
	for pos, id := range order {
		b, fit, err := assign(id)
		if err != nil {
			return nil, err
		}
		switch fit {
		case bucket.NoImage:
			p.noImage++
		case bucket.TooSmall:
			p.tooSmall++
		case bucket.TooShort:
			p.tooShort++
		}
		if fit != bucket.Fits {
			firstBad = firstOf(firstBad, id)
			continue
		}
		p.ids[b] = append(p.ids[b], int32(id))
		p.pos[b] = append(p.pos[b], int32(pos))
	}
	if job.Buckets.Fails() && (firstBad >= 0 || p.tooShort > 0) {
		first := ""
		if firstBad >= 0 {
			first = fmt.Sprintf(" (the first: %s)", pl.kindOf(job).name(ds, p, firstBad))
		}
		return nil, fmt.Errorf("%w: epoch %d of dataset %s: %d samples would be scaled up by more than %g to cover their bucket, %d have no image and %d videos are too short for every bucket's frames%s; small=skip leaves them out",
			ErrFitsNone, epoch, ds.Name, p.tooSmall, up, p.noImage, p.tooShort, first)
	}
	counts := make([]int, len(shapes))
	for b := range shapes {
		counts[b] = len(p.ids[b])
	}
	legs, err := bucket.ParseResume(job.Buckets.Resume)
	if err != nil {
		return nil, err
	}
	// The steps from the resume point are the uninterrupted run's
	// (bucket.Resume): a job resumed at the world it stopped at serves
	// the steps it would have served.
	if p.from, p.steps, p.taken, err = bucket.Resume(counts, per, legs, p.world, job.Seed, epoch); err != nil {
		return nil, err
	}
	for _, l := range legs {
		p.skipped += l.Steps
	}
	if len(p.steps) == 0 && len(legs) == 0 {
		// Not one step: every bucket holds fewer samples than a step of
		// it takes. An epoch of no batch is no run to start.
		return nil, fmt.Errorf("%w: epoch %d of dataset %s has no step: %s", ErrFitsNone, epoch, ds.Name, p.short(shapes, counts))
	}
	return p, nil
}

func firstOf(first, id int) int {
	if first < 0 {
		return id
	}
	return first
}

// info is the plan's figures for /epoch/N.
func (p *epochPlan) info(job api.Job) *api.BucketsInfo {
	in := &api.BucketsInfo{Budget: p.budget.Limit(), Unit: p.budget.Unit(), Resume: job.Buckets.Resume,
		TooSmall: p.tooSmall, NoImage: p.noImage, TooShort: p.tooShort, MaxUpscale: job.Buckets.Upscale()}
	batches := make([]int, len(p.shapes))
	for _, st := range p.steps {
		batches[st.Bucket]++
	}
	fill := 0.0
	for b, sh := range p.shapes {
		f := p.budgetOf(b).Fill(sh, p.per[b])
		served := batches[b] * p.per[b] * p.world
		bi := api.BucketInfo{Shape: sh.String(), Samples: len(p.ids[b]), Taken: p.taken[b], Batches: batches[b],
			BatchSize: p.per[b], Dropped: len(p.ids[b]) - p.taken[b] - served, Fill: f}
		if p.staged {
			from := p.stageFrom[b]
			bi.Stage = &from
			if p.segOf[b] != p.segOf[len(p.segOf)-1] {
				bi.Dropped = 0 // left to the next stage
			}
		}
		in.Buckets = append(in.Buckets, bi)
		fill += f * float64(batches[b])
	}
	if len(p.steps) > 0 {
		in.Fill = fill / float64(len(p.steps))
	}
	if p.staged && !job.Buckets.Staged() {
		in.Buckets = p.merged(in.Buckets)
	}
	return in
}

// merged are the buckets of a plan cut by edits alone (edits.go), one
// list's segments one after another, as the job's one list: each
// bucket's steps over the epoch, its samples those it served and those
// its last segment left (Dropped).
func (p *epochPlan) merged(segs []api.BucketInfo) []api.BucketInfo {
	if len(segs) == 0 {
		return segs // no step served from the resume point
	}
	last := p.segOf[len(p.segOf)-1]
	var out []api.BucketInfo
	for b, bi := range segs {
		if p.segOf[b] != p.segOf[0] {
			break
		}
		bi.Stage, bi.Samples = nil, 0
		out = append(out, bi)
	}
	for b, bi := range segs {
		k := b % len(out)
		served := bi.Batches * bi.BatchSize * p.world
		if p.segOf[b] == last {
			served = bi.Samples // and its last partial global batch, dropped
			out[k].Dropped = bi.Dropped
		}
		if p.segOf[b] != p.segOf[0] {
			out[k].Batches += bi.Batches
		}
		out[k].Samples += served
	}
	return out
}

// short says why no bucket makes a step: each bucket's samples and what
// a step of it takes (its batch size a rank times the world).
func (p *epochPlan) short(shapes []bucket.Shape, counts []int) string {
	var b strings.Builder
	for i, sh := range shapes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "bucket %s holds %d, a step takes %d", sh, counts[i], p.per[i]*p.world)
	}
	b.WriteString(" (a budget that holds fewer samples a rank, or a smaller world, makes steps)")
	return b.String()
}
