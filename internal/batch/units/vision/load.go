package vision

import (
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
)

// Load is what a vision epoch's ranks carry of its images: the
// whole epoch's images and vision tokens (as /epoch/N counts its
// tokens), and per full global batch (from the job's offset; a last
// one of fewer sequences, whose ranks' counts differ, is left out) each
// rank's vision tokens, under the job's assignment (its balance=, or the plain
// cut: Ranks) and under the plain cut (Plain). It is what the epoch's
// batches serve, rank by rank, computed as their layouts compute it
// (the same assignment, memoised alike); /plan reports it.
type Load struct {
	Images       int
	VisionTokens int64
	Ranks, Plain [][]uint64 // per global batch, per rank
}

// LoadOf is epoch epoch's Load of a vision job over src, whose
// batches' ETags etag names (layout.Orders.ETag). It reads no sample:
// the epoch is a pure function of the dataset's facts and the job.
func (vs *Unit) LoadOf(src layout.Source, job api.Job, epoch uint64, etag func(layout.Source, api.Job, uint64, uint64) string) (*Load, error) {
	ve, items, err := vs.Epoch(src.DS, job, epoch)
	if err != nil {
		return nil, err
	}
	n := ve.NumSequences()
	if job.Offset > n {
		return nil, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d sequences", layout.ErrOutOfRange, job.Offset, epoch, n)
	}
	vl := &Load{}
	for p := range n {
		for _, id := range ve.Sequence(p).Samples {
			vl.Images += items[id].Images
			vl.VisionTokens += int64(items[id].Vision)
		}
	}
	tokens := func(pos []int) uint64 {
		var c uint64
		for _, p := range pos {
			for _, id := range ve.Sequence(p).Samples {
				c += uint64(items[id].Vision)
			}
		}
		return c
	}
	for m := range job.NumBatches(n) {
		gstart, gend, err := job.GlobalBatch(n, m)
		if err != nil {
			return nil, err
		}
		if gend-gstart < job.BatchSize*job.World {
			break // the last, partial
		}
		ranks, plain := make([]uint64, job.World), make([]uint64, job.World)
		for r := range job.World {
			j := job
			j.Rank = r
			start, end, err := j.BatchRange(n, m)
			if err != nil {
				return nil, err
			}
			b := &layout.Batch{Source: src, Job: j, Epoch: epoch, Batch: uint64(m), EpochSamples: n, Start: start, End: end}
			if src.Assignment(j) != api.AssignPlain {
				r0 := j
				r0.Rank = 0
				b.SetGlobal(etag(src, r0, epoch, uint64(m)))
			}
			pos, _, err := vs.sequencesOf(b, ve, items)
			if err != nil {
				return nil, err
			}
			ranks[r], plain[r] = tokens(pos), tokens(layout.Span(start, end-start))
		}
		vl.Ranks, vl.Plain = append(vl.Ranks, ranks), append(vl.Plain, plain)
	}
	return vl, nil
}
