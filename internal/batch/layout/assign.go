package layout

import (
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/job/features"
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
type assignment = string

// The assignments, as the table names them (features.Set.Assignment).
const (
	plainCut   assignment = api.AssignPlain
	byLocality assignment = api.AssignLocality
	byCost     assignment = api.AssignBalance
)

// assignment is how job's global batches from s are given to its ranks:
// the table's answer (features.Set.Assignment, which /plan reports) for the
// job's features on s's membership — a cluster exactly when it has
// several members.
func (s Source) assignment(job api.Job) assignment {
	f := s.features(job).Without(features.Cluster)
	if s.Members != nil && s.Members.Len() > 1 {
		f = f.With(features.Cluster)
	}
	return f.Assignment(job.World)
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
// for every unit of the Orders it belongs to. Safe for concurrent use.
type assigner struct {
	memo *lru.Cache[string, *assigned]
}

func newAssigner() *assigner {
	c, _ := lru.New[string, *assigned](maxMemoAssigned)
	return &assigner{memo: c}
}

// places is the items job's rank takes of global batch m of an epoch
// from src, assigned as src assigns them (not cut plainly): their places
// in the global batch, in order; for a balanced batch, its ranks' costs.
// key names the global batch (its rank 0's ETag, Batch.global): every
// rank's assignment is memoised once under it.
func (a *assigner) places(src Source, job api.Job, epoch, m uint64, key string, g global) ([]int, *Balanced, error) {
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

// span is start, start+1, …, n of them.
func span(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}
