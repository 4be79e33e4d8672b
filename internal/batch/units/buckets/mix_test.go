package buckets_test

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/buckets"
	"github.com/brandgw/brand/internal/batch/units/unitstest"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/transform"
)

// mixFixture is a bucketed mixture of two image datasets, photos (3,000
// images of many aspect ratios) and art (1,500), each with a bucket list
// of its own, at world w.
type mixFixture struct {
	o      *layout.Orders
	ds     []*catalog.Dataset
	sizes  fakeSizes
	shapes [][]bucket.Shape
}

func newMixFixture(t *testing.T) mixFixture {
	t.Helper()
	set, err := transform.NewSet(transform.Config{}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	art := photos(1500)
	for i := range art { // wider
		art[i][0] = art[i][0] * 3 / 2
	}
	sizes := fakeSizes{"photos": photos(3000), "art": art}
	f := mixFixture{o: layout.New(nil, units.New(units.Node{Sizes: sizes, Pipelines: pipelines{set}})), sizes: sizes,
		ds: []*catalog.Dataset{catalogtest.Dataset(t, "photos", 60, 50), catalogtest.Dataset(t, "art", 30, 50)}}
	for _, l := range []string{small.Shapes, "256x256,192x384,384x192"} {
		sh, err := bucket.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		f.shapes = append(f.shapes, sh)
	}
	return f
}

// source is the mixture of the query raw at world w.
func (f mixFixture) source(t *testing.T, raw string, w int) (api.Job, layout.Source) {
	t.Helper()
	job := unitstest.ParseJob(t, raw, 1)
	job.World = w
	m, err := unitstest.Mixture(f.o, job.Mix, f.ds, job)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return job, layout.Source{Unit: m, Features: features.Requested(job)}
}

// TestBucketedMixture: a mixture of two image sources at 0.3/0.7, each
// with a bucket list of its own, at world 1 and 3: every step one bucket
// of one source, all its ranks' images of that bucket, each image in its
// nearest bucket of its own source's list; each source's count of steps
// within one step of its weight's share at every step, and each bucket's
// within one of its share of its source's steps; no image twice in a
// source's pass (the mixture's epoch reads the weightier source's
// passes more than once); the batches' Brand-Mix-Components their source.
func TestBucketedMixture(t *testing.T) {
	f := newMixFixture(t)
	raw := fmt.Sprintf("mix=photos:0.3,art:0.7&buckets=%s&budget=%d&seed=4&window=8", url.QueryEscape("photos:"+small.Shapes+";art:256x256,192x384,384x192"), small.Pixels)
	for _, w := range []int{1, 3} {
		job, src := f.source(t, raw, w)
		batches, _, err := f.o.Extent(src, job, 0)
		if err != nil {
			t.Fatal(err)
		}
		if batches < 50 {
			t.Fatalf("world %d: %d steps", w, batches)
		}
		count := [2]int{}
		bucketSteps := [2]map[int]int{{}, {}}
		bucketTotal := [2]map[int]int{{}, {}}
		type step struct{ comp, bucket int }
		var steps []step
		seen := map[[3]int]bool{} // source, pass, image
		for m := range uint64(batches) {
			var st step
			for r := range w {
				job.Rank = r
				b, err := f.o.Layout(context.Background(), src, job, 0, m)
				if err != nil {
					t.Fatalf("world %d step %d rank %d: %v", w, m, r, err)
				}
				c, ok := b.Content.(*buckets.Batch)
				if !ok {
					t.Fatalf("world %d step %d: content %T", w, m, b.Content)
				}
				comps := b.Components()
				if len(comps) == 0 || len(b.Parts) != 1 {
					t.Fatalf("world %d step %d rank %d: components %v, %d parts", w, m, r, comps, len(b.Parts))
				}
				comp := comps[0]
				for _, x := range comps {
					if x != comp {
						t.Fatalf("world %d step %d: components %v", w, m, comps)
					}
				}
				bk := -1
				for i, sh := range f.shapes[comp] {
					if sh == c.Shape {
						bk = i
					}
				}
				if bk < 0 {
					t.Fatalf("world %d step %d: bucket %v is not of source %d's list", w, m, c.Shape, comp)
				}
				if b.Job.Transform != transform.BucketName(c.Shape.H, c.Shape.W, false, 0) {
					t.Fatalf("world %d step %d: pipeline %s for bucket %v", w, m, b.Job.Transform, c.Shape)
				}
				if r == 0 {
					st = step{comp, bk}
				} else if (step{comp, bk}) != st {
					t.Fatalf("world %d step %d: rank %d's %+v, rank 0's %+v", w, m, r, step{comp, bk}, st)
				}
				name := f.ds[comp].Name
				pass := int(b.Parts[0].Epoch)
				for _, id := range b.Parts[0].Samples.IDs {
					if k := [3]int{comp, pass, id}; seen[k] {
						t.Fatalf("world %d: %s's image %d twice in its pass %d", w, name, id, pass)
					} else {
						seen[k] = true
					}
					sz := f.sizes[name][id]
					if want := bucket.Nearest(sz[0], sz[1], f.shapes[comp]); want != bk {
						t.Fatalf("world %d: %s's image %d (%dx%d) in bucket %d, its nearest is %d", w, name, id, sz[0], sz[1], bk, want)
					}
				}
			}
			steps = append(steps, st)
			bucketTotal[st.comp][st.bucket]++
		}
		weights := [2]float64{0.3, 0.7}
		for k, st := range steps {
			count[st.comp]++
			bucketSteps[st.comp][st.bucket]++
			for c := range 2 {
				if d := math.Abs(float64(count[c]) - weights[c]*float64(k+1)); d >= 1 {
					t.Fatalf("world %d: after %d steps source %d has %d, its share %.2f", w, k+1, c, count[c], weights[c]*float64(k+1))
				}
			}
		}
		_ = bucketSteps
		t.Logf("world %d: %d steps, %v a source", w, len(steps), count)
	}
}

// TestStagedBucketedMixture: a bucketed mixture in two stages — its
// weights 0.3/0.7 then 0.5/0.5 (mix_schedule=), each source's list
// changed at the same step (buckets=0@…|S@…) — at world 2: every step's
// bucket is of its source's list in force at its global step; each
// source's steps within one of its weight's share over each stage; no
// image twice in a source's pass, across the stage change too.
func TestStagedBucketedMixture(t *testing.T) {
	f := newMixFixture(t)
	const s = 150
	stage2 := [][]bucket.Shape{}
	for _, l := range []string{"128x512,512x128,256x256", "256x256,320x192"} {
		sh, _ := bucket.Parse(l)
		stage2 = append(stage2, sh)
	}
	lists := fmt.Sprintf("0@photos:%s;art:256x256,192x384,384x192|%d@photos:128x512,512x128,256x256;art:256x256,320x192", small.Shapes, s)
	sched := fmt.Sprintf("0:photos:0.3,art:0.7;%d:photos:0.5,art:0.5", s)
	raw := fmt.Sprintf("mix_schedule=%s&buckets=%s&budget=%d&seed=4&window=8", url.QueryEscape(sched), url.QueryEscape(lists), small.Pixels)
	const w = 2
	job, src := f.source(t, raw, w)
	seen := map[[3]int]bool{}
	var count, since [2]int
	step := 0
	for e := range uint64(2) {
		batches, _, err := f.o.Extent(src, job, e)
		if err != nil {
			t.Fatal(err)
		}
		for m := range uint64(batches) {
			comp := -1
			for r := range w {
				job.Rank = r
				b, err := f.o.Layout(context.Background(), src, job, e, m)
				if err != nil {
					t.Fatalf("epoch %d step %d rank %d: %v", e, m, r, err)
				}
				c := b.Content.(*buckets.Batch)
				comp = b.Components()[0]
				shapes := f.shapes[comp]
				if step >= s {
					shapes = stage2[comp]
				}
				name := f.ds[comp].Name
				for _, id := range b.Parts[0].Samples.IDs {
					k := [3]int{comp, int(b.Parts[0].Epoch), id}
					if seen[k] {
						t.Fatalf("epoch %d step %d: %s's image %d twice in its pass %d", e, m, name, id, k[1])
					}
					seen[k] = true
					sz := f.sizes[name][id]
					if want := shapes[bucket.Nearest(sz[0], sz[1], shapes)]; want != c.Shape {
						t.Fatalf("global step %d (stage 2 from %d): %s's image %d (%dx%d) in bucket %v, its stage's nearest %v", step, s, name, id, sz[0], sz[1], c.Shape, want)
					}
				}
			}
			count[comp]++
			if step >= s {
				since[comp]++
			}
			step++
			weights, n, got := [2]float64{0.3, 0.7}, step, count
			if step > s {
				weights, n, got = [2]float64{0.5, 0.5}, step-s, since
			}
			for c := range 2 {
				if d := float64(got[c]) - weights[c]*float64(n); d <= -1 || d >= 1 {
					t.Fatalf("global step %d: source %d has %d of the stage's %d, its share %.2f", step, c, got[c], n, weights[c]*float64(n))
				}
			}
		}
	}
	if step <= s {
		t.Fatalf("%d steps in two epochs: the stage from %d never came", step, s)
	}
}

// TestBucketedMixtureResumed: a bucketed mixture run at world 4 for k
// global steps and resumed at world 3 (resume=4:k) serves, from step k
// on, each step's source as the run at world 4 does (the mixture's rule
// knows no world), and no image of a source's pass that the steps before
// k served; resumed at world 4 itself, exactly the uninterrupted run's
// steps from k. k falls inside epoch 0 and inside epoch 1.
func TestBucketedMixtureResumed(t *testing.T) {
	f := newMixFixture(t)
	raw := fmt.Sprintf("mix=photos:0.3,art:0.7&buckets=%s&budget=%d&seed=4&window=8", url.QueryEscape("photos:"+small.Shapes+";art:256x256,192x384,384x192"), small.Pixels)
	type step struct {
		comp, pass int
		ids        []int
	}
	// steps serves epochs 0 and 1 of the job at world w from resume
	// point resume, each step by its global number.
	steps := func(w int, resume string) map[int]step {
		t.Helper()
		job, src := f.source(t, raw+"&resume="+url.QueryEscape(resume), w)
		if resume == "" {
			job, src = f.source(t, raw, w)
		}
		out := map[int]step{}
		global := 0
		for e := range uint64(2) {
			info, err := f.o.Info(src, job, e)
			if err != nil {
				t.Fatal(err)
			}
			epochSteps := info.Mix.Components[0].EpochSamples/w + info.Mix.Components[1].EpochSamples/w
			batches, _, err := f.o.Extent(src, job, e)
			if err != nil {
				t.Fatalf("world %d resume %q epoch %d: %v", w, resume, e, err)
			}
			first := global + epochSteps - batches // the steps the resume point took of the epoch
			for m := range uint64(batches) {
				var st step
				for r := range w {
					job.Rank = r
					b, err := f.o.Layout(context.Background(), src, job, e, m)
					if err != nil {
						t.Fatal(err)
					}
					st.comp, st.pass = b.Components()[0], int(b.Parts[0].Epoch)
					st.ids = append(st.ids, b.Parts[0].Samples.IDs...)
				}
				out[first+int(m)] = st
			}
			global += epochSteps
		}
		return out
	}
	whole := steps(4, "")
	n := len(whole)
	for _, k := range []int{n / 5, n*3/4 + 1} {
		rest := steps(3, fmt.Sprintf("4:%d", k))
		served := map[[3]int]bool{}
		for g := range k {
			st := whole[g]
			for _, id := range st.ids {
				served[[3]int{st.comp, st.pass, id}] = true
			}
		}
		for g, st := range rest {
			if g < k {
				t.Fatalf("k=%d: the resumed run serves step %d", k, g)
			}
			if w, ok := whole[g]; ok && w.comp != st.comp {
				t.Fatalf("k=%d: step %d is source %d's resumed, %d's uninterrupted", k, g, st.comp, w.comp)
			}
			for _, id := range st.ids {
				key := [3]int{st.comp, st.pass, id}
				if served[key] {
					t.Fatalf("k=%d: source %d's image %d served again in its pass %d at step %d", k, st.comp, id, st.pass, g)
				}
				served[key] = true
			}
		}
		same := steps(4, fmt.Sprintf("4:%d", k))
		for g, st := range same {
			if fmt.Sprint(st) != fmt.Sprint(whole[g]) {
				t.Fatalf("k=%d: resumed at world 4, step %d is %v, the uninterrupted run's %v", k, g, st, whole[g])
			}
		}
		if len(same) != n-k {
			t.Fatalf("k=%d: resumed at world 4, %d steps; the uninterrupted run has %d after k", k, len(same), n-k)
		}
		t.Logf("k=%d of %d: %d steps resumed at world 3", k, n, len(rest))
	}
}
