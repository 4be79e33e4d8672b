package buckets

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/transform"
)

// A sampleKind is what a bucket job buckets: a dataset's images, by
// their sizes in the index, or a tree of videos' clips, by their videos'
// sizes and lengths. Everything the unit does that depends on which is
// asked of it; kindOf chooses it, the one place the unit takes which.
type sampleKind interface {
	// load loads what ds's samples are bucketed by (an image's size),
	// refusing a dataset of no such samples.
	load(ctx context.Context, ds *catalog.Dataset, job api.Job) error
	// name names sample id of the base order (an image's key, a video's).
	name(ds *catalog.Dataset, p *epochPlan, id int) string
	// unavailable is why this node serves none of them, nil if it
	// does.
	unavailable(job api.Job) error
	// key appends its parameters to a batch's ETag key.
	key(s []byte, job api.Job) []byte
	// assigner returns the rule that gives a sample of the epoch (by
	// its ID in the base order) its bucket and fit, noting in p what
	// the epoch's plan keeps of it.
	assigner(ds *catalog.Dataset, job api.Job, shapes []bucket.Shape, p *epochPlan) (func(id int) (int, bucket.Fit, error), error)
	// read lays out the reads of a batch of samples ids (base order
	// IDs) of bucket sh through pipe: its content, its samples and the
	// positions of its stream's epoch.
	read(ctx context.Context, b *layout.Batch, p *epochPlan, sh bucket.Shape, pipe *transform.Pipeline, ids []int) (layout.Content, layout.Samples, int, error)
	// geometry is the micro-conditioning of batch b's samples, as read
	// laid them out (the Brand-Bucket-Geometry header).
	geometry(b *layout.Batch) string
	// maker is the stage that makes its batches' bytes, nil for images,
	// which go through their bucket's pipeline as a job's that names one.
	maker() visit.Maker
	// shape is batch b's bucket, as read laid it out.
	shape(b *layout.Batch) bucket.Shape
}

// kindOf is what job buckets: clips for a clip bucket job (buckets of
// HxWxT, whose clip parameters the parser derived), images otherwise.
func (u *Unit) kindOf(job api.Job) sampleKind {
	if job.Clip.On() {
		return clipKind{u}
	}
	return imageKind{u}
}

// imageKind buckets a dataset's images by their sizes in the index.
type imageKind struct{ u *Unit }

func (k imageKind) load(ctx context.Context, ds *catalog.Dataset, _ api.Job) error {
	return k.u.sizes.Load(ctx, ds)
}

func (imageKind) name(ds *catalog.Dataset, _ *epochPlan, id int) string {
	return ds.Index.SampleKey(id)
}

func (imageKind) unavailable(api.Job) error { return nil }

// key is nothing: an image bucket job's key as it was before clips.
func (imageKind) key(s []byte, _ api.Job) []byte { return s }

// assigner buckets an image by its displayed size (bucket.Nearest).
func (k imageKind) assigner(ds *catalog.Dataset, job api.Job, shapes []bucket.Shape, _ *epochPlan) (func(id int) (int, bucket.Fit, error), error) {
	up := job.Buckets.Upscale()
	return func(id int) (int, bucket.Fit, error) {
		w, h, ok := k.u.sizes.Of(ds, id)
		if !ok {
			return 0, 0, fmt.Errorf("bucket job over dataset %s: its image sizes are not loaded", ds.Name)
		}
		if w <= 0 || h <= 0 {
			return 0, bucket.NoImage, nil
		}
		b := bucket.Nearest(w, h, shapes)
		return b, bucket.FitOf(w, h, shapes[b], up), nil
	}, nil
}

// read reads the images as stored, which the transform stage makes into
// the bucket's tensors through its pipeline.
func (k imageKind) read(ctx context.Context, b *layout.Batch, _ *epochPlan, sh bucket.Shape, pipe *transform.Pipeline, ids []int) (layout.Content, layout.Samples, int, error) {
	smp, err := layout.NewSamples(ctx, b.DS, ids)
	if err != nil {
		return nil, layout.Samples{}, 0, err
	}
	return &Batch{Shape: sh, sizes: k.u.sizes, pipe: pipe}, smp, b.DS.Index.NumSamples(), nil
}

// geometry is the batch's images' (Batch.Geometry).
func (imageKind) geometry(b *layout.Batch) string { return b.Content.(*Batch).Geometry(b) }

// maker is none: an image bucket job's batch is transformed as read.
func (imageKind) maker() visit.Maker { return nil }

func (imageKind) shape(b *layout.Batch) bucket.Shape { return b.Content.(*Batch).Shape }
