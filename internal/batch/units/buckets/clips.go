package buckets

import (
	"context"
	"fmt"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	clipunit "github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/transform"
)

// A clip bucket job (buckets of HxWxT over a tree of videos, api.Buckets.ClipOf)
// is laid out as an image bucket job is, over the base order of its clip
// job of one clip a video (clipunit.ClipSpace): each video goes to its
// bucket by its size and length (bucket.NearestClip), and a batch's
// clips are drawn, each of its bucket's frames, from the clip space of
// those frames (the same stride, rate and start rule, one clip a video:
// its start drawn anew each epoch within the video), read and decoded as
// a clip job's (clipunit.ReadClips; the clip stage), each
// frame resized to cover the bucket and cropped to it by the bucket's
// pipeline — the draws (crop, flip) of an image of the video's size.

// clipKind buckets a tree of videos' clips by their videos' sizes and
// lengths, over the clip unit's spaces.
type clipKind struct{ u *Unit }

// load makes the clip space a video's size and length are read from:
// a dataset that is not a tree of videos is refused here, before a node
// without a video decoder says it has none.
func (k clipKind) load(_ context.Context, ds *catalog.Dataset, job api.Job) error {
	_, err := k.u.clips.Space(ds, job.Clip.Key())
	return err
}

// name is the key of the video of sample n of the base clip space.
func (clipKind) name(_ *catalog.Dataset, p *epochPlan, n int) string {
	return p.space.Dataset().Videos[p.space.VideoOf(n)].Key
}

// unavailable is the clip unit's: a node built without a video decoder
// serves no clip.
func (k clipKind) unavailable(job api.Job) error { return k.u.clips.Unavailable(job) }

// key names the temporal factor and the clip parameters.
func (clipKind) key(s []byte, job api.Job) []byte {
	return fmt.Appendf(s, "|vae_t=%d|clips=%s|clip_layout=%s", job.Buckets.VAET, job.Clip.Key(), job.Clip.LayoutName())
}

// assigner buckets a clip by its video's size and length
// (bucket.NearestClip); p.space is set to the base clip space, and the
// videos too short for the shortest bucket, which it leaves out, are
// counted too short.
func (k clipKind) assigner(ds *catalog.Dataset, job api.Job, shapes []bucket.Shape, p *epochPlan) (func(id int) (int, bucket.Fit, error), error) {
	up := job.Buckets.Upscale()
	cs, err := k.u.clips.Space(ds, job.Clip.Key())
	if err != nil {
		return nil, err
	}
	p.space = cs
	d := cs.Dataset()
	p.tooShort = len(d.Videos) - cs.Samples()
	stride := max(job.Clip.Stride, 1)
	return func(n int) (int, bucket.Fit, error) {
		v := cs.VideoOf(n)
		t := &d.Videos[v].Track
		if t.Width <= 0 || t.Height <= 0 {
			return 0, bucket.NoImage, nil
		}
		b, ok := bucket.NearestClip(t.Width, t.Height, cs.Length(v), stride, shapes)
		if !ok {
			return 0, bucket.TooShort, nil
		}
		return b, bucket.FitOf(t.Width, t.Height, shapes[b], up), nil
	}, nil
}

// read draws the clips and lays out their reads; a clip stream's epoch is
// of clips.
func (k clipKind) read(ctx context.Context, b *layout.Batch, p *epochPlan, sh bucket.Shape, pipe *transform.Pipeline, ids []int) (layout.Content, layout.Samples, int, error) {
	cb, smp, err := k.u.clipBatch(ctx, b, p.space, sh, pipe, ids)
	return cb, smp, p.n, err
}

// maker is the clip unit's: a clip bucket job's clips are decoded by the
// clip stage, through their bucket's pipeline.
func (k clipKind) maker() visit.Maker { return k.u.clips }

// shape is the batch's bucket: its pipeline's frame size
// (transform.BucketName) and its clips' frames.
func (clipKind) shape(b *layout.Batch) bucket.Shape {
	var sh bucket.Shape
	if spec, err := transform.BucketSpec(b.Job.Transform); err == nil {
		sh.H, sh.W = spec.Ops[0].Size.H, spec.Ops[0].Size.W
	}
	if cl := b.Content.(*clipunit.ClipBatch).Clips; len(cl) > 0 {
		sh.T = len(cl[0].Frames)
	}
	return sh
}

// geometry is the batch's clips' (clipunit.ClipBatch.Geometry, as
// clipBatch sets it).
func (clipKind) geometry(b *layout.Batch) string { return b.Content.(*clipunit.ClipBatch).Geometry(b) }

// clipBatch draws the clips of the videos whose base samples are ids
// (the base space's) in bucket sh and lays out their reads, with their
// geometry under pipe.
func (u *Unit) clipBatch(ctx context.Context, b *layout.Batch, base *clipunit.ClipSpace, sh bucket.Shape, pipe *transform.Pipeline, ids []int) (*clipunit.ClipBatch, layout.Samples, error) {
	c := b.Job.Clip
	key := api.Clip{Frames: sh.T, Stride: c.Stride, FPS: c.FPS, Step: api.MaxClipStep, First: c.First}.Key()
	sp, err := u.clips.Space(b.DS, key)
	if err != nil {
		return nil, layout.Samples{}, err
	}
	cl := make([]clips.Clip, len(ids))
	for i, n := range ids {
		v := base.VideoOf(n)
		m := sp.First(v)
		if m == sp.First(v+1) {
			return nil, layout.Samples{}, fmt.Errorf("%w: video %d holds no clip of %d frames, its bucket's", clipunit.ErrClips, v, sh.T)
		}
		if cl[i], err = sp.Clip(b.Job.Seed, b.Epoch, m); err != nil {
			return nil, layout.Samples{}, fmt.Errorf("%w: %w", clipunit.ErrClips, err)
		}
		// The clip is the base sample's: its draws are keyed by it.
		cl[i].Sample = n
	}
	cb, smp, err := clipunit.ReadClips(ctx, base, cl, c.LayoutName())
	if err != nil {
		return nil, layout.Samples{}, err
	}
	cb.Bucketed = clipGeometry(pipe, sh, transform.KeySeed(b.Job.Seed, b.DS.Name), b.Epoch)
	return cb, smp, nil
}

// clipGeometry writes a clip batch's geometry in bucket sh through pipe,
// its clips' draws keyed by seed (transform.KeySeed) and epoch.
func clipGeometry(pipe *transform.Pipeline, sh bucket.Shape, seed, epoch uint64) func(*clipunit.ClipBatch) string {
	return func(cb *clipunit.ClipBatch) string {
		var sb strings.Builder
		d := cb.Space.Dataset()
		for i, c := range cb.Clips {
			t := &d.Videos[c.Video].Track
			writeGeometry(&sb, i, geometry(pipe, sh, t.Width, t.Height, transform.Key{Seed: seed, Epoch: epoch, Sample: uint64(c.Sample)}))
		}
		return sb.String()
	}
}
