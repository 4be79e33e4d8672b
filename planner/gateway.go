package planner

import (
	"context"
	"fmt"
	"iter"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
)

// ForGateway is the planner as the gateway uses it, through an interface of
// the gateway's that speaks only in types of the packages below both
// (chunkindex, importance, api). The gateway therefore does not link the
// planner; `brand serve` passes ForGateway{} in its configuration.
type ForGateway struct{}

// Plan answers GET /plan: MakePlanContext for job over the dataset ix
// indexes, a *Plan, with its importance figures when snap (the snapshot
// job.Importance names, which the gateway loaded) is not nil; or with
// o.Nodes set, MakeClusterPlanContext for that many nodes each with a
// cache of o.CacheBytes, a *ClusterPlan, which has no importance mode.
func (ForGateway) Plan(ctx context.Context, ix *chunkindex.Index, job api.Job, o api.PlanOptions, snap *importance.Snapshot) (any, error) {
	if o.Nodes > 0 {
		if snap != nil {
			return nil, fmt.Errorf("%w: importance sampling is planned for one gateway, not for %d nodes", ErrInvalid, o.Nodes)
		}
		return MakeClusterPlanContext(ctx, ClusterInput{
			Dataset:        DatasetOf(ix),
			Job:            Job{Params: job.Params, FirstEpoch: o.FirstEpoch, Epochs: o.Epochs},
			IndexKey:       cluster.IndexKey(ix.ID()),
			Nodes:          o.Nodes,
			NodeCacheBytes: o.CacheBytes,
		})
	}
	in := PlanInput{
		Dataset:            DatasetOf(ix),
		Job:                Job{Params: job.Params, FirstEpoch: o.FirstEpoch, Epochs: o.Epochs},
		CacheBytes:         o.CacheBytes,
		BackendBytesPerSec: o.BackendBytesPerSec,
		ConsumeBytesPerSec: o.ConsumeBytesPerSec,
		PrefetchWindows:    o.PrefetchWindows,
	}
	if snap != nil {
		in.Importance = &Importance{Snapshot: snap, Hot: job.Importance.Hot}
	}
	return MakePlanContext(ctx, in)
}

// OptimalHitRatios simulates the optimal policy (Belady) with a cache of
// capacity bytes on a demand trace given batch by batch — each batch's
// epoch and its distinct chunks in first-use order, in the order the
// batches were served — and returns each epoch's hit ratio.
func (ForGateway) OptimalHitRatios(ctx context.Context, sizes []int64, capacity int64, batches iter.Seq2[uint64, []int32]) (map[uint64]float64, error) {
	var trace []Access
	for epoch, chunks := range batches {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i, c := range chunks {
			trace = append(trace, Access{Chunk: c, Epoch: int32(epoch), Start: i == 0})
		}
	}
	res := Simulate(trace, sizes, capacity, Belady)
	out := make(map[uint64]float64, len(res.Epochs))
	for _, e := range res.Epochs {
		if e.Accesses > 0 {
			out[uint64(e.Epoch)] = e.HitRatio
		}
	}
	return out, nil
}
