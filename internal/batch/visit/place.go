package visit

import (
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/tensorize"
)

// epochOrder names one epoch of one order: the batches every rank of a
// job reads in it, whatever their requests' world, offset or name.
type epochOrder struct {
	order layout.Stream // Stream.Order: comparable
	epoch uint64
}

// PlaceOf is b's place in the transform stage's queue (tensorize.Place):
// among the queued batches of its epoch of its order, by its first
// position, so that the batches a trainer's loaders ask for at once —
// after a resume, at a cold gateway — are made in step order, the step
// the trainer waits for first. A composite's batch (a mixture's), whose
// position is the mixture's, keeps the place of its arrival.
func PlaceOf(b *layout.Batch) tensorize.Place {
	if b.Composite() != nil || len(b.Parts) != 1 {
		return tensorize.Place{}
	}
	return tensorize.Place{Job: epochOrder{order: b.Parts[0].Stream.Order(), epoch: b.Epoch}, Pos: b.Start}
}
