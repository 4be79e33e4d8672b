package layout

import (
	"context"
	"fmt"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/vision"
)

// A balanced job (api.Job.Balance) takes each global batch whole, weighs
// its samples — a token job's sequences by their attention or tokens, a
// vision job's also by their vision tokens, a job of samples by their
// stored bytes — and gives each rank its share
// of them by package balance's rule, in place of the plain cut and of a
// cluster's locality-aware assignment (Source.Assigns): the ranks' costs,
// not where the chunks live, decide. The global batch's samples are the
// plain cut's; a rank takes as many as the plain cut gives it, in their
// order in the batch. Every rank of a step computes the same assignment,
// which is memoised once for the batch's other ranks. Which jobs may be
// balanced, and by which cost, is the table's (internal/job/features).

// Balanced is what a balanced batch's layout says of its global batch:
// the cost its ranks were weighed by, and every rank's cost, balanced and
// as the plain cut would have left them.
type Balanced struct {
	Kind string
	// Global names the global batch: its rank 0's ETag, the same in
	// every rank's answer.
	Global       string
	Epoch, Batch uint64
	Costs        []uint64 // per rank, this global batch
	Plain        []uint64 // per rank, had the batch been cut plainly
}

// FormatCosts writes the ranks' costs comma-separated (the
// Brand-Rank-Costs header).
func (b *Balanced) FormatCosts() string {
	out := make([]byte, 0, 12*len(b.Costs))
	for r, c := range b.Costs {
		if r > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, c, 10)
	}
	return string(out)
}

// sequenceCost is a packed sequence's cost under kind: its attention
// (the sum of its pieces' squared lengths) or its tokens.
func sequenceCost(kind string, q seqpack.Sequence) uint64 {
	var c uint64
	for _, pc := range q.Pieces {
		if kind == api.BalanceAttention {
			c += uint64(pc.Len) * uint64(pc.Len)
		} else {
			c += uint64(pc.Len)
		}
	}
	return c
}

// visionCost is a vision sequence's cost under kind: its attention and
// its encoder's (vision.Cost), its tokens (text and vision, the pad
// excluded), or its vision tokens alone (the encoder's inputs).
func visionCost(kind string, q vision.Sequence, items []vision.Item) uint64 {
	if kind == api.BalanceAttention {
		return vision.Cost(q, items)
	}
	var c uint64
	for _, id := range q.Samples {
		if kind == api.BalanceVision {
			c += uint64(items[id].Vision)
		} else {
			c += uint64(items[id].Tokens)
		}
	}
	return c
}

// draws is the draws b's job's rank takes of batch m of a mixture's epoch
// (n positions) and, for a token mixture, each one's position in it: its
// plain cut's, or its share of the global batch by locality or cost
// (draws weighed by their samples' stored bytes, or a token mixture's by
// their sequences).
func (x *mixtures) draws(ctx context.Context, b *Batch) ([]shuffle.Draw, []int, *Balanced, error) {
	src, job, epoch, n, m, start, end := b.Source, b.Job, b.Epoch, b.EpochSamples, b.Batch, b.Start, b.End
	mx := src.Mix
	if src.assignment(job) == plainCut {
		draws, err := mx.Order.Draws(ctx, make([]shuffle.Draw, 0, end-start), job.Seed, epoch, start, end)
		return draws, span(start, len(draws)), nil, err
	}
	shares, gstart, gend, err := globalBatch(job, n, int(m))
	if err != nil {
		return nil, nil, nil, err
	}
	draws, err := mx.Order.Draws(ctx, make([]shuffle.Draw, 0, gend-gstart), job.Seed, epoch, gstart, gend)
	if err != nil {
		return nil, nil, nil, err
	}
	places, info, err := x.asg.places(src, job, epoch, m, b.global, global{shares: shares,
		owners: func() ([]int, error) {
			ids, err := x.drawIDs(mx, job, draws)
			if err != nil {
				return nil, err
			}
			out := make([]int, len(draws))
			for i, d := range draws {
				ds := mx.DS[d.Component]
				out[i] = ds.Owners(src.Members)[ds.Index.ChunkOf(ids[i])]
			}
			return out, nil
		},
		costs: func() ([]uint64, error) {
			if mx.comps != nil {
				return x.drawSequenceCosts(mx, job, draws)
			}
			return x.drawByteCosts(ctx, mx, job, draws)
		}})
	if err != nil {
		return nil, nil, nil, err
	}
	mine, pos := make([]shuffle.Draw, len(places)), make([]int, len(places))
	for k, at := range places {
		mine[k], pos[k] = draws[at], gstart+at
	}
	if mx.comps == nil {
		// A rank's share can put two passes' draws of one sample of a
		// small component next to each other: a tar reader would group
		// them as one sample.
		if err := x.separateDraws(mx, job, mine); err != nil {
			return nil, nil, nil, err
		}
		pos = nil // parted: a mixture of samples keys its samples by their own keys
	}
	return mine, pos, info, nil
}

// drawIDs is the sample ID each draw of a mixture reads.
func (x *mixtures) drawIDs(m *Mixed, job api.Job, draws []shuffle.Draw) ([]int, error) {
	ids := make([]int, len(draws))
	for i, d := range draws {
		if d.Pass > maxPass {
			return nil, fmt.Errorf("%w: the mixture reads pass %d of %s, past the last epoch number (%d)", ErrOutOfRange, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		s := m.Stream(d.Component, job)
		h, err := x.heldEpoch(m, d.Component, s, d.Pass)
		if err != nil {
			return nil, err
		}
		var one []int
		one, _ = x.appendHeldRange(one, m, d.Component, h, d.Index, d.Index+1)
		ids[i] = one[0]
	}
	return ids, nil
}

// drawByteCosts weighs a mixture's draws by their samples' stored bytes.
func (x *mixtures) drawByteCosts(ctx context.Context, m *Mixed, job api.Job, draws []shuffle.Draw) ([]uint64, error) {
	ids, err := x.drawIDs(m, job, draws)
	if err != nil {
		return nil, err
	}
	byComp := map[int][]int{} // component → its draws' places
	for i, d := range draws {
		byComp[d.Component] = append(byComp[d.Component], i)
	}
	costs := make([]uint64, len(draws))
	for c, at := range byComp {
		cids := make([]int, len(at))
		for k, i := range at {
			cids[k] = ids[i]
		}
		info, err := m.DS[c].Index.Samples(ctx, cids)
		if err != nil {
			return nil, fmt.Errorf("reading the index entries of %d samples of dataset %s: %w", len(cids), m.DS[c].Name, err)
		}
		for k, i := range at {
			costs[i] = uint64(info[k].Length)
		}
	}
	return costs, nil
}

// drawSequenceCosts weighs a token mixture's draws by their sequences.
func (x *mixtures) drawSequenceCosts(m *Mixed, job api.Job, draws []shuffle.Draw) ([]uint64, error) {
	costs := make([]uint64, len(draws))
	packs := map[[2]uint64]*Packed{}
	for i, d := range draws {
		if d.Pass > maxPass {
			return nil, fmt.Errorf("%w: the mixture reads pass %d of %s, past the last epoch number (%d)", ErrOutOfRange, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		k := [2]uint64{uint64(d.Component), d.Pass}
		p, ok := packs[k]
		if !ok {
			spec, err := TokensOf(m.DS[d.Component], job)
			if err != nil {
				return nil, err
			}
			if p, err = x.units.tokens.packed(m.Stream(d.Component, job), d.Pass, spec.Pack); err != nil {
				return nil, err
			}
			packs[k] = p
		}
		if d.Index >= p.NumSequences() {
			return nil, fmt.Errorf("%w: sequence %d of pass %d of %s, which has %d", ErrOutOfRange, d.Index, d.Pass, m.DS[d.Component].Name, p.NumSequences())
		}
		costs[i] = sequenceCost(job.Balance, x.units.tokens.sequences(nil, p, d.Index, d.Index+1)[0])
	}
	return costs, nil
}

// separateDraws parts two draws of one sample that a rank's share of a
// mixture's global batch put next to each other (a small component's
// passes meeting): a tar reader would group them as one sample.
func (x *mixtures) separateDraws(m *Mixed, job api.Job, draws []shuffle.Draw) error {
	ids, err := x.drawIDs(m, job, draws)
	if err != nil {
		return err
	}
	type drawn struct {
		d      shuffle.Draw
		sample int
	}
	mine := make([]drawn, len(draws))
	for i := range draws {
		mine[i] = drawn{draws[i], ids[i]}
	}
	importance.SeparateRepeatsFunc(mine, func(x, y drawn) bool { return x.d.Component == y.d.Component && x.sample == y.sample })
	for i := range mine {
		draws[i] = mine[i].d
	}
	return nil
}
