package usetable

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// Table follows the job streams' positions and, from the seeded order,
// knows when every chunk will next be needed. It publishes that as an
// immutable use table, rebuilt when a stream crosses a window boundary,
// starts or ends, a turn moves or a stream queues for one, or the streams
// are late (publish.go), so
// that the cache policy (which runs under the cache's lock) and the
// prefetcher read distances without computing anything or taking the
// use table's lock.
type Table struct {
	orders Orders
	// capacity is the cache's, in bytes: prefetch reads only what the
	// cache can keep until it is used (Snapshot.Prefetchable).
	capacity int64
	// local reports whether this node reads chunk c of ds from the store
	// itself: on a cluster a node prefetches only those (the chunks it
	// owns, or stands in for while their owner is down); other nodes'
	// chunks come from them.
	local func(ds *catalog.Dataset, c int) bool
	// own reports whether this node owns chunk c of ds (nil: every chunk
	// it reads): a chunk it reads only while its owner is down is kept
	// for the windows at hand, not for the next epoch (publishStream).
	own func(ds *catalog.Dataset, c int) bool
	// keep reports whether this node holds chunk c of ds for another
	// node that will ask for it (Config.Keep).
	keep func(ds *catalog.Dataset, c int) bool
	frame

	// mu guards the streams (the map and every stream's fields), the
	// turns' line and channel, and the building of tables.
	mu      sync.Mutex
	streams map[jobstream.Stream]*stream
	gen     uint64

	uses atomic.Pointer[Snapshot]
	// coalescing counts the Coalesce calls running; stale: a rebuild
	// was asked for during one.
	coalescing int
	stale      bool
	// published is which streams waited for a turn when the latest
	// table was built (turn.go's waitSet).
	published waitSet
	// rebuilds spaces the rebuilds the streams' moves ask for by a
	// multiple of what the last one cost (spacer).
	rebuilds spacer
	// ticks counts requests: a policy re-keys the chunks of the streams'
	// current windows when it moved (their clocks did).
	ticks atomic.Uint64

	// turns is the line for turns (turn.go), guarded by mu.
	turns line
}

// Orders lays out the streams' epochs (layout.Orders): the order of a
// stream's epoch, memoised, with its per-chunk window table. It is
// called under the table's lock and must not wait for a store.
type Orders interface {
	Epoch(js jobstream.Stream, epoch uint64) (*jobstream.EpochOrder, error)
}

// Config configures a Table.
type Config struct {
	// Orders computes the streams' orders.
	Orders Orders
	// Local tells which chunks this node reads itself: Advance lists only
	// those to prefetch.
	Local func(ds *catalog.Dataset, c int) bool
	// Own tells which of those this node owns, rather than stands in for
	// while their owner is down or out of reach (nil: all of them).
	Own func(ds *catalog.Dataset, c int) bool
	// Keep, if set, tells which other chunks this node keeps for another
	// node that will ask it for them (a chunk it read for the jobs before
	// a membership change that its new owner left to the batches,
	// handover.Kept): keyed by when the jobs need them, as its own are,
	// never prefetched. It must not block.
	Keep func(ds *catalog.Dataset, c int) bool
	// Capacity is the cache's, in bytes.
	Capacity int64
	// MaxTurnWait bounds a batch's wait for its stream's turn (turn.go);
	// 0 means no turns are taken: every batch goes ahead at once.
	MaxTurnWait time.Duration
	// Clock is the table's clock; nil: time.Now. A test that holds it
	// still keys chunks by the streams' orders alone, as when every
	// stream keeps the pace the table expects.
	Clock func() time.Time
}

// New returns a use table.
func New(c Config) *Table {
	clock := c.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &Table{orders: c.Orders, local: c.Local, own: c.Own, keep: c.Keep, capacity: c.Capacity, frame: newFrame(clock),
		streams: map[jobstream.Stream]*stream{}, turns: line{maxWait: c.MaxTurnWait, moved: make(chan struct{})}}
	if s.keep == nil {
		s.keep = func(*catalog.Dataset, int) bool { return false }
	}
	s.turns.capacity, s.turns.hot = c.Capacity, s.hotKeys
	s.turns.follows = func(st, h *stream) bool { return follows(s.orders, st, h) }
	s.rebuilds.clock = func() time.Time { return s.clock() } // a test's, where it sets one
	s.rebuilds.fire = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rebuilds.armed = false
		if s.stale && s.coalescing == 0 {
			s.stale = false
			s.publishLocked()
		}
	}
	return s
}

// frame is the use table's time frame: the clock it reads (a test's
// own, in tests) and its origin, the clock's reading when it was made.
// Next-use keys are nanoseconds since the origin.
type frame struct {
	clock func() time.Time
	zero  time.Time
}

func newFrame(clock func() time.Time) frame { return frame{clock: clock, zero: clock()} }

// nowAt is t in the time frame: ns since its zero, never negative.
func (f frame) nowAt(t time.Time) int64 { return max(t.Sub(f.zero).Nanoseconds(), 0) }

// now is the present in the time frame.
func (f frame) now() int64 { return f.nowAt(f.clock()) }

// Ticks counts the requests the use table has seen; each moves a stream's
// clock.
func (s *Table) Ticks() uint64 { return s.ticks.Load() }

// Snapshot returns the latest use table.
func (s *Table) Snapshot() *Snapshot { return s.uses.Load() }

// Distance is k's next-use distance in the latest table.
func (s *Table) Distance(k chunkcache.Key) int64 { return s.Snapshot().Distance(k) }

// Inflight is a batch registered with Begin, to be passed to Finish.
type Inflight struct {
	js   jobstream.Stream
	at   epochPos
	rank Rank
}

// Rank is who a batch is served to, for admission: rank Rank of a job of
// World ranks, as its request names them. A peer's request, on behalf of
// ranks that live elsewhere, names none (World 0).
type Rank struct{ Rank, World int }

// MaxRankInflight bounds the batches one rank of a job may have being
// served at once. A rank reads a few batches ahead (its loader's
// workers, each a batch or two ahead); one that sends hundreds at once
// would fill the queue for cache room (256 requests) alone and starve
// every other job, so beyond this it is told to back off. The bound is
// a rank's, not a job's: a job of a thousand ranks, each with one
// request in flight, is a thousand batches in flight and no rank
// reading ahead. What they hold at once is bounded by the memory budget
// and the cache's queue, not by this.
const MaxRankInflight = 64

// ErrRankBusy is Begin's answer to a rank with MaxRankInflight batches
// in flight.
var ErrRankBusy = fmt.Errorf("%w: this rank has %d batches being served already; read fewer ahead", chunkcache.ErrBusy, MaxRankInflight)

// ErrStreamBusy is Begin's answer to a stream with MaxRankInflight
// batches in flight for each of its job's ranks: peers' requests for
// samples of it, which name no rank, are bounded so, by the widest world
// this node has seen the stream's own requests name (1 when it has
// seen none).
var ErrStreamBusy = fmt.Errorf("%w: this job has as many batches being served as its ranks may have (%d a rank); read fewer ahead", chunkcache.ErrBusy, MaxRankInflight)

// Begin records that a batch starting at start is being served, so that
// the chunks it still has to pin keep counting as needed now, and moves
// the stream's clock (see clock). drawn is how far before start its
// samples may lie: a rank's share of its global batch by locality or
// balance= is drawn from the whole global batch, which begins drawn
// positions before the rank's plain cut (start), and every chunk of it
// counts as needed while the batch is served; whether the batch came
// late is judged by start. (Counted from start, a rank's request keyed
// the chunks of the global batch before its cut as read, and a load it
// made could evict one that a later rank of the same step needed: read
// again, where the planner pins the whole global batch.)
// global is the job's global batch, batch size × world, in samples (0:
// unknown, as for a peer's request); weight is the job's (0 means 1);
// who the rank it is served to. A rank with MaxRankInflight batches in
// flight gets ErrRankBusy instead, and a stream with that many for each
// of its job's ranks ErrStreamBusy.
func (s *Table) Begin(js jobstream.Stream, epoch uint64, start, drawn, global int, weight float64, who Rank) (Inflight, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := epochPos{epoch, start}
	now := s.clock()
	st := s.streamLocked(js, at, now)
	f := &st.inflight
	if who.World > 0 {
		f.width = max(f.width, who.World)
		if f.ranks[who.Rank] >= MaxRankInflight {
			return Inflight{}, ErrRankBusy
		}
	}
	if bound := MaxRankInflight * max(f.width, 1); f.serving >= bound {
		return Inflight{}, fmt.Errorf("%w: %d batches for %d ranks", ErrStreamBusy, f.serving, max(f.width, 1))
	}
	st.lag -= st.lag / 64
	if epoch == st.edge.epoch && start < st.edge.pos {
		st.lag = max(st.lag, st.edge.pos-start)
	}
	if global > 0 {
		st.margin = global
	}
	if f.len() == 0 && !st.lastFinish.IsZero() {
		dt := float64(now.Sub(st.lastFinish))
		if st.gap == 0 {
			st.gap = max(dt, 1)
		} else {
			st.gap += (dt - st.gap) / 8
		}
	}
	at.pos = max(start-max(drawn, 0), 0)
	f.add(at, s.nowAt(now), who)
	if weight <= 0 {
		weight = 1
	}
	st.weight = weight
	st.clock.weight.Store(math.Float64bits(weight))
	s.clockLocked(st, now)
	s.refreshLocked(st)
	return Inflight{js, at, who}, nil
}

// Finish ends what Begin started.
func (s *Table) Finish(f Inflight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.streams[f.js]
	if !ok {
		return
	}
	if !st.inflight.remove(f.at, f.rank) {
		return // finished already
	}
	now := s.clock()
	if st.inflight.len() == 0 {
		st.lastFinish = now
	}
	s.clockLocked(st, now)
	s.refreshLocked(st)
	if s.leaveLocked(st, now) {
		s.turnsMovedLocked()
	}
}

// Advance records that a stream served epoch positions up to end. If the
// stream moved, it returns the chunks this node reads itself of the
// stream's current window and the windows after it (Upcoming): what
// to prefetch.
func (s *Table) Advance(js jobstream.Stream, epoch uint64, end int, windows int) []Use {
	st, moved := s.advance(js, epoch, end)
	if !moved {
		return nil
	}
	return s.upcoming(st, windows)
}

func (s *Table) advance(js jobstream.Stream, epoch uint64, end int) (st stream, moved bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	pruned := false
	for k, o := range s.streams {
		if now.Sub(o.lastSeen) > streamIdle && o.inflight.len() == 0 {
			delete(s.streams, k)
			pruned = true
		}
	}
	at := epochPos{epoch, end}
	_, known := s.streams[js]
	if !known && js.ImportanceJob() {
		// Each epoch of an importance job is a stream of its own (it
		// names its snapshot); the job's earlier epochs are over, and
		// their orders must not hold the cache.
		for k, o := range s.streams {
			if k.Imp.Job == js.Imp.Job && k.DS.Name == js.DS.Name && o.edge.epoch < epoch && o.inflight.len() == 0 {
				delete(s.streams, k)
				pruned = true
			}
		}
	}
	cur := s.streamLocked(js, at, now)
	switch {
	case !known:
		moved = true
	case cur.edge.before(at):
		cur.edge, moved = at, true
	case now.Sub(cur.lastSeen) > 30*time.Second:
		// A job resumed from an earlier point; follow it.
		cur.edge, moved = at, true
	}
	cur.lastSeen = now
	cur.rateLocked(cur.edge, now, moved)
	if pruned {
		s.turns.admit(s.streams, now)
		s.turnsMovedLocked() // publishes
	} else {
		s.refreshLocked(cur)
	}
	return *cur, moved
}

// Use is a chunk some epoch of a stream will need.
type Use struct {
	Stream jobstream.Stream
	Chunk  int
	Epoch  uint64
}

// upcoming lists the chunks of the windows a stream needs next that this
// node reads itself: the rest of its current window and the next ahead
// windows, continuing into the next epoch at the boundary, in the order
// they will be needed. A schedule's component (jobstream.Pace) whose phase
// ahead reads it faster lists, beyond those, the windows it reaches in
// the time they take at its pace now (at most maxPacedWindows in all): a
// source whose weight jumps at a switch has the windows its first steps
// after the switch read listed before it, not one window at its old pace.
func (s *Table) upcoming(st stream, ahead int) []Use {
	var out []Use
	// The epochs the stream holds first (st is a copy: what it holds
	// more is dropped): the memo tables hold fewer epochs than a mixture
	// of many sources has streams.
	e, err := st.order(s.orders, st.edge.epoch)
	if err != nil || e.NumSamples() == 0 {
		return nil
	}
	edge := min(st.edge.pos, e.NumSamples()-1)
	w := e.WindowOf(edge)
	epoch := st.edge.epoch
	// budget is what the windows listed by count span, in samples at
	// the pace now; past them a window is listed while it begins within
	// that span at the paces ahead. done: samples of the epochs before
	// e's, counted from the edge.
	budget, done := -1, 0
	for i := 0; ; i++ {
		if w >= e.NumWindows() {
			if st.ImportanceJob() {
				return out // the next epoch's snapshot is not sealed yet
			}
			done += e.NumSamples()
			epoch++
			if e, err = st.order(s.orders, epoch); err != nil {
				return out
			}
			w = 0
		}
		if i > ahead {
			if st.Pace == nil || i >= maxPacedWindows {
				return out
			}
			if budget < 0 {
				budget = done + e.WindowStart(w) - edge
			}
			if st.Pace.Ahead(st.edge.epoch, edge, done+e.WindowStart(w)-edge) >= float64(budget) {
				return out
			}
		}
		for _, c := range e.WindowChunks(w) {
			if s.local(st.DS, c) {
				out = append(out, Use{st.Stream, c, epoch})
			}
		}
		w++
	}
}

// maxPacedWindows bounds the windows upcoming lists for a component
// whose pace rises ahead: the work of a request, and the chunks queued.
const maxPacedWindows = 64
