package buckets

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
)

// maxBucketPlan bounds a bucket plan's work: the images of every step of
// every epoch planned, each laid out as its batch is.
const maxBucketPlan = 1 << 22

// Plan answers /plan for a bucket job (plans.UnitPlanner): each planned epoch as its
// batches are laid out — /epoch/N's figures (its steps, and per bucket
// its images, steps, batch size, images dropped and fill of the budget;
// the images too small and the samples without one) from the unit that
// cuts its batches — and the chunks its steps read, in the order its
// batches ask for them (every rank's batch of a step laid out), simulated
// through the plan's cache under Belady's rule (the use table's keys of
// a bucket job's reads follow its steps, not its order's windows).
func (u *Unit) Plan(ctx context.Context, t plans.Tools, src layout.Source, q query.Query) (any, error) {
	epochs := q.Plan.Epochs
	if epochs == 0 {
		epochs = plans.DefaultEpochs
	}
	job := q.Job
	world := max(job.World, 1)
	ds := src.DS
	var trace api.PlanTrace
	served := make([]api.PlanEpoch, 0, epochs)
	per := make([]api.BucketPlanEpoch, 0, epochs)
	work := 0
	for e := q.Plan.FirstEpoch; e < q.Plan.FirstEpoch+epochs; e++ {
		info, err := t.Epochs().Info(src, job, uint64(e))
		if err != nil {
			return nil, err
		}
		if info.Buckets == nil {
			return nil, fmt.Errorf("%w: epoch %d of a bucket job has no buckets", query.ErrBadRequest, e)
		}
		served = append(served, api.PlanEpoch{Epoch: e, Samples: info.Samples, Batches: info.Batches})
		per = append(per, api.BucketPlanEpoch{Epoch: e, Steps: info.Batches, BucketsInfo: *info.Buckets})
		for _, b := range info.Buckets.Buckets {
			work += b.Batches * b.BatchSize * world
		}
		if work > maxBucketPlan {
			return nil, fmt.Errorf("%w: a plan of %d epochs reads more than %d images; a gateway plans at most that many", query.ErrBadRequest, epochs, maxBucketPlan)
		}
		for step := range info.Batches {
			batch := api.PlanBatch{Epoch: e, Start: -1}
			seen := map[int]bool{}
			for r := range world {
				jr := job
				jr.Rank = r
				b, err := t.Epochs().Layout(ctx, src, jr, uint64(e), uint64(step))
				if err != nil {
					return nil, err
				}
				for _, p := range b.Parts {
					if batch.Start < 0 || p.First < batch.Start {
						batch.Start = p.First
					}
					batch.End = max(batch.End, p.End)
					for _, id := range p.Samples.IDs {
						if c := ds.Index.ChunkOf(id); !seen[c] {
							seen[c] = true
							batch.Chunks = append(batch.Chunks, int32(c))
						}
					}
				}
			}
			trace.Batches = append(trace.Batches, batch)
		}
	}
	o := q.Plan
	if o.Nodes > 1 {
		o.CacheBytes *= int64(o.Nodes) // each chunk read once, by its owner
	}
	return t.Run(ctx, func(ctx context.Context) (any, error) {
		sim, err := t.Planner().TracePlan(ctx, plans.Data(ds), trace, o)
		if err != nil {
			return nil, err
		}
		return map[string]any{"buckets": per, "simulation": sim, "cache_bytes": o.CacheBytes, "nodes": max(o.Nodes, 1),
			"epochs": served, "batches_per_epoch": served[0].Batches}, nil
	})
}
