package api

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/shuffle"
)

// ParamMixSchedule is a mixture whose weights change with the job's
// global step (docs/shuffle.md §11.9): phases separated by ";", each a
// step and a mixture as mix= writes it, STEP:MIX for constant weights
// from STEP on, STEP~END:MIX for weights moving linearly from the
// previous phase's to MIX over steps [STEP, END):
// mix_schedule=0:web:0.7,code:0.3;4000~6000:web:0.3,code:0.7. It takes
// the place of mix= (and dataset=).
const ParamMixSchedule = "mix_schedule"

// ParamScheduleVersion reads the schedule stored under the job's name
// (job=NAME; PUT /jobs/NAME/schedule stores it) in place of mix= or
// mix_schedule=: "latest" for its current version, or a version (16 hex
// digits, as the Brand-Schedule-Version header names it) that a client
// pinned for its epoch. A request naming a version that an edit has
// since changed where it reads is refused (409, naming the current one).
const ParamScheduleVersion = "schedule"

// HeaderScheduleVersion names, on a batch or epoch of a stored schedule,
// the version it was laid out under.
const HeaderScheduleVersion = "Brand-Schedule-Version"

// A SchedulePhase is one phase of a Schedule: from Step on, Mix's
// weights; with End > Step a ramp to them over [Step, End).
type SchedulePhase struct {
	Step, End uint64
	Mix       Mix
}

// A Schedule is a mixture's phases, in step order. Every phase names the
// same datasets; the first phase's order numbers them.
type Schedule []SchedulePhase

// ParseSchedule reads a schedule as mix_schedule= writes it. Bounds: at
// most shuffle.MaxSchedulePhases phases and shuffle.MaxMixComponents
// datasets; steps below 2^53, the first 0, increasing, a ramp ending
// at or before the next phase; weights as mix= takes them, 0 allowed in
// a phase but not for all its datasets. Errors wrap ErrMix.
func ParseSchedule(s string) (Schedule, error) {
	out, err := parsePhases(s)
	if err != nil || out == nil {
		return nil, err
	}
	if err := out.check(0); err != nil {
		return nil, err
	}
	return out, nil
}

// parsePhases reads the phases of s, each on its own: check relates them.
func parsePhases(s string) (Schedule, error) {
	if s == "" {
		return nil, nil
	}
	if n := strings.Count(s, ";") + 1; n > shuffle.MaxSchedulePhases {
		return nil, fmt.Errorf("%w: a schedule of %d phases; at most %d", ErrMix, n, shuffle.MaxSchedulePhases)
	}
	var out Schedule
	for part := range strings.SplitSeq(s, ";") {
		steps, mix, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%w: schedule phase %s: write STEP:MIX or STEP~END:MIX, such as 4000:web:0.3,code:0.7", ErrMix, quote.Input(part))
		}
		var p SchedulePhase
		from, to, ramp := strings.Cut(steps, "~")
		var err error
		if p.Step, err = parseStep(from); err != nil {
			return nil, fmt.Errorf("%w: schedule phase %s: %w", ErrMix, quote.Input(part), err)
		}
		if ramp {
			if p.End, err = parseStep(to); err != nil {
				return nil, fmt.Errorf("%w: schedule phase %s: %w", ErrMix, quote.Input(part), err)
			}
			if p.End <= p.Step {
				return nil, fmt.Errorf("%w: schedule phase %s ramps to step %d, not after its start %d", ErrMix, quote.Input(part), p.End, p.Step)
			}
		}
		if p.Mix, err = parsePhaseMix(mix); err != nil {
			return nil, fmt.Errorf("schedule phase at step %d: %w", p.Step, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Edit returns the schedule that is s for every step before from and
// next's phases from there: next is an edit's text, whose first phase
// starts at from (constant, or a ramp from s's weights at from). Every
// step before from keeps s's weights, so an edit cannot start inside a
// ramp of s, which would change the ramp's slope before from. next names
// s's datasets. Errors wrap ErrMix.
func (s Schedule) Edit(from uint64, next string) (Schedule, error) {
	ph, err := parsePhases(next)
	if err != nil {
		return nil, err
	}
	if len(ph) == 0 || ph[0].Step != from {
		return nil, fmt.Errorf("%w: an edit from step %d starts with a phase at that step (%d:MIX or %d~END:MIX)", ErrMix, from, from, from)
	}
	var out Schedule
	for _, p := range s {
		if p.Step >= from {
			break
		}
		if p.End > from {
			return nil, fmt.Errorf("%w: step %d is inside the ramp from step %d to %d, whose weights before %d would change; edit from step %d or from %d on", ErrMix, from, p.Step, p.End, from, p.Step, p.End)
		}
		out = append(out, p)
	}
	if len(out) == 0 && ph[0].End > ph[0].Step {
		return nil, fmt.Errorf("%w: an edit from step 0 has no weights to ramp from: start it with 0:MIX", ErrMix)
	}
	out = append(out, ph...)
	if err := out.check(0); err != nil {
		return nil, err
	}
	if len(s) > 0 && len(out[0].Mix) > 0 {
		want := s.Datasets()
		got := out.Datasets()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return nil, fmt.Errorf("%w: the edit's schedule reads %s; the job's reads %s: an edit keeps the datasets, in their order", ErrMix, strings.Join(got, ","), strings.Join(want, ","))
		}
	}
	if len(out) > shuffle.MaxSchedulePhases {
		return nil, fmt.Errorf("%w: the edited schedule has %d phases; at most %d", ErrMix, len(out), shuffle.MaxSchedulePhases)
	}
	return out, nil
}

func parseStep(s string) (uint64, error) {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("step %s is not a whole number", quote.Input(s))
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n >= shuffle.MaxScheduleStep {
		return 0, fmt.Errorf("step %s: steps are whole numbers below 2^53", quote.Input(s))
	}
	return n, nil
}

// parsePhaseMix is ParseMix with weights of 0 allowed, so long as one is
// not.
func parsePhaseMix(s string) (Mix, error) {
	// Sized once: every request of a schedule names every source in
	// every phase, and growing these was most of its parse's garbage.
	n := min(strings.Count(s, ",")+1, shuffle.MaxMixComponents+1)
	m := make(Mix, 0, n)
	seen := make(map[string]bool, n)
	for part := range strings.SplitSeq(s, ",") {
		name, w, ok := strings.Cut(part, ":")
		if !ok || name == "" || w == "" {
			return nil, fmt.Errorf("%w: %s: each component is dataset:weight, such as web:0.7", ErrMix, quote.Input(part))
		}
		if err := CheckDatasetName(name); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMix, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: dataset %s is named twice", ErrMix, quote.Input(name))
		}
		seen[name] = true
		m = append(m, MixComponent{Dataset: name, Weight: w})
	}
	if len(m) > shuffle.MaxMixComponents {
		return nil, fmt.Errorf("%w: %d datasets; a mixture has at most %d", ErrMix, len(m), shuffle.MaxMixComponents)
	}
	if _, err := m.phaseWeights(); err != nil {
		return nil, err
	}
	return m, nil
}

// zeroWeight reports whether w is a plain decimal of value 0.
func zeroWeight(w string) bool {
	return plainDecimal(w) && strings.Trim(w, "0.") == ""
}

// phaseWeights is IntWeights with weights of 0 allowed: the others
// reduced as IntWeights reduces them, 0 where the weight is 0.
func (m Mix) phaseWeights() ([]uint64, error) {
	pos := make(Mix, 0, len(m))
	for _, c := range m {
		if !zeroWeight(c.Weight) {
			pos = append(pos, c)
		}
	}
	if len(pos) == 0 {
		return nil, fmt.Errorf("%w: weights %s sum to 0; at least one must be positive", ErrMix, m)
	}
	w, err := pos.IntWeights()
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(m))
	j := 0
	for i, c := range m {
		if !zeroWeight(c.Weight) {
			out[i] = w[j]
			j++
		}
	}
	return out, nil
}

// check refuses a schedule whose phases are out of order, overlap, start
// anywhere but 0 or name other datasets than the first phase's.
func (s Schedule) check(first uint64) error {
	if len(s) == 0 {
		return nil
	}
	if s[0].Step != first || s[0].End != 0 {
		return fmt.Errorf("%w: a schedule's first phase is 0:MIX, constant from step 0 (a ramp moves from the phase before it)", ErrMix)
	}
	names := make(map[string]bool, len(s[0].Mix))
	for _, c := range s[0].Mix {
		names[c.Dataset] = true
	}
	for n := 1; n < len(s); n++ {
		p, prev := s[n], s[n-1]
		if p.Step <= prev.Step {
			return fmt.Errorf("%w: phase %d starts at step %d, not after the phase before it (step %d): phases are in increasing step order", ErrMix, n, p.Step, prev.Step)
		}
		if prev.End > p.Step {
			return fmt.Errorf("%w: phase %d ramps to step %d, past the next phase's start %d: phases do not overlap", ErrMix, n-1, prev.End, p.Step)
		}
		if len(p.Mix) != len(names) {
			return fmt.Errorf("%w: phase %d names %d datasets, the first phase %d: every phase names the same ones (weight 0 for none)", ErrMix, n, len(p.Mix), len(names))
		}
		for _, c := range p.Mix {
			if !names[c.Dataset] {
				return fmt.Errorf("%w: phase %d names %s, which the first phase does not: every phase names the same datasets (weight 0 for none)", ErrMix, n, quote.Input(c.Dataset))
			}
		}
	}
	return nil
}

// String writes the schedule as ParseSchedule reads it.
func (s Schedule) String() string {
	var b strings.Builder
	for n, p := range s {
		if n > 0 {
			b.WriteByte(';')
		}
		b.WriteString(strconv.FormatUint(p.Step, 10))
		if p.End > p.Step {
			b.WriteByte('~')
			b.WriteString(strconv.FormatUint(p.End, 10))
		}
		b.WriteByte(':')
		b.WriteString(p.Mix.String())
	}
	return b.String()
}

// Datasets returns the schedule's datasets in the first phase's order,
// which numbers its components.
func (s Schedule) Datasets() []string {
	if len(s) == 0 {
		return nil
	}
	out := make([]string, len(s[0].Mix))
	for i, c := range s[0].Mix {
		out[i] = c.Dataset
	}
	return out
}

// Phases returns the schedule's phases as shuffle.NewSchedule takes
// them: each phase's integer weights in the first phase's order of
// datasets.
func (s Schedule) Phases() ([]shuffle.SchedulePhase, error) {
	names := s.Datasets()
	at := make(map[string]int, len(names))
	for i, n := range names {
		at[n] = i
	}
	out := make([]shuffle.SchedulePhase, len(s))
	for n, p := range s {
		w, err := p.Mix.phaseWeights()
		if err != nil {
			return nil, err
		}
		out[n] = shuffle.SchedulePhase{Step: p.Step, End: p.End, Weights: make([]uint64, len(names))}
		for i, c := range p.Mix {
			out[n].Weights[at[c.Dataset]] = w[i]
		}
	}
	return out, nil
}
