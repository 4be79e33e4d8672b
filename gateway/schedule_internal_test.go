package gateway

import "testing"

// TestScheduleNowIsOldestInFlight: while an earlier batch is still being
// served, next use is measured from it, not from the leading edge, so its
// chunks cannot be judged "not needed until next epoch" before it pins them.
func TestScheduleNowIsOldestInFlight(t *testing.T) {
	s := newSchedule(nil)
	ds := &served{name: "d"}
	now := func() (uint64, int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.streams[streamKey{"d", 1, 2}].now()
	}
	a := s.begin(ds, 1, 2, 0, 100)
	s.observe(ds, 1, 2, 0, 132)
	b := s.begin(ds, 1, 2, 0, 400)
	s.observe(ds, 1, 2, 0, 432)
	if e, p := now(); e != 0 || p != 100 {
		t.Fatalf("now = epoch %d pos %d, want the oldest batch in flight, 0/100", e, p)
	}
	s.finish(a)
	if e, p := now(); e != 0 || p != 400 {
		t.Fatalf("now = %d/%d, want 0/400", e, p)
	}
	s.finish(b)
	s.finish(b) // a second finish is harmless
	if e, p := now(); e != 0 || p != 432 {
		t.Fatalf("now = %d/%d, want the leading edge 0/432", e, p)
	}
	c := s.begin(ds, 1, 2, 1, 0) // the next epoch's first batch
	s.observe(ds, 1, 2, 1, 32)
	if e, p := now(); e != 1 || p != 0 {
		t.Fatalf("now = %d/%d, want 1/0", e, p)
	}
	s.finish(c)
}
