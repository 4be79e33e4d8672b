package layout

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/spec"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/vision"
)

// The assignment of a global batch to its ranks: one of three, chosen
// from the job's features (Source.assignment, the table's downgrades
// applied) and used by every kind of batch — a dataset's samples, a
// token job's sequences, a mixture's draws:
//
//   - the plain cut: rank r takes its slice of the global batch's
//     positions (shuffle's cut), read alone;
//   - locality (cluster.Assign): on a cluster of several members, each
//     rank first takes the items whose chunk its home member owns;
//   - cost (balance=, balance.Assign): each rank a share of the batch's
//     cost, its samples' bytes or its sequences' attention or tokens (a
//     vision job's: vision.Cost, tokens, or vision tokens).
//
// Each rank takes as many items as the plain cut gives it and the global
// batch holds the same ones; only which rank takes which changes. Every
// rank of a step computes the same assignment, memoised once under the
// global batch's name (its rank 0's ETag, which names the cost and the
// membership an assignment is made under).

// An assignment is how a job's global batches are given to its ranks.
type assignment uint8

const (
	plainCut assignment = iota
	byLocality
	byCost
)

// assignment is how job's global batches from s are given to its ranks.
func (s Source) assignment(job api.Job) assignment {
	f := s.features(job).Effective()
	switch {
	case f.Has(spec.BalanceB) || f.Has(spec.BalanceC):
		return byCost
	case s.Assigns(job):
		return byLocality
	}
	return plainCut
}

// A global is a global batch as an assignment weighs it: each rank's
// count (the plain cut's), and, asked for only by the assignment that
// needs them, each item's owner on the cluster and its cost.
type global struct {
	shares []int
	owners func() ([]int, error)
	costs  func() ([]uint64, error)
}

// assigned is a global batch's assignment: per rank, its items' places
// in the batch; for a balanced batch, its ranks' costs.
type assigned struct {
	ranks [][]int
	info  *Balanced
}

// maxMemoAssigned bounds the memoised assignments: each holds one global
// batch's places.
const maxMemoAssigned = 64

// assigner assigns the global batches of jobs that are not cut plainly,
// for the Orders it belongs to. Safe for concurrent use.
type assigner struct {
	o    *Orders
	memo *lru.Cache[string, *assigned]
}

func newAssigner(o *Orders) assigner {
	c, _ := lru.New[string, *assigned](maxMemoAssigned)
	return assigner{o: o, memo: c}
}

// places is the items job's rank takes of global batch m of an epoch
// from src, assigned as src assigns them (not cut plainly): their places
// in the global batch, in order; for a balanced batch, its ranks' costs.
func (a *assigner) places(src Source, job api.Job, epoch, m uint64, g global) ([]int, *Balanced, error) {
	r0 := job
	r0.Rank = 0
	key := a.o.ETag(src, r0, epoch, m)
	if x, ok := a.memo.Get(key); ok {
		return x.ranks[job.Rank], x.info, nil
	}
	var x *assigned
	switch src.assignment(job) {
	case byLocality:
		owners, err := g.owners()
		if err != nil {
			return nil, nil, err
		}
		at := make([]int, len(owners))
		for i := range at {
			at[i] = i
		}
		asg, err := cluster.Assign(at, owners, g.shares, src.Members.Len())
		if err != nil {
			return nil, nil, err
		}
		x = &assigned{ranks: asg.Ranks}
	case byCost:
		costs, err := g.costs()
		if err != nil {
			return nil, nil, err
		}
		asg, err := balance.Assign(costs, g.shares)
		if err != nil {
			return nil, nil, err
		}
		plain, err := balance.Plain(costs, g.shares)
		if err != nil {
			return nil, nil, err
		}
		x = &assigned{ranks: asg.Ranks, info: &Balanced{Kind: job.Balance, Global: key, Epoch: epoch, Batch: m, Costs: asg.Costs, Plain: plain.Costs}}
	default:
		return nil, nil, fmt.Errorf("layout: a plain cut assigned as a whole global batch")
	}
	a.memo.Add(key, x)
	return x.ranks[job.Rank], x.info, nil
}

// sampleIDs is the samples job's rank takes of batch m of an epoch of
// stream s over src.DS, of n positions: its plain cut's, or its share of
// the global batch by locality or cost (samples weighed by their stored
// bytes).
func (a *assigner) sampleIDs(ctx context.Context, src Source, s Stream, e *EpochOrder, epoch uint64, job api.Job, n int, m uint64, start, end int) ([]int, *Balanced, error) {
	if src.assignment(job) == plainCut {
		return a.o.appendRange(nil, s, e, epoch, start, end), nil, nil
	}
	shares, gstart, gend, err := globalBatch(job, n, int(m))
	if err != nil {
		return nil, nil, err
	}
	ids := a.o.appendRange(make([]int, 0, gend-gstart), s, e, epoch, gstart, gend)
	places, info, err := a.places(src, job, epoch, m, global{shares: shares,
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
				return nil, fmt.Errorf("reading the index entries of global batch %d of dataset %s: %w", m, src.DS.Name, err)
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

// sequencesOf is the sequences job's rank takes of batch m of packed
// epoch p (n sequences) and each one's position in the epoch: its plain
// cut's, or its balanced share of the global batch.
func (a *assigner) sequencesOf(src Source, p *Packed, epoch uint64, job api.Job, n int, m uint64, start, end int) ([]seqpack.Sequence, []int, *Balanced, error) {
	if src.assignment(job) == plainCut {
		seqs := a.o.sequences(nil, p, start, end)
		return seqs, span(start, len(seqs)), nil, nil
	}
	shares, gstart, gend, err := globalBatch(job, n, int(m))
	if err != nil {
		return nil, nil, nil, err
	}
	seqs := a.o.sequences(make([]seqpack.Sequence, 0, gend-gstart), p, gstart, gend)
	places, info, err := a.places(src, job, epoch, m, global{shares: shares,
		costs: func() ([]uint64, error) {
			costs := make([]uint64, len(seqs))
			for i, q := range seqs {
				costs[i] = sequenceCost(job.Balance, q)
			}
			return costs, nil
		}})
	if err != nil {
		return nil, nil, nil, err
	}
	mine, pos := make([]seqpack.Sequence, len(places)), make([]int, len(places))
	for k, at := range places {
		mine[k], pos[k] = seqs[at], gstart+at
	}
	return mine, pos, info, nil
}

// visionSequences is the positions in vision epoch ve (n sequences) of
// the sequences job's rank takes of batch m: its plain cut's, or its
// balanced share of the global batch (each sequence weighed by
// visionCost).
func (a *assigner) visionSequences(src Source, ve *vision.Epoch, items []vision.Item, epoch uint64, job api.Job, n int, m uint64, start, end int) ([]int, *Balanced, error) {
	if src.assignment(job) == plainCut {
		return span(start, end-start), nil, nil
	}
	shares, gstart, gend, err := globalBatch(job, n, int(m))
	if err != nil {
		return nil, nil, err
	}
	places, info, err := a.places(src, job, epoch, m, global{shares: shares,
		costs: func() ([]uint64, error) {
			costs := make([]uint64, gend-gstart)
			for i := range costs {
				costs[i] = visionCost(job.Balance, ve.Sequence(gstart+i), items)
			}
			return costs, nil
		}})
	if err != nil {
		return nil, nil, err
	}
	pos := make([]int, len(places))
	for k, at := range places {
		pos[k] = gstart + at
	}
	return pos, info, nil
}

// draws is the draws job's rank takes of batch m of a mixture's epoch
// (n positions) and, for a token mixture, each one's position in it: its
// plain cut's, or its share of the global batch by locality or cost
// (draws weighed by their samples' stored bytes, or a token mixture's by
// their sequences).
func (a *assigner) draws(ctx context.Context, src Source, job api.Job, epoch uint64, n int, m uint64, start, end int) ([]shuffle.Draw, []int, *Balanced, error) {
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
	places, info, err := a.places(src, job, epoch, m, global{shares: shares,
		owners: func() ([]int, error) {
			ids, err := a.drawIDs(mx, job, draws)
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
			if job.Tokens() {
				return a.drawSequenceCosts(mx, job, draws)
			}
			return a.drawByteCosts(ctx, mx, job, draws)
		}})
	if err != nil {
		return nil, nil, nil, err
	}
	mine, pos := make([]shuffle.Draw, len(places)), make([]int, len(places))
	for k, at := range places {
		mine[k], pos[k] = draws[at], gstart+at
	}
	if !job.Tokens() {
		// A rank's share can put two passes' draws of one sample of a
		// small component next to each other: a tar reader would group
		// them as one sample.
		if err := a.separateDraws(mx, job, mine); err != nil {
			return nil, nil, nil, err
		}
		pos = nil // parted: a mixture of samples keys its samples by their own keys
	}
	return mine, pos, info, nil
}

// span is start, start+1, …, n of them.
func span(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}
