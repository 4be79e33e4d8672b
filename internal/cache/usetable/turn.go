package usetable

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// Turns. Every batch of a window needs every chunk of the window (its
// samples are shuffled across them), so a job stream holds its window's
// chunks for as long as it reads the window. When the windows the jobs are
// in do not fit in the cache together, serving all of them at once makes
// each batch evict chunks another job's next batch needs: every chunk is
// read again and again within one window, several times a dataset per
// epoch. Instead the streams take turns: a stream's batches go ahead
// while the windows of the streams holding a turn, its own included, fit
// in the cache, when its windows add no chunk to theirs, or when it
// trails a stream holding a turn on that stream's chunks by less than a
// window (line.trails); otherwise they wait, in order of arrival, for a
// stream to finish its window. A stream that finishes its window passes
// its turn on to the streams waiting and waits again behind them, so under
// contention every stream reads each window's chunks about once and waits,
// in turn, about as long as the others. Turns only ever hold a batch back
// while the cache is contended: when the windows fit, no batch waits.
//
// A stream's footprint is its current window and the next: the batch that
// crosses from one into the other pins the chunks of both, and without
// room for it every crossing would evict the window of another stream
// holding a turn (measured: twice the store reads at eight jobs).
//
// A wait is bounded by the use table's maximum (Config.MaxTurnWait): past
// it the batch goes ahead anyway, as it would without turns. Streams
// followed only for other nodes' requests (a cluster owner's, which the
// asking node's own turns regulate) always hold a turn: they are counted,
// never held back.

// turnIdleMin and turnIdleMax bound the time a stream holding a turn may
// go without a batch in flight before it gives the turn back: a stream
// that pauses for longer than 8 of its usual gaps between batches (a job
// that ended, or stopped to save a checkpoint) gives it back, and queues
// again when it resumes. The upper bound keeps a job that reads a batch a
// second, or a client that sent one request and stopped reading, from
// holding the cache against the others for 8 s at a time (measured: 2 s
// and then 3.9 s waits beside a client that asked for a batch a second
// and never read it).
const (
	turnIdleMin = 100 * time.Millisecond
	turnIdleMax = time.Second
)

// idleAfter is how long st may go without a batch in flight before it
// gives its turn back.
func (st *stream) idleAfter() time.Duration {
	return min(max(turnIdleMin, time.Duration(8*st.gap)), turnIdleMax)
}

// waiting reports whether st waits for a turn.
func (st *stream) waiting() bool { return !st.waitSince.IsZero() }

// holds reports whether st's windows count against the cache now: it
// holds a turn, or it never takes turns (a peer's stream).
func (st *stream) holds() bool { return st.active || !st.turned }

// line is the line for turns: who gets one next, and when turns moved.
// The streams' places in it are theirs (stream.active, waitSince,
// waitSeq); the line gives places, admits streams to turns and wakes
// those waiting. It is the Table's, guarded by the Table's mu but for
// its figures, which are atomic. It knows the cache only by its capacity
// and by hot, the bytes a stream's windows add to a set of chunks
// (Table.hotKeys), so that which chunks a stream holds stays the use
// table's.
type line struct {
	maxWait  time.Duration // Config.MaxTurnWait; 0: no turns
	capacity int64         // the cache's, in bytes
	hot      func(st *stream, set map[chunkcache.Key]struct{}) int64
	// follows reports whether st trails h on h's chunks (follows).
	follows func(st, h *stream) bool

	moved chan struct{} // closed and replaced whenever turns move
	seq   uint64        // the last place in the line given

	waited, overdue atomic.Int64
}

// follows reports whether st reads h's chunks in h's order, in the same
// epoch, less than a window behind h: its leading edge behind h's by
// fewer samples than the window st is in holds, and the windows from
// st's to h's the same chunks in both orders (two jobs that chose one
// seed and name themselves apart; any two orders whose windows hold the
// same chunks cost the cache alike, whatever order the samples come in).
func follows(orders Orders, st, h *stream) bool {
	if st.DS != h.DS || st.edge.epoch != h.edge.epoch {
		return false
	}
	d := h.edge.pos - st.edge.pos
	if d < 0 {
		return false
	}
	se, err := st.order(orders, st.edge.epoch)
	if err != nil || se.NumSamples() == 0 {
		return false
	}
	he, err := h.order(orders, h.edge.epoch)
	if err != nil || he.NumSamples() != se.NumSamples() || he.NumWindows() != se.NumWindows() {
		return false
	}
	sw := se.WindowOf(min(st.edge.pos, se.NumSamples()-1))
	hw := he.WindowOf(min(h.edge.pos, he.NumSamples()-1))
	end := se.NumSamples()
	if sw+1 < se.NumWindows() {
		end = se.WindowStart(sw + 1)
	}
	if d >= end-se.WindowStart(sw) || hw > sw+1 {
		return false
	}
	for w := sw; w <= hw; w++ {
		if !slices.Equal(se.WindowChunks(w), he.WindowChunks(w)) {
			return false
		}
	}
	return true
}

// hotKeys adds the chunks st holds while it reads its window to set — its
// current windows and the next one — and returns the bytes it added.
func (s *Table) hotKeys(st *stream, set map[chunkcache.Key]struct{}) int64 {
	origin, e, ok := s.originOf(st)
	if !ok {
		return 0
	}
	first, last, _ := st.hotWindows(e, origin)
	var n int64
	add := func(chunks []int) {
		for _, c := range chunks {
			k := st.DS.ChunkKey(c)
			if _, dup := set[k]; !dup {
				set[k] = struct{}{}
				n += st.DS.ChunkSize(c)
			}
		}
	}
	for w := first; w <= last; w++ {
		add(e.WindowChunks(int(w)))
	}
	// The batch that crosses into the next window pins both: room for
	// it is kept, or every crossing evicts another stream's window.
	if int(last)+1 < e.NumWindows() {
		add(e.WindowChunks(int(last) + 1))
	} else if next, err := st.order(s.orders, origin.epoch+1); err == nil && next.NumWindows() > 0 {
		add(next.WindowChunks(0))
	}
	return n
}

// admit takes back the turns of streams gone idle and gives turns to
// waiting streams, in order of arrival, while their windows fit beside
// those of the streams holding one, add no chunk to theirs, or trail one
// of them by less than a window (trails). The first
// waiting stream always gets one when no other stream holds one. It
// reports whether any turn moved.
func (l *line) admit(streams map[jobstream.Stream]*stream, now time.Time) bool {
	moved := false
	var waiting []*stream
	for _, st := range streams {
		if st.active && st.inflight.len() == 0 && now.Sub(st.lastSeen) > st.idleAfter() {
			st.active = false
			moved = true
		}
		if st.waiting() {
			waiting = append(waiting, st)
		}
	}
	if len(waiting) == 0 {
		return moved
	}
	if l.roomForAll(streams) {
		for _, st := range waiting {
			st.active, st.waitSince = true, time.Time{}
		}
		return true
	}
	slices.SortFunc(waiting, func(a, b *stream) int { return cmp.Compare(a.waitSeq, b.waitSeq) })
	set := map[chunkcache.Key]struct{}{}
	var used int64
	holders := 0
	for _, st := range streams {
		if st.holds() {
			used += l.hot(st, set)
			holders++
		}
	}
	for _, st := range waiting {
		overdue := l.maxWait > 0 && now.Sub(st.waitSince) >= l.maxWait
		add := map[chunkcache.Key]struct{}{}
		for k := range set {
			add[k] = struct{}{}
		}
		extra := l.hot(st, add)
		// A stream whose windows the holders hold already (another job
		// named apart on the same order and position: a search over
		// learning rates with one seed) adds nothing to the cache, and
		// goes ahead even when the holders alone exceed it (one job's
		// window and the next larger than the cache). It used to wait
		// for every holder to go idle: about 50 ms for each new job name.
		if holders > 0 && extra > 0 && used+extra > l.capacity && !overdue && !l.trails(st, streams) {
			break // strictly in order: a large window is not passed over for ever
		}
		if overdue {
			l.overdue.Add(1)
		}
		set, used = add, used+extra
		holders++
		st.active, st.waitSince = true, time.Time{}
		moved = true
	}
	return moved
}

// roomForAll reports whether the cache holds every chunk of every
// dataset the streams read: then no stream's windows can crowd out
// another's, and every waiting stream goes ahead without the holders'
// windows being counted, which costs O(streams × a window's chunks) a
// call (a sixth of a gateway's CPU under 1,024 jobs of their own, each
// taking a turn again at each window it crossed, over a dataset its
// cache held four times over).
func (l *line) roomForAll(streams map[jobstream.Stream]*stream) bool {
	seen := map[*catalog.Dataset]struct{}{}
	var total int64
	for _, st := range streams {
		if _, dup := seen[st.DS]; dup {
			continue
		}
		seen[st.DS] = struct{}{}
		if st.DS.InPlace == nil {
			total += st.DS.Index.TotalBytes() // a tar chunk is cached as stored: its size, summed in the index
		} else {
			for c := range st.DS.Index.NumChunks() {
				total += st.DS.ChunkSize(c) // its resident bound with the fields read
			}
		}
		if total > l.capacity {
			return false
		}
	}
	return true
}

// trails reports whether st follows a stream holding a turn on its
// chunks, less than a window behind it (follows). Such a stream
// goes ahead though its window and the holders' do not fit together: the
// window it adds is the one the holder has just left, resident still, and
// it leaves it before the holder reaches the window after its own — the
// holders' footprint counts that one (the crossing's), not yet loaded.
// Made to wait instead, it fell a window further behind at each of its
// crossings and the two read apart: two jobs of one order six batches
// apart read 3.83 datasets in two epochs against one job's 1.82 whenever
// the trailing one's first batch came at the instant just after the
// leading one crossed into its second window
// (TestNamedJobsOfOneOrderShare, 1 run in 40 to 400 on a loaded machine).
func (l *line) trails(st *stream, streams map[jobstream.Stream]*stream) bool {
	if l.follows == nil {
		return false
	}
	for _, h := range streams {
		if h != st && h.holds() && l.follows(st, h) {
			return true
		}
	}
	return false
}

// Turn waits until the stream of a batch begun with Begin holds a turn
// (see above), ctx ends, or the use table's maximum wait passes. Only
// batches of this node's clients take turns.
func (s *Table) Turn(ctx context.Context, f Inflight) error {
	if s.turns.maxWait <= 0 {
		return nil // no turns
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.streams[f.js]
	if !ok || st.active {
		return nil
	}
	st.turned = true
	now := s.clock()
	queued := !st.waiting()
	if queued {
		s.turns.queue(st, now)
	}
	start := now
	var timeout <-chan time.Time
	if s.turns.maxWait > 0 {
		t := time.NewTimer(s.turns.maxWait - now.Sub(st.waitSince))
		defer t.Stop()
		timeout = t.C
	}
	for {
		if s.turns.admit(s.streams, now) {
			// The table's keys depend on which streams wait, not on
			// which hold a turn (publishLocked): a stream that queued
			// and was let through at once, beside others gone idle,
			// leaves them as they were, and rebuilding for each such
			// turn cost O(streams × chunks) a batch wherever the jobs'
			// requests are far enough apart for their turns to lapse
			// (a third of a gateway's CPU under 1,024 jobs of their own).
			s.turns.wake()
			if waitingOf(s.streams) != s.published {
				s.publishLocked()
			}
		} else if queued {
			// The table keys a stream not in line as served now, its
			// window needed at once; while it waits, its uses come when
			// its turn is expected (publishStream).
			s.publishLocked()
		}
		queued = false
		if st.active || s.streams[f.js] != st {
			if w := s.clock().Sub(start); w > 0 {
				s.turns.waited.Add(int64(w))
			}
			return nil
		}
		ch := s.turns.moved
		// Turns move on events, but a stream holding one may also go
		// idle, which no event marks: look again when the first may,
		// and now and then.
		idle := time.NewTimer(min(s.turns.nextIdle(s.streams, now), turnIdleMin/2))
		s.mu.Unlock()
		select {
		case <-ch:
		case <-idle.C:
		case <-timeout:
			timeout = nil // overdue now: admitLocked lets it through
		case <-ctx.Done():
			idle.Stop()
			s.mu.Lock()
			return ctx.Err()
		}
		idle.Stop()
		s.mu.Lock()
		now = s.clock()
	}
}

// nextIdle is how long from now until the first stream holding a turn
// may go idle (see idleAfter), at least 1 ms.
func (l *line) nextIdle(streams map[jobstream.Stream]*stream, now time.Time) time.Duration {
	next := turnIdleMax
	for _, st := range streams {
		if st.active && st.inflight.len() == 0 {
			next = min(next, st.lastSeen.Add(st.idleAfter()).Sub(now))
		}
	}
	return max(next+time.Millisecond, time.Millisecond)
}

// turnsMovedLocked wakes the streams waiting for a turn and republishes
// the use table, whose keys depend on who is served now.
func (s *Table) turnsMovedLocked() {
	s.turns.wake()
	s.publishLocked()
}

// waitSet names the streams that wait for a turn, and so their order
// (their places, stream.waitSeq, are never given twice): how many, and
// a hash of their places.
type waitSet struct {
	n    int
	hash uint64
}

// add counts st in w if it waits.
func (w *waitSet) add(st *stream) {
	if st.waiting() {
		w.n++
		w.hash ^= mix64(st.waitSeq)
	}
}

// waitingOf is which of streams wait for a turn.
func waitingOf(streams map[jobstream.Stream]*stream) waitSet {
	var w waitSet
	for _, st := range streams {
		w.add(st)
	}
	return w
}

// mix64 is SplitMix64's finalizer: places that differ in any bit hash
// apart, so that the xor of a set's hashes tells sets apart.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// wake wakes the streams waiting for a turn (Table.Turn), to look again.
func (l *line) wake() {
	close(l.moved)
	l.moved = make(chan struct{})
}

// passTurnLocked is called when st moved into another window: a stream
// holding a turn gives it up and queues again behind the streams that
// wait, getting it back at once if its new window fits beside the others.
// It reports whether any turn moved.
func (s *Table) passTurnLocked(st *stream, now time.Time) bool {
	if !st.active {
		return false
	}
	st.active = false
	s.turns.queue(st, now)
	s.turns.admit(s.streams, now)
	return true
}

// queue puts st at the end of the line.
func (l *line) queue(st *stream, now time.Time) {
	l.seq++
	st.waitSince, st.waitSeq = now, l.seq
}

// leaveLocked takes st out of the line for a turn once it has no batch
// in flight (its client gave up, or it passed its turn between batches):
// a stream that sends no batch must not hold up the streams behind it.
// Its next batch queues again. It reports whether any turn moved.
func (s *Table) leaveLocked(st *stream, now time.Time) bool {
	if !st.waiting() || st.inflight.len() > 0 {
		return false
	}
	st.waitSince = time.Time{}
	s.turns.admit(s.streams, now)
	return true
}

// TurnStats are the use table's cumulative figures of turns.
type TurnStats struct {
	Waited  time.Duration // batches' time waiting for a turn, in all
	Overdue int64         // turns given past the maximum wait, over capacity
	Waiting int           // streams waiting now
}

// Turns returns the figures of turns.
func (s *Table) Turns() TurnStats {
	st := TurnStats{Waited: time.Duration(s.turns.waited.Load()), Overdue: s.turns.overdue.Load()}
	s.mu.Lock()
	for _, o := range s.streams {
		if o.waiting() {
			st.Waiting++
		}
	}
	s.mu.Unlock()
	return st
}

// Shared reports whether several job streams use the cache now: two or
// more have a batch in flight or sent one within the last second, or the
// last 8 of their usual gaps between batches if longer.
func (s *Table) Shared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return shared(s.streams, s.clock())
}

// shared is Shared at now; the caller holds the streams' lock (Table.mu).
func shared(streams map[jobstream.Stream]*stream, now time.Time) bool {
	// A mixture's component streams are one job (jobstream.Stream.Mix).
	var first jobstream.Stream
	seen := false
	for _, st := range streams {
		if st.inflight.len() > 0 || now.Sub(st.lastSeen) < max(time.Second, time.Duration(8*st.gap)) {
			job := st.Stream
			if job.Mix != "" {
				job = jobstream.Stream{Mix: job.Mix, Name: job.Name}
			}
			if !seen {
				first, seen = job, true
			} else if job != first {
				return true
			}
		}
	}
	return false
}
