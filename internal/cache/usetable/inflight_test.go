package usetable

import (
	"math/rand/v2"
	"testing"
)

// TestInflightOldest holds the heaps' oldest position and start to a
// scan of every batch in flight, through a seeded run of begins and
// finishes — positions begun again after they finished, several batches
// at one position, starts out of order (a test's clock) — and the heaps
// to a bound of their stale entries.
func TestInflightOldest(t *testing.T) {
	tests := []struct {
		name      string
		positions int // distinct positions drawn from
		steps     int
	}{
		{name: "few positions, many repeats", positions: 8, steps: 20_000},
		{name: "a wide job", positions: 2048, steps: 50_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.positions)))
			f := newInflight()
			type batch struct {
				at  epochPos
				who Rank
			}
			var live []batch
			now := int64(0)
			for step := range tt.steps {
				if len(live) == 0 || rng.IntN(2) == 0 {
					p := rng.IntN(tt.positions)
					b := batch{epochPos{uint64(p % 3), p}, Rank{p % 16, 16}}
					now += int64(rng.IntN(100)) - 10 // now and then earlier than the last
					f.add(b.at, now, b.who)
					live = append(live, b)
				} else {
					i := rng.IntN(len(live))
					if !f.remove(live[i].at, live[i].who) {
						t.Fatalf("step %d: %v not in flight", step, live[i].at)
					}
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				}
				// The reference: a scan.
				wantPos, wantBegan, some := epochPos{}, int64(0), false
				for p, b := range f.began {
					if !some || p.before(wantPos) {
						wantPos = p
					}
					if !some || b < wantBegan {
						wantBegan = b
					}
					some = true
				}
				gotPos, ok1 := f.oldest()
				gotBegan, ok2 := f.oldestBegan()
				if ok1 != some || ok2 != some || some && (gotPos != wantPos || gotBegan != wantBegan) {
					t.Fatalf("step %d: oldest %v %v, began %d %v; want %v %d (%v)", step, gotPos, ok1, gotBegan, ok2, wantPos, wantBegan, some)
				}
				if f.serving != len(live) || f.len() > len(live) {
					t.Fatalf("step %d: serving %d at %d positions, want %d batches", step, f.serving, f.len(), len(live))
				}
				if stale := len(f.pos) + len(f.time) - 2*f.len(); stale > 2*f.len()+64+2 {
					t.Fatalf("step %d: %d stale heap entries for %d positions", step, stale, f.len())
				}
			}
			for _, b := range live {
				f.remove(b.at, b.who)
			}
			if f.serving != 0 || f.len() != 0 || len(f.ranks) != 0 {
				t.Fatalf("all finished: serving %d, %d positions, ranks %v", f.serving, f.len(), f.ranks)
			}
		})
	}
}
