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
func (m *Mixed) Plan(ctx context.Context, t plans.Tools, src layout.Source, q query.Query) (any, error) {
	if p, ok := m.inner.(MixPlanner); ok {
		return p.PlanMixture(ctx, t, m, src, q)
	}
	return t.Run(ctx, func(ctx context.Context) (any, error) {
		data := make([]api.PlanDataset, len(m.DS))
		for i, ds := range m.DS {
			data[i] = plans.Data(ds)
		}
		return t.Planner().MixPlan(ctx, data, q.Job, q.Plan)
	})
}

// A MixPlanner kind plans its mixtures itself (a bucketed mixture, as
// its steps are laid out): the planner's model of a mixture is of
// samples.
type MixPlanner interface {
	PlanMixture(ctx context.Context, t plans.Tools, m *Mixed, src layout.Source, q query.Query) (any, error)
}

var _ plans.UnitPlanner = (*Mixed)(nil)
