package visit_test

import (
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/batch/visit"
)

// TestPlaceOf: every batch of one epoch of one order has one job in the
// transform stage's queue, whatever the request's job name, and its place
// is its first position; another epoch or order is another job, and a
// mixture's batch keeps its arrival.
func TestPlaceOf(t *testing.T) {
	batch := func(s layout.Stream, epoch uint64, start int) *layout.Batch {
		return &layout.Batch{Epoch: epoch, Start: start, Parts: []layout.Part{{Stream: s}}}
	}
	a := layout.Stream{Seed: 1, Window: 2, Space: "16/2"}
	named := a
	named.Name = "train"
	rank0, rank1 := visit.PlaceOf(batch(a, 3, 16)), visit.PlaceOf(batch(named, 3, 24))
	if rank0.Job == nil || rank0.Job != rank1.Job {
		t.Errorf("one epoch of one order: jobs %v and %v", rank0.Job, rank1.Job)
	}
	if rank0.Pos != 16 || rank1.Pos != 24 {
		t.Errorf("places %d and %d, want 16 and 24", rank0.Pos, rank1.Pos)
	}
	other := a
	other.Seed = 2
	for _, p := range []struct {
		name string
		b    *layout.Batch
	}{{"another epoch", batch(a, 4, 16)}, {"another order", batch(other, 3, 16)}} {
		if visit.PlaceOf(p.b).Job == rank0.Job {
			t.Errorf("%s: the same job", p.name)
		}
	}
	mixed := batch(a, 3, 16)
	mixed.Unit = &mixture.Mixed{}
	if got := visit.PlaceOf(mixed); got.Job != nil {
		t.Errorf("a mixture's batch: %+v, want its arrival", got)
	}
}
