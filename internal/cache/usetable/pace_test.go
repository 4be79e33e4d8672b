package usetable

import (
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
	"github.com/brandgw/brand/shuffle"
)

// TestUseTableSeesThePhaseAhead: a schedule's component whose weight
// triples at a phase switch ahead has its uses after the switch keyed
// sooner than its rate now says — as the pace after the switch reaches
// them — so that prefetch reads its next windows before the switch;
// its uses before the switch are keyed as without a schedule.
func TestUseTableSeesThePhaseAhead(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32)) // 512 samples
	sched, err := shuffle.NewSchedule([]shuffle.SchedulePhase{
		{Weights: []uint64{1, 3}},           // 2 of d a step of 8
		{Step: 40, Weights: []uint64{3, 1}}, // 6 a step from step 40: d's position 80
	}, []shuffle.Passes{shuffle.EqualPasses(512), shuffle.EqualPasses(512)}, 8, 1024)
	if err != nil {
		t.Fatal(err)
	}
	plain := jobstream.Stream{DS: ds, Seed: 3, Window: 4}
	paced := plain
	paced.Pace = jobstream.NewPace(sched, 0, 512, 0)
	keys := func(js jobstream.Stream) []int64 {
		s := newTestSchedule()
		s.advance(js, 0, 0)
		tab := s.Snapshot()
		out := make([]int64, 16)
		for c := range out {
			out[c] = tab.Distance(ds.ChunkKey(c))
		}
		return out
	}
	kp, kq := keys(plain), keys(paced)
	e, err := layout.New(nil, nil).Epoch(plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	sooner := 0
	for c := range 16 {
		w := int(e.ChunkWindow[c])
		start := e.WindowStart(w)
		switch {
		case w == 0:
			// The window read now: hot, the same.
		case start <= 80 && kq[c] != kp[c]:
			t.Errorf("chunk %d (window from %d, before the switch): key %d with the pace, %d without", c, start, kq[c], kp[c])
		case start > 80 && kq[c] >= kp[c]:
			t.Errorf("chunk %d (window from %d, after the switch): key %d with the pace, not before %d", c, start, kq[c], kp[c])
		case start > 80:
			sooner++
		}
	}
	if sooner == 0 {
		t.Fatal("no window starts after the switch: the test shows nothing")
	}
}
