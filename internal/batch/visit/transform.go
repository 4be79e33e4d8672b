package visit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/transform"
)

// Stage transforms a read's samples (tensorize.Stage): the stage between
// read and respond for a job that names a pipeline.
type Stage interface {
	Pipeline(name string) (*transform.Pipeline, error)
	Apply(ctx context.Context, req tensorize.Request) (*tensorize.Output, error)
}

// ErrFingerprint marks a peer's request for samples transformed by a
// pipeline this node defines otherwise: the asker transforms them itself
// (it reads such a refusal elsewhere, ending with itself).
var ErrFingerprint = fmt.Errorf("%w: another definition of the pipeline", query.ErrBadRequest)

// transform turns batch b's samples, read as res, into their tensors
// under the job's pipeline, each drawn from its key (transform.SampleKey:
// the job's seed and the sample's dataset, its part's epoch, its ID).
// The read's pins go back to the cache as soon as the tensors are made,
// before any of them is written. A sample whose image cannot be
// transformed fails the batch, or with SkipBadImages is left out and
// named as a damaged chunk's samples are (layout.Batch.Without). noWait:
// a premade batch, which takes no memory it would have to wait for.
func (v *Batches) transform(ctx context.Context, b *layout.Batch, res *reader.Result, noWait bool) (*Served, error) {
	defer res.Release()
	pl, err := v.stage.Pipeline(b.Job.Transform)
	if err != nil {
		return nil, err
	}
	// The batch positions read, in order: res.Parts are theirs.
	kept := make([]int, 0, len(res.Parts))
	for i, m := 0, 0; i < b.Len(); i++ {
		if m < len(res.MissingPos) && res.MissingPos[m] == i {
			m++
			continue
		}
		kept = append(kept, i)
	}
	seeds := make([]uint64, len(b.Parts)) // per part: its dataset's key seed
	for i, part := range b.Parts {
		seeds[i] = transform.KeySeed(b.Job.Seed, part.Samples.DS.Name)
	}
	samples := make([]tensorize.Sample, len(kept))
	for j, i := range kept {
		t := b.Take[i]
		part := b.Parts[t.Part]
		s := part.Samples
		samples[j] = tensorize.Sample{Data: res.Parts[j], Name: s.Info[t.At].Key, Dataset: s.DS.Name,
			Key: transform.Key{Seed: seeds[t.Part], Epoch: part.Epoch, Sample: uint64(s.IDs[t.At])}}
	}
	on := tensorize.Fail
	if v.skipBad {
		on = tensorize.Skip
	}
	out, err := v.stage.Apply(ctx, tensorize.Request{Pipeline: pl, Samples: samples, On: on, NoWait: noWait, Place: PlaceOf(b)})
	if errors.Is(err, transform.ErrDecode) || errors.Is(err, transform.ErrTooLarge) {
		return nil, fmt.Errorf("%w (a server started with --on-bad-image=skip serves the batch without it)", err)
	}
	if err != nil {
		return nil, err
	}
	missing := res.MissingPos
	perPart := slices.Clone(res.PerPart)
	if len(out.Failed) > 0 {
		missing = slices.Clone(missing)
		keys := make([]string, len(out.Failed))
		for k, j := range out.Failed {
			missing = append(missing, kept[j])
			keys[k] = samples[j].Name
			if t := b.Take[kept[j]]; t.Part < len(perPart) {
				perPart[t.Part].Samples--
			}
		}
		slices.Sort(missing)
		v.log.Warn().Str("pipeline", pl.Name()).Strs("skipped_samples", keys).AnErr("first", out.Errors[0]).
			Msg("serving without samples whose images cannot be transformed")
	}
	r := reader.Owned(out.Parts, out.Bytes, out.Release)
	r.Figures, r.PerPart, r.MissingPos = res.Figures, perPart, missing
	return &Served{Batch: b.Without(missing), Result: r}, nil
}

// transformFor turns the samples s a peer asked for, read as res, into
// their tensors under the pipeline the peer named, keyed as the peer's
// batch keys them (origin: the job's seed, the part's epoch). A sample
// whose image cannot be transformed is kept as it came: the asker's own
// stage meets the same image and applies its own policy.
func (v *Batches) transformFor(ctx context.Context, s layout.Samples, o *transport.Origin, res *reader.Result) (*reader.Result, error) {
	defer res.Release()
	pl, err := v.stage.Pipeline(o.Transform.Name)
	if err != nil {
		return nil, err
	}
	if pl.Fingerprint() != o.Transform.Fingerprint {
		return nil, fmt.Errorf("%w: pipeline %q has fingerprint %s here, %s at the asker", ErrFingerprint, pl.Name(), pl.Fingerprint(), o.Transform.Fingerprint)
	}
	seed := transform.KeySeed(o.Stream.Seed, s.DS.Name)
	samples := make([]tensorize.Sample, 0, len(res.Parts))
	for i, m := 0, 0; i < len(s.IDs); i++ {
		if m < len(res.MissingPos) && res.MissingPos[m] == i {
			m++
			continue
		}
		samples = append(samples, tensorize.Sample{Data: res.Parts[len(samples)], Name: s.Info[i].Key, Dataset: s.DS.Name,
			Key: transform.Key{Seed: seed, Epoch: o.Epoch, Sample: uint64(s.IDs[i])}})
	}
	out, err := v.stage.Apply(ctx, tensorize.Request{Pipeline: pl, Samples: samples, On: tensorize.Keep})
	if err != nil {
		return nil, err
	}
	r := reader.Owned(out.Parts, out.Bytes, out.Release)
	r.Figures, r.MissingPos = res.Figures, res.MissingPos
	return r, nil
}

// noStage is the stage of Batches built without one: a job that names a
// pipeline is refused.
type noStage struct{}

var errNoStage = errors.New("visit: no transform stage")

func (noStage) Pipeline(name string) (*transform.Pipeline, error) {
	return nil, fmt.Errorf("%w %q: %w", transform.ErrUnknownPipeline, name, errNoStage)
}

func (noStage) Apply(context.Context, tensorize.Request) (*tensorize.Output, error) {
	return nil, errNoStage
}
