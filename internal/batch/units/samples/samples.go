// Package samples is the unit of a job of samples as stored: an epoch is
// its base order's samples, and a batch the rank's slice of them — the
// plain cut, or its share of the global batch by locality or by their
// stored bytes (balance=bytes). It mixes as passes of samples
// (internal/batch/units/mixture): a mixture of datasets' samples.
package samples

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
)

// Unit is the unit of a job of samples as stored. Safe for concurrent
// use.
type Unit struct {
	base layout.Base
}

// New returns the unit over the orders' base b.
func New(b layout.Base) *Unit { return &Unit{base: b} }

func (*Unit) Feature() features.Feature { return features.Samples }

// View is the fields job names (columns=).
func (*Unit) View(_ context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	return ds.Select(job.Columns)
}

// Extent is the base order's samples.
func (u *Unit) Extent(src layout.Source, job api.Job, epoch uint64) (int, error) {
	e, err := u.base.Epoch(layout.StreamOf(src.DS, job), epoch)
	if err != nil {
		return 0, err
	}
	return e.NumSamples(), nil
}

// Lay lays out the rank's samples of b as one part.
func (u *Unit) Lay(ctx context.Context, b *layout.Batch) error {
	s := layout.StreamOf(b.DS, b.Job)
	e, err := u.base.Epoch(s, b.Epoch)
	if err != nil {
		return err
	}
	ids, from, bal, err := u.ids(ctx, b, s, e)
	if err != nil {
		return err
	}
	b.Balanced = bal
	smp, err := layout.NewSamples(ctx, b.DS, ids)
	if err != nil {
		return err
	}
	b.Parts = []layout.Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: b.Start, End: b.End, Drawn: b.Start - from,
		Share: b.Job.BatchSize * b.Job.World, EpochLen: b.DS.Index.NumSamples()}}
	b.Take = layout.TakeAll(len(ids))
	return nil
}

// ids is the samples b's rank takes of its global batch over stream s,
// and the first position they may lie at: its plain cut's, or its share
// of the global batch by locality or cost (samples weighed by their
// stored bytes), drawn from the whole global batch.
func (u *Unit) ids(ctx context.Context, b *layout.Batch, s layout.Stream, e *layout.EpochOrder) ([]int, int, *layout.Balanced, error) {
	src, job := b.Source, b.Job
	if src.Assignment(job) == api.AssignPlain {
		return u.base.AppendRange(nil, s, e, b.Epoch, b.Start, b.End), b.Start, nil, nil
	}
	shares, gstart, gend, err := layout.GlobalBatch(job, b.EpochSamples, int(b.Batch))
	if err != nil {
		return nil, 0, nil, err
	}
	ids := u.base.AppendRange(make([]int, 0, gend-gstart), s, e, b.Epoch, gstart, gend)
	places, info, err := u.base.Assign(b, layout.Global{Shares: shares,
		Owners: func() ([]int, error) {
			owners := src.DS.Owners(src.Members)
			out := make([]int, len(ids))
			for i, id := range ids {
				out[i] = owners[src.DS.Index.ChunkOf(id)]
			}
			return out, nil
		},
		Costs: func() ([]uint64, error) { return ByteCosts(ctx, src.DS, b.Batch, ids) }})
	if err != nil {
		return nil, 0, nil, err
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
	return mine, min(gstart, b.Start), info, nil
}

// ByteCosts weighs samples ids of ds, of global batch m, by their stored
// bytes (balance=bytes).
func ByteCosts(ctx context.Context, ds *catalog.Dataset, m uint64, ids []int) ([]uint64, error) {
	info, err := ds.Index.Samples(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the index entries of global batch %d of dataset %s: %w", m, ds.Name, err)
	}
	costs := make([]uint64, len(info))
	for i, in := range info {
		costs[i] = uint64(in.Length)
	}
	return costs, nil
}

// AppendKey names nothing: samples as stored are selected by the
// parameters every batch's ETag names.
func (*Unit) AppendKey(s []byte, _ api.Job) []byte { return s }

// Describe adds nothing to /epoch/N.
func (*Unit) Describe(*api.EpochInfo, layout.Source, api.Job, uint64) error { return nil }
