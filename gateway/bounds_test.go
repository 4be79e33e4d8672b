package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/planner"
)

// The security review's plan: a mixture epoch of 2^24 samples, 20
// epochs, 4096 nodes, which ran for more than five minutes. It is over
// the gateway's budget from its input alone: refused at once, naming the
// bound, as is the one with blocks of 1.
func TestPlanOverBudgetRefused(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	defer srv.close()
	for _, q := range []string{
		"mix=web:1,code:1&mix_samples=16777216&mix_block=16777216&epochs=20&nodes=4096",
		"mix=web:1,code:1&mix_samples=16777216&mix_block=1&epochs=20",
	} {
		resp, b := get(t, srv.url+"/plan?"+q)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), strconv.Itoa(planner.GatewayWalk)) {
			t.Errorf("%s: %d %s; want 400 naming %d", q, resp.StatusCode, b, planner.GatewayWalk)
		}
	}
}

// watchedPlanner is the gateway's planner, telling when a plan of a long
// mixture epoch starts and what it returned.
type watchedPlanner struct {
	gateway.Planner
	started chan struct{}
	done    chan error
}

func (p *watchedPlanner) MixPlan(ctx context.Context, ds []api.PlanDataset, job api.Job, o api.PlanOptions) (any, error) {
	if job.MixSamples == 0 {
		return p.Planner.MixPlan(ctx, ds, job, o)
	}
	p.started <- struct{}{}
	v, err := p.Planner.MixPlan(ctx, ds, job, o)
	p.done <- err
	return v, err
}

// A plan near the gateway's budget runs for seconds; meanwhile a small
// plan is answered (plans have slots, not one turn), and when its client
// leaves the long one stops: the planner returns the context's error, not
// a plan.
func TestPlanStopsWhenClientLeaves(t *testing.T) {
	m := newMixFixture(t)
	watch := &watchedPlanner{Planner: planner.ForGateway{}, started: make(chan struct{}, 1), done: make(chan error, 1)}
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = m.specs
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 2, Seed: 5}
		c.Planner = watch
	})
	// 20 epochs of 3,200,000 draws: 64,000,000 of the budget's 2^26.
	long := srv.URL + "/plan?mix=web:1,code:1&mix_samples=3200000&epochs=20&batch_size=4096&window=64"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, long, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = errors.New("answered " + resp.Status)
		}
		left <- err
	}()
	<-watch.started

	resp, b := get(t, srv.URL+"/plan?mix=web:1,code:1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a small plan while a long one runs: %d %s", resp.StatusCode, b)
	}
	var p planner.Plan
	if err := json.Unmarshal(b, &p); err != nil || p.Mix == nil {
		t.Fatalf("a small plan: %v %s", err, b)
	}

	cancel()
	if err := <-watch.done; !errors.Is(err, context.Canceled) {
		t.Errorf("the long plan, its client gone, returned %v; want context.Canceled", err)
	}
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("the long plan's client: %v", err)
	}
}
