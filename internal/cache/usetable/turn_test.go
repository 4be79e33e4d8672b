package usetable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// clockedSchedule is a schedule of 16 chunks of 32 samples (17,408 bytes
// each) for a cache of capacity bytes, on a clock the test moves; window
// is the streams' window in chunks.
type clockedSchedule struct {
	*Table
	ds  *catalog.Dataset
	now time.Time
}

func newClocked(t *testing.T, capacity int64, maxTurnWait time.Duration) *clockedSchedule {
	t.Helper()
	s := New(Config{Orders: layout.New(nil, nil), Local: allLocal, Capacity: capacity, MaxTurnWait: maxTurnWait})
	c := &clockedSchedule{Table: s, ds: catalog.NewDataset("d", "", nil, testIndex(t, 16, 32)), now: s.zero.Add(time.Second)}
	s.clock = func() time.Time { return c.now }
	return c
}

func (c *clockedSchedule) stream(seed uint64, window int) jobstream.Stream {
	return jobstream.Stream{DS: c.ds, Seed: seed, Window: window}
}

// batch begins a batch of 32 samples at pos of epoch 0 of js and moves
// the stream there, as the gateway does.
func (c *clockedSchedule) batch(t *testing.T, js jobstream.Stream, pos int) Inflight {
	t.Helper()
	f := mustBegin(t, c.Table, js, 0, pos, 32)
	c.advance(js, 0, pos+32)
	return f
}

func (c *clockedSchedule) tick(d time.Duration) {
	c.Table.mu.Lock()
	c.now = c.now.Add(d)
	c.Table.mu.Unlock()
}

// windowKeys are the chunk keys of window w of epoch 0 of js.
func (c *clockedSchedule) windowKeys(t *testing.T, js jobstream.Stream, w int) []chunkcache.Key {
	t.Helper()
	e, err := c.orders.Epoch(js, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []chunkcache.Key
	for _, ch := range e.WindowChunks(w) {
		out = append(out, c.ds.ChunkKey(ch))
	}
	return out
}

// maxKey and minKey are the largest and smallest keys of ks now.
func (c *clockedSchedule) keys(ks []chunkcache.Key) (lo, hi int64) {
	lo, hi = Never, -1
	for _, k := range ks {
		d := c.Distance(k)
		lo, hi = min(lo, d), max(hi, d)
	}
	return lo, hi
}

// TestClocksRankWhoIsServedNext: the chunks of the windows streams are in
// rank by when each stream's next batch will be served — a batch waiting
// now first, in the order the batches began; then the streams between
// batches, the one served last going first — so that a gateway serving
// jobs as fast as they read gives up the window of the job it just served,
// as Belady's rule on their merged trace does.
func TestClocksRankWhoIsServedNext(t *testing.T) {
	c := newClocked(t, 1<<40, 0)
	a, b := c.stream(1, 4), c.stream(2, 4) // windows of 128 samples
	// A first batch each, 10 ms of think time: the streams' gaps.
	for _, js := range []jobstream.Stream{a, b} {
		c.Finish(c.batch(t, js, 0))
	}
	c.tick(10 * time.Millisecond)
	fa := c.batch(t, a, 32)
	c.tick(time.Millisecond)
	fb := c.batch(t, b, 32)
	only := func(ks, others []chunkcache.Key) []chunkcache.Key {
		return slices.DeleteFunc(slices.Clone(ks), func(k chunkcache.Key) bool { return slices.Contains(others, k) })
	}
	// Each stream's window-0 chunks that the other does not need in its
	// first two windows: their keys are the stream's own.
	near := func(js jobstream.Stream) []chunkcache.Key {
		return append(c.windowKeys(t, js, 0), c.windowKeys(t, js, 1)...)
	}
	wa, wb := only(c.windowKeys(t, a, 0), near(b)), only(c.windowKeys(t, b, 0), near(a))
	if len(wa) == 0 || len(wb) == 0 {
		t.Fatalf("seeds 1 and 2 share their first windows' chunks (%v, %v): pick others", wa, wb)
	}
	_, hiA := c.keys(wa)
	loB, _ := c.keys(wb)
	if hiA >= loB {
		t.Fatalf("both in flight: a's window (began first) keys up to %d, b's from %d; want a's first", hiA, loB)
	}
	// a is served and goes back to its loop; b still waits: b first.
	c.tick(time.Millisecond)
	c.Finish(fa)
	loA, _ := c.keys(wa)
	_, hiB := c.keys(wb)
	if hiB >= loA {
		t.Fatalf("b waiting, a between batches: b's keys up to %d, a's from %d; want b's first", hiB, loA)
	}
	// Both served, a first: a's next request is expected first.
	c.tick(time.Millisecond)
	c.Finish(fb)
	_, hiA = c.keys(wa)
	loB, _ = c.keys(wb)
	if hiA >= loB {
		t.Fatalf("both between batches, b served last: a's keys up to %d, b's from %d; want a's first", hiA, loB)
	}
	// A stream that stays away drifts out: the key of its window grows
	// with its silence. (The chunks of b's window are also needed by a's
	// later windows, whose keys are a's: they move when a reads on.)
	clockOf := func(js jobstream.Stream) int64 { return c.streams[js].clock.key(c.nowAt(c.now)) }
	before := clockOf(b)
	c.tick(time.Second)
	if after := clockOf(b); after-before < int64(time.Second) {
		t.Fatalf("a second of silence moved b's window's key by %v, want more than the second", time.Duration(after-before))
	}
	// a reads on: its later uses are keyed from now again, not from a
	// second ago, and b's window, silent, ranks after a's.
	c.Finish(c.batch(t, a, 64))
	now := c.nowAt(c.now)
	for _, k := range wb {
		if d := c.Distance(k); d < now {
			t.Errorf("chunk %v of b's window keyed %v in the past after a read on", k, time.Duration(now-d))
		}
	}
	if _, hiA := c.keys(only(c.windowKeys(t, a, 0), wb)); hiA >= clockOf(b) {
		t.Errorf("a reads on, b silent: a's window keyed up to %d, b's window from %d; want a's first", hiA, clockOf(b))
	}
}

// TestWeightBringsAJobsUsesNearer: two streams in the same place of their
// orders, between batches with the same gap; the one of weight 4 keeps
// its window's chunks against the other's: its keys are nearer, by the
// weight, than those of the stream of weight 1.
func TestWeightBringsAJobsUsesNearer(t *testing.T) {
	c := newClocked(t, 1<<40, 0)
	a, b := c.stream(1, 4), c.stream(2, 4)
	for _, js := range []jobstream.Stream{a, b} {
		w := 1.0
		if js == b {
			w = 4
		}
		f, err := c.Begin(js, 0, 0, 0, 32, w, Rank{})
		if err != nil {
			t.Fatal(err)
		}
		c.advance(js, 0, 32)
		c.Finish(f)
	}
	c.tick(time.Millisecond)
	for _, js := range []jobstream.Stream{a, b} {
		f, err := c.Begin(js, 0, 32, 0, 32, map[jobstream.Stream]float64{a: 1, b: 4}[js], Rank{})
		if err != nil {
			t.Fatal(err)
		}
		c.advance(js, 0, 64)
		c.Finish(f)
	}
	only := func(ks, others []chunkcache.Key) []chunkcache.Key {
		return slices.DeleteFunc(slices.Clone(ks), func(k chunkcache.Key) bool { return slices.Contains(others, k) })
	}
	wa := only(c.windowKeys(t, a, 0), c.windowKeys(t, b, 0))
	wb := only(c.windowKeys(t, b, 0), c.windowKeys(t, a, 0))
	if len(wa) == 0 || len(wb) == 0 {
		t.Fatalf("seeds 1 and 2 share their first windows' chunks: pick others")
	}
	now := c.nowAt(c.now)
	loA, _ := c.keys(wa)
	_, hiB := c.keys(wb)
	if hiB >= loA {
		t.Fatalf("b of weight 4 keys its window up to %d, a of weight 1 from %d: want b's nearer", hiB, loA)
	}
	if ra, rb := loA-now, hiB-now; ra <= 0 || rb <= 0 || float64(ra)/float64(rb) < 3 {
		t.Fatalf("keys %v (weight 1) and %v (weight 4) from now: want about 4× apart", time.Duration(ra), time.Duration(rb))
	}
}

// TestTurnsWhenWindowsDoNotFit: with room for one window and a half, a
// second stream waits while the first reads its window, gets its turn when
// the first moves on to its next window, and the first then waits behind
// it; a stream that stops reading gives its turn back. On synctest's
// clock, which moves only when every goroutine of the test waits: whether
// a Turn waits is what it decided after 100 ms of its timers, however
// loaded the machine.
func TestTurnsWhenWindowsDoNotFit(t *testing.T) {
	synctest.Test(t, testTurnsWhenWindowsDoNotFit)
}

func testTurnsWhenWindowsDoNotFit(t *testing.T) {
	const chunk = 34 * 512
	c := newClocked(t, 3*chunk, time.Hour) // windows of 2 chunks
	a, b := c.stream(1, 2), c.stream(2, 2)
	turn := func(f Inflight) chan error {
		done := make(chan error, 1)
		go func() { done <- c.Turn(context.Background(), f) }()
		return done
	}
	waits := func(done chan error) bool {
		time.Sleep(100 * time.Millisecond) // the Turn's timers up to then fire
		synctest.Wait()                    // and it does what they woke it for
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return false
		default:
			return true
		}
	}
	fa := c.batch(t, a, 0)
	if waits(turn(fa)) {
		t.Fatal("the first stream waits with nobody else served")
	}
	c.Finish(fa)
	fb := c.batch(t, b, 0)
	db := turn(fb)
	if !waits(db) {
		t.Fatal("the second stream went ahead though the two windows do not fit")
	}
	if got := c.Turns().Waiting; got != 1 {
		t.Fatalf("%d streams waiting, want 1", got)
	}
	// a moves into its second window: its turn passes to b.
	fa = c.batch(t, a, 64)
	if waits(db) {
		t.Fatal("b still waits after a left its window")
	}
	da := turn(fa)
	if !waits(da) {
		t.Fatal("a went ahead into its next window beside b's")
	}
	// b goes idle (its batch served, nothing more for longer than a turn
	// is held): a gets the turn.
	c.Finish(fb)
	c.tick(time.Second)
	if waits(da) {
		t.Fatal("a still waits after b stopped reading")
	}
	c.Finish(fa)
	if st := c.Turns(); st.Waiting != 0 || st.Overdue != 0 {
		t.Fatalf("turns %+v, want none waiting and none overdue", st)
	}
}

// TestTurnsNeverHoldBackWindowsThatFit: with room for every stream's
// window, no batch waits for a turn.
func TestTurnsNeverHoldBackWindowsThatFit(t *testing.T) {
	c := newClocked(t, 1<<40, time.Hour)
	for seed := range uint64(20) {
		f := mustBegin(t, c.Table, c.stream(seed, 2), 0, 0, 32)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := c.Turn(ctx, f); err != nil {
			t.Fatalf("stream %d: %v", seed, err)
		}
		cancel()
	}
	if st := c.Turns(); st.Waited != 0 || st.Waiting != 0 {
		t.Fatalf("turns %+v, want no wait", st)
	}
}

// TestANewJobOnHeldChunksDoesNotWait: a job named apart that reads the
// same order at the same place as the job holding the turn adds no chunk
// to the cache, so its first batch goes ahead at once — even when that
// job's window and the next are larger than the cache on their own. It
// used to wait for the holder to go idle (about 50 ms for every new job
// name on one order, against 1.5 ms for a known job); a job on another
// order still waits. The context is cancelled up front: a Turn that
// would wait for a turn to move, or for the holder to go idle, returns
// the context's error instead, so the answer is what admission decided.
func TestANewJobOnHeldChunksDoesNotWait(t *testing.T) {
	const chunk = 34 * 512
	c := newClocked(t, 3*chunk, time.Hour) // a window and the next: 4 chunks
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	first := c.stream(1, 2)
	first.Name = "lr-0.1"
	fa := c.batch(t, first, 0)
	if err := c.Turn(cancelled, fa); err != nil {
		t.Fatalf("the first job waits with nobody else served: %v", err)
	}
	c.Finish(fa)
	for _, name := range []string{"lr-0.2", "lr-0.3"} {
		js := first
		js.Name = name
		f := c.batch(t, js, 0)
		if err := c.Turn(cancelled, f); err != nil {
			t.Fatalf("job %s on the chunks job %s holds waited for a turn: %v", name, first.Name, err)
		}
		c.Finish(f)
	}
	other := c.stream(2, 2)
	f := c.batch(t, other, 0)
	if err := c.Turn(cancelled, f); !errors.Is(err, context.Canceled) {
		t.Fatalf("a job on another order went ahead beside a holder whose windows fill the cache: %v", err)
	}
	c.Finish(f)
	if st := c.Turns(); st.Waiting != 0 || st.Overdue != 0 {
		t.Fatalf("turns %+v, want none waiting, none overdue", st)
	}
}

// TestAWaitingStreamIsKeyedFromItsTurn: a stream that waits for a turn
// needs its window when its turn is expected — when the stream holding
// one leaves its window — not now: its chunks rank after the holder's
// window and are not among the hot ones. A stream's first batch used to
// stay published as served until some turn moved, its window keyed as
// needed at once, ahead of the holder's.
func TestAWaitingStreamIsKeyedFromItsTurn(t *testing.T) {
	const chunk = 34 * 512
	c := newClocked(t, 3*chunk, time.Hour) // room for one window and a half
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	a, b := c.stream(1, 2), c.stream(2, 2)
	fa := c.batch(t, a, 0)
	if err := c.Turn(cancelled, fa); err != nil {
		t.Fatalf("the first stream waits with nobody else served: %v", err)
	}
	c.Finish(fa)
	fb := c.batch(t, b, 0)
	defer c.Finish(fb)
	if err := c.Turn(cancelled, fb); !errors.Is(err, context.Canceled) {
		t.Fatalf("the second stream went ahead though the windows do not fit: %v", err)
	}
	table := c.Snapshot()
	aNear := append(c.windowKeys(t, a, 0), c.windowKeys(t, a, 1)...)
	wb := slices.DeleteFunc(c.windowKeys(t, b, 0), func(k chunkcache.Key) bool { return slices.Contains(aNear, k) })
	if len(wb) == 0 {
		t.Fatal("seeds 1 and 2 share their first windows' chunks: pick others")
	}
	_, hiA := c.keys(c.windowKeys(t, a, 0))
	for _, k := range wb {
		if d := table.Distance(k); d < table.crossing || d <= hiA {
			t.Errorf("chunk %v of the waiting stream's window keyed %v, before its turn (a leaves its window at %v, a's window keyed up to %v)",
				k, time.Duration(d), time.Duration(table.crossing), time.Duration(hiA))
		}
		if slices.Contains(table.Hot(), k) {
			t.Errorf("chunk %v of the waiting stream's window is hot", k)
		}
	}
}

// TestTurnWaitIsBounded: past the maximum wait a batch goes ahead, over
// capacity, and is counted; a batch whose client gives up leaves the line.
func TestTurnWaitIsBounded(t *testing.T) {
	// On synctest's clock, which moves only when every goroutine of the
	// test waits: the 10 ms deadline comes before the 50 ms maximum wait
	// however loaded the machine (under load, on the real clock, both had
	// passed when Turn looked, and it went ahead as overdue).
	synctest.Test(t, func(t *testing.T) {
		const chunk = 34 * 512
		s := New(Config{Orders: layout.New(nil, nil), Local: allLocal, Capacity: 3 * chunk, MaxTurnWait: 50 * time.Millisecond})
		ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32))
		a, b, c := jobstream.Stream{DS: ds, Seed: 1, Window: 2}, jobstream.Stream{DS: ds, Seed: 2, Window: 2}, jobstream.Stream{DS: ds, Seed: 3, Window: 2}
		fa := mustBegin(t, s, a, 0, 0, 32)
		if err := s.Turn(context.Background(), fa); err != nil {
			t.Fatal(err)
		}
		fc := mustBegin(t, s, c, 0, 0, 32)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		if err := s.Turn(ctx, fc); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a turn given up on: %v, want the context's error", err)
		}
		cancel()
		s.Finish(fc) // its client went away: it leaves the line
		fb := mustBegin(t, s, b, 0, 0, 32)
		began := time.Now()
		if err := s.Turn(context.Background(), fb); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(began); waited < 50*time.Millisecond {
			t.Fatalf("b went ahead after %v, before the maximum wait", waited)
		}
		if st := s.Turns(); st.Overdue != 1 || st.Waiting != 0 {
			t.Fatalf("turns %+v, want one overdue, none waiting", st)
		}
		s.Finish(fa)
		s.Finish(fb)
	})
}

// TestNoTurnsWithoutAMaximumWait: a schedule without a maximum wait (the
// lru policy, or --max-turn-wait 0) takes no turns: a batch whose window
// does not fit beside another stream's goes ahead at once. It used to
// wait without bound.
func TestNoTurnsWithoutAMaximumWait(t *testing.T) {
	const chunk = 34 * 512
	c := newClocked(t, 3*chunk, 0)
	a, b := c.stream(1, 2), c.stream(2, 2)
	fa := c.batch(t, a, 0)
	fb := c.batch(t, b, 0)
	for _, f := range []Inflight{fa, fb} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := c.Turn(ctx, f); err != nil {
			t.Fatalf("a batch waited for a turn with turns off: %v", err)
		}
		cancel()
	}
	if st := c.Turns(); st.Waited != 0 || st.Waiting != 0 || st.Overdue != 0 {
		t.Fatalf("turns %+v, want none taken", st)
	}
}

// TestPrefetchOnlyWhatStaysCached: prefetch may read a chunk only if the
// chunks needed sooner, and it, fit in the cache — else it would be
// evicted before its use — and may displace chunks still needed only for
// a lone stream, whose next window is certain to be needed first.
func TestPrefetchOnlyWhatStaysCached(t *testing.T) {
	const chunk = 34 * 512
	c := newClocked(t, 4*chunk, 0) // two windows of two chunks
	a := c.stream(1, 2)
	f := c.batch(t, a, 0)
	table := c.Snapshot()
	for w, want := range []bool{true, true, false, false} {
		for _, k := range c.windowKeys(t, a, w) {
			if got := table.Prefetchable(k); got != want {
				t.Errorf("window %d chunk %v: prefetchable %t, want %t", w, k, got, want)
			}
		}
	}
	next := c.windowKeys(t, a, 1)[0]
	if !table.Displaces(table.Distance(next), 0) {
		t.Error("a lone stream's next window may not displace chunks needed later")
	}
	c.Finish(f)
	// A second stream: prefetch takes only free room or chunks nobody
	// needs.
	b := c.stream(2, 2)
	c.batch(t, b, 0)
	if table := c.Snapshot(); table.Displaces(table.Distance(next), 0) {
		t.Error("with two streams, a prefetch may displace chunks some stream needs")
	}
}

// TestPrefetchJustAfterACrossingMayDisplace: a chunk needed only after
// the first stream leaves its window may displace chunks needed later if
// it is needed less than its read's lead after that crossing — waiting
// for the window's chunks to become the victims would leave too little
// time to read it — and not if it is needed later than that. Two
// components of a mixture of equal weights cross their windows nearly
// together; before, the second one's next window was read on demand
// every window (at a quarter of the dataset, two ranks: 139 of 297 loads,
// against 8 of 297 for one dataset).
func TestPrefetchJustAfterACrossingMayDisplace(t *testing.T) {
	const chunk = 34 * 512
	c := newClocked(t, 8*chunk, 0) // windows of two chunks, 64 samples
	a, b := c.stream(1, 2), c.stream(2, 2)
	a.Mix, b.Mix = "m", "m"
	fa := mustBegin(t, c.Table, a, 0, 0, 64)
	c.advance(a, 0, 32) // a leaves window 0 in 32 samples
	fb := mustBegin(t, c.Table, b, 0, 0, 64)
	c.advance(b, 0, 28) // b in 36
	defer c.Finish(fa)
	defer c.Finish(fb)
	table := c.Snapshot()
	// b's chunks that no window of a before its third holds: their keys
	// are b's alone.
	aHas := map[chunkcache.Key]bool{}
	for w := range 3 {
		for _, k := range c.windowKeys(t, a, w) {
			aHas[k] = true
		}
	}
	only := func(w int) chunkcache.Key {
		for _, k := range c.windowKeys(t, b, w) {
			if !aHas[k] {
				return k
			}
		}
		t.Fatalf("every chunk of b's window %d is a's too", w)
		return chunkcache.Key{}
	}
	next, later := table.Distance(only(1)), table.Distance(only(2))
	gap := next - table.crossing
	if gap <= 0 || later <= next {
		t.Fatalf("b's next window needed %d ns after the first crossing, its window after that at %d (next at %d): want both after it, in order", gap, later, next)
	}
	if table.Displaces(next, 0) {
		t.Error("with no lead, a chunk needed after the first crossing may displace chunks needed later")
	}
	if !table.Displaces(next, gap) {
		t.Errorf("a chunk needed %d ns after the first crossing may not displace chunks needed later with a read's lead of as much", gap)
	}
	if table.Displaces(later, gap) {
		t.Error("a chunk needed a window after the first crossing may displace chunks needed later with a lead of a few samples")
	}
}

// TestMixtureComponentsAreOneJob: the streams of one mixture's
// components are one job to Shared (so their reads do not load in turn
// with each other); another job beside them makes the cache shared.
func TestMixtureComponentsAreOneJob(t *testing.T) {
	c := newClocked(t, 1<<30, time.Second)
	a, b := c.stream(1, 2), c.stream(2, 2)
	a.Mix, b.Mix = "m", "m"
	fa, fb := c.batch(t, a, 0), c.batch(t, b, 0)
	if c.Shared() {
		t.Fatal("two components of one mixture count as two jobs")
	}
	c.batch(t, c.stream(3, 2), 0)
	if !c.Shared() {
		t.Fatal("a job beside a mixture does not share the cache")
	}
	c.Finish(fa)
	c.Finish(fb)
}

// TestPrefetchWaitsForTheTrailingReader: while a stream's readers straddle
// two windows — a batch of window 1 still in flight when the leading rank
// reads window 2 — a prefetch of the next window takes only free room or
// chunks no stream needs: window 1's chunks are about to become the
// better victims. The reproduction: at a cache of a quarter of the
// dataset, two ranks read 1.10–1.18 of the optimum's bytes, against
// 1.04–1.06 once these reads wait for the trailing rank.
func TestPrefetchWaitsForTheTrailingReader(t *testing.T) {
	const chunk = 34 * 512
	c := newClocked(t, 6*chunk, 0) // three windows of two chunks
	a := c.stream(1, 2)
	next := c.windowKeys(t, a, 3)[0]
	c.Finish(c.batch(t, a, 0))
	w0 := c.batch(t, a, 48)  // windows 0 and 1
	w1 := c.batch(t, a, 80)  // window 1
	w2 := c.batch(t, a, 128) // window 2
	c.Finish(w0)             // the trailing reader is in window 1, the leading one in window 2
	if table := c.Snapshot(); table.Displaces(table.Distance(next), 0) {
		t.Error("a prefetch may displace needed chunks while the stream's readers straddle windows 1 and 2")
	}
	c.Finish(w1) // both in window 2
	c.Finish(w2)
	c.Finish(c.batch(t, a, 160))
	if table := c.Snapshot(); !table.Displaces(table.Distance(next), 0) {
		t.Error("once the readers are in one window, its next window's prefetch may not displace chunks needed later")
	}
}

// TestALateStreamKeepsItsOrder: a stream slower than its pace predicts —
// its batch waits on a cold load, say — still needs its windows in their
// order, its current one first. Keys that grow with each chunk's own
// lateness inverted that order (the next window, overdue longest, keyed
// furthest, so evicted first), and a stall that evicts the next window
// makes the next stall: at a cache of a quarter of the dataset an epoch
// in about ten read 1.2–1.8 datasets where the optimum reads one.
func TestALateStreamKeepsItsOrder(t *testing.T) {
	c := newClocked(t, 1<<40, 0)
	a := c.stream(1, 2) // windows of two chunks, 64 samples
	check := func(when string) {
		t.Helper()
		prev := int64(-1)
		for w := range 6 {
			lo, hi := c.keys(c.windowKeys(t, a, w))
			if lo <= prev {
				t.Errorf("%s: window %d keyed from %v, before window %d's %v", when, w, time.Duration(lo), w-1, time.Duration(prev))
			}
			prev = hi
		}
	}
	f := c.batch(t, a, 0)
	check("on time")
	// The batch waits on its loads far longer than the stream's pace
	// says a window takes.
	c.tick(50 * time.Millisecond)
	check("late, its batch still in flight")
	c.Finish(f)
	c.tick(time.Millisecond)
	f = c.batch(t, a, 32) // the next batch, still in window 0
	check("late, the next batch of the window begun")
	c.tick(30 * time.Millisecond)
	check("later still")
	c.Finish(f)
}

// TestTurnsWithoutRebuilds: jobs whose requests come far enough apart for
// their turns to lapse between batches (a gateway serving 1,024 jobs of
// their own, each batch queued behind the others' for longer than a
// turn's idle bound) take a turn again at each batch; with room for
// every window no stream waits, and the use table, whose keys depend on
// which streams wait and not on which hold a turn, is not rebuilt for
// it. It was, once a turn: O(streams × chunks) a batch, a third of the
// gateway's CPU (docs/benchmarks.md, Many streams). Nor are the holders'
// windows counted, when the cache holds every dataset the streams read.
func TestTurnsWithoutRebuilds(t *testing.T) {
	const jobs = 20
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 8))
	s := New(Config{Orders: layout.New(nil, nil), Local: allLocal, Capacity: 1 << 40, MaxTurnWait: 10 * time.Second})
	var mu sync.Mutex
	at := s.zero.Add(time.Second)
	s.clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	tick := func(d time.Duration) { mu.Lock(); at = at.Add(d); mu.Unlock() }
	gen := func() uint64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gen
	}
	var streams []jobstream.Stream
	for i := range jobs {
		streams = append(streams, jobstream.Stream{DS: ds, Seed: uint64(i + 1), Window: 16, Name: fmt.Sprintf("j%d", i)})
	}
	hot, counted := s.turns.hot, 0
	s.turns.hot = func(st *stream, set map[chunkcache.Key]struct{}) int64 { counted++; return hot(st, set) }
	var before uint64
	for round := range 4 {
		if round == 1 {
			before = gen() // every stream known, its window begun
		}
		for _, js := range streams {
			f := mustBegin(t, s, js, 0, round*8, 8)
			s.Advance(js, 0, round*8+8, 1)
			if err := s.Turn(t.Context(), f); err != nil {
				t.Fatal(err)
			}
			s.Finish(f)
			tick(2 * turnIdleMin) // the other streams' turns lapse meanwhile
		}
	}
	if n := gen() - before; n > jobs/4 {
		t.Errorf("%d rebuilds for %d turns taken with no stream waiting, want few", n, 3*jobs)
	}
	// The cache holds the dataset: no stream's windows were counted to
	// tell whether another's fit beside them (line.roomForAll).
	if counted > 0 {
		t.Errorf("the streams' windows were counted %d times for %d turns, in a cache that holds the whole dataset", counted, 4*jobs)
	}
}
