package mixture

import (
	"context"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
)

// Plan answers /plan for a mixture (plans.UnitPlanner): the planner's
// plan of its components, each the current version of the dataset it
// names (Planner.MixPlan). The table refuses, before, a mixture the
// planner does not model (a token mixture's packed epochs).
func (m *Mixed) Plan(ctx context.Context, t plans.Tools, _ layout.Source, q query.Query) (any, error) {
	return t.Run(ctx, func(ctx context.Context) (any, error) {
		data := make([]api.PlanDataset, len(m.DS))
		for i, ds := range m.DS {
			data[i] = plans.Data(ds)
		}
		return t.Planner().MixPlan(ctx, data, q.Job, q.Plan)
	})
}

var _ plans.UnitPlanner = (*Mixed)(nil)
