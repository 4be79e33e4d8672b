package bucketunit

import (
	"context"
	"fmt"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/transform"
)

// A clip bucket job (buckets of HxWxT over a tree of videos, api.Buckets.ClipOf)
// is laid out as an image bucket job is, over the base order of its clip
// job of one clip a video (layout.ClipSpace): each video goes to its
// bucket by its size and length (bucket.NearestClip), and a batch's
// clips are drawn, each of its bucket's frames, from the clip space of
// those frames (the same stride, rate and start rule, one clip a video:
// its start drawn anew each epoch within the video), read and decoded as
// a clip job's (layout.ReadClips; the transform stage's clip path), each
// frame resized to cover the bucket and cropped to it by the bucket's
// pipeline — the draws (crop, flip) of an image of the video's size.

// clipBatch draws the clips of the videos whose base samples are ids
// (the base space's) in bucket sh and lays out their reads, with their
// geometry under pipe.
func (u *Unit) clipBatch(ctx context.Context, b *layout.Batch, base *layout.ClipSpace, sh bucket.Shape, pipe *transform.Pipeline, ids []int) (*layout.ClipBatch, layout.Samples, error) {
	c := b.Job.Clip
	key := api.Clip{Frames: sh.T, Stride: c.Stride, FPS: c.FPS, Step: api.MaxClipStep, First: c.First}.Key()
	sp, err := u.base.ClipSpace(b.DS, key)
	if err != nil {
		return nil, layout.Samples{}, err
	}
	cl := make([]clips.Clip, len(ids))
	for i, n := range ids {
		v := base.VideoOf(n)
		m := sp.First(v)
		if m == sp.First(v+1) {
			return nil, layout.Samples{}, fmt.Errorf("%w: video %d holds no clip of %d frames, its bucket's", layout.ErrClips, v, sh.T)
		}
		if cl[i], err = sp.Clip(b.Job.Seed, b.Epoch, m); err != nil {
			return nil, layout.Samples{}, fmt.Errorf("%w: %w", layout.ErrClips, err)
		}
		// The clip is the base sample's: its draws are keyed by it.
		cl[i].Sample = n
	}
	cb, smp, err := layout.ReadClips(ctx, base, cl, c.LayoutName())
	if err != nil {
		return nil, layout.Samples{}, err
	}
	seed := transform.KeySeed(b.Job.Seed, b.DS.Name)
	epoch := b.Epoch
	cb.Bucketed = func(cb *layout.ClipBatch) string {
		var sb strings.Builder
		d := cb.Space.Dataset()
		for i, c := range cb.Clips {
			t := &d.Videos[c.Video].Track
			writeGeometry(&sb, i, geometry(pipe, sh, t.Width, t.Height, transform.Key{Seed: seed, Epoch: epoch, Sample: uint64(c.Sample)}))
		}
		return sb.String()
	}
	return cb, smp, nil
}
