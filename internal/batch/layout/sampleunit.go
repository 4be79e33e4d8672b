package layout

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
)

// sampleUnit is the unit of a job of samples as stored: an epoch is its
// base order's samples, and a batch the rank's slice of them — the plain
// cut, or its share of the global batch by locality or by their stored
// bytes (balance=bytes).
type sampleUnit struct {
	base *epochs
	asg  *assigner
}

func (*sampleUnit) Feature() features.Feature { return features.Samples }

// View is the fields job names (columns=).
func (*sampleUnit) View(_ context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	return ds.Select(job.Columns)
}

func (*sampleUnit) Extent(_ *catalog.Dataset, _ api.Job, _ uint64, e *EpochOrder) (int, error) {
	return e.NumSamples(), nil
}

// Lay lays out the rank's samples of b as one part.
func (u *sampleUnit) Lay(ctx context.Context, b *Batch, e *EpochOrder) error {
	s := StreamOf(b.DS, b.Job)
	ids, bal, err := u.ids(ctx, b, s, e)
	if err != nil {
		return err
	}
	b.Balanced = bal
	smp, err := NewSamples(ctx, b.DS, ids)
	if err != nil {
		return err
	}
	b.Parts = []Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: b.Start, End: b.End, Share: b.Job.BatchSize * b.Job.World,
		EpochLen: b.DS.Index.NumSamples()}}
	b.Take = make([]Take, len(ids))
	for i := range b.Take {
		b.Take[i].At = i
	}
	return nil
}

// ids is the samples b's rank takes of its global batch over stream s:
// its plain cut's, or its share of the global batch by locality or cost
// (samples weighed by their stored bytes).
func (u *sampleUnit) ids(ctx context.Context, b *Batch, s Stream, e *EpochOrder) ([]int, *Balanced, error) {
	src, job := b.Source, b.Job
	if src.assignment(job) == plainCut {
		return u.base.appendRange(nil, s, e, b.Epoch, b.Start, b.End), nil, nil
	}
	shares, gstart, gend, err := globalBatch(job, b.EpochSamples, int(b.Batch))
	if err != nil {
		return nil, nil, err
	}
	ids := u.base.appendRange(make([]int, 0, gend-gstart), s, e, b.Epoch, gstart, gend)
	places, info, err := u.asg.places(src, job, b.Epoch, b.Batch, b.global, global{shares: shares,
		owners: func() ([]int, error) {
			owners := src.DS.Owners(src.Members)
			out := make([]int, len(ids))
			for i, id := range ids {
				out[i] = owners[src.DS.Index.ChunkOf(id)]
			}
			return out, nil
		},
		costs: func() ([]uint64, error) {
			info, err := src.DS.Index.Samples(ctx, ids)
			if err != nil {
				return nil, fmt.Errorf("reading the index entries of global batch %d of dataset %s: %w", b.Batch, src.DS.Name, err)
			}
			costs := make([]uint64, len(info))
			for i, in := range info {
				costs[i] = uint64(in.Length)
			}
			return costs, nil
		}})
	if err != nil {
		return nil, nil, err
	}
	mine := make([]int, len(places))
	for k, at := range places {
		mine[k] = ids[at]
	}
	if s.Sampled() {
		// A rank's samples are a subsequence of the global batch, which
		// can put two draws of one sample next to each other.
		importance.SeparateRepeats(mine)
	}
	return mine, info, nil
}

// AppendKey names nothing: samples as stored are selected by the
// parameters every batch's ETag names.
func (*sampleUnit) AppendKey(s []byte, _ api.Job) []byte { return s }

// Describe adds nothing to /epoch/N.
func (*sampleUnit) Describe(*api.EpochInfo, *catalog.Dataset, api.Job, uint64) error { return nil }
