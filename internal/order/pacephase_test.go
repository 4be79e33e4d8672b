package order

import (
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// A stream position past the last step that reads a component (its
// weight 0 from a ramp's end on) is in no phase that reads it: its pace is
// the last one that did, the ramp's, not none. (Gateway's schedule test
// over HTTP reached this through the use table; TestScheduleContract lays
// the same schedule out without it.)
func TestPaceOfAStretchNotRead(t *testing.T) {
	const n = 50
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
	last := len(p.at) - 1
	if last < 1 || p.per[last] != 0 || p.per[last-1] <= 0 {
		t.Fatalf("boundaries at %v, per step %v: want the last one reading none, after one reading some", p.at, p.per)
	}
	for _, q := range []uint64{p.at[last], p.at[last] + 7} {
		if got := p.phase(q); got != last-1 {
			t.Errorf("position %d: phase %d, want %d (the ramp, the last to read the component)", q, got, last-1)
		}
	}
}
