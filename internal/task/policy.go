package task

import (
	"math"
	"slices"
	"strings"
)

// A policy is how a task job weighs its prompts in a pass and when it
// retires one: a pure function of the prompt's recent answers, so that
// every node, and a replay, decides alike. Dynamic sampling (redraws),
// the generators' counts override, passes and leases are the plan's,
// whatever the policy; a new policy is one entry in policies.
type policy interface {
	// weight is the prompt's weight in its pass, in (0, 1], given the
	// pass rates of its last answers (rates, oldest first; none for a
	// prompt never answered).
	weight(rates []float32) float64
	// retires reports whether a prompt solved solves times is retired.
	retires(solves int) bool
}

// policies are the policies by name, each made from a job's spec.
var policies = map[string]func(Spec) policy{
	"uniform": func(Spec) policy { return uniform{} },
	"curriculum": func(s Spec) policy {
		return curriculum{lo: s.Band[0], hi: s.Band[1], temp: *s.Temperature, retire: s.Retire}
	},
	"importance": func(Spec) policy { return importance{} },
}

func policyNames() string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// uniform draws every prompt alike, without replacement in each pass.
type uniform struct{}

func (uniform) weight([]float32) float64 { return 1 }
func (uniform) retires(int) bool         { return false }

// minWeight is the least weight a prompt is drawn with: a prompt far from
// a curriculum's band is drawn late in its pass, never left out of it.
const minWeight = 1e-6

// curriculum weighs 1 a prompt never answered or whose mean pass rate
// over its last answers is in [lo, hi], and exp(-d/temp) one at distance
// d outside; it retires a prompt after retire solves (0: never).
type curriculum struct {
	lo, hi, temp float64
	retire       int
}

// MeanRate is the mean of rates, summed in float64 in order.
func MeanRate(rates []float32) float64 {
	var s float64
	for _, r := range rates {
		s += float64(r)
	}
	return s / float64(len(rates))
}

func (c curriculum) weight(rates []float32) float64 {
	if len(rates) == 0 {
		return 1
	}
	r := MeanRate(rates)
	var d float64
	switch {
	case r < c.lo:
		d = c.lo - r
	case r > c.hi:
		d = r - c.hi
	default:
		return 1
	}
	return max(math.Exp(-d/c.temp), minWeight)
}

func (c curriculum) retires(solves int) bool { return c.retire > 0 && solves >= c.retire }

// importance draws sooner the prompts the model fails: weight 1 − r of
// the last answer's pass rate r, at least a tenth (as importance
// sampling's floor), 1 for a prompt never answered.
type importance struct{}

func (importance) weight(rates []float32) float64 {
	if len(rates) == 0 {
		return 1
	}
	return max(1-float64(rates[len(rates)-1]), 0.1)
}

func (importance) retires(int) bool { return false }

// quantum is a weight of 1 in the plan's integer weights.
const quantum = 1 << 32

// fixedWeight is w in the plan's integers: at least 1, so that a prompt
// in a pass is always drawn in it.
func fixedWeight(w float64) uint64 {
	return max(1, uint64(w*quantum))
}
