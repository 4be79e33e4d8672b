// Package buckets is the unit of a bucket job (buckets=): a dataset's
// images batched by shape, as text-to-image models train (package
// bucket). It is a kind of batch of its own behind the layout's seam
// (layout.Unit, made over the orders' Base):
// an epoch's images go each to its bucket in the job's seeded order,
// each bucket's images are cut into batches of the size its budget
// gives, and the steps interleave the buckets (bucket.Steps); every
// global step is one bucket, each rank its own batch of it.
//
// Its items are the ranks' batches: the job's batch_size is 1 (one batch
// of the step's bucket's size), an epoch's extent is its steps times the
// world size, so the layout's cut gives each rank its batch of each step
// and everything downstream (the use table, the ETag, the clients'
// lengths) works unchanged. A batch's images go through the bucket's
// pipeline (transform.BucketName: resize to cover, crop at the centre,
// flip) in the transform stage, as a job that names a pipeline.
//
// A clip bucket job (buckets of HxWxT over a tree of videos) is the same
// unit over a clip job's base order of one clip a video: its batches are
// clip batches (clips.ClipBatch, of the clip unit it is made over) whose
// frames the clip stage decodes through the bucket's pipeline (clips.go).
// Which kind of sample a job buckets is chosen in one place (kindOf).
package buckets

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	clipunit "github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/transform"
)

// ErrFitsNone marks a bucket job with small=fail over images that fit no
// bucket (422: the dataset, not the request, is at fault).
var ErrFitsNone = errkind.New(errkind.Unprocessable, "images fit no bucket")

// Sizes are the datasets' image sizes, as their index holds them
// (brand index --sizes).
type Sizes interface {
	// Load loads ds's sizes from its store if they are not in memory: a
	// dataset without them is refused, saying how to write them.
	Load(ctx context.Context, ds *catalog.Dataset) error
	// Of is sample id's image's displayed size in ds (loaded), 0×0 for a
	// sample without one; false if ds's sizes are not loaded.
	Of(ds *catalog.Dataset, id int) (w, h int, ok bool)
}

// Pipelines are the server's pipelines: the transform stage's, which
// makes a bucket's on demand (transform.BucketSpec).
type Pipelines interface {
	Pipeline(name string) (*transform.Pipeline, error)
}

// Unit is the bucket job's unit. Safe for concurrent use.
type Unit struct {
	base  layout.Base
	clips *clipunit.Unit // a clip bucket job's clip spaces and clip batches
	sizes Sizes
	pipes Pipelines
	plans *planner
}

// planner makes (and memoises) the plans of a bucket job's epochs: each
// bucket's images in the job's order and the steps (epoch.go), cut where
// a stage starts or an edit applies (stages.go, edits.go). Safe for
// concurrent use.
type planner struct {
	base layout.Base
	memo *lru.Cache[memoKey, *epochPlan]
	// kindOf is what a job buckets (Unit.kindOf): how its samples are
	// assigned to buckets and named.
	kindOf func(api.Job) sampleKind
}

// maxMemoEpochs bounds the epochs' plans kept: each is 4 bytes an image.
const maxMemoEpochs = 16

// New returns the unit, over the orders' base b and, for clip bucket
// jobs, the clip unit cu, reading sizes and the bucket pipelines of
// pipes.
func New(b layout.Base, cu *clipunit.Unit, sizes Sizes, pipes Pipelines) *Unit {
	m, _ := lru.New[memoKey, *epochPlan](maxMemoEpochs)
	u := &Unit{base: b, clips: cu, sizes: sizes, pipes: pipes}
	u.plans = &planner{base: b, memo: m, kindOf: u.kindOf}
	return u
}

func (*Unit) Feature() features.Feature { return features.Buckets }

// View is the fields job names, with what its kind of sample is
// bucketed by loaded (an image's size).
func (u *Unit) View(ctx context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	if len(job.Mix) > 0 || len(job.Schedule) > 0 {
		// A source of a bucketed mixture: by its own list and kind.
		own, err := u.sourceJob(ds, job)
		if err != nil {
			return nil, err
		}
		job = own
	}
	if err := u.kindOf(job).load(ctx, ds, job); err != nil {
		return nil, err
	}
	return ds.Select(job.Columns)
}

// Unavailable is why this node serves no job of job's kind of sample (a
// clip bucket job on a node without a video decoder), nil if it does.
func (u *Unit) Unavailable(job api.Job) error { return u.kindOf(job).unavailable(job) }

// Extent is the epoch's steps times the world size: its ranks' batches.
func (u *Unit) Extent(src layout.Source, job api.Job, epoch uint64) (int, error) {
	p, err := u.epochPlan(src.DS, job, epoch)
	if err != nil {
		return 0, err
	}
	return len(p.steps) * max(job.World, 1), nil
}

// epochPlan is the plan of an epoch of job over ds.
func (u *Unit) epochPlan(ds *catalog.Dataset, job api.Job, epoch uint64) (*epochPlan, error) {
	e, err := u.base.Epoch(layout.StreamOf(ds, job), epoch)
	if err != nil {
		return nil, err
	}
	return u.plans.plan(ds, job, epoch, e)
}

// Lay lays out the rank's batch of step b.Batch: its images (or clips)
// of the step's bucket, through the bucket's pipeline.
func (u *Unit) Lay(ctx context.Context, b *layout.Batch) error {
	if b.Source.Assignment(b.Job) != api.AssignPlain {
		return fmt.Errorf("bucket job: assignment %s: a bucket job's ranks take the plain cut", b.Source.Assignment(b.Job))
	}
	p, err := u.epochPlan(b.DS, b.Job, b.Epoch)
	if err != nil {
		return err
	}
	st := p.steps[b.Batch]
	k := p.per[st.Bucket]
	from := p.from[st.Bucket] + st.First + b.Job.Rank*k
	ids := make([]int, k)
	first, end := -1, 0
	for i := range k {
		ids[i] = int(p.ids[st.Bucket][from+i])
		pos := int(p.pos[st.Bucket][from+i])
		if first < 0 || pos < first {
			first = pos
		}
		end = max(end, pos+1)
	}
	sh := p.shapes[st.Bucket]
	name := transform.BucketName(sh.H, sh.W, b.Job.Buckets.RandomCrop(), b.Job.Buckets.Flip)
	pl, err := u.pipes.Pipeline(name)
	if err != nil {
		return err
	}
	c, smp, epochLen, err := u.kindOf(b.Job).read(ctx, b, p, sh, pl, ids)
	if err != nil {
		return err
	}
	b.Content = c
	s := layout.StreamOf(b.DS, b.Job)
	b.Parts = []layout.Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: first, End: end,
		Share: max(1, p.n/max(1, len(p.steps))), EpochLen: epochLen}}
	b.Take = layout.TakeAll(len(smp.IDs))
	b.Job.Transform, b.Job.TransformFingerprint = name, pl.Fingerprint()
	return nil
}

// AppendKey names the job's buckets, budget, upscale rule, flip and
// resume point (a clip bucket job's temporal factor and clip parameters
// too), and the server's bucket pipelines (their decoder and
// pixel bound, by the fingerprint of the first bucket's).
func (u *Unit) AppendKey(s []byte, job api.Job) []byte {
	bk := job.Buckets
	s = fmt.Appendf(s, "|buckets=%s|%d|%d|%d|%d|%g|%s|%g|%s", bk.Shapes, bk.Pixels, bk.Tokens, bk.VAE, bk.Patch, bk.Upscale(), bk.Small, bk.Flip, bk.Resume)
	s = u.kindOf(job).key(s, job)
	if bk.RandomCrop() {
		s = append(s, "|crop=random"...)
	}
	if shapes, err := bucket.Parse(bk.Shapes); err == nil {
		if pl, err := u.pipes.Pipeline(transform.BucketName(shapes[0].H, shapes[0].W, bk.RandomCrop(), bk.Flip)); err == nil {
			s = append(append(s, '|'), pl.Fingerprint()...)
		}
	}
	return s
}

// MakerOf is the maker of batch b's bytes (visit.Chooser): the clip
// stage for a clip bucket job's clips, none for images.
func (u *Unit) MakerOf(b *layout.Batch) visit.Maker { return u.kindOf(b.Job).maker() }

// BatchHeaders names a batch's samples' geometry (the gateway's
// Brand-Bucket-Geometry header: each image's or clip's
// micro-conditioning).
func (u *Unit) BatchHeaders(h http.Header, b *layout.Batch) {
	if g := u.kindOf(b.Job).geometry(b); g != "" {
		h.Set(api.HeaderBucketGeometry, g)
	}
}

// Describe adds the epoch's buckets to /epoch/N.
func (u *Unit) Describe(info *api.EpochInfo, src layout.Source, job api.Job, epoch uint64) error {
	p, err := u.epochPlan(src.DS, job, epoch)
	if err != nil {
		return err
	}
	info.Buckets = p.info(job)
	return nil
}

// Batch is a bucket job's batch's content: its images, served as the
// transform stage makes them of what the batch reads, and their
// geometry (Geometry).
type Batch struct {
	Shape bucket.Shape
	sizes Sizes
	pipe  *transform.Pipeline
	// comp is, for a batch of a bucketed mixture (mixed), the source its
	// n images are of.
	comp, n int
	mixed   bool
}

// Served is -1: the batch serves the images it reads.
func (*Batch) Served() int { return -1 }

// Size is not known before the images are decoded.
func (*Batch) Size() (int64, bool) { return 0, false }

// Components is nil for a job of one dataset's; a bucketed mixture's
// batch's images are all of one source.
func (c *Batch) Components() []int {
	if !c.mixed {
		return nil
	}
	out := make([]int, c.n)
	for i := range out {
		out[i] = c.comp
	}
	return out
}

// Geometry is each served image's SDXL micro-conditioning, in order:
// its displayed size (W,H), the crop's offsets (LEFT,TOP) in the image
// resized to cover the bucket, and 1 if it is flipped: "W,H,LEFT,TOP,FLIP"
// each, semicolon-separated (the Brand-Bucket-Geometry header).
func (c *Batch) Geometry(b *layout.Batch) string {
	var sb strings.Builder
	for i := range b.Len() {
		ds, id, _ := b.Sample(i)
		w, h, _ := c.sizes.Of(ds, id)
		part := b.Parts[b.Take[i].Part]
		key := transform.Key{Seed: transform.KeySeed(b.Job.Seed, ds.Name), Epoch: part.Epoch, Sample: uint64(id)}
		writeGeometry(&sb, i, geometry(c.pipe, c.Shape, w, h, key))
	}
	return sb.String()
}

// geometry is a sample's micro-conditioning (Batch.Geometry) of size
// w×h (0×0 for none) in bucket sh, its draws of key under pipe.
func geometry(pipe *transform.Pipeline, sh bucket.Shape, w, h int, key transform.Key) [5]int {
	flip := 0
	_, _, left, top := bucket.Crop(max(w, 1), max(h, 1), sh)
	if w > 0 && h > 0 {
		if g, err := pipe.Geometry(w, h, key); err == nil {
			d := g.Draws()
			if len(d.Flips) > 0 && d.Flips[0] {
				flip = 1
			}
			if len(d.Crops) > 0 { // crop=random: the box drawn in the image resized to cover
				left, top = d.Crops[0].X, d.Crops[0].Y
			}
		}
	}
	return [5]int{w, h, left, top, flip}
}

// writeGeometry writes the i-th sample's geometry g to sb.
func writeGeometry(sb *strings.Builder, i int, g [5]int) {
	if i > 0 {
		sb.WriteByte(';')
	}
	for j, v := range g {
		if j > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(v))
	}
}

// CatalogSizes are the datasets' image sizes as their catalog loads them
// (catalog.Dataset.LoadSizes): the Sizes a node's bucket unit reads.
type CatalogSizes struct{}

// Load loads ds's sizes from its store if they are not in memory.
func (CatalogSizes) Load(ctx context.Context, ds *catalog.Dataset) error {
	_, err := ds.LoadSizes(ctx)
	return err
}

// Of is sample id's image's size in ds, false if its sizes are not
// loaded.
func (CatalogSizes) Of(ds *catalog.Dataset, id int) (w, h int, ok bool) {
	f := ds.Sizes()
	if f == nil {
		return 0, 0, false
	}
	s, _ := f.Of(id)
	return int(s.W), int(s.H), true
}
