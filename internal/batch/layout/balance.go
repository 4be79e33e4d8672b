package layout

import (
	"context"
	"fmt"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
)

// A balanced job (api.Job.Balance) takes each global batch whole, weighs
// its samples — a token job's sequences by their attention or tokens, a
// job of samples by their stored bytes — and gives each rank its share
// of them by package balance's rule, in place of the plain cut and of a
// cluster's locality-aware assignment (Source.Assigns): the ranks' costs,
// not where the chunks live, decide. The global batch's samples are the
// plain cut's; a rank takes as many as the plain cut gives it, in their
// order in the batch. Every rank of a step computes the same assignment,
// which is memoised once for the batch's other ranks. Which jobs may be
// balanced, and by which cost, is the table's (internal/job/spec).

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

// globalBalance is one global batch's assignment: per rank its positions
// in the batch, and the costs.
type globalBalance struct {
	ranks [][]int
	info  *Balanced
}

// maxMemoBalances bounds the memoised assignments: each holds one global
// batch's positions.
const maxMemoBalances = 64

// balancer assigns a balanced job's global batches to its ranks
// (balance=): the samples or sequences of a global batch, weighed by the
// job's cost, each rank's share of them, memoised by the global batch.
// It lays batches out through the Orders it belongs to.
type balancer struct {
	o    *Orders
	memo *lru.Cache[string, *globalBalance] // balanced global batches' assignments
}

func newBalanceMemo() *lru.Cache[string, *globalBalance] {
	c, _ := lru.New[string, *globalBalance](maxMemoBalances)
	return c
}

// balanceOf is the assignment of global batch m of an epoch of job,
// memoised under the batch's rank 0's ETag: costs weighs its samples in
// batch order, the ranks take shares of them.
func (bal *balancer) balanceOf(src Source, job api.Job, epoch uint64, m int, shares []int, costs func() ([]uint64, error)) (*globalBalance, error) {
	global := bal.globalKey(src, job, epoch, uint64(m))
	if gb, ok := bal.memo.Get(global); ok {
		return gb, nil
	}
	c, err := costs()
	if err != nil {
		return nil, err
	}
	a, err := balance.Assign(c, shares)
	if err != nil {
		return nil, err
	}
	p, err := balance.Plain(c, shares)
	if err != nil {
		return nil, err
	}
	gb := &globalBalance{ranks: a.Ranks, info: &Balanced{Kind: job.Balance, Global: global, Epoch: epoch, Batch: uint64(m), Costs: a.Costs, Plain: p.Costs}}
	bal.memo.Add(global, gb)
	return gb, nil
}

// globalKey names a job's global batch m: its rank 0's ETag, which every
// parameter that decides the batch's samples enters (the cost among
// them).
func (bal *balancer) globalKey(src Source, job api.Job, epoch, m uint64) string {
	job.Rank = 0
	return bal.o.ETag(src, job, epoch, m)
}

// balancedIDs is, for a balanced job of samples over one dataset, the
// samples its rank takes of global batch m of an epoch of n positions.
func (bal *balancer) balancedIDs(ctx context.Context, src Source, s Stream, e *EpochOrder, epoch uint64, job api.Job, n, m int) ([]int, *Balanced, error) {
	shares, start, end, err := globalBatch(job, n, m)
	if err != nil {
		return nil, nil, err
	}
	ids := bal.o.appendRange(make([]int, 0, end-start), s, e, epoch, start, end)
	gb, err := bal.balanceOf(src, job, epoch, m, shares, func() ([]uint64, error) {
		info, err := src.DS.Index.Samples(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("reading the index entries of global batch %d of dataset %s: %w", m, src.DS.Name, err)
		}
		costs := make([]uint64, len(info))
		for i, in := range info {
			costs[i] = uint64(in.Length)
		}
		return costs, nil
	})
	if err != nil {
		return nil, nil, err
	}
	mine := make([]int, len(gb.ranks[job.Rank]))
	for k, at := range gb.ranks[job.Rank] {
		mine[k] = ids[at]
	}
	if s.Sampled() {
		// A rank's samples are a subsequence of the batch, which can put
		// two draws of one sample next to each other.
		importance.SeparateRepeats(mine)
	}
	return mine, gb.info, nil
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

// balancedSequences is, for a balanced token job over one dataset, the
// sequences its rank takes of global batch m of packed epoch p (n
// sequences), and the global batch's positions [start, end).
func (bal *balancer) balancedSequences(src Source, p *Packed, epoch uint64, job api.Job, n, m int) ([]seqpack.Sequence, *Balanced, int, int, error) {
	shares, start, end, err := globalBatch(job, n, m)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	seqs := bal.o.sequences(make([]seqpack.Sequence, 0, end-start), p, start, end)
	gb, err := bal.balanceOf(src, job, epoch, m, shares, func() ([]uint64, error) {
		costs := make([]uint64, len(seqs))
		for i, q := range seqs {
			costs[i] = sequenceCost(job.Balance, q)
		}
		return costs, nil
	})
	if err != nil {
		return nil, nil, 0, 0, err
	}
	mine := make([]seqpack.Sequence, len(gb.ranks[job.Rank]))
	for k, at := range gb.ranks[job.Rank] {
		mine[k] = seqs[at]
	}
	return mine, gb.info, start, end, nil
}

// balancedDraws is, for a balanced job over a mixture, the draws its
// rank takes of global batch b of the mixture's epoch (n positions):
// weighed by their samples' stored bytes, or for a token mixture by
// their sequences' cost.
func (bal *balancer) balancedDraws(ctx context.Context, src Source, job api.Job, epoch uint64, n, b int) ([]shuffle.Draw, *Balanced, error) {
	m := src.Mix
	shares, start, end, err := globalBatch(job, n, b)
	if err != nil {
		return nil, nil, err
	}
	draws, err := m.Order.Draws(ctx, make([]shuffle.Draw, 0, end-start), job.Seed, epoch, start, end)
	if err != nil {
		return nil, nil, err
	}
	gb, err := bal.balanceOf(src, job, epoch, b, shares, func() ([]uint64, error) {
		if job.Tokens() {
			return bal.drawSequenceCosts(m, job, draws)
		}
		return bal.drawByteCosts(ctx, m, job, draws)
	})
	if err != nil {
		return nil, nil, err
	}
	mine := make([]shuffle.Draw, len(gb.ranks[job.Rank]))
	for k, at := range gb.ranks[job.Rank] {
		mine[k] = draws[at]
	}
	if !job.Tokens() {
		if err := bal.separateDraws(m, job, mine); err != nil {
			return nil, nil, err
		}
	}
	return mine, gb.info, nil
}

// drawIDs is the sample ID each draw of a mixture reads.
func (bal *balancer) drawIDs(m *Mixed, job api.Job, draws []shuffle.Draw) ([]int, error) {
	ids := make([]int, len(draws))
	for i, d := range draws {
		if d.Pass > maxPass {
			return nil, fmt.Errorf("%w: the mixture reads pass %d of %s, past the last epoch number (%d)", ErrOutOfRange, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		s := m.Stream(d.Component, job)
		h, err := bal.o.mixEpoch(m, d.Component, s, d.Pass)
		if err != nil {
			return nil, err
		}
		var one []int
		one, _ = bal.o.appendHeldRange(one, m, d.Component, h, d.Index, d.Index+1)
		ids[i] = one[0]
	}
	return ids, nil
}

// drawByteCosts weighs a mixture's draws by their samples' stored bytes.
func (bal *balancer) drawByteCosts(ctx context.Context, m *Mixed, job api.Job, draws []shuffle.Draw) ([]uint64, error) {
	ids, err := bal.drawIDs(m, job, draws)
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
func (bal *balancer) drawSequenceCosts(m *Mixed, job api.Job, draws []shuffle.Draw) ([]uint64, error) {
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
			if p, err = bal.o.Packed(m.Stream(d.Component, job), d.Pass, spec.Pack); err != nil {
				return nil, err
			}
			packs[k] = p
		}
		if d.Index >= p.NumSequences() {
			return nil, fmt.Errorf("%w: sequence %d of pass %d of %s, which has %d", ErrOutOfRange, d.Index, d.Pass, m.DS[d.Component].Name, p.NumSequences())
		}
		costs[i] = sequenceCost(job.Balance, bal.o.sequences(nil, p, d.Index, d.Index+1)[0])
	}
	return costs, nil
}

// separateDraws parts two draws of one sample that a rank's share of a
// mixture's global batch put next to each other (a small component's
// passes meeting): a tar reader would group them as one sample.
func (bal *balancer) separateDraws(m *Mixed, job api.Job, draws []shuffle.Draw) error {
	ids, err := bal.drawIDs(m, job, draws)
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
