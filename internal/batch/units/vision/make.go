package vision

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/vision"
)

// Stage writes a vision batch's sequences from its image-text samples
// (sequences.Stage): the stage between read and respond for a vision job.
type Stage interface {
	PackVision(ctx context.Context, req sequences.VisionRequest) (*sequences.Output, error)
}

// noStage is the stage of a unit made without one: a vision batch fails.
type noStage struct{}

var errNoStage = errors.New("vision: no pack stage")

func (noStage) PackVision(context.Context, sequences.VisionRequest) (*sequences.Output, error) {
	return nil, errNoStage
}

// Premakes is false, as for a token job.
func (*Unit) Premakes() bool { return false }

// ErrVisionMissing marks a vision batch a sample of which was not read
// (its chunk damaged at rest, under --on-damaged-chunk=skip): its
// sequences' spans were laid out with the sample, so the batch fails
// rather than serve a sequence without it.
var ErrVisionMissing = errkind.New(errkind.Upstream, "vision: a vision sequence's sample was not read")

// Make writes vision batch b's sequences from its samples, read
// as res: each sample read again under the job's rule and checked
// against the item it was laid out by (vision.Reader.ReadSequence), then
// written by the pack stage (sequences.Stage.PackVision) into the copy
// budget, keyed as a token job's sequences (sequences.Key). The read's
// pins go back once the sequences are written, before any is sent.
// noWait: a premade batch, which takes no memory it would wait for.
func (vs *Unit) Make(ctx context.Context, b *layout.Batch, res *reader.Result, noWait bool) (*visit.Served, error) {
	defer res.Release()
	vb := b.Content.(*VisionBatch)
	if len(res.MissingPos) > 0 {
		_, _, in := b.Sample(res.MissingPos[0])
		return nil, fmt.Errorf("%w: sample %s of batch %d (and %d more)", ErrVisionMissing, in.Key, b.Batch, len(res.MissingPos)-1)
	}
	req := sequences.VisionRequest{Writer: vb.Writer, Keys: make([]string, len(vb.Seqs)), Samples: make([][]vision.Sample, len(vb.Seqs)), NoWait: noWait, Skip: vs.cfg.SkipBadImages}
	for i, q := range vb.Seqs {
		at := vb.At[i]
		if vb.IsText(i) {
			samples, err := textSamples(b, res, vb, i)
			if err != nil {
				return nil, err
			}
			req.Keys[i], req.Samples[i] = sequences.Key(b.Epoch, vb.Pos[i]), samples
			continue
		}
		src := func(id int) (string, []byte, error) {
			for j, sid := range q.Samples {
				if sid == id {
					_, _, in := b.Sample(at[j])
					return in.Key, res.Parts[at[j]], nil
				}
			}
			return "", nil, fmt.Errorf("%w: sample %d is not sequence %d's", vision.ErrSequence, id, vb.Pos[i])
		}
		samples, err := vb.Reader.ReadSequence(src, q, vb.Items)
		if err != nil {
			return nil, err
		}
		req.Keys[i], req.Samples[i] = sequences.Key(b.Epoch, vb.Pos[i]), samples
	}
	out, err := vs.cfg.Stage.PackVision(ctx, req)
	if err != nil {
		return nil, err
	}
	nb, perPart := b, res.PerPart
	if len(out.Skipped) > 0 {
		// Samples whose images' pixels did not decode, left out of their
		// sequences (--on-bad-image=skip): named as a transform job's bad
		// images are, by their read positions.
		missing := make([]int, len(out.Skipped))
		keys := make([]string, len(out.Skipped))
		perPart = slices.Clone(perPart)
		for k, sk := range out.Skipped {
			missing[k] = vb.At[sk.Seq][sk.Sample]
			_, _, in := b.Sample(missing[k])
			keys[k] = in.Key
			if t := b.Take[missing[k]]; t.Part < len(perPart) {
				perPart[t.Part].Samples--
			}
		}
		slices.Sort(missing)
		nb = b.Without(missing)
		vs.cfg.Log.Warn().Strs("skipped_samples", keys).AnErr("first", out.Skipped[0].Err).
			Msg("serving vision sequences without samples whose images do not decode")
	}
	r := reader.Owned(out.Parts, out.Bytes, out.Release)
	r.Figures, r.PerPart, r.MissingPos = res.Figures, perPart, nb.Missing
	return &visit.Served{Batch: nb, Result: r}, nil
}

// textSamples is a vision mixture's text sequence i as samples of text
// alone (sequences.TextSample), one a piece, from its documents read as
// res.
func textSamples(b *layout.Batch, res *reader.Result, vb *VisionBatch, i int) ([]vision.Sample, error) {
	q := vb.Text[i]
	out := make([]vision.Sample, len(q.Pieces))
	for j, pc := range q.Pieces {
		at := vb.At[i][j]
		_, _, in := b.Sample(at)
		if pc.EOS {
			return nil, fmt.Errorf("%w: a piece of document %s ends with an EOS, which a vision mixture's best-fit packing never adds", vision.ErrSequence, in.Key)
		}
		var err error
		if out[j], err = sequences.TextSample(res.Parts[at], vb.DTypes[vb.Comps[i]], pc.Offset, pc.Len); err != nil {
			return nil, fmt.Errorf("%w (document %s)", err, in.Key)
		}
	}
	return out, nil
}
