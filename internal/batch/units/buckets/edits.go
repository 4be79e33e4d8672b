package buckets

import (
	"fmt"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
)

// Edits of a bucket job (POST /jobs/{job}/exclude, /append): a bucket
// job's every step takes images from across its epoch's order, so an
// edit from a position of the order would change the steps before it.
// Its edits cut its pass at a step instead (layout.StepCutter,
// layout.Edit.Step), as a stage does: the steps before the cut are
// those the pass had, and from it on the pass's images not yet taken
// are those of the order under the edit — less an exclusion's samples,
// with an append's new ones merged in — bucketed and stepped afresh. So
// what an exclusion removes is never served after its step, and what an
// append adds joins the pass's remaining steps; every later pass is the
// edited order's whole.
//
// An edit's step is a global step counted over the job's whole epochs
// at the edit's world, from its first step (as a stage's is): Counted.

// passCuts are the orders of a pass its job's edits cut: the order in
// force from the pass's first step (the edits of earlier epochs applied),
// then each edit's of the pass, from its step.
type passCuts struct {
	steps  []int   // the pass's step each order starts at, ascending; steps[0] is 0
	orders [][]int // each order's sample IDs
	ids    int     // a bound on the orders' IDs
	key    string  // the edits' versions and steps
}

// orderAt is the order in force at the pass's step k, and the steps to
// the next cut (-1: none).
func (c *passCuts) orderAt(k int) (order []int, left int) {
	j := 0
	for j+1 < len(c.steps) && c.steps[j+1] <= k {
		j++
	}
	if j+1 < len(c.steps) {
		return c.orders[j], c.steps[j+1] - k
	}
	return c.orders[j], -1
}

// cutsOf are the cuts of job's epoch by its edits (nil if none of its
// chain starts in the epoch), over ds, the version the chain up to
// job.Edit grew the job to.
func (pl *planner) cutsOf(ds *catalog.Dataset, job api.Job, epoch uint64) (*passCuts, error) {
	if job.Edit == "" {
		return nil, nil
	}
	x, ok := pl.base.Edit(job.Edit)
	if !ok {
		return nil, fmt.Errorf("%w: edit %s", layout.ErrNoEdit, job.Edit)
	}
	chain := x.Chain()
	var before *layout.Edit
	var in []*layout.Edit
	for _, e := range chain {
		switch {
		case e.Epoch < epoch:
			before = e
		case e.Epoch == epoch && e.Step >= 0:
			in = append(in, e)
		}
	}
	if len(in) == 0 {
		return nil, nil
	}
	if job.Space() != "" {
		return nil, fmt.Errorf("%w: a clip bucket job's edits", bucket.ErrSpec)
	}
	c := &passCuts{}
	var key strings.Builder
	for _, e := range append([]*layout.Edit{before}, in...) {
		// The order under the chain up to e, over the chunks of the
		// version it grew the job to: the next append's base, or ds's.
		chunks := len(ds.Counts)
		seen := e == nil
		for _, y := range chain {
			if seen && y.IsAppend() {
				chunks = y.Chunks
				break
			}
			seen = seen || y == e
		}
		o, err := layout.EditedOrder(ds.Counts[:chunks], e, job.Seed, epoch, job.Window)
		if err != nil {
			return nil, err
		}
		ids := make([]int, 0, o.NumSamples())
		for w := range o.NumWindows() {
			ids = append(ids, o.Window(w)...)
		}
		for _, id := range ids {
			c.ids = max(c.ids, id+1)
		}
		step := 0
		if e != nil && e != before {
			step = e.Step
			fmt.Fprintf(&key, "%s@%d,", e.Version, e.Step)
		}
		if k := len(c.steps); k > 0 && c.steps[k-1] == step {
			c.orders[k-1] = ids // two edits from one step: the later's
			continue
		}
		c.steps = append(c.steps, step)
		c.orders = append(c.orders, ids)
	}
	c.key = key.String()
	return c, nil
}

// PassStep is the step of its epoch's pass batch m of job over src is:
// the steps its resume point took of the pass, then m.
func (u *Unit) PassStep(src layout.Source, job api.Job, epoch, m uint64) (int, error) {
	p, err := u.epochPlan(src.DS, job, epoch)
	if err != nil {
		return 0, err
	}
	return p.skipped + int(m), nil
}

// Counted is job as an edit's steps count it: its whole epochs at its
// world (its resume point dropped), whose lengths may differ up to its
// last stage's start.
func (u *Unit) Counted(job api.Job) (api.Job, uint64, error) {
	job.Buckets.Resume = ""
	stages, err := job.Buckets.Stages()
	if err != nil {
		return job, 0, err
	}
	return job, stages[len(stages)-1].From, nil
}
