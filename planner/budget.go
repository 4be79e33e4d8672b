package planner

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
)

// ErrBudget reports a plan that ran out of its Budget while it computed:
// the work it had done by then is lost, and the same input would run out
// again. It is api.ErrPlanBudget, so that the gateway, which does not link
// the planner, tells it from a refused input (ErrInvalid).
var ErrBudget = api.ErrPlanBudget

// Budget bounds the work of one plan, so that a server answering plans
// for clients it does not trust knows what each may cost it: CPU time
// grows with the samples walked and the accesses simulated, memory with
// the accesses traces hold. A zero field is no bound (the CLI plans on
// the user's own machine without one).
//
// What the input alone decides is checked before any work: a plan whose
// walk is over Walk, or whose traces would hold more than Trace accesses
// even at one access a batch, is refused with ErrInvalid naming the
// bound. The rest is counted as the plan goes, and the plan gives up
// with ErrBudget when a count passes its bound.
type Budget struct {
	// Walk bounds the plan's walk over its epochs: each sample drawn
	// counts one, on every pass the plan makes (the job's order; a full
	// shuffle's, for the quality figures; an importance order's), and in
	// a cluster prediction each global batch counts as many more as it
	// has nodes, which its assignment to ranks ranks.
	Walk int64
	// Trace bounds the chunk accesses the plan's traces hold at once, 12
	// bytes each and 8 more while a next-use simulation runs over them.
	Trace int64
	// Simulate bounds the accesses simulated, summed over every
	// simulation the plan runs (one per policy and cache size, a dozen
	// to about forty in all).
	Simulate int64
}

// The budget of every plan a gateway computes (GET and POST /plan,
// through ForGateway): seconds of one core and about a hundred MB at
// most. docs/http-api.md, "Bounds and timeouts", lists them.
const (
	GatewayWalk     = 1 << 26
	GatewayTrace    = 1 << 22
	GatewaySimulate = 1 << 28
)

// gatewayBudget is the Budget of the constants above.
func gatewayBudget() Budget {
	return Budget{Walk: GatewayWalk, Trace: GatewayTrace, Simulate: GatewaySimulate}
}

// meterCheck is how many units of work pass between two looks at the
// plan's context: often enough that a plan stops within milliseconds of
// its client leaving, seldom enough to cost nothing.
const meterCheck = 1 << 14

// meter counts one plan's work against its Budget and watches its
// context. A nil meter counts nothing and never stops: the simulations
// the package exports run without one.
type meter struct {
	ctx       context.Context
	budget    Budget
	walked    int64
	traced    int64
	simulated int64
	unchecked int64 // work since ctx was last looked at
	// stopped is the first error a count returned: every later count
	// returns it too, so that a loop that cannot return an error (a
	// walk's visitor) stops the loop around it at its next count.
	stopped error
}

func newMeter(ctx context.Context, b Budget) *meter {
	return &meter{ctx: ctx, budget: b}
}

// admit checks what the input decides before any work: walk, the samples
// (and assignment ranks) the whole plan will walk, and batches, the
// global batches its traces will hold, each at least one access.
func (m *meter) admit(walk, batches int64) error {
	if b := m.budget.Walk; b > 0 && walk > b {
		return fmt.Errorf("%w: the plan walks %d samples (epochs × samples per epoch × passes, and each batch's nodes in a cluster); this planner's budget is %d",
			ErrInvalid, walk, b)
	}
	if b := m.budget.Trace; b > 0 && batches > b {
		return fmt.Errorf("%w: the plan's trace holds at least %d accesses (one a global batch of every epoch); this planner's budget is %d",
			ErrInvalid, batches, b)
	}
	return m.ctx.Err()
}

// walk counts n samples walked.
func (m *meter) walk(n int) error {
	if m == nil {
		return nil
	}
	m.walked += int64(n)
	if b := m.budget.Walk; b > 0 && m.walked > b && m.stopped == nil {
		m.stopped = fmt.Errorf("%w: the plan walked more than %d samples", ErrBudget, b)
	}
	return m.tick(n)
}

// trace counts n accesses added to the traces the plan holds; untrace
// gives back those of a trace it dropped.
func (m *meter) trace(n int) error {
	if m == nil {
		return nil
	}
	m.traced += int64(n)
	if b := m.budget.Trace; b > 0 && m.traced > b && m.stopped == nil {
		m.stopped = fmt.Errorf("%w: the plan's traces hold more than %d accesses", ErrBudget, b)
	}
	return m.tick(n)
}

func (m *meter) untrace(n int) {
	if m != nil {
		m.traced -= int64(n)
	}
}

// simulate counts n accesses simulated.
func (m *meter) simulate(n int) error {
	if m == nil {
		return nil
	}
	m.simulated += int64(n)
	if b := m.budget.Simulate; b > 0 && m.simulated > b && m.stopped == nil {
		m.stopped = fmt.Errorf("%w: the plan simulated more than %d accesses", ErrBudget, b)
	}
	return m.tick(n)
}

// tick looks at the context once every meterCheck units of work.
func (m *meter) tick(n int) error {
	if m.stopped != nil {
		return m.stopped
	}
	m.unchecked += int64(n)
	if m.unchecked < meterCheck {
		return nil
	}
	m.unchecked = 0
	m.stopped = m.ctx.Err()
	return m.stopped
}

// err is the error that stopped the plan, or the context's, for the
// loops that count nothing and for the end of a walk.
func (m *meter) err() error {
	if m == nil {
		return nil
	}
	if m.stopped == nil {
		m.stopped = m.ctx.Err()
	}
	return m.stopped
}

// traceRoom is how many more accesses the traces may hold, for sizing
// one up front; -1 for no bound.
func (m *meter) traceRoom() int64 {
	if m == nil || m.budget.Trace <= 0 {
		return -1
	}
	return max(m.budget.Trace-m.traced, 0)
}
