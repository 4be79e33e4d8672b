package layout_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// pairs is a unit of a package other than layout, made with nothing but
// the seam's exported API (Base, Source, Batch, Part, Take, Content): its
// items are pairs of consecutive samples of the base order, a batch of k
// pairs reading 2k samples as one part.
type pairs struct{ base layout.Base }

type pairBatch struct{ n int }

func (p pairBatch) Served() int                    { return p.n }
func (pairBatch) Size() (int64, bool)              { return 0, false }
func (pairBatch) Components() []int                { return nil }
func (pairs) Feature() features.Feature            { return features.Samples }
func (pairs) AppendKey(s []byte, _ api.Job) []byte { return append(s, "|pairs"...) }

func (pairs) View(_ context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	return ds.Select(job.Columns)
}

func (p pairs) Extent(src layout.Source, job api.Job, epoch uint64) (int, error) {
	e, err := p.base.Epoch(layout.StreamOf(src.DS, job), epoch)
	if err != nil {
		return 0, err
	}
	return e.NumSamples() / 2, nil
}

func (p pairs) Lay(ctx context.Context, b *layout.Batch) error {
	if b.Source.Assignment(b.Job) != api.AssignPlain {
		return fmt.Errorf("pairs take the plain cut")
	}
	s := layout.StreamOf(b.DS, b.Job)
	e, err := p.base.Epoch(s, b.Epoch)
	if err != nil {
		return err
	}
	ids := p.base.AppendRange(nil, s, e, b.Epoch, 2*b.Start, 2*b.End)
	smp, err := layout.NewSamples(ctx, b.DS, ids)
	if err != nil {
		return err
	}
	b.Parts = []layout.Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: 2 * b.Start, End: 2 * b.End, EpochLen: b.DS.Index.NumSamples()}}
	b.Take = layout.TakeAll(len(ids))
	b.Content = pairBatch{len(ids) / 2}
	return nil
}

func (pairs) Describe(info *api.EpochInfo, _ layout.Source, _ api.Job, _ uint64) error {
	info.RankSamples = -1 // overwritten by Info: the unit's figures come first
	return nil
}

// TestUnitOfAnotherPackage: a kind of batch is one unit behind the seam.
// A unit made outside the package from its exported API alone, passed
// in the orders' kinds for its feature, takes that feature's jobs —
// their extent, layout, ETag and /epoch figures — and nothing in the
// layout asks which kind it is; orders made without it serve no such
// job (ErrNoUnit).
func TestUnitOfAnotherPackage(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 6, 10)
	job := api.Job{Dataset: "d", Params: shuffle.Params{Seed: 7, Window: 2, BatchSize: 4, World: 2, Rank: 1}}
	kinds := func(b layout.Base) ([]layout.Unit, layout.Composer) { return []layout.Unit{pairs{b}}, nil }
	o := layout.New(nil, kinds)
	src := layout.Source{DS: ds}
	if u := o.UnitOf(features.Requested(job)); u == nil || u.Feature() != features.Samples {
		t.Fatalf("the unit of a job of samples: %v", u)
	}
	batches, n, err := o.Extent(src, job, 0)
	if err != nil || n != 30 || batches != 4 {
		t.Fatalf("extent: %d batches of %d pairs, %v; want 4 of 30", batches, n, err)
	}
	e, err := o.Epoch(layout.StreamOf(ds, job), 0)
	if err != nil {
		t.Fatal(err)
	}
	order := layout.New(nil, nil).Base().AppendRange(nil, layout.StreamOf(ds, job), e, 0, 0, e.NumSamples())
	// The ETag is the unit's own: not the samples kind's, nor that of
	// the same unit naming nothing of its own.
	samples := units.Orders(nil)
	plain := layout.New(nil, func(b layout.Base) ([]layout.Unit, layout.Composer) {
		return []layout.Unit{noKey{pairs{b}}}, nil
	})
	for m := range uint64(batches) {
		b, err := o.Layout(context.Background(), src, job, 0, m)
		if err != nil {
			t.Fatal(err)
		}
		start, end, _ := job.BatchRange(n, int(m))
		if want := order[2*start : 2*end]; !slices.Equal(b.Parts[0].Samples.IDs, want) || b.Len() != end-start {
			t.Fatalf("batch %d: samples %v serving %d; want %v serving %d", m, b.Parts[0].Samples.IDs, b.Len(), want, end-start)
		}
		if b.ETag == samples.ETag(src, job, 0, m) || b.ETag == plain.ETag(src, job, 0, m) || b.ETag != o.ETag(src, job, 0, m) {
			t.Fatalf("batch %d: ETag %s names no unit of its own", m, b.ETag)
		}
		if b.Unit == nil || b.Unit.Feature() != features.Samples {
			t.Fatalf("batch %d: laid out by %v", m, b.Unit)
		}
	}
	info, err := o.Info(src, job, 0)
	if err != nil || info.Samples != 30 || info.Batches != 4 || info.RankSamples != job.RankSamples(30) {
		t.Fatalf("/epoch/0: %+v %v", info, err)
	}
	if _, _, err := layout.New(nil, nil).Extent(src, job, 0); !errors.Is(err, layout.ErrNoUnit) {
		t.Fatalf("orders without a unit of samples: %v, want ErrNoUnit", err)
	}
}

// noKey is a unit that names nothing of its own in the ETag.
type noKey struct{ pairs }

func (noKey) AppendKey(s []byte, _ api.Job) []byte { return s }
