package buckets

import (
	"context"
	"fmt"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
)

// MixSourcePlan is one source's part of a planned epoch of a bucketed
// mixture: its steps, and per bucket of its list its steps, the samples
// they serve (every rank's) and the bytes they read.
type MixSourcePlan struct {
	Dataset string                `json:"dataset"`
	Steps   int                   `json:"steps"`
	Buckets []MixSourceBucketPlan `json:"buckets"`
}

// MixSourceBucketPlan is one bucket of a source in a planned epoch.
type MixSourceBucketPlan struct {
	Shape   string  `json:"shape"`
	Steps   int     `json:"steps"`
	Samples int     `json:"samples"`
	Bytes   int64   `json:"bytes"`
	Fill    float64 `json:"fill"` // the share of the budget a rank's batch of it uses
}

// MixEpochPlan is a planned epoch of a bucketed mixture, by source.
type MixEpochPlan struct {
	Epoch   int             `json:"epoch"`
	Steps   int             `json:"steps"`
	Sources []MixSourcePlan `json:"sources"`
}

// PlanMixture answers /plan for a bucketed mixture m (mixture.MixPlanner):
// each planned epoch as its batches are laid out — per source and bucket
// its steps, samples, bytes and fill — and the chunks its steps read, of
// every source, in the order its batches ask for them, simulated through
// the plan's cache under Belady's rule, as a bucket job's plan is.
func (u *Unit) PlanMixture(ctx context.Context, t plans.Tools, m *mixture.Mixed, src layout.Source, q query.Query) (any, error) {
	epochs := q.Plan.Epochs
	if epochs == 0 {
		epochs = plans.DefaultEpochs
	}
	job := q.Job
	world := max(job.World, 1)
	// The sources' chunks as one dataset's: source i's chunk c is
	// first[i] + c.
	first := make([]int, len(m.DS))
	data := api.PlanDataset{}
	var ids []string
	for i, ds := range m.DS {
		d := plans.Data(ds)
		first[i] = len(data.Counts)
		ids = append(ids, d.ID)
		data.Counts = append(data.Counts, d.Counts...)
		data.Sizes = append(data.Sizes, d.Sizes...)
		store := d.StoreSizes
		if store == nil {
			store = d.Sizes
		}
		data.StoreSizes = append(data.StoreSizes, store...)
	}
	data.ID = strings.Join(ids, "+")
	var trace api.PlanTrace
	served := make([]api.PlanEpoch, 0, epochs)
	per := make([]MixEpochPlan, 0, epochs)
	work := 0
	for e := q.Plan.FirstEpoch; e < q.Plan.FirstEpoch+epochs; e++ {
		info, err := t.Epochs().Info(src, job, uint64(e))
		if err != nil {
			return nil, err
		}
		served = append(served, api.PlanEpoch{Epoch: e, Samples: info.Samples, Batches: info.Batches})
		ep := MixEpochPlan{Epoch: e, Steps: info.Batches, Sources: make([]MixSourcePlan, len(m.DS))}
		at := make([]map[string]int, len(m.DS)) // a source's bucket's place in its Buckets
		for i, ds := range m.DS {
			ep.Sources[i].Dataset, at[i] = ds.Name, map[string]int{}
		}
		for step := range info.Batches {
			batch := api.PlanBatch{Epoch: e, Start: -1}
			seen := map[int]bool{}
			var sp *MixSourcePlan
			var bp *MixSourceBucketPlan
			for r := range world {
				jr := job
				jr.Rank = r
				b, err := t.Epochs().Layout(ctx, src, jr, uint64(e), uint64(step))
				if err != nil {
					return nil, err
				}
				if r == 0 {
					comp, shape, fill, err := u.stepOf(m, b)
					if err != nil {
						return nil, err
					}
					sp = &ep.Sources[comp]
					k, ok := at[comp][shape]
					if !ok {
						k = len(sp.Buckets)
						at[comp][shape] = k
						sp.Buckets = append(sp.Buckets, MixSourceBucketPlan{Shape: shape, Fill: fill})
					}
					sp.Steps++
					bp = &sp.Buckets[k]
					bp.Steps++
				}
				bp.Samples += b.Len()
				work += b.Reads()
				if work > maxBucketPlan {
					return nil, fmt.Errorf("%w: a plan of %d epochs reads more than %d samples; a gateway plans at most that many", query.ErrBadRequest, epochs, maxBucketPlan)
				}
				for _, p := range b.Parts {
					if batch.Start < 0 || p.First < batch.Start {
						batch.Start = p.First
					}
					batch.End = max(batch.End, p.End)
					bp.Bytes += p.Samples.Bytes
					for _, id := range p.Samples.IDs {
						if c := first[p.Comp] + p.Samples.DS.Index.ChunkOf(id); !seen[c] {
							seen[c] = true
							batch.Chunks = append(batch.Chunks, int32(c))
						}
					}
				}
			}
			trace.Batches = append(trace.Batches, batch)
		}
		per = append(per, ep)
		served[len(served)-1].Samples = info.Samples
	}
	o := q.Plan
	if o.Nodes > 1 {
		o.CacheBytes *= int64(o.Nodes) // each chunk read once, by its owner
	}
	return t.Run(ctx, func(ctx context.Context) (any, error) {
		sim, err := t.Planner().TracePlan(ctx, data, trace, o)
		if err != nil {
			return nil, err
		}
		return map[string]any{"bucketed_mixture": per, "simulation": sim, "cache_bytes": o.CacheBytes, "nodes": max(o.Nodes, 1),
			"epochs": served, "batches_per_epoch": served[0].Batches}, nil
	})
}

// stepOf is the source, bucket and fill of batch b of a bucketed mixture
// m.
func (u *Unit) stepOf(m *mixture.Mixed, b *layout.Batch) (comp int, shape string, fill float64, err error) {
	if len(b.Parts) == 0 {
		return 0, "", 0, fmt.Errorf("%w: a bucketed mixture's batch of no part", query.ErrBadRequest)
	}
	comp = b.Parts[0].Comp
	sh := u.kindOf(b.Job).shape(b)
	c, ok := m.Component(comp).(*component)
	if !ok {
		return 0, "", 0, fmt.Errorf("%w: source %d of a bucketed mixture is not bucketed", query.ErrBadRequest, comp)
	}
	_, budget, _, err := c.job.Buckets.Shaped()
	if err != nil {
		return 0, "", 0, err
	}
	return comp, sh.String(), budget.Fill(sh, b.Len()), nil
}
