package planner

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// budgetInput is a plan of 3 epochs of 40,000 samples in 400 chunks: a
// walk of 240,000 samples (its order and the full shuffle's) and about
// 7,500 global batches, each an access or more.
func budgetInput() PlanInput {
	return PlanInput{Dataset: equalDataset(400, 100, 1000),
		Job:        Job{Params: shuffle.Params{Seed: 3, Window: 4, BatchSize: 8, World: 2}, Epochs: 3},
		CacheBytes: 20_000, BackendBytesPerSec: 1}
}

// TestBudgetUpFront: what the input alone decides is refused before any
// work, with ErrInvalid naming the bound, for every kind of plan.
func TestBudgetUpFront(t *testing.T) {
	mix := &Mix{Components: []MixComponent{{Name: "a", Weight: 1, Dataset: equalDataset(10, 10, 100)},
		{Name: "b", Weight: 1, Dataset: equalDataset(10, 10, 100)}}, Block: 1 << 20, Samples: 1 << 22}
	job := Job{Params: shuffle.Params{Window: 2, BatchSize: 32, World: 1}, Epochs: 20}
	for _, tt := range []struct {
		name  string
		b     Budget
		bound int64
		plan  func(m *meter) error
	}{
		{"walk", Budget{Walk: 239_999}, 239_999, func(m *meter) error { _, err := makePlan(m, budgetInput()); return err }},
		{"trace", Budget{Trace: 7_000}, 7_000, func(m *meter) error { _, err := makePlan(m, budgetInput()); return err }},
		// The security finding's plan: a mixture epoch of 2^22 samples,
		// 20 epochs, 4096 nodes.
		{"mixture over a cluster", gatewayBudget(), GatewayWalk, func(m *meter) error {
			_, err := makeClusterPlan(m, ClusterInput{Mix: mix, Job: job, Nodes: 4096, NodeCacheBytes: 1 << 20})
			return err
		}},
		{"mixture", gatewayBudget(), GatewayWalk, func(m *meter) error {
			in := PlanInput{Mix: mix, Job: job, CacheBytes: 1 << 20, BackendBytesPerSec: 1}
			in.Mix.Samples = 1 << 23
			_, err := makePlan(m, in)
			return err
		}},
		{"shared", Budget{Walk: 100_000}, 100_000, func(m *meter) error {
			in := budgetInput()
			_, err := MakeSharedPlan(m.ctx, SharedInput{Dataset: in.Dataset, Jobs: []SharedJob{{Job: in.Job}}, Budget: m.budget})
			return err
		}},
	} {
		m := newMeter(context.Background(), tt.b)
		err := tt.plan(m)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), strconv.FormatInt(tt.bound, 10)) {
			t.Errorf("%s: %v; want ErrInvalid naming %d", tt.name, err, tt.bound)
		}
		if m.walked+m.traced+m.simulated != 0 {
			t.Errorf("%s: refused after %d samples walked, %d accesses traced, %d simulated", tt.name, m.walked, m.traced, m.simulated)
		}
	}
	// At the bounds the same plans are made.
	for _, b := range []Budget{{Walk: 240_000}, {Trace: 1 << 20}} {
		if _, err := makePlan(newMeter(context.Background(), b), budgetInput()); err != nil {
			t.Errorf("budget %+v: %v", b, err)
		}
	}
}

// TestBudgetRunsOut: a plan whose traces or simulations pass the budget
// as it computes gives up with ErrBudget, having done about the budget's
// work and no more.
func TestBudgetRunsOut(t *testing.T) {
	full := newMeter(context.Background(), Budget{})
	if _, err := makePlan(full, budgetInput()); err != nil {
		t.Fatal(err)
	}
	for _, b := range []Budget{
		{Trace: full.traced - 1},
		{Simulate: full.simulated / 2},
	} {
		m := newMeter(context.Background(), b)
		p, err := makePlan(m, budgetInput())
		if !errors.Is(err, ErrBudget) || p != nil {
			t.Errorf("budget %+v: %v; want ErrBudget", b, err)
			continue
		}
		if b.Simulate > 0 && m.simulated > b.Simulate+int64(budgetInput().Job.BatchSize*2) {
			t.Errorf("budget %+v: simulated %d accesses", b, m.simulated)
		}
	}
}

// flipCtx is a context whose Err turns to Canceled at its n-th call, and
// that then records the work its meter had counted.
type flipCtx struct {
	context.Context
	n     int
	m     *meter
	calls int
	at    int64 // the meter's work when Err turned
}

func (c *flipCtx) Err() error {
	c.calls++
	if c.calls == c.n {
		c.at = c.m.work()
	}
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

// work is everything the meter counted.
func (m *meter) work() int64 { return m.walked + m.traced + m.simulated }

// TestPlanStopsWhereCanceled: a plan looks at its context every
// meterCheck units of work, inside its walks and simulations and not
// only between epochs, so that wherever its client leaves it stops
// within one batch of work.
func TestPlanStopsWhereCanceled(t *testing.T) {
	in := budgetInput()
	in.DiskCacheBytes = 50_000
	count := &flipCtx{Context: context.Background(), n: math.MaxInt}
	count.m = newMeter(count, Budget{})
	if _, err := makePlan(count.m, in); err != nil {
		t.Fatal(err)
	}
	work, checks := count.m.work(), count.calls
	if int64(checks) < work/meterCheck {
		t.Fatalf("%d context checks over %d units of work; want one every %d", checks, work, meterCheck)
	}
	for n := 1; n <= checks; n += max(1, checks/40) {
		c := &flipCtx{Context: context.Background(), n: n}
		c.m = newMeter(c, Budget{})
		p, err := makePlan(c.m, in)
		if !errors.Is(err, context.Canceled) || p != nil {
			t.Fatalf("canceled at check %d of %d: %v", n, checks, err)
		}
		// The count that saw the cancellation may have added its own
		// batch; nothing after it.
		if after := c.m.work() - c.at; after > 64 {
			t.Errorf("canceled at check %d of %d: %d more units of work after it", n, checks, after)
		}
	}
}
