package runs

import (
	"context"
	"encoding/json"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
)

// Plan answers /plan for a run job (plans.UnitPlanner): the plan of the
// records its runs read — the same chunks in the same windows as its
// dataset's order, so the same store bytes and cache behaviour — with
// batches of a global batch's runs' records, its epochs and
// batches_per_epoch its runs' and their batches, as /epoch/N counts
// them.
func (u *Unit) Plan(ctx context.Context, t plans.Tools, src layout.Source, q query.Query) (any, error) {
	epochs := q.Plan.Epochs
	if epochs == 0 {
		epochs = plans.DefaultEpochs
	}
	job := q.Job
	job.Offset = 0 // a plan is of whole epochs
	var served []api.PlanEpoch
	for e := range epochs {
		info, err := t.Epochs().Info(src, job, uint64(q.Plan.FirstEpoch+e))
		if err != nil {
			return nil, err
		}
		served = append(served, api.PlanEpoch{Epoch: info.Epoch, Samples: info.Samples, Batches: info.Batches})
	}
	records := q.Job
	records.Run, records.Offset = api.Runs{}, 0
	records.BatchSize = q.Job.BatchSize * q.Job.Run.Len
	return t.Run(ctx, func(ctx context.Context) (any, error) {
		p, err := t.Planner().Plan(ctx, plans.Data(src.DS), records, q.Plan, nil)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		m["run"] = q.Job.Run.Len
		m["epochs"], m["batches_per_epoch"] = served, served[0].Batches
		return m, nil
	})
}

var _ plans.UnitPlanner = (*Unit)(nil)
