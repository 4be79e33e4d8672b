package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// The security review's mixture request: a mixing block and an epoch of
// 2^24 samples. Each batch of it once shuffled a block of 2^24 slots:
// 0.6–1.7 CPU-seconds and 140–540 MB a request, 3.3 GB for 24 at once.
// A mixture's epoch is now read a span at a time, each span built once
// for every request that asks at once and kept (internal/order), so 24
// such requests allocate about one span, far below the memo's bound.
func TestMixtureRequestsBounded(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	defer srv.close()
	const requests = 24
	url := srv.url + "/epoch/0/batch/0?mix=web:1,code:1&mix_block=16777216&mix_samples=16777216"

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	status := make([]int, requests)
	for i := range requests {
		wg.Go(func() {
			resp, err := http.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			status[i] = resp.StatusCode
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, s := range status {
		if s != http.StatusOK {
			t.Fatalf("request %d: status %d", i, s)
		}
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d requests allocated %d MiB in all", requests, allocated>>20)
	// A span of a 2^24 block over 2 components is 16 MiB and some: one
	// build, and well under the memo's 64 MiB for everything else.
	if bound := uint64(order.MaxMixSpanBytes); allocated > bound {
		t.Errorf("%d concurrent requests allocated %d MiB; bound %d MiB", requests, allocated>>20, bound>>20)
	}

	// A mixture whose rounding rule would take more than shuffle's bound
	// to build is refused, naming it: weights 1:1.100001 repeat their
	// rounding only every 2,100,001 blocks.
	resp, b := get(t, srv.url+"/epoch/0/batch/0?mix=web:1,code:1.100001&mix_block=1&mix_samples=4194304")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), strconv.Itoa(shuffle.MaxMixWork)) {
		t.Errorf("a mixture past shuffle.MaxMixWork: %d %s; want 400 naming %d", resp.StatusCode, b, shuffle.MaxMixWork)
	}
}

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
