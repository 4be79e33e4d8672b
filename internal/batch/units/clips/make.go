package clips

import (
	"context"
	"errors"
	"fmt"

	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// Stage decodes a clip batch's clips from the GOPs (and rows) it read
// (tensorize.Stage): the transform stage's work for a clip job.
type Stage interface {
	Clips(ctx context.Context, req tensorize.ClipRequest) (*tensorize.ClipOutput, error)
}

// Pipelines are the server's pipelines a clip job may name (the
// transform stage's).
type Pipelines interface {
	Pipeline(name string) (*transform.Pipeline, error)
}

// Premakes: a clip's frames are decoded, worth starting before the
// request.
func (*Unit) Premakes() bool { return true }

// Make decodes clip batch b's clips from the GOPs and rows read as res. A
// clip that needs a GOP or row of a chunk damaged or lost at rest, or
// whose video's packets do not decode (skip mode, both), is left out and
// named (layout.ClipBatch.Without, WithoutAt). The read's pins go
// back once the clips are written, before any is sent. noWait: a premade
// batch, which takes no memory it would wait for.
func (u *Unit) Make(ctx context.Context, b *layout.Batch, res *reader.Result, noWait bool) (*visit.Served, error) {
	defer res.Release()
	old := b.Content.(*ClipBatch)
	nb, cb := old.Without(b, res.MissingPos)
	data := make([][]byte, b.Reads()) // by read position; nil where missing
	for i, j, m := 0, 0, 0; i < b.Reads(); i++ {
		if m < len(res.MissingPos) && res.MissingPos[m] == i {
			m++
			continue
		}
		data[i] = res.Parts[j]
		j++
	}
	var pl *transform.Pipeline
	if b.Job.Transform != "" {
		var err error
		if pl, err = u.cfg.Pipelines.Pipeline(b.Job.Transform); err != nil {
			return nil, err
		}
	}
	ds := b.Parts[0].Samples.DS
	seed := transform.KeySeed(b.Job.Seed, ds.Name)
	// The clips' draws are of their stream's epoch: the batch's, or a
	// mixture's component's pass.
	epoch := b.Parts[0].Epoch
	req := tensorize.ClipRequest{Pipeline: pl, Layout: video.Layout(cb.Layout), Video: cb.Space.Video, NoWait: noWait,
		Place: visit.PlaceOf(b), GOPs: map[clips.GOP][]byte{}, Rows: map[int][]byte{}, Clips: make([]tensorize.ClipSample, len(cb.Clips)),
		Skip: u.cfg.SkipDamaged, Missing: len(nb.Missing)}
	for i, c := range cb.Clips {
		req.Clips[i] = tensorize.ClipSample{Key: cb.Keys[i], Clip: c, Draw: transform.Key{Seed: seed, Epoch: epoch, Sample: uint64(c.Sample)}}
		if cb.Pos != nil {
			// Its GOPs are decoded once for its horizon's clips.
			h, err := u.horizonOf(b.Parts[0].Stream, b.Epoch, cb.Pos[i])
			if err != nil {
				return nil, err
			}
			req.Clips[i].Pos, req.Clips[i].Horizon = cb.Pos[i], h
		}
		for _, g := range c.GOPs {
			req.GOPs[g] = data[cb.GOPs[g]]
		}
		for r, at := range cb.Rows {
			req.Rows[r] = data[at]
		}
	}
	out, err := u.cfg.Stage.Clips(ctx, req)
	if errors.Is(err, video.ErrDecode) && !u.cfg.SkipDamaged {
		return nil, fmt.Errorf("%w (a server started with --on-damaged-chunk=skip serves the batch without the clips of a video that does not decode)", err)
	}
	if err != nil {
		return nil, err
	}
	if len(out.Failed) > 0 {
		keys := make([]string, len(out.Failed))
		for k, i := range out.Failed {
			keys[k] = cb.Keys[i]
		}
		nb = cb.WithoutAt(nb, out.Failed)
		u.cfg.Log.Warn().Str("dataset", ds.Name).Strs("skipped_clips", keys).AnErr("first", out.Errors[0]).
			Msg("serving without the clips of a video that does not decode")
	}
	r := reader.Owned(out.Parts, out.Bytes, out.Release)
	r.Figures, r.PerPart, r.MissingPos = res.Figures, res.PerPart, nb.Missing
	return &visit.Served{Batch: nb, Result: r}, nil
}

// noStage is the clip stage of a unit made without one: a clip job is
// refused.
type noStage struct{}

var errNoStage = errors.New("clips: no clip stage")

func (noStage) Clips(context.Context, tensorize.ClipRequest) (*tensorize.ClipOutput, error) {
	return nil, fmt.Errorf("%w: %w", video.ErrNoDecoder, errNoStage)
}

// noPipelines are the pipelines of a unit made without a transform stage:
// a clip job that names a pipeline is refused.
type noPipelines struct{}

var errNoPipelines = errors.New("clips: no transform stage")

func (noPipelines) Pipeline(name string) (*transform.Pipeline, error) {
	return nil, fmt.Errorf("%w %q: %w", transform.ErrUnknownPipeline, name, errNoPipelines)
}

var (
	_ visit.Maker   = (*Unit)(nil)
	_ layout.Spaced = (*Unit)(nil)
)
