package task

import (
	"fmt"
	"math"
	"slices"

	"github.com/brandgw/brand/shuffle"
)

// Domains: post-training mixes prompt sets — math, code, science, chat —
// at a ratio each in every step. A task job of domains (Spec.Domains)
// keeps each domain's prompts apart, each with its own passes and policy
// state (its curriculum's band, its retirements, dynamic sampling's
// redraws), and shares one window, one lease book and one run of steps
// among them:
//
//   - Steps. Step s holds, of domain d, its counted prompts
//     C_d(s) … C_d(s+1) − 1 in the order counted, C_d the mixture rule's
//     count over blocks of one step (docs/shuffle.md §11.2, shuffle's
//     reference): each step holds each domain's share of B within one
//     prompt, and every run of steps within one of its share in all. A
//     ratio edit (from a step not yet full) is a phase of a schedule of
//     the rule (§11.9): the steps before it keep their counts.
//   - Leases. A lease fills, prompt by prompt, the earliest step's slot
//     no counted or leased prompt covers, of any domain with prompts to
//     lease; each domain's share of the window is its slots up to the
//     trainer's step plus ahead.
//   - Passes. A domain whose pass runs out starts its next pass on its
//     own (PassesOwn: a small domain's prompts reshuffled and drawn
//     again while a larger one is in its first pass, so that every step
//     keeps its ratio); or the job's pass ends and every domain starts
//     its next (PassesShared: the prompts a larger domain had not drawn
//     yet are drawn in the next pass, never lost).
//
// A job without domains is a job of one, its dataset's.

// The rules for a domain whose pass runs out (Spec.DomainPasses).
const (
	PassesOwn    = "own"
	PassesShared = "shared"
)

// MaxDomains bounds a job's domains.
const MaxDomains = 64

// A Domain is a prompt dataset of a task job and its ratio: the share of
// every step its prompts take (the ratios are taken to six decimals, as
// integers, and need not sum to 1). Index and Prompts are set when the
// job is made: the dataset's index version then, and its prompts.
type Domain struct {
	Dataset string  `json:"dataset"`
	Ratio   float64 `json:"ratio"`
	Index   string  `json:"index,omitempty"`
	Prompts int     `json:"prompts,omitempty"`
}

// ratioWeight is a ratio as the rule's integer weight: its millionths.
func ratioWeight(r float64) uint64 { return uint64(math.Round(r * 1e6)) }

// checkDomains refuses a spec's domains out of their bounds.
func checkDomains(s Spec) error {
	if len(s.Domains) == 0 {
		return nil
	}
	if len(s.Domains) > MaxDomains {
		return fmt.Errorf("%w: %d domains: at most %d", ErrBadSpec, len(s.Domains), MaxDomains)
	}
	for i, d := range s.Domains {
		if d.Dataset == "" {
			return fmt.Errorf("%w: domain %d names no dataset", ErrBadSpec, i)
		}
		if slices.ContainsFunc(s.Domains[:i], func(e Domain) bool { return e.Dataset == d.Dataset }) {
			return fmt.Errorf("%w: dataset %s is two domains of the job", ErrBadSpec, d.Dataset)
		}
		if !(d.Ratio > 0 && d.Ratio <= 1e6) || ratioWeight(d.Ratio) == 0 {
			return fmt.Errorf("%w: domain %s: ratio=%v: more than 0 (taken to six decimals), at most 10^6", ErrBadSpec, d.Dataset, d.Ratio)
		}
		if d.Prompts < 0 {
			return fmt.Errorf("%w: domain %s of %d prompts", ErrBadSpec, d.Dataset, d.Prompts)
		}
	}
	n := 0
	for _, d := range s.Domains {
		n += d.Prompts
	}
	if n != s.Prompts {
		return fmt.Errorf("%w: the domains hold %d prompts, the job %d", ErrBadSpec, n, s.Prompts)
	}
	if _, err := newStepRule(s.Step, []shuffle.SchedulePhase{{Weights: domainWeights(s.Domains)}}); err != nil {
		return fmt.Errorf("%w: the domains' ratios: %v", ErrBadSpec, err)
	}
	return nil
}

// sameDomains reports whether two specs name the same domains and ratios.
func sameDomains(a, b []Domain) bool {
	return slices.EqualFunc(a, b, func(x, y Domain) bool { return x.Dataset == y.Dataset && ratioWeight(x.Ratio) == ratioWeight(y.Ratio) })
}

// DomainWeights are the domains' ratios as the rule's weights (a ratio
// edit's, Stream.EditRatios).
func DomainWeights(ds []Domain) []uint64 { return domainWeights(ds) }

// domainWeights are the domains' ratios as the rule's weights.
func domainWeights(ds []Domain) []uint64 {
	w := make([]uint64, len(ds))
	for i, d := range ds {
		w[i] = ratioWeight(d.Ratio)
	}
	return w
}

// stepRule is how a job's steps share their B prompts among its domains:
// C(d, s), domain d's prompts in the steps before s, by the mixture rule
// over blocks of one step of its weights, or of a schedule of them
// (ratio edits). A job of one domain holds s·B.
type stepRule struct {
	b      uint64
	phases []shuffle.SchedulePhase
	sched  *shuffle.Schedule // nil for one domain
	// memo holds the steps asked lately: each domain's count before it
	// (at most maxRuleMemo steps, dropped together when full); at is
	// each domain's step stepOf answered last, where the next search
	// starts (a lease's slots, a domain's counted answers, move on by a
	// step or so).
	memo map[uint64][]uint64
	at   []uint64
}

// maxRuleMemo bounds a rule's memo of steps.
const maxRuleMemo = 1 << 14

// newStepRule is the rule of steps of b prompts under phases (their
// weights one a domain).
func newStepRule(b int, phases []shuffle.SchedulePhase) (*stepRule, error) {
	r := &stepRule{b: uint64(b), phases: phases}
	if k := len(phases[0].Weights); k > 1 {
		ones := make([]shuffle.Passes, k)
		for i := range ones {
			ones[i] = shuffle.EqualPasses(1)
		}
		s, err := shuffle.NewSchedule(phases, ones, b, b)
		if err != nil {
			return nil, err
		}
		r.sched, r.memo, r.at = s, map[uint64][]uint64{}, make([]uint64, k)
	}
	return r, nil
}

// before is C(d, s): domain d's prompts in the steps before step s.
func (r *stepRule) before(d int, s uint64) uint64 {
	if r.sched == nil {
		return s * r.b
	}
	at, ok := r.memo[s]
	if !ok {
		// An epoch of one step, over passes of one prompt: where it
		// starts each domain's stream is its count before it.
		view, err := r.sched.Epoch(s)
		if err != nil {
			return math.MaxUint64 // past step 2^64 / B: never reached
		}
		at = make([]uint64, len(r.at))
		for i := range at {
			at[i] = view.Start(i, s).Pass
		}
		if len(r.memo) == maxRuleMemo {
			clear(r.memo)
		}
		r.memo[s] = at
	}
	return at[d]
}

// stepOf is the step domain d's j-th counted prompt falls in: the s with
// C(d, s) ≤ j < C(d, s+1) (of a domain no step takes from from some step
// on, the step before that one's prompts end: never a step it is in).
func (r *stepRule) stepOf(d int, j uint64) uint64 {
	if r.sched == nil {
		return j / r.b
	}
	s := r.at[d]
	switch {
	case r.before(d, s) > j:
		// Behind where it was last asked: searched from step 0.
		lo, hi := uint64(0), s // C(d, lo) ≤ j < C(d, hi)
		for lo+1 < hi {
			mid := lo + (hi-lo)/2
			if r.before(d, mid) <= j {
				lo = mid
			} else {
				hi = mid
			}
		}
		s = lo
	case r.before(d, s+1) <= j:
		// Ahead: by doubling, then halving.
		lo, step := s+1, uint64(1)
		for r.before(d, lo+step) <= j && step < 1<<40 {
			lo, step = lo+step, step*2
		}
		hi := lo + step
		for lo+1 < hi {
			mid := lo + (hi-lo)/2
			if r.before(d, mid) <= j {
				lo = mid
			} else {
				hi = mid
			}
		}
		s = lo
	}
	r.at[d] = s
	return s
}

// full is the steps whose every domain's prompts are counted, counted[d]
// domain d's: the largest s with C(d, s) ≤ counted[d] for every d.
func (r *stepRule) full(counted []uint64) uint64 {
	if r.sched == nil {
		return counted[0] / r.b
	}
	var total uint64
	for _, c := range counted {
		total += c
	}
	lo, hi := uint64(0), total/r.b+1 // at most total/B steps are full
	for lo+1 < hi {                  // the steps before lo are full, and those before hi not
		mid := lo + (hi-lo)/2
		if r.fills(counted, mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// fills reports whether counted (each domain's answers) fill the steps
// before s.
func (r *stepRule) fills(counted []uint64, s uint64) bool {
	for d, c := range counted {
		if r.before(d, s) > c {
			return false
		}
	}
	return true
}

// edited is the rule with the ratios weights from step from on: a phase
// after its last, or its last phase's weights when it starts at from.
func (r *stepRule) edited(from uint64, weights []uint64) (*stepRule, error) {
	phases := slices.Clone(r.phases)
	if last := &phases[len(phases)-1]; last.Step == from {
		last.Weights = weights
	} else {
		phases = append(phases, shuffle.SchedulePhase{Step: from, Weights: weights})
	}
	return newStepRule(int(r.b), phases)
}
