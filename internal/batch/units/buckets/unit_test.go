package buckets_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/buckets"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// fakeSizes gives each sample of a dataset a size from a table.
type fakeSizes map[string][][2]int

func (f fakeSizes) Load(_ context.Context, ds *catalog.Dataset) error {
	if _, ok := f[ds.Name]; !ok {
		return catalog.ErrNoSizes
	}
	return nil
}

func (f fakeSizes) Of(ds *catalog.Dataset, id int) (int, int, bool) {
	s, ok := f[ds.Name]
	if !ok {
		return 0, 0, false
	}
	return s[id][0], s[id][1], true
}

// photos are n sizes of many aspect ratios, some too small for their
// bucket and some of samples without an image.
func photos(n int) [][2]int {
	r := rand.New(rand.NewPCG(5, 6))
	out := make([][2]int, n)
	for i := range out {
		switch r.IntN(20) {
		case 0:
			out[i] = [2]int{0, 0} // no image
		case 1:
			out[i] = [2]int{40 + r.IntN(20), 40 + r.IntN(20)} // too small
		default:
			out[i] = [2]int{200 + r.IntN(3800), 200 + r.IntN(3800)}
		}
	}
	return out
}

// pipelines are a pipeline set's, as the transform stage gives them.
type pipelines struct{ s *transform.Set }

func (p pipelines) Pipeline(name string) (*transform.Pipeline, error) { return p.s.Get(name) }

type fixture struct {
	o   *layout.Orders
	src layout.Source
	job api.Job
}

func newFixture(t *testing.T, n int, b api.Buckets) fixture {
	t.Helper()
	ds := catalogtest.Dataset(t, "photos", n/50, 50)
	set, err := transform.NewSet(transform.Config{}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The node's kinds of batch, the bucket unit's sizes and pipelines
	// the fixture's: the table chooses the bucket unit among them all.
	o := layout.New(nil, units.New(units.Node{Sizes: fakeSizes{"photos": photos(n)}, Pipelines: pipelines{set}}))
	job := api.Job{Dataset: "photos", Params: shuffle.Params{Seed: 9, Window: 4, BatchSize: 1, World: 1}, Buckets: b}
	f := features.Requested(job)
	un := o.UnitOf(f)
	if un.Feature() != features.Buckets {
		t.Fatalf("a bucket job's unit is %s", un.Feature())
	}
	return fixture{o: o, src: layout.Source{DS: ds, Unit: un, Features: f}, job: job}
}

var small = api.Buckets{Shapes: "256x256,192x320,320x192,128x512,512x128", Pixels: 4 * 256 * 256}

// served lays out every batch of epoch e from resume point resume at
// world w, and returns each step's bucket and the samples each rank took.
func (f fixture) served(t *testing.T, epoch uint64, w int, resume string) (steps []string, ids [][]int) {
	t.Helper()
	job := f.job
	job.World, job.Buckets.Resume = w, resume
	batches, _, err := f.o.Extent(f.src, job, epoch)
	if err != nil {
		t.Fatal(err)
	}
	for m := range uint64(batches) {
		var shape string
		var step []int
		for r := range w {
			job.Rank = r
			b, err := f.o.Layout(context.Background(), f.src, job, epoch, m)
			if err != nil {
				t.Fatal(err)
			}
			c := b.Content.(*buckets.Batch)
			switch {
			case r == 0:
				shape = b.Job.Transform
			case b.Job.Transform != shape:
				t.Fatalf("step %d: rank %d's bucket %s, rank 0's %s", m, r, b.Job.Transform, shape)
			}
			if b.Job.Transform != transform.BucketName(c.Shape.H, c.Shape.W, false, 0) {
				t.Fatalf("step %d: pipeline %s for bucket %v", m, b.Job.Transform, c.Shape)
			}
			step = append(step, b.Parts[0].Samples.IDs...)
		}
		steps = append(steps, shape)
		ids = append(ids, step)
	}
	return steps, ids
}

// TestEpochOnce: every image of an epoch is served at most once, each in
// its nearest bucket, every step one bucket, and what is left unserved is
// what no bucket takes and each bucket's last partial global batch, as
// /epoch/N says.
func TestEpochOnce(t *testing.T) {
	f := newFixture(t, 3000, small)
	sizes := photos(3000)
	shapes, _ := bucket.Parse(small.Shapes)
	for _, w := range []int{1, 3} {
		steps, ids := f.served(t, 1, w, "")
		seen := map[int]bool{}
		perBucket := map[string]int{}
		for m, step := range ids {
			for _, id := range step {
				if seen[id] {
					t.Fatalf("world %d: sample %d served twice", w, id)
				}
				seen[id] = true
				sz := sizes[id]
				b := shapes[bucket.Nearest(sz[0], sz[1], shapes)]
				if got := transform.BucketName(b.H, b.W, false, 0); got != steps[m] {
					t.Fatalf("world %d step %d: sample %d (%dx%d) in %s, its nearest bucket is %s", w, m, id, sz[0], sz[1], steps[m], got)
				}
			}
			perBucket[steps[m]] += len(step)
		}
		job := f.job
		job.World = w
		info, err := f.o.Info(f.src, job, 1)
		if err != nil {
			t.Fatal(err)
		}
		bi := info.Buckets
		if info.Batches != len(steps) || bi == nil {
			t.Fatalf("world %d: /epoch says %d steps (%+v), served %d", w, info.Batches, bi, len(steps))
		}
		unserved := bi.TooSmall + bi.NoImage
		for i, b := range bi.Buckets {
			name := transform.BucketName(shapes[i].H, shapes[i].W, false, 0)
			if served := b.Batches * b.BatchSize * w; served != perBucket[name] {
				t.Errorf("world %d: /epoch says bucket %s serves %d, it served %d", w, b.Shape, served, perBucket[name])
			}
			if b.Dropped >= b.BatchSize*w {
				t.Errorf("world %d: bucket %s drops %d, a full global batch", w, b.Shape, b.Dropped)
			}
			unserved += b.Dropped
		}
		if len(seen)+unserved != 3000 {
			t.Errorf("world %d: %d served and %d unserved of 3000", w, len(seen), unserved)
		}
		if bi.TooSmall == 0 || bi.NoImage == 0 {
			t.Errorf("the fixture's small and missing images were not counted: %+v", bi)
		}
	}
}

// TestResumeAtAnotherWorld: an epoch begun at world 4 and resumed at step
// k at world 3 serves the rest once, none of what world 4 served.
func TestResumeAtAnotherWorld(t *testing.T) {
	f := newFixture(t, 3000, small)
	_, first := f.served(t, 0, 4, "")
	for _, k := range []int{0, 1, len(first) / 3, len(first)} {
		seen := map[int]bool{}
		for _, step := range first[:k] {
			for _, id := range step {
				seen[id] = true
			}
		}
		_, rest := f.served(t, 0, 3, fmt.Sprintf("4:%d", k))
		for _, step := range rest {
			for _, id := range step {
				if seen[id] {
					t.Fatalf("k=%d: sample %d served before and after the resume", k, id)
				}
				seen[id] = true
			}
		}
		// The same from a chain of legs: 4 for k, then 3 for none.
		_, again := f.served(t, 0, 3, fmt.Sprintf("4:%d,3:0", k))
		if fmt.Sprint(again) != fmt.Sprint(rest) {
			t.Fatalf("k=%d: a leg of no steps changed the rest", k)
		}
	}
	job := f.job
	job.World, job.Buckets.Resume = 3, fmt.Sprintf("4:%d", len(first)+1)
	if _, _, err := f.o.Extent(f.src, job, 0); !errors.Is(err, bucket.ErrSpec) {
		t.Errorf("a resume point past the epoch: %v", err)
	}
}

// TestSmallFail: small=fail refuses an epoch with images that fit no
// bucket, naming them.
func TestSmallFail(t *testing.T) {
	b := small
	b.Small = api.SmallFail
	f := newFixture(t, 500, b)
	if _, _, err := f.o.Extent(f.src, f.job, 0); !errors.Is(err, buckets.ErrFitsNone) {
		t.Fatalf("small=fail over images too small: %v", err)
	}
}

// TestETagNamesBuckets: the bucket parameters select the bytes.
func TestETagNamesBuckets(t *testing.T) {
	f := newFixture(t, 500, small)
	a := f.o.ETag(f.src, f.job, 0, 0)
	j := f.job
	j.Buckets.Flip = 0.5
	if f.o.ETag(f.src, j, 0, 0) == a {
		t.Error("flip= does not change the ETag")
	}
	j = f.job
	j.Buckets.Pixels *= 2
	if f.o.ETag(f.src, j, 0, 0) == a {
		t.Error("budget= does not change the ETag")
	}
}

// TestETagOfClipBuckets: a clip bucket job's clip parameters and
// temporal factor select its bytes; an image bucket job's key is as it
// was without them.
func TestETagOfClipBuckets(t *testing.T) {
	f := newFixture(t, 500, small)
	u := f.src.Unit
	img := string(u.AppendKey(nil, f.job))
	if strings.Contains(img, "clips=") || strings.Contains(img, "vae_t") {
		t.Errorf("an image bucket job's key names clips: %s", img)
	}
	j := f.job
	j.Buckets.Shapes = "24x24x8,24x24x16"
	j.Clip = api.Clip{Frames: 8, Step: api.MaxClipStep}
	a := string(u.AppendKey(nil, j))
	for _, change := range []func(*api.Job){
		func(j *api.Job) { j.Clip.Stride = 2 },
		func(j *api.Job) { j.Clip.FPS = 5 },
		func(j *api.Job) { j.Clip.First = true },
		func(j *api.Job) { j.Clip.Layout = api.ClipTCHW },
		func(j *api.Job) { j.Buckets.VAET = 2 },
	} {
		k := j
		change(&k)
		if string(u.AppendKey(nil, k)) == a {
			t.Errorf("a change to %+v leaves the key %s", k.Clip, a)
		}
	}
}

// TestClipBucketsMadeByTheClipStage: a clip bucket job's batch is made by
// the clip unit's stage (visit.Chooser), an image bucket job's by none
// (served through its bucket's pipeline as read): where the unit did not
// say, a clip bucket batch was served as its GOPs' bytes.
func TestClipBucketsMadeByTheClipStage(t *testing.T) {
	o := units.Orders(nil)
	u, ok := o.UnitOf(features.Of(features.Buckets)).(*buckets.Unit)
	if !ok {
		t.Fatal("no bucket unit among the node's units")
	}
	clip := &layout.Batch{Job: api.Job{Buckets: api.Buckets{Shapes: "16x32x8"}, Clip: api.Clip{Frames: 8, Step: api.MaxClipStep}}}
	image := &layout.Batch{Job: api.Job{Buckets: api.Buckets{Shapes: "sdxl"}}}
	if mk := u.MakerOf(clip); mk == nil || any(mk) != any(o.UnitOf(features.Of(features.Clips))) {
		t.Fatalf("a clip bucket batch's maker is %v, not the clip unit", mk)
	}
	if mk := u.MakerOf(image); mk != nil {
		t.Fatalf("an image bucket batch's maker is %v, want none", mk)
	}
}

// TestStagedEpochs: a job whose buckets and budget change at stated
// global steps (buckets=0@A|s@B, budget=0@x|s@y), at world 1 and 3: each
// step's bucket is of the stage in force at its global step, counted
// over the epochs; no image is served twice in an epoch, across the
// stage change too; and every image an epoch leaves unserved is one no
// bucket of its stage takes, or of the last stage's dropped partial
// batches. Resumed at another world after k steps (resume=W:k), the
// epoch's rest is served once, none of it before.
func TestStagedEpochs(t *testing.T) {
	const n = 3000
	sizes := photos(n)
	a, b := "256x256,192x320,320x192", "128x512,512x128,256x256"
	for _, w := range []int{1, 3} {
		f := newFixture(t, n, small)
		job := f.job
		job.World = w
		// The stage change in epoch 1: a third of the way through.
		whole, _, err := f.o.Extent(f.src, withBuckets(job, api.Buckets{Shapes: a, Pixels: 4 * 256 * 256}), 0)
		if err != nil {
			t.Fatal(err)
		}
		change := whole + whole/3
		staged := api.Buckets{Shapes: fmt.Sprintf("0@%s|%d@%s", a, change, b), PixelStages: fmt.Sprintf("0@%d|%d@%d", 4*256*256, change, 3*256*256)}
		if err := staged.Check(); err != nil {
			t.Fatal(err)
		}
		job = withBuckets(job, staged)
		global := 0
		for e := range uint64(3) {
			steps, ids := servedOf(t, f, job, e)
			seen := map[int]bool{}
			for m, step := range ids {
				list := a
				if global+m >= change {
					list = b
				}
				shapes, _ := bucket.Parse(list)
				for _, id := range step {
					if seen[id] {
						t.Fatalf("world %d epoch %d: sample %d served twice", w, e, id)
					}
					seen[id] = true
					sz := sizes[id]
					sh := shapes[bucket.Nearest(sz[0], sz[1], shapes)]
					if want := transform.BucketName(sh.H, sh.W, false, 0); want != steps[m] {
						t.Fatalf("world %d epoch %d step %d (global %d, stage from %d): sample %d in %s, its stage's nearest bucket %s", w, e, m, global+m, change, id, steps[m], want)
					}
				}
			}
			// Unserved: no bucket of its stage's list, or left over.
			unfit := 0
			for id, sz := range sizes {
				if seen[id] {
					continue
				}
				if sz[0] == 0 || sz[0] < 100 {
					unfit++
				}
			}
			left := n - len(seen) - unfit
			lastStage := b
			if global+len(steps) < change {
				lastStage = a
			}
			shapes, _ := bucket.Parse(lastStage)
			if max := len(shapes) * 4 * 3 * w; left >= max {
				t.Errorf("world %d epoch %d: %d images neither served nor unfit, over the last stage's partial batches (%d)", w, e, left, max)
			}
			t.Logf("world %d epoch %d: %d steps from global step %d, %d served, %d unfit, %d left", w, e, len(steps), global, len(seen), unfit, left)
			global += len(steps)
		}
	}
	// Resumed at world 3 after k steps at world 4 of epoch 1 (the stage
	// change inside it): the resume point names the job's global steps
	// from its first (epoch 0's at world 4, then k), the rest of the
	// epoch is served once, and every step from the stage's global step
	// on is of its list, whatever the world.
	f := newFixture(t, n, small)
	job := f.job
	job.World = 4
	whole, _, _ := f.o.Extent(f.src, withBuckets(job, api.Buckets{Shapes: a, Pixels: 4 * 256 * 256}), 0)
	change := whole + 5
	staged := withBuckets(job, api.Buckets{Shapes: fmt.Sprintf("0@%s|%d@%s", a, change, b), Pixels: 4 * 256 * 256})
	staged.World = 4
	e0, _ := servedOf(t, f, staged, 0)
	_, first := servedOf(t, f, staged, 1)
	// A step's stage by its bucket: 256x256 is of both lists.
	of := func(list, name string) bool {
		shapes, _ := bucket.Parse(list)
		for _, sh := range shapes {
			if name == transform.BucketName(sh.H, sh.W, false, 0) {
				return true
			}
		}
		return false
	}
	for _, k := range []int{0, 3, 5, 9, len(first)} {
		seen := map[int]bool{}
		for _, step := range first[:k] {
			for _, id := range step {
				seen[id] = true
			}
		}
		r := staged
		r.World, r.Buckets.Resume = 3, fmt.Sprintf("4:%d", len(e0)+k)
		names, rest := servedOf(t, f, r, 1)
		for m, name := range names {
			if g := len(e0) + k + m; g >= change && !of(b, name) || g < change && !of(a, name) {
				t.Fatalf("k=%d: resumed at world 3, global step %d is of bucket %s; the second stage starts at %d", k, g, name, change)
			}
		}
		for _, step := range rest {
			for _, id := range step {
				if seen[id] {
					t.Fatalf("k=%d: sample %d served before and after the resume", k, id)
				}
				seen[id] = true
			}
		}
		// Resumed at the world it ran at: the rest of the uninterrupted run.
		r.World = 4
		_, same := servedOf(t, f, r, 1)
		if fmt.Sprint(same) != fmt.Sprint(first[k:]) {
			t.Fatalf("k=%d: resumed at world 4, the steps differ from the uninterrupted run's", k)
		}
	}
}

// withBuckets is job with b.
func withBuckets(job api.Job, b api.Buckets) api.Job {
	job.Buckets = b
	return job
}

// servedOf lays out every batch of epoch e of job over f's source, and
// returns each step's bucket pipeline and the samples its ranks took.
func servedOf(t *testing.T, f fixture, job api.Job, epoch uint64) (steps []string, ids [][]int) {
	t.Helper()
	batches, _, err := f.o.Extent(f.src, job, epoch)
	if err != nil {
		t.Fatal(err)
	}
	for m := range uint64(batches) {
		var step []int
		var shape string
		for r := range max(job.World, 1) {
			job.Rank = r
			b, err := f.o.Layout(context.Background(), f.src, job, epoch, m)
			if err != nil {
				t.Fatal(err)
			}
			if r == 0 {
				shape = b.Job.Transform
			} else if b.Job.Transform != shape {
				t.Fatalf("step %d: rank %d's bucket %s, rank 0's %s", m, r, b.Job.Transform, shape)
			}
			step = append(step, b.Parts[0].Samples.IDs...)
		}
		steps = append(steps, shape)
		ids = append(ids, step)
	}
	return steps, ids
}
