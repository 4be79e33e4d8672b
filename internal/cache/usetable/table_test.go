package usetable

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// allLocal is a single gateway's: every chunk is read here.
func allLocal(*catalog.Dataset, int) bool { return true }

// TestScheduleNowIsOldestInFlight: while an earlier batch is still being
// served, next use is measured from it, not from the leading edge, so its
// chunks cannot be judged "not needed until next epoch" before it pins them.
func TestScheduleNowIsOldestInFlight(t *testing.T) {
	s, js := testSchedule(t)
	now := func() (uint64, int) { return streamNow(s, js) }
	a := mustBegin(t, s, js, 0, 100, 32)
	s.advance(js, 0, 132)
	b := mustBegin(t, s, js, 0, 400, 32)
	s.advance(js, 0, 432)
	if e, p := now(); e != 0 || p != 100 {
		t.Fatalf("now = epoch %d pos %d, want the oldest batch in flight, 0/100", e, p)
	}
	s.Finish(a)
	if e, p := now(); e != 0 || p != 400 {
		t.Fatalf("now = %d/%d, want 0/400", e, p)
	}
	s.Finish(b)
	s.Finish(b) // a second finish is harmless
	if e, p := now(); e != 0 || p != 432 {
		t.Fatalf("now = %d/%d, want the leading edge 0/432", e, p)
	}
	c := mustBegin(t, s, js, 1, 0, 32) // the next epoch's first batch
	s.advance(js, 1, 32)
	if e, p := now(); e != 1 || p != 0 {
		t.Fatalf("now = %d/%d, want 1/0", e, p)
	}
	s.Finish(c)
	// One batch asked for twice at once (two clients, or a retry): the
	// first to finish leaves the other in flight.
	d, d2 := mustBegin(t, s, js, 1, 64, 32), mustBegin(t, s, js, 1, 64, 32)
	s.advance(js, 1, 96)
	s.Finish(d)
	if e, p := now(); e != 1 || p != 64 {
		t.Fatalf("now = %d/%d, want the batch still in flight, 1/64", e, p)
	}
	s.Finish(d2)
	if e, p := now(); e != 1 || p != 96 {
		t.Fatalf("now = %d/%d, want the leading edge 1/96", e, p)
	}
}

// TestScheduleNowAllowsForLateBatches: batches of a client reading ahead
// can arrive out of order. Once one arrived behind the leading edge, next
// use is measured from further back — the lateness seen plus a batch — so
// that an earlier batch not yet arrived still finds its chunks.
func TestScheduleNowAllowsForLateBatches(t *testing.T) {
	s, js := testSchedule(t)
	now := func() (uint64, int) { return streamNow(s, js) }
	// In order: now is the leading edge.
	for m := range 4 {
		f := mustBegin(t, s, js, 0, 32*m, 32)
		s.advance(js, 0, 32*m+32)
		s.Finish(f)
	}
	if e, p := now(); e != 0 || p != 128 {
		t.Fatalf("in order: now = %d/%d, want the leading edge 0/128", e, p)
	}
	// Batches 6 and 5 arrive before 4: 5 is 64 samples late.
	six := mustBegin(t, s, js, 0, 192, 32)
	s.advance(js, 0, 224)
	five := mustBegin(t, s, js, 0, 160, 32)
	s.advance(js, 0, 192)
	s.Finish(six)
	s.Finish(five)
	if e, p := now(); e != 0 || p != 224-64-32 {
		t.Fatalf("after a late batch: now = %d/%d, want the edge less lateness and a batch, 0/%d", e, p, 224-64-32)
	}
	// Across an epoch boundary the position is counted back into the
	// previous epoch (as a negative offset from the new one's start).
	f := mustBegin(t, s, js, 1, 0, 32)
	s.advance(js, 1, 32)
	s.Finish(f)
	if e, p := now(); e != 1 || p >= 0 {
		t.Fatalf("early in the next epoch: now = %d/%d, want a negative position in epoch 1", e, p)
	}
}

func mustBegin(t *testing.T, s *Table, js jobstream.Stream, epoch uint64, start, global int) Inflight {
	t.Helper()
	f, err := s.Begin(js, epoch, start, 0, global, 1, Rank{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDrawnBatchKeepsItsGlobalBatch: a rank's share of its global batch
// by locality (or balance=) is drawn from the whole global batch, not
// its plain cut, so while it is served every chunk of the global batch
// counts as needed now — as the planner pins a global batch's chunks
// together. Counted from its cut (Begin's start alone, as before), the
// rank's request keyed the chunks of the global batch's windows before
// its cut as read, needed only in the next epoch, and its loads evicted
// them first, though the step's later ranks read them next: a cluster's
// nodes then loaded more than /plan's bill (gateway/clustertest
// TestClusterBill).
func TestDrawnBatchKeepsItsGlobalBatch(t *testing.T) {
	s, js := testSchedule(t) // windows of 64 samples
	e, err := s.orders.Epoch(js, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Global batch 1 is [128, 256), windows 2 and 3, of a world of four
	// ranks of 32; rank 2's cut is [192, 224), in window 3.
	s.advance(js, 0, 192)
	f, err := s.Begin(js, 0, 192, 64, 128, 1, Rank{Rank: 2, World: 4})
	if err != nil {
		t.Fatal(err)
	}
	s.advance(js, 0, 224)
	table := s.Snapshot()
	now := table.Now()
	var latest int64 // the latest key of a chunk of the global batch
	for _, w := range []int{2, 3} {
		for _, c := range e.WindowChunks(w) {
			latest = max(latest, table.victimKey(js.DS.ChunkKey(c), now))
		}
	}
	for c := range 16 {
		if w := e.ChunkWindow[c]; w == 2 || w == 3 {
			continue
		}
		if d := table.victimKey(js.DS.ChunkKey(c), now); d <= latest {
			t.Errorf("chunk %d of window %d (key %d) goes after a chunk of the global batch being read (key %d)", c, e.ChunkWindow[c], d, latest)
		}
	}
	s.Finish(f)
	if _, p := streamNow(s, js); p != 224 {
		t.Errorf("after the batch: now = %d, want the leading edge, 224", p)
	}
}

// TestInflightBounded: one rank of a job may not have more than
// MaxRankInflight batches being served at once, so it cannot fill the
// cache's queue alone, however wide its job; a job's ranks each have
// that many, so a job of many ranks with one batch in flight each is
// not refused; a peer's requests, which name no rank, are bounded by the
// job's width as this node has seen it. Finishing one makes room again.
func TestInflightBounded(t *testing.T) {
	tests := []struct {
		name    string
		begins  []rankBegins
		refused Rank  // the next Begin, which must be refused
		want    error // with this
	}{
		{name: "one rank of one", begins: []rankBegins{{Rank{0, 1}, MaxRankInflight}}, refused: Rank{0, 1}, want: ErrRankBusy},
		{name: "1,024 ranks, one each, then rank 5 reading ahead",
			begins:  append([]rankBegins{{Rank{5, 1024}, MaxRankInflight - 1}}, ranksOf(1024)...),
			refused: Rank{5, 1024}, want: ErrRankBusy},
		{name: "a peer's requests for a job not seen here", begins: []rankBegins{{Rank{}, MaxRankInflight}}, refused: Rank{}, want: ErrStreamBusy},
		{name: "a peer's requests for a job of 4 ranks", begins: []rankBegins{{Rank{3, 4}, 1}, {Rank{}, 4*MaxRankInflight - 1}}, refused: Rank{}, want: ErrStreamBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, js := testSchedule(t)
			n := js.DS.Index.NumSamples() // positions past an epoch go on into the next
			var toks []Inflight
			pos := 0
			for _, b := range tt.begins {
				for range b.n {
					f, err := s.Begin(js, uint64(pos/n), pos%n, 0, 1, 1, b.who)
					if err != nil {
						t.Fatalf("batch %d of %+v: %v", len(toks)+1, b.who, err)
					}
					toks = append(toks, f)
					pos++
				}
			}
			if got := servingOf(t, s); got != float64(len(toks)) {
				t.Fatalf("brand_batches_serving = %v, want %d", got, len(toks))
			}
			if _, err := s.Begin(js, uint64(pos/n), pos%n, 0, 1, 1, tt.refused); !errors.Is(err, tt.want) || !errors.Is(err, chunkcache.ErrBusy) {
				t.Fatalf("one more for %+v: %v, want %v", tt.refused, err, tt.want)
			}
			other := jobstream.Stream{DS: js.DS, Seed: js.Seed + 1, Window: js.Window}
			mustBegin(t, s, other, 0, 0, 1) // another job is not affected
			// Finish the last begun of the refused one's kind, twice: the
			// second changes nothing.
			last := toks[len(toks)-1]
			for i := len(toks) - 1; i >= 0; i-- {
				if toks[i].rank == tt.refused {
					last = toks[i]
					break
				}
			}
			s.Finish(last)
			s.Finish(last)
			if _, err := s.Begin(js, uint64(pos/n), pos%n, 0, 1, 1, tt.refused); err != nil {
				t.Fatalf("after one finish: %v", err)
			}
			if _, err := s.Begin(js, uint64((pos+1)/n), (pos+1)%n, 0, 1, 1, tt.refused); !errors.Is(err, tt.want) {
				t.Fatalf("after one finish and one begin: %v, want %v", err, tt.want)
			}
		})
	}
}

// servingOf is s's brand_batches_serving.
func servingOf(t *testing.T, s *Table) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "brand_batches_serving" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no brand_batches_serving")
	return 0
}

// rankBegins is n batches begun at once for who.
type rankBegins struct {
	who Rank
	n   int
}

// ranksOf is one batch for each rank of a job of world ranks.
func ranksOf(world int) []rankBegins {
	bs := make([]rankBegins, world)
	for r := range bs {
		bs[r] = rankBegins{Rank{r, world}, 1}
	}
	return bs
}

// streamNow is the position next use is measured from for stream js.
func streamNow(s *Table, js jobstream.Stream) (uint64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.streams[js].position()
	return p.epoch, p.pos
}

// testSchedule is a schedule and a stream over 16 chunks of 32 samples.
func testSchedule(t testing.TB) (*Table, jobstream.Stream) {
	return newTestSchedule(), jobstream.Stream{DS: catalog.NewDataset("d", "", nil, testIndex(t, 16, 32)), Seed: 1, Window: 2}
}

// TestUseTableFollowsTheOrder checks the published keys against the
// sample order itself: a chunk of the current window is needed sooner than
// any other, and of two other chunks the one whose first sample comes
// sooner — later in this epoch or in the next — has the smaller key,
// strictly: the order the planner's Belady evicts them in. Keyed by
// their window's start, as they once were, the chunks of one window tied,
// and the cache chose among them by when each was last touched — the
// order concurrent loads happened to end in: a cluster's nodes then
// loaded a chunk or two more or less than /plan's bill, run to run
// (gateway/clustertest TestClusterBill).
func TestUseTableFollowsTheOrder(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32))
	s := newTestSchedule()
	js := jobstream.Stream{DS: ds, Seed: 3, Window: 4}
	for _, at := range []epochPos{{0, 0}, {0, 100}, {0, 300}, {1, 511}, {2, 128}} {
		s.advance(js, at.epoch, at.pos)
		table := s.Snapshot()
		e, _ := s.orders.Epoch(js, at.epoch)
		next, _ := s.orders.Epoch(js, at.epoch+1)
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
			c, _, _, _ := ds.Index.SampleRange(order[i])
			if _, ok := firstUse[c]; !ok {
				firstUse[c] = i - at.pos
			}
		}
		inCur := func(c int) bool { return int(e.ChunkWindow[c]) == cur }
		now := table.Now()
		for a := range 16 {
			da := table.victimKey(ds.ChunkKey(a), now)
			for b := range 16 {
				db := table.victimKey(ds.ChunkKey(b), now)
				if inCur(a) && !inCur(b) && da >= db {
					t.Fatalf("at %v: chunk %d of the current window (key %d) does not rank before chunk %d (key %d)", at, a, da, b, db)
				}
				if !inCur(a) && !inCur(b) && (da < db) != (firstUse[a] < firstUse[b]) && a != b {
					t.Fatalf("at %v: chunk %d (distance %d, first use in %d) and chunk %d (distance %d, first use in %d) are not keyed in the order of their first uses",
						at, a, da, firstUse[a], b, db, firstUse[b])
				}
			}
		}
	}
}

// TestUseTableOnlyOwnChunks: on a node of a cluster, a chunk another node
// reads for the batches is never needed here, however soon the jobs read
// it, so it is evicted before any chunk this node reads. The
// reproduction: after a membership change a node kept the chunks it no
// longer owned, whose jobs needed them soon, and evicted its own chunks,
// which it then read from the store again (brand-bench resize: 0.06–0.08
// × the dataset in the epoch after the change, against 0.003 on a fixed
// cluster).
func TestUseTableOnlyOwnChunks(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32))
	own := func(_ *catalog.Dataset, c int) bool { return c%2 == 0 }
	s := New(Config{Orders: layout.New(nil, nil), Local: own, Capacity: 1 << 40})
	at := s.zero.Add(time.Second)
	s.clock = func() time.Time { return at }
	js := jobstream.Stream{DS: ds, Seed: 3, Window: 4}
	s.advance(js, 0, 100)
	table := s.Snapshot()
	for c := range 16 {
		d := table.Distance(ds.ChunkKey(c))
		if own(ds, c) == (d == Never) {
			t.Errorf("chunk %d (read here: %t) has distance %d", c, own(ds, c), d)
		}
	}
}

// TestUseTableStandInChunks: a chunk a node of a cluster reads only
// while its owner is down or out of reach (local, not its own) is kept
// for the windows at hand and the next, never for later windows nor the
// next epoch, so that it never evicts a chunk the node owns that a job
// needs later: once the fault heals, its owner reads it again. A chunk
// the node owns is kept for its next use, in this epoch or the next.
// The reproduction: a node cut off from its peers read the chunks its
// ranks needed from the store, kept them for the next epoch, evicted its
// own for them, and read those again in the warm epoch after the cut
// healed (0.03 × the dataset here, 0.1–0.15 in a longer cut).
func TestUseTableStandInChunks(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32))
	own := func(_ *catalog.Dataset, c int) bool { return c%2 == 0 }
	all := func(*catalog.Dataset, int) bool { return true }
	s := New(Config{Orders: layout.New(nil, nil), Local: all, Own: own, Capacity: 1 << 40})
	at := s.zero.Add(time.Second)
	s.clock = func() time.Time { return at }
	js := jobstream.Stream{DS: ds, Seed: 3, Window: 4}
	const pos = 100
	s.advance(js, 0, pos)
	table := s.Snapshot()
	e, _ := s.orders.Epoch(js, 0)
	cur := e.WindowOf(pos)
	for c := range 16 {
		d := table.Distance(ds.ChunkKey(c))
		w := int(e.ChunkWindow[c])
		soon := w >= cur && w <= cur+1 // the windows at hand and the next
		switch {
		case own(ds, c) && d == Never:
			t.Errorf("chunk %d, this node's own (window %d, now %d): never needed", c, w, cur)
		case !own(ds, c) && soon && d == Never:
			t.Errorf("chunk %d, stood in for, of window %d (now %d): never needed", c, w, cur)
		case !own(ds, c) && !soon && d != Never:
			t.Errorf("chunk %d, stood in for, of window %d (now %d): needed at %d, want never", c, w, cur, d)
		}
	}
}

// TestUseTableKeepsChunksAwaited: a chunk another node reads for the
// batches, but that this node keeps for it (Config.Keep: the new owner
// of a chunk this node read before a membership change will ask it for
// it), has its next use's key, as one this node reads does; the others
// are Never. Such chunks are never listed for prefetch.
//
// On a cluster's node the table also knows which chunks the node owns
// (Config.Own, for the chunks it stands in for while their owner is
// down): a kept chunk is not one it stands in for, kept only for the
// windows at hand and the next. Keyed so, a kept chunk the jobs need two
// windows on, or in the next epoch, was Never, the first to go: a node
// whose leave warm-up loaded gains soon after a join evicted one before
// its new owner asked, who read it from the store
// (integration.TestClusterJoinAtEpochEnd, 2 of 40 runs under load).
func TestUseTableKeepsChunksAwaited(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32))
	own := func(_ *catalog.Dataset, c int) bool { return c%2 == 0 }
	keep := func(_ *catalog.Dataset, c int) bool { return c%4 == 1 }
	for _, tc := range []struct {
		name string
		own  func(*catalog.Dataset, int) bool
	}{
		{"one node", nil},
		{"a cluster's node", own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Orders: layout.New(nil, nil), Local: own, Own: tc.own, Keep: keep, Capacity: 1 << 40})
			at := s.zero.Add(time.Second)
			s.clock = func() time.Time { return at }
			js := jobstream.Stream{DS: ds, Seed: 3, Window: 4}
			s.advance(js, 0, 100)
			table := s.Snapshot()
			for c := range 16 {
				keyed := own(ds, c) || keep(ds, c)
				if d := table.Distance(ds.ChunkKey(c)); keyed == (d == Never) {
					t.Errorf("chunk %d (read here: %t, kept: %t) has distance %d", c, own(ds, c), keep(ds, c), d)
				}
			}
			for _, u := range s.Advance(js, 0, 200, 8) {
				if !own(ds, u.Chunk) {
					t.Errorf("chunk %d listed for prefetch: this node does not read it", u.Chunk)
				}
			}
		})
	}
}

// TestImportanceJobSupersedesItsEpochs: each epoch of an importance job is
// a stream of its own; a later epoch's first request forgets the job's
// earlier epochs, whose orders would otherwise hold the cache, and no
// importance job's next epoch is projected.
func TestImportanceJobSupersedesItsEpochs(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32))
	s := newTestSchedule()
	first := jobstream.Stream{DS: ds, Seed: 3, Window: 4, Imp: jobstream.Importance{Job: "j"}}
	other := jobstream.Stream{DS: ds, Seed: 3, Window: 4, Imp: jobstream.Importance{Job: "k"}}
	s.advance(first, 0, 100)
	s.advance(other, 0, 100)
	if len(s.streams) != 2 {
		t.Fatalf("%d streams, want 2", len(s.streams))
	}
	// Before the next epoch arrives, no chunk read earlier in epoch 0 is
	// needed: the job's next epoch is not known.
	e, _ := s.orders.Epoch(first, 0)
	c := e.WindowChunks(0)[0]
	if d := s.Distance(ds.ChunkKey(c)); Needed(d) && e.ChunkWindow[c] < int32(e.WindowOf(100)) {
		t.Errorf("chunk %d of a past window is needed at %d: the next epoch was projected", c, d)
	}
	next := first
	next.Imp.Version = "0123456789abcdef"
	s.advance(next, 1, 10)
	if _, ok := s.streams[first]; ok {
		t.Error("epoch 0 of job j is still followed after its epoch 1 began")
	}
	if _, ok := s.streams[other]; !ok {
		t.Error("another job's stream was dropped")
	}
}

// newTestSchedule is a schedule of a single gateway with a large cache,
// on a clock that stands still unless a test moves it (tick).
func newTestSchedule() *Table {
	s := New(Config{Orders: layout.New(nil, nil), Local: allLocal, Capacity: 1 << 40})
	at := s.zero.Add(time.Second)
	s.clock = func() time.Time { return at }
	return s
}

// TestCoalesceRebuildsOnce: the parts of a batch over many sources, each
// crossing into another window, rebuild the use table once within
// Coalesce — a rebuild per part cost a batch of a mixture of 100 sources
// O(parts × every source's chunks), 41 % of its allocations (issue 43's
// schedule bench) — and the table it publishes is the one a rebuild per
// part ends with.
func TestCoalesceRebuildsOnce(t *testing.T) {
	const sources = 20
	var streams []jobstream.Stream
	for i := range sources {
		ds := catalog.NewDataset(fmt.Sprintf("d%02d", i), "", nil, testIndex(t, 8, 4))
		streams = append(streams, jobstream.Stream{DS: ds, Seed: 1, Window: 1, Mix: "m"})
	}
	visit := func(s *Table, pos int) {
		for _, js := range streams {
			s.Finish(mustBegin(t, s, js, 0, pos, 4))
			s.Advance(js, 0, pos+4, 1)
		}
	}
	rebuilds := func(s *Table) uint64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gen
	}
	plain, coalesced := newTestSchedule(), newTestSchedule()
	visit(plain, 0)
	coalesced.Coalesce(func() { visit(coalesced, 0) })
	// Every stream crosses from its first window (4 samples) into its
	// second.
	before, beforeC := rebuilds(plain), rebuilds(coalesced)
	visit(plain, 4)
	coalesced.Coalesce(func() { visit(coalesced, 4) })
	if n := rebuilds(plain) - before; n < sources {
		t.Fatalf("%d rebuilds for %d streams crossing a window, one at a time: the test shows nothing", n, sources)
	}
	if n := rebuilds(coalesced) - beforeC; n != 1 {
		t.Errorf("%d rebuilds for %d streams crossing a window in one Coalesce, want 1", n, sources)
	}
	for _, js := range streams {
		for c := range 8 {
			k := js.DS.ChunkKey(c)
			if a, b := plain.Distance(k), coalesced.Distance(k); a != b {
				t.Errorf("%s chunk %d: key %d rebuilt per part, %d coalesced", js.DS.Name, c, a, b)
			}
		}
	}
}

// TestRebuildsSpaced: streams of jobs of their own crossing windows one
// after another, each asking for a rebuild, are rebuilt at most once per
// rebuildCost times a rebuild's duration (1,024 jobs on one gateway spent
// a quarter to a third of its CPU rebuilding, once per stream per window,
// and served a quarter of its best batches/s), and the rebuild put off
// comes by itself once that has passed: the table then holds every
// stream in the window it crossed into.
func TestRebuildsSpaced(t *testing.T) {
	const jobs = 20
	var streams []jobstream.Stream
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 8, 4))
	for i := range jobs {
		streams = append(streams, jobstream.Stream{DS: ds, Seed: uint64(i + 1), Window: 1, Name: fmt.Sprintf("j%d", i)})
	}
	s := New(Config{Orders: layout.New(nil, nil), Local: allLocal, Capacity: 1 << 40})
	// A clock that moves 100 µs each time it is read: a rebuild, which
	// reads it a few times, costs some hundreds of µs by it, and the
	// visits between two rebuilds read it less than 20 times as often.
	var ticks atomic.Int64
	zero := s.zero
	s.clock = func() time.Time { return zero.Add(time.Duration(ticks.Add(1)) * 100 * time.Microsecond) }
	gen := func() uint64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gen
	}
	for _, js := range streams {
		s.Finish(mustBegin(t, s, js, 0, 0, 4))
		s.Advance(js, 0, 4, 1)
	}
	// Let the rebuilds the first windows asked for come.
	deadline := time.Now().Add(10 * time.Second)
	settled := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.stale
	}
	for !settled() {
		if time.Now().After(deadline) {
			t.Fatal("the rebuild put off never came")
		}
		time.Sleep(time.Millisecond)
	}
	before := gen()
	for _, js := range streams {
		s.Finish(mustBegin(t, s, js, 0, 4, 4))
		s.Advance(js, 0, 8, 1)
	}
	crossing := gen() - before
	if crossing >= jobs/2 {
		t.Errorf("%d rebuilds for %d streams crossing a window one after another, want them spaced", crossing, jobs)
	}
	for !settled() {
		if time.Now().After(deadline) {
			t.Fatal("the rebuild put off never came")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("%d rebuilds as %d streams crossed, %d in all", crossing, jobs, gen()-before)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, js := range streams {
		st := s.streams[js]
		if o, _, _ := s.originOf(st); st.origin != o {
			t.Errorf("%s: the table's origin %v after the rebuilds, the stream's window starts at %v", js.Name, st.origin, o)
		}
	}
}
