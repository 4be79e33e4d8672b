package plans_test

import (
	"context"
	"errors"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/planner"
)

// watchedPlanner is planner.ForGateway, telling when a plan of a long
// mixture epoch (mix_samples set) starts and what it returned.
type watchedPlanner struct {
	planner.ForGateway
	started chan struct{}
	done    chan error
}

func (p *watchedPlanner) MixPlan(ctx context.Context, ds []api.PlanDataset, job api.Job, o api.PlanOptions) (any, error) {
	if job.MixSamples == 0 {
		return p.ForGateway.MixPlan(ctx, ds, job, o)
	}
	p.started <- struct{}{}
	v, err := p.ForGateway.MixPlan(ctx, ds, job, o)
	p.done <- err
	return v, err
}

// A plan near the gateway's budget runs for seconds; meanwhile a small
// plan is answered (plans have slots, not one turn), and when its context
// ends (the gateway passes the request's: its client left) the long one
// stops: the planner returns the context's error, not a plan, and so does
// Plan.
func TestPlanStopsWhenItsContextEnds(t *testing.T) {
	ds := []*catalog.Dataset{tarDataset("web", indexOf(t, "web-", 12, 25)), tarDataset("code", indexOf(t, "code-", 6, 20))}
	watch := &watchedPlanner{started: make(chan struct{}, 1), done: make(chan error, 1)}
	m := newMaker(t, ds, func(c *plans.Config) { c.Planner = watch })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 1)
	go func() {
		// 20 epochs of 3,200,000 draws: 64,000,000 of the budget's 2^26.
		_, err := m.Plan(ctx, "mix=web:1,code:1&mix_samples=3200000&epochs=20&batch_size=4096&window=64")
		left <- err
	}()
	<-watch.started

	if p, _ := planned(t, m, "mix=web:1,code:1", &planner.Plan{}); p.(*planner.Plan).Mix == nil {
		t.Fatal("a small plan while a long one runs has no mixture")
	}

	cancel()
	if err := <-watch.done; !errors.Is(err, context.Canceled) {
		t.Errorf("the long plan, its context ended, returned %v; want context.Canceled", err)
	}
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("Plan of the long plan: %v; want context.Canceled", err)
	}
}
