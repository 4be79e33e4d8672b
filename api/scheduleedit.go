package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/internal/quote"
)

// NextStep is what from_step says for an edit from the first step the job
// has not read yet: the gateway takes that step as it makes the edit, so
// an edit made while loaders read ahead is never refused for a step they
// read in the meantime (docs/http-api.md, "Schedules").
const NextStep = "next"

// ScheduleEdit is the body of PUT and POST /jobs/{job}/schedule.
type ScheduleEdit struct {
	// Schedule is the whole schedule (a job's first, with no Base), or an
	// edit's phases from FromStep on, the first at FromStep: written
	// "next" (next:MIX, next~END:MIX) with FromStep Next, where steps
	// written +N count from the step the edit takes effect from.
	Schedule string   `json:"schedule"`
	FromStep EditFrom `json:"from_step"`
	// Base is the version the edit changes, the current one; "" stores a
	// job's first schedule.
	Base string `json:"base"`
	BucketStages
}

// BucketStages are a bucketed mixture's staged buckets and budget stored
// with its schedule (buckets=, budget=, budget_tokens= as a request gives
// them: STEP@VALUE|…, Buckets.Stages), which a job reads with
// buckets=stored (and budget=stored): a job's first with its first
// schedule, whole; an edit's from its step on, its first stage at the
// edit's step (or at "next", and +N counting from it, as the schedule's
// phases), the stages before it kept. An edit that gives none keeps the
// version's.
type BucketStages struct {
	Buckets      string `json:"buckets,omitempty"`
	Budget       string `json:"budget,omitempty"`
	BudgetTokens string `json:"budget_tokens,omitempty"`
}

// Stored is the value of buckets=, budget= and budget_tokens= that reads
// the job's bucket stages stored with its schedule (schedule=).
const Stored = "stored"

// Zero reports whether no stage is given.
func (b BucketStages) Zero() bool { return b == BucketStages{} }

// Edit returns b edited by e from step from (e's stages from it on, b's
// before it kept), e's first stage written at from (or "next", and
// +N counting from from, ResolveNext's). An edit that gives no value of
// a parameter keeps b's. Each value is checked as its parameter
// (Buckets.Set). Errors wrap bucket.ErrSpec.
func (b BucketStages) Edit(from uint64, e BucketStages, next bool) (BucketStages, error) {
	out := b
	for _, x := range []struct {
		name        string
		have, given string
		set         *string
	}{{ParamBuckets, b.Buckets, e.Buckets, &out.Buckets}, {ParamBudget, b.Budget, e.Budget, &out.Budget},
		{ParamBudgetTokens, b.BudgetTokens, e.BudgetTokens, &out.BudgetTokens}} {
		if x.given == "" {
			continue
		}
		given := x.given
		if next {
			given = resolveStages(given, from)
		}
		if from == 0 && !staged(given) {
			given = "0" + stageMark + given // a first version's plain value: every step's
		}
		edit, err := parseStagedFrom(x.name, given, from, func(string) error { return nil })
		if err != nil {
			return b, fmt.Errorf("%w (an edit from step %d starts with a stage at that step: %d@VALUE|…)", err, from, from)
		}
		var kept []string
		if x.have != "" {
			have := x.have
			if !staged(have) {
				have = "0" + stageMark + have
			}
			prev, err := parseStaged(x.name, have, func(string) error { return nil })
			if err != nil {
				return b, err
			}
			for _, st := range prev {
				if st.from < from {
					kept = append(kept, strconv.FormatUint(st.from, 10)+stageMark+st.value)
				}
			}
		}
		if len(kept) == 0 && from != 0 {
			return b, fmt.Errorf("%w: %s: the job stores none to edit from step %d: its first stages start at 0", bucket.ErrSpec, x.name, from)
		}
		for _, st := range edit {
			kept = append(kept, strconv.FormatUint(st.from, 10)+stageMark+st.value)
		}
		*x.set = strings.Join(kept, stageSep)
		var check Buckets
		if err := check.Set(x.name, *x.set); err != nil {
			return b, err
		}
	}
	return out, nil
}

// resolveStages writes an edit's stages given from "next": "next@…" at
// from, "+N@…" at from+N.
func resolveStages(v string, from uint64) string {
	parts := strings.Split(v, stageSep)
	for i, p := range parts {
		step, value, ok := strings.Cut(p, stageMark)
		if !ok {
			continue
		}
		switch {
		case step == NextStep:
			step = strconv.FormatUint(from, 10)
		case strings.HasPrefix(step, "+"):
			if n, err := strconv.ParseUint(step[1:], 10, 64); err == nil {
				step = strconv.FormatUint(from+n, 10)
			}
		}
		parts[i] = step + stageMark + value
	}
	return strings.Join(parts, stageSep)
}

// EditFrom is an edit's from_step: a step (a JSON number), or, with Next,
// the first step the job has not read (the JSON string "next").
type EditFrom struct {
	Step uint64
	Next bool
}

// MarshalJSON writes the step, or "next".
func (f EditFrom) MarshalJSON() ([]byte, error) {
	if f.Next {
		return []byte(`"` + NextStep + `"`), nil
	}
	return []byte(strconv.FormatUint(f.Step, 10)), nil
}

// UnmarshalJSON reads a whole number or "next".
func (f *EditFrom) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte(`"`+NextStep+`"`)) {
		*f = EditFrom{Next: true}
		return nil
	}
	var n uint64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("from_step is a step (a whole number) or %q, not %s", NextStep, quote.Input(string(b)))
	}
	*f = EditFrom{Step: n}
	return nil
}

func (f EditFrom) String() string {
	if f.Next {
		return NextStep
	}
	return strconv.FormatUint(f.Step, 10)
}

// StoredSchedule is what the schedule endpoints answer: a version of a
// job's stored schedule and the latest step the answering node has served
// of the job.
type StoredSchedule struct {
	Job     string `json:"job"`
	Version string `json:"version"`
	// Previous is the version this one edits ("" for the first) and
	// FromStep the step from which they differ (0 for the first): after
	// an edit from "next", the step the gateway took.
	Previous string `json:"previous,omitempty"`
	FromStep uint64 `json:"from_step"`
	// Schedule is the whole schedule, as mix_schedule= writes it; with
	// its bucket stages, if it stores some.
	Schedule string `json:"schedule"`
	BucketStages
	LatestStep *uint64 `json:"latest_step,omitempty"`
}

// ResolveNext writes the steps of an edit from the first step not yet
// read (EditFrom.Next) as the step from it took: the first phase's
// "next", and every step written +N, which counts from it (next~+500:MIX
// ramps over the 500 steps from it). Other steps are as written. Errors
// wrap ErrMix.
func ResolveNext(text string, from uint64) (string, error) {
	if text == "" {
		return "", fmt.Errorf("%w: an edit from the next step has phases: next:MIX or next~END:MIX", ErrMix)
	}
	phases := strings.Split(text, ";")
	for i, part := range phases {
		steps, mix, ok := strings.Cut(part, ":")
		if !ok {
			return "", fmt.Errorf("%w: schedule phase %s: write STEP:MIX or STEP~END:MIX, such as next:web:0.3,code:0.7", ErrMix, quote.Input(part))
		}
		start, end, ramp := strings.Cut(steps, "~")
		switch {
		case i == 0 && start != NextStep:
			return "", fmt.Errorf("%w: an edit from the next step starts with a phase at %q (next:MIX or next~END:MIX), not %s: the gateway chooses the step", ErrMix, NextStep, quote.Input(start))
		case i > 0 && start == NextStep:
			return "", fmt.Errorf("%w: schedule phase %s: only the first phase starts at %q", ErrMix, quote.Input(part), NextStep)
		}
		resolved := func(s string) (string, error) {
			switch {
			case s == NextStep:
				return strconv.FormatUint(from, 10), nil
			case strings.HasPrefix(s, "+"):
				n, err := parseStep(s[1:])
				if err != nil {
					return "", fmt.Errorf("%w: schedule phase %s: %w", ErrMix, quote.Input(part), err)
				}
				return strconv.FormatUint(from+n, 10), nil
			}
			return s, nil
		}
		var err error
		if start, err = resolved(start); err != nil {
			return "", err
		}
		if ramp {
			if end, err = resolved(end); err != nil {
				return "", err
			}
			start += "~" + end
		}
		phases[i] = start + ":" + mix
	}
	return strings.Join(phases, ";"), nil
}
