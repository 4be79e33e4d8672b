package gateway

import (
	"errors"
	"testing"

	"github.com/brandgw/brand/chunkcache"
)

// TestScheduleNowIsOldestInFlight: while an earlier batch is still being
// served, next use is measured from it, not from the leading edge, so its
// chunks cannot be judged "not needed until next epoch" before it pins them.
func TestScheduleNowIsOldestInFlight(t *testing.T) {
	s, js := testSchedule()
	now := func() (uint64, int) { return streamNow(s, js) }
	a := mustBegin(t, s, js, 0, 100, 32)
	s.advance(js, 0, 132)
	b := mustBegin(t, s, js, 0, 400, 32)
	s.advance(js, 0, 432)
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
	c := mustBegin(t, s, js, 1, 0, 32) // the next epoch's first batch
	s.advance(js, 1, 32)
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
	s, js := testSchedule()
	now := func() (uint64, int) { return streamNow(s, js) }
	// In order: now is the leading edge.
	for m := range 4 {
		f := mustBegin(t, s, js, 0, 32*m, 32)
		s.advance(js, 0, 32*m+32)
		s.finish(f)
	}
	if e, p := now(); e != 0 || p != 128 {
		t.Fatalf("in order: now = %d/%d, want the leading edge 0/128", e, p)
	}
	// Batches 6 and 5 arrive before 4: 5 is 64 samples late.
	six := mustBegin(t, s, js, 0, 192, 32)
	s.advance(js, 0, 224)
	five := mustBegin(t, s, js, 0, 160, 32)
	s.advance(js, 0, 192)
	s.finish(six)
	s.finish(five)
	if e, p := now(); e != 0 || p != 224-64-32 {
		t.Fatalf("after a late batch: now = %d/%d, want the edge less lateness and a batch, 0/%d", e, p, 224-64-32)
	}
	// Across an epoch boundary the position is counted back into the
	// previous epoch (as a negative offset from the new one's start).
	f := mustBegin(t, s, js, 1, 0, 32)
	s.advance(js, 1, 32)
	s.finish(f)
	if e, p := now(); e != 1 || p >= 0 {
		t.Fatalf("early in the next epoch: now = %d/%d, want a negative position in epoch 1", e, p)
	}
}

func mustBegin(t *testing.T, s *schedule, js jobStream, epoch uint64, start, global int) inflight {
	t.Helper()
	f, err := s.begin(js, epoch, start, global)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestStreamInflightBounded: one job stream may not have more than
// maxStreamInflight batches being served at once, so it cannot fill the
// cache's queue alone; finishing one makes room again.
func TestStreamInflightBounded(t *testing.T) {
	s, js := testSchedule()
	var toks []inflight
	for i := range maxStreamInflight {
		toks = append(toks, mustBegin(t, s, js, 0, i, 1))
	}
	if _, err := s.begin(js, 0, 999, 1); !errors.Is(err, chunkcache.ErrBusy) {
		t.Fatalf("batch %d of one stream in flight: %v, want ErrBusy", maxStreamInflight+1, err)
	}
	other := jobStream{ds: js.ds, seed: js.seed + 1, window: js.window}
	mustBegin(t, s, other, 0, 0, 1) // another job is not affected
	s.finish(toks[0])
	s.finish(toks[0]) // a second finish changes nothing
	mustBegin(t, s, js, 0, 999, 1)
	if _, err := s.begin(js, 0, 1000, 1); !errors.Is(err, chunkcache.ErrBusy) {
		t.Fatalf("after one finish and one begin: %v, want ErrBusy", err)
	}
}

// streamNow is the position next use is measured from for stream js.
func streamNow(s *schedule, js jobStream) (uint64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.streams[js].position()
	return p.epoch, p.pos
}

// testSchedule is a schedule and a stream over 16 chunks of 32 samples.
func testSchedule() (*schedule, jobStream) {
	counts := make([]int, 16)
	for c := range counts {
		counts[c] = 32
	}
	return newSchedule(newOrders(1, nil)), jobStream{ds: &loadedDataset{name: "d", counts: counts}, seed: 1, window: 2}
}

// TestUseTableFollowsTheOrder checks the published distances against the
// sample order itself: a chunk of the current window is needed now (0),
// and of two other chunks the one whose first sample comes sooner — later
// in this epoch or in the next — has the smaller distance.
func TestUseTableFollowsTheOrder(t *testing.T) {
	ds := newLoadedDataset("d", "", nil, testIndex(t, 16, 32))
	s := newSchedule(newOrders(1, nil))
	js := jobStream{ds: ds, seed: 3, window: 4}
	for _, at := range []epochPos{{0, 0}, {0, 100}, {0, 300}, {1, 511}, {2, 128}} {
		s.advance(js, at.epoch, at.pos)
		table := s.table()
		e, _ := s.orders.epoch(js, at.epoch)
		next, _ := s.orders.epoch(js, at.epoch+1)
		firstUse := map[int]int{} // chunk → positions from now to its first sample
		order := append(e.Window(0)[:0:0], nil...)
		for w := range e.NumWindows() {
			order = append(order, e.Window(w)...)
		}
		for w := range next.NumWindows() {
			order = append(order, next.Window(w)...)
		}
		cur := e.WindowOf(min(at.pos, e.NumSamples()-1))
		for i := at.pos; i < len(order); i++ {
			c, _, _, _ := ds.index.SampleRange(order[i])
			if _, ok := firstUse[c]; !ok {
				firstUse[c] = i - at.pos
			}
		}
		for a := range 16 {
			da := table.distance(ds.chunkKey(a))
			if inCur := int(e.chunkWindow[a]) == cur; inCur != (da == 0) {
				t.Fatalf("at %v: chunk %d in the current window %t, distance %d", at, a, inCur, da)
			}
			for b := range 16 {
				db := table.distance(ds.chunkKey(b))
				if da != 0 && db != 0 && da < db && firstUse[a] >= firstUse[b] {
					t.Fatalf("at %v: chunk %d (distance %d, first use in %d) ranks before chunk %d (distance %d, first use in %d)",
						at, a, da, firstUse[a], b, db, firstUse[b])
				}
			}
		}
	}
}

// TestImportanceJobSupersedesItsEpochs: each epoch of an importance job is
// a stream of its own; a later epoch's first request forgets the job's
// earlier epochs, whose orders would otherwise hold the cache, and no
// importance job's next epoch is projected.
func TestImportanceJobSupersedesItsEpochs(t *testing.T) {
	ds := newLoadedDataset("d", "", nil, testIndex(t, 16, 32))
	s := newSchedule(newOrders(1, nil))
	first := jobStream{ds: ds, seed: 3, window: 4, imp: importanceStream{job: "j"}}
	other := jobStream{ds: ds, seed: 3, window: 4, imp: importanceStream{job: "k"}}
	s.advance(first, 0, 100)
	s.advance(other, 0, 100)
	if len(s.streams) != 2 {
		t.Fatalf("%d streams, want 2", len(s.streams))
	}
	// Before the next epoch arrives, no chunk read earlier in epoch 0 is
	// needed: the job's next epoch is not known.
	e, _ := s.orders.epoch(first, 0)
	c := e.WindowChunks(0)[0]
	if d := s.distance(ds.chunkKey(c)); needed(d) && e.chunkWindow[c] < int32(e.WindowOf(100)) {
		t.Errorf("chunk %d of a past window is needed at %d: the next epoch was projected", c, d)
	}
	next := first
	next.imp.version = "0123456789abcdef"
	s.advance(next, 1, 10)
	if _, ok := s.streams[first]; ok {
		t.Error("epoch 0 of job j is still followed after its epoch 1 began")
	}
	if _, ok := s.streams[other]; !ok {
		t.Error("another job's stream was dropped")
	}
}
