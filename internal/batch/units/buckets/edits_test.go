package buckets_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// editFixture is a bucket job over a dataset that grows by appended
// chunks: parent is the version the job reads first, grown the one an
// append extends it to (its first chunks parent's).
type editFixture struct {
	o              *layout.Orders
	parent, grown  *catalog.Dataset
	job            api.Job
	un             layout.Unit
	features       features.Set
	parentChunks   int
	appendedChunks int
}

func newEditFixture(t *testing.T, b api.Buckets) editFixture {
	t.Helper()
	const per, old, added = 50, 30, 8
	set, err := transform.NewSet(transform.Config{}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := layout.New(nil, units.New(units.Node{Sizes: fakeSizes{"photos": photos(per * (old + added))}, Pipelines: pipelines{set}}))
	job := api.Job{Dataset: "photos", Name: "gen", Params: shuffle.Params{Seed: 9, Window: 4, BatchSize: 1, World: 2}, Buckets: b}
	f := features.Requested(job)
	return editFixture{o: o, parent: catalogtest.Dataset(t, "photos", old, per), grown: catalogtest.Dataset(t, "photos", old+added, per),
		job: job, un: o.UnitOf(f), features: f, parentChunks: old, appendedChunks: added}
}

// source is the job's source under the chain ending at e (nil: none).
func (f editFixture) source(e *layout.Edit) layout.Source {
	src := layout.Source{DS: f.parent, Unit: f.un, Features: f.features, Edit: e}
	if e != nil && e.Appends() > 0 {
		src.DS, src.Versions = f.grown, []*catalog.Dataset{f.parent, f.grown}
	}
	return src
}

// pass is what every rank of job is served of epoch epoch under the
// chain ending at e: each step's bucket pipeline, its samples, and each
// batch's ETag (rank 0's).
func (f editFixture) pass(t *testing.T, e *layout.Edit, world int, resume string, epoch uint64) (steps []string, ids [][]int, etags []string) {
	t.Helper()
	src, job := f.source(e), f.job
	job.World, job.Buckets.Resume = world, resume
	if e != nil {
		job.Edit = e.Version
	}
	batches, _, err := f.o.Extent(src, job, epoch)
	if err != nil {
		t.Fatal(err)
	}
	for m := range uint64(batches) {
		var step []int
		var shape string
		for r := range world {
			job.Rank = r
			b, err := f.o.Layout(context.Background(), src, job, epoch, m)
			if err != nil {
				t.Fatal(err)
			}
			if r == 0 {
				shape = b.Job.Transform
				etags = append(etags, b.ETag)
			} else if b.Job.Transform != shape {
				t.Fatalf("epoch %d step %d: rank %d's bucket %s, rank 0's %s", epoch, m, r, b.Job.Transform, shape)
			}
			step = append(step, b.Parts[0].Samples.IDs...)
		}
		steps = append(steps, shape)
		ids = append(ids, step)
	}
	return steps, ids, etags
}

// exclusion is an exclusion of ids from step step of epoch's pass, after
// prev, registered with the orders.
func (f editFixture) exclusion(t *testing.T, version string, epoch uint64, step int, ids []int, prev *layout.Edit) *layout.Edit {
	t.Helper()
	ds := f.parent
	if prev != nil && prev.Appends() > 0 {
		ds = f.grown
	}
	x, err := layout.NewExclusion(version, ds, epoch, 0, ids, prev)
	if err != nil {
		t.Fatal(err)
	}
	x.Step = step
	f.o.Edits().Add(x)
	return x
}

// appended is the append of the grown version's new chunks from step
// step of epoch's pass, after prev.
func (f editFixture) appended(t *testing.T, version string, epoch uint64, step int, prev *layout.Edit) *layout.Edit {
	t.Helper()
	a, err := layout.NewAppend(version, f.parent.ID(), f.grown.ID(), f.parentChunks, epoch, 0, prev)
	if err != nil {
		t.Fatal(err)
	}
	a.Step = step
	f.o.Edits().Add(a)
	return a
}

// holdPass holds a pass edited at step cut to the pass unedited: the
// steps before the cut the same (buckets, samples, ETags), none after it
// of the samples gone, each sample at most once.
func holdPass(t *testing.T, name string, cut int, before, after [][]int, bSteps, aSteps, bTags, aTags []string, gone map[int]bool) {
	t.Helper()
	if len(after) < cut || len(before) < cut {
		t.Fatalf("%s: %d steps edited, %d unedited: the cut at step %d is past them", name, len(after), len(before), cut)
	}
	for m := range cut {
		if aSteps[m] != bSteps[m] || !slices.Equal(after[m], before[m]) || aTags[m] != bTags[m] {
			t.Fatalf("%s: step %d before the edit's step %d changed: %s %v (ETag %s), unedited %s %v (ETag %s)",
				name, m, cut, aSteps[m], after[m], aTags[m], bSteps[m], before[m], bTags[m])
		}
	}
	seen := map[int]bool{}
	for m, step := range after {
		for _, id := range step {
			if seen[id] {
				t.Fatalf("%s: sample %d served twice in the pass (again at step %d)", name, id, m)
			}
			seen[id] = true
			if m >= cut && gone[id] {
				t.Fatalf("%s: sample %d, excluded from step %d, served at step %d", name, id, cut, m)
			}
		}
	}
}

// modelRest is the rule for a pass's steps from an edit's step cut on,
// written out here: the images of the order under the edit (the whole
// epoch's, its From 0) not served before the cut (taken), each in its
// nearest bucket if it fits, stepped by bucket.Steps; each step a global
// batch of its bucket's next images. Each step's bucket pipeline and
// samples, its ranks' in turn.
func (f editFixture) modelRest(t *testing.T, b api.Buckets, x *layout.Edit, world int, epoch uint64, taken map[int]bool) (steps []string, ids [][]int) {
	t.Helper()
	src := f.source(x)
	s := layout.Stream{DS: src.DS, Seed: f.job.Seed, Window: f.job.Window, Edit: x.Version}
	e, err := f.o.Epoch(s, epoch)
	if err != nil {
		t.Fatal(err)
	}
	order := f.o.Base().AppendRange(nil, s, e, epoch, 0, e.NumSamples())
	shapes, _, per, err := b.Shaped()
	if err != nil {
		t.Fatal(err)
	}
	sizes := photos(f.grown.Index.NumSamples())
	lists := make([][]int, len(shapes))
	for _, id := range order {
		w, h := sizes[id][0], sizes[id][1]
		if taken[id] || w == 0 {
			continue
		}
		k := bucket.Nearest(w, h, shapes)
		if bucket.FitOf(w, h, shapes[k], b.Upscale()) == bucket.Fits {
			lists[k] = append(lists[k], id)
		}
	}
	counts := make([]int, len(shapes))
	for k := range lists {
		counts[k] = len(lists[k])
	}
	for _, st := range bucket.Steps(counts, per, world, f.job.Seed, epoch) {
		sh := shapes[st.Bucket]
		steps = append(steps, transform.BucketName(sh.H, sh.W, false, 0))
		ids = append(ids, lists[st.Bucket][st.First:st.First+per[st.Bucket]*world])
	}
	return steps, ids
}

// holdRest holds a pass's steps from cut on to modelRest's.
func (f editFixture) holdRest(t *testing.T, name string, b api.Buckets, x *layout.Edit, world int, epoch uint64, cut int, gotSteps []string, got [][]int) {
	t.Helper()
	taken := map[int]bool{}
	for _, s := range got[:cut] {
		for _, id := range s {
			taken[id] = true
		}
	}
	ws, want := f.modelRest(t, b, x, world, epoch, taken)
	if len(got)-cut != len(want) {
		t.Fatalf("%s: %d steps from the edit's step %d, the rule's %d", name, len(got)-cut, cut, len(want))
	}
	for m := range want {
		if gotSteps[cut+m] != ws[m] || !slices.Equal(got[cut+m], want[m]) {
			t.Fatalf("%s: step %d is %s %v, the rule's %s %v", name, cut+m, gotSteps[cut+m], got[cut+m], ws[m], want[m])
		}
	}
}

// TestEditsCutAtStep: an exclusion and an append of a bucket job cut its
// pass at their steps. The steps before are the unedited pass's, bytes
// and ETags alike; after an exclusion's step none of its samples is
// served (in that pass or any later), after an append's the new samples
// join the pass's remaining steps, each sample at most once a pass; two
// edits in one pass, a staged job's, and one resumed at another world
// after the edit hold the same.
func TestEditsCutAtStep(t *testing.T) {
	f := newEditFixture(t, small)
	_, base0, _ := f.pass(t, nil, 2, "", 0)
	var drop []int
	for _, step := range base0[20:40] { // samples served late in epoch 0, and some early
		drop = append(drop, step[0])
	}
	drop = append(drop, base0[2][1], base0[3][0])
	gone := map[int]bool{}
	for _, id := range drop {
		gone[id] = true
	}

	t.Run("exclusion", func(t *testing.T) {
		const cut = 9
		x := f.exclusion(t, "x1", 0, cut, drop, nil)
		bs, b, bt := f.pass(t, nil, 2, "", 0)
		as, a, at := f.pass(t, x, 2, "", 0)
		holdPass(t, "epoch 0", cut, b, a, bs, as, bt, at, gone)
		f.holdRest(t, "epoch 0", small, x, 2, 0, cut, as, a)
		if len(a) >= len(b) {
			t.Fatalf("the exclusion of %d samples left %d steps of %d", len(drop), len(a), len(b))
		}
		_, next, _ := f.pass(t, x, 2, "", 1)
		holdPass(t, "epoch 1", 0, nil, next, nil, nil, nil, nil, gone)
		// Samples served before the cut, and those after it that the
		// order still holds: every sample the unedited pass served but
		// the excluded after the cut is served, less the buckets' last
		// partial steps.
		served := map[int]bool{}
		for _, s := range a {
			for _, id := range s {
				served[id] = true
			}
		}
		lost := 0
		for m, s := range b {
			for _, id := range s {
				if !served[id] && !(m >= cut && gone[id]) {
					lost++
				}
			}
		}
		if lost > 5*len(f.job.Buckets.Shapes) {
			t.Fatalf("%d samples the unedited pass served are neither served nor excluded after the edit", lost)
		}
	})

	t.Run("two exclusions in a pass", func(t *testing.T) {
		x1 := f.exclusion(t, "y1", 0, 5, drop[:10], nil)
		x2 := f.exclusion(t, "y2", 0, 14, drop, x1)
		bs, b, bt := f.pass(t, x1, 2, "", 0)
		as, a, at := f.pass(t, x2, 2, "", 0)
		g1 := map[int]bool{}
		for _, id := range drop[:10] {
			g1[id] = true
		}
		for m := 5; m < len(a); m++ {
			for _, id := range a[m] {
				if g1[id] {
					t.Fatalf("sample %d, excluded from step 5, served at step %d", id, m)
				}
			}
		}
		holdPass(t, "the second", 14, b, a, bs, as, bt, at, gone)
		f.holdRest(t, "the second", small, x2, 2, 0, 14, as, a)
	})

	t.Run("append", func(t *testing.T) {
		const cut = 12
		ap := f.appended(t, "a1", 0, cut, nil)
		bs, b, bt := f.pass(t, nil, 2, "", 0)
		as, a, at := f.pass(t, ap, 2, "", 0)
		holdPass(t, "epoch 0", cut, b, a, bs, as, bt, at, nil)
		f.holdRest(t, "epoch 0", small, ap, 2, 0, cut, as, a)
		first := f.parent.Index.NumSamples()
		newIn := 0
		for m, s := range a {
			for _, id := range s {
				if id >= first {
					if m < cut {
						t.Fatalf("appended sample %d served at step %d, before the append's step %d", id, m, cut)
					}
					newIn++
				}
			}
		}
		if newIn < f.appendedChunks*50/2 {
			t.Fatalf("%d of the %d appended samples joined the pass's remaining steps", newIn, f.appendedChunks*50)
		}
		if len(a) <= len(b) {
			t.Fatalf("the append left %d steps of %d", len(a), len(b))
		}
		// An exclusion after the append, in the same pass: of new
		// samples and old.
		var more []int
		for _, s := range a[cut+3:] {
			more = append(more, s[0])
		}
		x := f.exclusion(t, "a1x", 0, cut+3, more, ap)
		xs, xa, xt := f.pass(t, x, 2, "", 0)
		g := map[int]bool{}
		for _, id := range more {
			g[id] = true
		}
		holdPass(t, "the exclusion after the append", cut+3, a, xa, as, xs, at, xt, g)
		f.holdRest(t, "the exclusion after the append", small, x, 2, 0, cut+3, xs, xa)
	})

	t.Run("resumed at another world", func(t *testing.T) {
		// Served at world 2 to step 6 of epoch 1 with an exclusion from
		// step 4; resumed at world 3 from there.
		x := f.exclusion(t, "r1", 1, 4, drop, nil)
		_, a, _ := f.pass(t, x, 2, "", 1)
		_, rest, _ := f.pass(t, x, 3, "2:6", 1)
		seen := map[int]bool{}
		for m, s := range append(slices.Clone(a[:6]), rest...) {
			for _, id := range s {
				if seen[id] {
					t.Fatalf("sample %d served twice (again at step %d of the resumed run)", id, m)
				}
				seen[id] = true
				if m >= 4 && gone[id] {
					t.Fatalf("sample %d, excluded from step 4, served at step %d", id, m)
				}
			}
		}
	})

	t.Run("staged", func(t *testing.T) {
		// The stage starts 30 steps into epoch 1.
		first := api.Buckets{Shapes: "256x256,192x320,320x192", Pixels: 4 * 256 * 256}
		_, e0, _ := newEditFixture(t, first).pass(t, nil, 2, "", 0)
		stage := len(e0) + 30
		g := newEditFixture(t, api.Buckets{Shapes: fmt.Sprintf("0@%s|%d@384x384,320x448,448x320", first.Shapes, stage), Pixels: first.Pixels})
		if _, s0, _ := g.pass(t, nil, 2, "", 0); len(s0) != len(e0) {
			t.Fatalf("the staged job's epoch 0 has %d steps, its first stage's alone %d", len(s0), len(e0))
		}
		// The stage starts inside epoch 1; an exclusion before it and
		// one after it, in that epoch.
		x1 := g.exclusion(t, "s1", 1, 2, drop, nil)
		bs, b, bt := g.pass(t, nil, 2, "", 1)
		as, a, at := g.pass(t, x1, 2, "", 1)
		if stage >= len(e0)+len(b) {
			t.Fatalf("the stage at step %d is not in epoch 1 (%d steps in epoch 0, %d in 1)", stage, len(e0), len(b))
		}
		holdPass(t, "staged", 2, b, a, bs, as, bt, at, gone)
		big := 0
		for m := range a {
			if as[m] == transform.BucketName(384, 384, false, 0) {
				big++
				if len(e0)+m < stage {
					t.Fatalf("step %d of epoch 1 (global %d) is of the second stage, which starts at %d", m, len(e0)+m, stage)
				}
			}
		}
		if big == 0 {
			t.Fatal("no step of the second stage's square bucket after the exclusion")
		}
	})
}
