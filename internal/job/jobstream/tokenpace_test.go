package jobstream

import (
	"math"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// TestTokenPaceCountsDocuments: a token component's pace counts its
// stream's documents where the schedule counts its sequences: every
// boundary's position and every pace are the sample pace's times the
// documents per sequence, so that the time to read d documents at a
// token pace is the time to read d/r sequences at the schedule's.
func TestTokenPaceCountsDocuments(t *testing.T) {
	const (
		seqs = 50  // component 1's sequences in pass 0
		docs = 150 // its documents a pass: 3 a sequence
	)
	phases := []shuffle.SchedulePhase{
		{Weights: []uint64{3, 1}},
		{Step: 7, Weights: []uint64{1, 3}},
	}
	s, err := shuffle.NewSchedule(phases, []shuffle.Passes{shuffle.EqualPasses(70), shuffle.EqualPasses(seqs)}, 8, 80)
	if err != nil {
		t.Fatal(err)
	}
	p, tp := NewPace(s, 1, seqs, 0), NewTokenPace(s, 1, seqs, docs, 0)
	if tp.n != docs || len(tp.at) != len(p.at) {
		t.Fatalf("token pace %+v against %+v", *tp, *p)
	}
	for k := range p.at {
		if tp.at[k] != 3*p.at[k] || math.Abs(tp.per[k]-3*p.per[k]) > 1e-9 {
			t.Errorf("boundary %d: documents %d at %v a step, want %d at %v", k, tp.at[k], tp.per[k], 3*p.at[k], 3*p.per[k])
		}
	}
	// Across the switch, from the start: d documents at the token pace
	// take as many steps as d/3 sequences at the schedule's.
	d := int(3*p.at[1] + 36) // 12 sequences into the second phase
	if got, want := tp.Ahead(0, 0, d), 3*p.Ahead(0, 0, d/3); math.Abs(got-want) > 1e-9 {
		t.Errorf("across the switch: %v documents at the first pace, want %v", got, want)
	}
	if !tp.Changes() {
		t.Error("the token pace sees no change ahead")
	}
}
