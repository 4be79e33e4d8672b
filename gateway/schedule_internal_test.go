package gateway

import "testing"

// TestScheduleNowIsOldestInFlight: while an earlier batch is still being
// served, next use is measured from it, not from the leading edge, so its
// chunks cannot be judged "not needed until next epoch" before it pins them.
func TestScheduleNowIsOldestInFlight(t *testing.T) {
	s := newSchedule(nil)
	ds := &served{name: "d"}
	now := func() (uint64, int) { return streamNow(s, streamKey{"d", 1, 2}) }
	a := s.begin(ds, 1, 2, 0, 100, 32)
	s.observe(ds, 1, 2, 0, 132)
	b := s.begin(ds, 1, 2, 0, 400, 32)
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
	c := s.begin(ds, 1, 2, 1, 0, 32) // the next epoch's first batch
	s.observe(ds, 1, 2, 1, 32)
	if e, p := now(); e != 1 || p != 0 {
		t.Fatalf("now = %d/%d, want 1/0", e, p)
	}
	s.finish(c)
}

// TestScheduleNowAllowsForLateBatches: batches of a client reading ahead
// can arrive out of order. Once one arrived behind the leading edge, next
// use is measured from further back — the lateness seen plus a batch — so
// that an earlier batch not yet arrived still finds its chunks.
func TestScheduleNowAllowsForLateBatches(t *testing.T) {
	s := newSchedule(nil)
	ds := &served{name: "d"}
	now := func() (uint64, int) { return streamNow(s, streamKey{"d", 1, 2}) }
	// In order: now is the leading edge.
	for m := range 4 {
		f := s.begin(ds, 1, 2, 0, 32*m, 32)
		s.observe(ds, 1, 2, 0, 32*m+32)
		s.finish(f)
	}
	if e, p := now(); e != 0 || p != 128 {
		t.Fatalf("in order: now = %d/%d, want the leading edge 0/128", e, p)
	}
	// Batches 6 and 5 arrive before 4: 5 is 64 samples late.
	six := s.begin(ds, 1, 2, 0, 192, 32)
	s.observe(ds, 1, 2, 0, 224)
	five := s.begin(ds, 1, 2, 0, 160, 32)
	s.observe(ds, 1, 2, 0, 192)
	s.finish(six)
	s.finish(five)
	if e, p := now(); e != 0 || p != 224-64-32 {
		t.Fatalf("after a late batch: now = %d/%d, want the edge less lateness and a batch, 0/%d", e, p, 224-64-32)
	}
	// Across an epoch boundary the position is counted back into the
	// previous epoch (as a negative offset from the new one's start).
	f := s.begin(ds, 1, 2, 1, 0, 32)
	s.observe(ds, 1, 2, 1, 32)
	s.finish(f)
	if e, p := now(); e != 1 || p >= 0 {
		t.Fatalf("early in the next epoch: now = %d/%d, want a negative position in epoch 1", e, p)
	}
}

// streamNow is the position next use is measured from for stream k.
func streamNow(s *schedule, k streamKey) (uint64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[k].now()
}
