package buckets

import (
	"context"
	"fmt"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	clipunit "github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// A bucketed mixture (mix= or mix_schedule= with buckets=) is a mixture
// of steps: every global step is one bucket of one source, the sources'
// shares of the steps held to their weights (docs/shuffle.md §11, the
// mixture's rule over blocks of one step) and each source's buckets'
// shares of its steps to their batches (bucket.Steps). Each source is a
// component whose passes are its dataset's bucket epochs, at the job's
// world: a pass's items are its steps' ranks' batches, a step's world
// items consecutive (Stepped), so that the mixture, which draws a
// component for each step, gives every rank its batch of the step. An
// image source buckets its images by their sizes, a video source its
// videos' clips (a list of HxW, a list of HxWxT: buckets=NAME:LIST;...
// names each source's, api.Buckets.For); a batch is either kind, made by
// that kind's stage.

// Stepped: a mixture of bucket jobs mixes whole steps.
func (*Unit) Stepped() bool { return true }

// Resumed is a bucketed mixture's steps its resume point took: its legs'
// (resume=WORLD:STEPS,…, the job's global steps from its first, at each
// world in turn).
func (*Unit) Resumed(job api.Job) (int, error) {
	legs, err := bucket.ParseResume(job.Buckets.Resume)
	n := 0
	for _, l := range legs {
		n += l.Steps
	}
	return n, err
}

// Components is each of ds as a bucketed mixture's component: the job as
// the source takes it (its own list, its clip parameters), bucketed by
// its kind.
func (u *Unit) Components(ds []*catalog.Dataset, job api.Job) ([]mixture.Component, func() (layout.Content, error), error) {
	legs, err := bucket.ParseResume(job.Buckets.Resume)
	if err != nil {
		return nil, nil, err
	}
	comps := make([]mixture.Component, len(ds))
	var counts func(step uint64) ([]uint64, error)
	if job.Buckets.Staged() || len(legs) > 0 {
		if counts, err = stepCounts(job, len(ds)); err != nil {
			return nil, nil, err
		}
	}
	// A resumed run's worlds, in global steps: the legs', then the
	// request's.
	type worldAt struct {
		step  uint64
		world int
	}
	var worlds []worldAt
	var at uint64
	for _, l := range legs {
		if n := len(worlds); n == 0 || worlds[n-1].world != l.World {
			worlds = append(worlds, worldAt{at, l.World})
		}
		at += uint64(l.Steps)
	}
	if w := max(job.World, 1); len(worlds) > 0 && worlds[len(worlds)-1].world != w {
		worlds = append(worlds, worldAt{at, w})
	}
	for i, d := range ds {
		own, err := u.sourceJob(d, job)
		if err != nil {
			return nil, nil, err
		}
		c := &component{u: u, ds: d, job: own, kind: u.kindOf(own)}
		if len(worlds) > 0 {
			c.first = worlds[0].world
		}
		if own.Buckets.Staged() || len(worlds) > 0 {
			stages, err := own.Buckets.Stages()
			if err != nil {
				return nil, nil, err
			}
			c.st = &staging{stages: stages, starts: make([]uint64, len(stages))}
			for k, x := range stages {
				n, err := counts(x.From)
				if err != nil {
					return nil, nil, err
				}
				c.st.starts[k] = n[i]
			}
			for _, w := range worlds {
				n, err := counts(w.step)
				if err != nil {
					return nil, nil, err
				}
				c.st.worlds = append(c.st.worlds, worldCut{at: n[i], world: w.world})
			}
		}
		comps[i] = c
	}
	return comps, func() (layout.Content, error) { return &mixBatch{}, nil }, nil
}

// stepCounts returns, for a staged bucketed mixture job of k sources,
// how many of the mixture's steps before a global step each source
// takes: the mixture's rule over blocks of one step (docs/shuffle.md
// §11.2; §11.9 for a schedule's weights), counted from the job's first
// step across its epochs. A mixture of weights too fine to count across
// epochs without their length (its counts restart every epoch) is
// refused.
func stepCounts(job api.Job, k int) (func(step uint64) ([]uint64, error), error) {
	ones := make([]shuffle.Passes, k)
	sizes := make([]int, k)
	for i := range k {
		ones[i], sizes[i] = shuffle.EqualPasses(1), 1
	}
	// Over passes of one step each, where a view of one step starts a
	// source's stream is its count of steps before it.
	at := func(m *shuffle.Mixture, step uint64) []uint64 {
		out := make([]uint64, k)
		for i := range k {
			out[i] = m.Start(i, step).Pass
		}
		return out
	}
	if len(job.Schedule) > 0 {
		phases, err := job.Schedule.Phases()
		if err != nil {
			return nil, err
		}
		s, err := shuffle.NewSchedule(phases, ones, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(step uint64) ([]uint64, error) {
			m, err := s.Epoch(step)
			if err != nil {
				return nil, err
			}
			return at(m, step), nil
		}, nil
	}
	weights, err := job.Mix.IntWeights()
	if err != nil {
		return nil, err
	}
	m, err := shuffle.NewMixture(weights, sizes, 1, 1)
	if err != nil {
		return nil, err
	}
	if m.Period() > shuffle.MaxMixWork/k {
		// Its counts restart every epoch (docs/shuffle.md §11.2, "Long
		// periods"), so a count before a step depends on the epochs'
		// length.
		return nil, fmt.Errorf("%w: a staged bucketed mixture of weights this fine (their period is over the rule's bound): round them", bucket.ErrSpec)
	}
	return func(step uint64) ([]uint64, error) { return at(m.Epoch(step), step), nil }, nil
}

// sourceJob is job as source ds of a bucketed mixture takes it: its own
// bucket list, and for a video source the clip parameters of its list's
// fewest frames (api.Buckets.ClipOf); a list of the other kind than the
// source's is refused, naming both.
func (u *Unit) sourceJob(ds *catalog.Dataset, job api.Job) (api.Job, error) {
	b, err := job.Buckets.For(ds.Name)
	if err != nil {
		return job, err
	}
	stages, err := b.Stages()
	if err != nil {
		return job, err
	}
	video := clipunit.IsVideo(ds)
	for _, st := range stages {
		shapes, err := bucket.Parse(st.B.Shapes)
		if err != nil {
			return job, fmt.Errorf("source %s: %w", ds.Name, err)
		}
		if bucket.Clips(shapes) != video {
			kind, list := "image", "HxW"
			if video {
				kind, list = "video", "HxWxT"
			}
			return job, fmt.Errorf("%w: source %s is a dataset of %ss, and its bucket list %q is not of %s sizes (buckets=NAME:LIST;... gives each source its own)", bucket.ErrSpec, ds.Name, kind, st.B.Shapes, list)
		}
	}
	job.Buckets = b
	c := job.Clip
	c.Frames, c.Step = 0, 0
	if job.Clip, _, err = b.ClipOf(c); err != nil {
		return job, err
	}
	if !video {
		job.Clip = api.Clip{}
	}
	return job, nil
}

// component is one source of a bucketed mixture.
type component struct {
	u    *Unit
	ds   *catalog.Dataset
	job  api.Job // as the source takes it
	kind sampleKind
	// st is a staged job's stages, each's start counted in the source's
	// steps; nil for a job not staged. starts are its passes' first
	// steps, as far as they have been counted.
	st     *staging
	mu     sync.Mutex
	starts map[layout.Stream][]uint64
	// first is the world the job's first steps were at (its resume
	// point's first leg's), 0 for the request's.
	first int
}

// EpochSteps is the source's pass 0's steps at the job's first world and
// its first stage, which with the other sources' fixes the mixture's
// epoch length (mixture.EpochSized) whatever world a run resumes at and
// however its later stages are edited.
func (c *component) EpochSteps(s layout.Stream) (int, error) {
	job := c.job
	job.Buckets.Resume = ""
	if c.first > 0 {
		job.World = c.first
	}
	e, err := c.u.base.Epoch(s, 0)
	if err != nil {
		return 0, err
	}
	var p *epochPlan
	if c.st == nil {
		p, err = c.u.plans.planOf(c.ds, job, s, 0, e)
	} else {
		// The first stage alone: an edit of a later stage (a stored
		// schedule's, from a step not yet read) then never moves the
		// epochs' boundaries, nor so the steps already served.
		st := staging{stages: c.st.stages[:1], starts: c.st.starts[:1]}
		p, err = c.u.plans.memoPlan(c.ds, job, s, 0, e, &st, 0)
	}
	if err != nil {
		return 0, err
	}
	return len(p.steps), nil
}

// Len is -1: a pass's steps are its epoch's, of the order drawn.
func (*component) Len() int { return -1 }

// Stream is a video source's stream over its base clip space (one clip
// a video), an image source's as the mixture names it.
func (c *component) Stream(s layout.Stream) layout.Stream {
	s.Space = c.job.Space()
	return s
}

// Pass is the source's bucket epoch p over stream s.
func (c *component) Pass(s layout.Stream, p uint64) (mixture.Pass, error) {
	e, err := c.u.base.Epoch(s, p)
	if err != nil {
		return nil, err
	}
	var plan *epochPlan
	if c.st == nil {
		plan, err = c.u.plans.planOf(c.ds, c.job, s, p, e)
	} else {
		var first uint64
		if first, err = c.passStart(s, p); err == nil {
			plan, err = c.u.plans.memoPlan(c.ds, c.job, s, p, e, c.st, first)
		}
	}
	if err != nil {
		return nil, err
	}
	return &pass{c: c, plan: plan, s: s, epoch: p}, nil
}

// passStart is a staged source's steps before its pass p over stream s:
// its passes before it, each cut by the stages.
func (c *component) passStart(s layout.Stream, p uint64) (uint64, error) {
	key := s.Order()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.starts == nil {
		c.starts = map[layout.Stream][]uint64{}
	}
	starts := c.starts[key]
	if starts == nil {
		starts = []uint64{0}
	}
	for uint64(len(starts)) <= p {
		q := uint64(len(starts) - 1)
		e, err := c.u.base.Epoch(s, q)
		if err != nil {
			return 0, err
		}
		plan, err := c.u.plans.memoPlan(c.ds, c.job, s, q, e, c.st, starts[q])
		if err != nil {
			return 0, err
		}
		starts = append(starts, starts[q]+uint64(len(plan.steps)))
	}
	c.starts[key] = starts
	return starts[p], nil
}

// Describe adds the source's buckets in pass p to /epoch/N.
func (c *component) Describe(ci *api.MixComponentInfo, s layout.Stream, p uint64) error {
	ps, err := c.Pass(s, p)
	if err != nil {
		return err
	}
	ci.Buckets = ps.(*pass).plan.info(c.job)
	return nil
}

// pass is one bucket epoch of a source: its items are its steps' ranks'
// batches, step by step.
type pass struct {
	c     *component
	plan  *epochPlan
	s     layout.Stream
	epoch uint64
	// last is the item whose clips were drawn last (AppendDocs, then
	// AddTo of the same item), and its clips and documents.
	last  int
	lastC []clips.Clip
	lastB *clipunit.ClipBatch
	lastD []int
}

func (p *pass) Len() int  { return len(p.plan.steps) * p.plan.world }
func (p *pass) Docs() int { return p.plan.n }

// DocPosition is the share of the epoch's positions the steps before
// item i take: a step takes its images from across the epoch's order
// (Extent is where), so the use table counts progress by steps.
func (p *pass) DocPosition(i int) int {
	if n := p.Len(); n > 0 {
		return int(int64(i) * int64(p.plan.n) / int64(n))
	}
	return 0
}

// Extent is the positions of the epoch's order item i's samples span.
func (p *pass) Extent(i int) (first, end int) {
	_, _, first, end = p.item(i)
	return first, end
}

// item is item i's bucket, its samples (base order IDs) and the span of
// their positions.
func (p *pass) item(i int) (b int, ids []int, first, end int) {
	w := p.plan.world
	st := p.plan.steps[i/w]
	k := p.plan.per[st.Bucket]
	from := p.plan.from[st.Bucket] + st.First + (i%w)*k
	ids = make([]int, k)
	first = -1
	for j := range k {
		ids[j] = int(p.plan.ids[st.Bucket][from+j])
		pos := int(p.plan.pos[st.Bucket][from+j])
		if first < 0 || pos < first {
			first = pos
		}
		end = max(end, pos+1)
	}
	return st.Bucket, ids, first, end
}

// AppendDocs appends the samples item i reads: an image source's images,
// a video source's GOPs its clips need, each once.
func (p *pass) AppendDocs(dst []int, i int) []int {
	_, ids, _, _ := p.item(i)
	if _, ok := p.c.kind.(clipKind); !ok {
		return append(dst, ids...)
	}
	if err := p.drawClips(i, ids); err != nil {
		return dst // AddTo says why
	}
	return append(dst, p.lastD...)
}

// drawClips draws item i's clips (of base samples ids), once an item.
func (p *pass) drawClips(i int, ids []int) error {
	if p.lastB != nil && p.last == i {
		return nil
	}
	b, _, _, _ := p.item(i)
	sh := p.plan.shapes[b]
	cb, docs, err := p.c.u.drawClips(p.c.ds, p.c.job, p.epoch, p.plan.space, sh, ids)
	if err != nil {
		p.lastB = nil
		return err
	}
	p.last, p.lastB, p.lastD = i, cb, docs
	return nil
}

// AddTo makes item i the batch's content (a bucketed mixture's batch is
// one item: a rank's batch of one step): its images through its
// bucket's pipeline, or its clips read at positions at.
func (p *pass) AddTo(c layout.Content, i, comp, _ int, at []int) error {
	mb, ok := c.(*mixBatch)
	if !ok || mb.inner != nil {
		return fmt.Errorf("bucketed mixture: a batch of more than one step's batch")
	}
	b, ids, _, _ := p.item(i)
	sh := p.plan.shapes[b]
	name := transform.BucketName(sh.H, sh.W, p.c.job.Buckets.RandomCrop(), p.c.job.Buckets.Flip)
	pl, err := p.c.u.pipes.Pipeline(name)
	if err != nil {
		return err
	}
	mb.pipeline, mb.fingerprint, mb.clip = name, pl.Fingerprint(), p.c.job.Clip
	if _, ok := p.c.kind.(clipKind); !ok {
		mb.inner = &Batch{Shape: sh, sizes: p.c.u.sizes, pipe: pl, comp: comp, n: len(ids), mixed: true}
		return nil
	}
	if err := p.drawClips(i, ids); err != nil {
		return err
	}
	cb := *p.lastB
	cb.GOPs = make(map[clips.GOP]int, len(p.lastB.GOPs))
	for g, local := range p.lastB.GOPs {
		cb.GOPs[g] = at[local]
	}
	cb.Comp, cb.Mixed = comp, true
	seed := transform.KeySeed(p.c.job.Seed, p.c.ds.Name)
	cb.Bucketed = clipGeometry(pl, sh, seed, p.epoch)
	mb.inner = &cb
	return nil
}

// Costs: balance= is the table's refusal with buckets.
func (*pass) Costs(context.Context, string, []int) ([]uint64, error) {
	return nil, fmt.Errorf("%w: a bucket job's batches are not balanced", bucket.ErrSpec)
}

// mixBatch is a bucketed mixture's batch's content while it is laid out:
// the one item's (Finish makes it the batch's).
type mixBatch struct {
	inner                 layout.Content
	pipeline, fingerprint string
	clip                  api.Clip // the source's (api.Job.Clip: its kind)
}

func (m *mixBatch) Served() int         { return m.inner.Served() }
func (m *mixBatch) Size() (int64, bool) { return m.inner.Size() }
func (m *mixBatch) Components() []int   { return m.inner.Components() }

// Finish makes the item's content the batch's, its bucket's pipeline
// the one the batch's images or frames go through, and its source's clip
// parameters the batch's job's.
func (m *mixBatch) Finish(b *layout.Batch) error {
	if m.inner == nil {
		return fmt.Errorf("bucketed mixture: a batch of no step's batch")
	}
	b.Content = m.inner
	b.Job.Transform, b.Job.TransformFingerprint = m.pipeline, m.fingerprint
	// The batch's job is its source's: what it holds (kindOf) is the
	// source's kind.
	b.Job.Clip = m.clip
	return nil
}

var (
	_ mixture.Mixable    = (*Unit)(nil)
	_ mixture.Stepped    = (*Unit)(nil)
	_ mixture.Streamed   = (*component)(nil)
	_ mixture.Described  = (*component)(nil)
	_ mixture.EpochSized = (*component)(nil)
	_ mixture.Extents    = (*pass)(nil)
	_ mixture.Finisher   = (*mixBatch)(nil)
)

// drawClips draws the clips of the videos whose base samples are ids
// (of base space base) in bucket sh, in epoch epoch of job over ds, and
// returns their batch, its GOPs at their places in docs, the samples
// they read (each once, in the order the clips first need them).
func (u *Unit) drawClips(ds *catalog.Dataset, job api.Job, epoch uint64, base *clipunit.ClipSpace, sh bucket.Shape, ids []int) (*clipunit.ClipBatch, []int, error) {
	c := job.Clip
	key := api.Clip{Frames: sh.T, Stride: c.Stride, FPS: c.FPS, Step: api.MaxClipStep, First: c.First}.Key()
	sp, err := u.clips.Space(ds, key)
	if err != nil {
		return nil, nil, err
	}
	cl := make([]clips.Clip, len(ids))
	for i, n := range ids {
		v := base.VideoOf(n)
		m := sp.First(v)
		if m == sp.First(v+1) {
			return nil, nil, fmt.Errorf("%w: video %d holds no clip of %d frames, its bucket's", clipunit.ErrClips, v, sh.T)
		}
		if cl[i], err = sp.Clip(job.Seed, epoch, m); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", clipunit.ErrClips, err)
		}
		// The clip is the base sample's: its draws are keyed by it.
		cl[i].Sample = n
	}
	cb, docs, err := clipunit.PlanClips(base, cl, c.LayoutName())
	return cb, docs, err
}
