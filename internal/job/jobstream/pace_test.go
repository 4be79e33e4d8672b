package jobstream

import (
	"math"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// TestPaceSeesThePhaseAhead: a component's pace puts each phase's start
// at the stream position its draws reach at that step, and counts the
// samples after a switch that gives the component three times the weight
// as a third of the time each: its uses there are keyed sooner than its
// rate now says; past the last step that reads it, at the last pace that
// did.
func TestPaceSeesThePhaseAhead(t *testing.T) {
	const n = 50 // samples a pass of component 1
	phases := []shuffle.SchedulePhase{
		{Weights: []uint64{3, 1}},
		{Step: 7, Weights: []uint64{1, 3}},
		{Step: 15, End: 21, Weights: []uint64{1, 0}},
	}
	s, err := shuffle.NewSchedule(phases, []shuffle.Passes{shuffle.EqualPasses(70), shuffle.EqualPasses(n)}, 8, 80)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPace(s, 1, n, 0)
	// The stream position of component 1 at each step, from the draws.
	var at []uint64 // at[step]
	q := uint64(0)
	for e := range uint64(4) {
		m, err := s.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		for b := range 10 {
			at = append(at, q)
			q += uint64(m.BlockCounts(b)[1])
		}
	}
	for k, step := range p.step {
		if want := at[int(step)]; p.at[k] != want {
			t.Errorf("boundary %d (step %v) at stream position %d, the draws' %d", k, step, p.at[k], want)
		}
	}
	// From step 0 (position 0) to step 7's position: the same pace, d.
	if got := p.Ahead(0, 0, int(at[7])); math.Abs(got-float64(at[7])) > 1e-9 {
		t.Errorf("within the first phase: %v samples for %d", got, at[7])
	}
	// Across the switch at step 7: 2 per step before, 6 after.
	d := int(at[7] + 12) // 2 steps into the second phase
	got := p.Ahead(0, 0, d)
	if want := 7*2 + 2*2.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("across the switch: %v samples at the first pace, want %v", got, want)
	}
	// From a later pass's position too: pass 0 index at[9] is stream
	// position at[9].
	if got := p.Ahead(0, int(at[9]), 6); math.Abs(got-6) > 1e-9 {
		t.Errorf("within the second phase: %v", got)
	}
	// Past the ramp's end, where the component is read no more, a
	// position is in no phase that reads it: its pace is the ramp's, the
	// last that did, not none.
	last := len(p.at) - 1
	if p.per[last] != 0 || p.per[last-1] <= 0 {
		t.Fatalf("boundaries at %v, per step %v: want the last one reading none, after one reading some", p.at, p.per)
	}
	for _, q := range []uint64{p.at[last], p.at[last] + 7} {
		if got := p.phase(q); got != last-1 {
			t.Errorf("position %d: phase %d, want %d (the ramp)", q, got, last-1)
		}
	}
	var none *Pace
	if none.Ahead(3, 4, 10) != 10 {
		t.Error("a nil Pace is not the identity")
	}
}

// TestPaceChanges: a pace changes ahead while a phase boundary lies after
// the step it is made from, and not past the last one, nor for a schedule
// of one phase, nor for no schedule (the cache's Keeps rule follows it).
func TestPaceChanges(t *testing.T) {
	passes := []shuffle.Passes{shuffle.EqualPasses(70), shuffle.EqualPasses(50)}
	two, err := shuffle.NewSchedule([]shuffle.SchedulePhase{{Weights: []uint64{3, 1}}, {Step: 7, Weights: []uint64{1, 3}}}, passes, 8, 80)
	if err != nil {
		t.Fatal(err)
	}
	one, err := shuffle.NewSchedule([]shuffle.SchedulePhase{{Weights: []uint64{3, 1}}}, passes, 8, 80)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    *Pace
		want bool
	}{
		{"no schedule", nil, false},
		{"before the switch", NewPace(two, 1, 50, 0), true},
		{"past the switch", NewPace(two, 1, 50, 9), false},
		{"one phase", NewPace(one, 1, 50, 0), false},
	}
	for _, tt := range tests {
		if got := tt.p.Changes(); got != tt.want {
			t.Errorf("%s: Changes() = %t, want %t", tt.name, got, tt.want)
		}
	}
}
