package schedule

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/evict"
	"github.com/brandgw/brand/internal/order"
)

// Bounds on the job streams the schedule follows. A stream that sends no
// request for streamIdle is forgotten and its chunks stop counting as
// needed. At most maxStreams are followed: a new stream beyond that
// displaces the one seen longest ago, so a flood of distinct seeds costs a
// bounded amount of work per window change, not per stream ever seen.
const (
	streamIdle = 2 * time.Minute
	maxStreams = 64
)

// The pace of a stream is learnt from its requests. Until a stream has
// shown its own, it is taken to move as the median of the others, or at
// these defaults when there are none (a lone stream's pace changes no
// choice: only the order of its own uses matters).
const (
	defaultRate = 1e-5 // samples per ns: 10,000 a second
	// rateSpan is the least time over which the leading edge's progress
	// is measured: requests of one global batch arrive together.
	rateSpan = 50 * time.Millisecond
)

// Never is the next-use distance of a chunk that no followed stream needs.
const Never = evict.Never

// epochPos is a position in a stream's sequence of epochs.
type epochPos struct {
	epoch uint64
	pos   int
}

func (a epochPos) before(b epochPos) bool {
	return a.epoch < b.epoch || (a.epoch == b.epoch && a.pos < b.pos)
}

// stream is a job stream's progress: its leading edge (just past the
// furthest batch requested), which prefetch runs ahead of, and the batches
// still being served, whose chunks must count as needed until they are
// pinned: next use is measured from the oldest of them.
//
// A client that keeps several batches in flight sends them at once, and
// they can reach the gateway out of order: the batch before the leading
// edge may not have arrived yet when a prefetch looks for room. So once a
// stream has shown such lateness, next use is measured from further back:
// the lateness seen, plus one global batch.
type stream struct {
	order.Stream
	edge     epochPos
	lastSeen time.Time
	inflight map[epochPos]int // start positions of batches being served
	// lag is how far behind the leading edge batches have arrived, in
	// samples: the largest lateness seen, decaying slowly so that a
	// client that stops reordering is eventually trusted again.
	lag int
	// margin is one global batch (batch size × world), in samples.
	margin int
	// origin is the window start next use was last measured from (see
	// Schedule.originOf); the use table is rebuilt when it changes.
	origin epochPos
	// held keeps the orders of the few epochs around the stream's
	// position, so that rebuilding the use table for every stream does
	// not go to the shared memo, which a flood of streams would cycle
	// (it holds 64 epochs) and make every rebuild recompute orders.
	held      [3]*order.Epoch
	heldEpoch [3]uint64

	// The stream's pace, in the schedule's time frame. gap is how long
	// the job takes between one batch served and its next request (ns,
	// a moving average; its think time, 0 for a job that reads as fast
	// as it is served); rate is how fast its leading edge moves (samples
	// per ns), measured from (anchorAt, anchorPos) once rateSpan has
	// passed. 0: not known yet.
	began      map[epochPos]int64 // when each batch in flight began
	lastFinish time.Time
	gap        float64
	rate       float64
	anchorAt   time.Time
	anchorPos  int64
	weight     float64
	// clock publishes when the stream will next need the chunks of its
	// current window, for the use table to read between rebuilds.
	clock *clock

	// Turns (turn.go): whether the stream takes turns (its batches come
	// from this node's clients), holds one now, or waits for one since
	// waitSince.
	turned    bool
	active    bool
	waitSince time.Time
	waitSeq   uint64 // its place in the line
}

// clock is what a use table reads of a stream between rebuilds: when the
// stream will next need the chunks of the window it is in. Every request
// and every batch served moves it, so that those chunks — all needed by
// the stream's next batch — rank by which stream will be served first,
// without a rebuild per request:
//
//   - a stream with batches in flight needs them now: its key is when the
//     oldest of those began, which is the order the cache's queue serves
//     them in;
//   - a stream with none expects its next request its gap after its last
//     batch was served, weighted; a gateway serving jobs that read as
//     fast as they are served thus keeps the windows of the jobs whose
//     turn comes next and gives up first the window of the job served
//     last, as Belady's rule does with their merged trace;
//   - a stream later than expected is expected again twice as late as it
//     is (lateFactor), so that the window of a job that stopped reading
//     drifts out of the cache.
type clock struct {
	inflight atomic.Bool
	oldest   atomic.Int64  // when the oldest batch in flight began
	next     atomic.Int64  // when the next request is expected, with none in flight
	weight   atomic.Uint64 // float64 bits, > 0
}

// key is the eviction key, at now, of a chunk this stream's next batch
// needs.
func (c *clock) key(now int64) int64 {
	if c.inflight.Load() {
		return c.oldest.Load()
	}
	rel := c.next.Load() - now
	if rel < 0 {
		rel = -lateFactor * rel
	}
	return now + int64(float64(rel)/math.Float64frombits(c.weight.Load()))
}

// lateFactor is how much later again than it already is a late stream is
// expected: a job that paused is most likely to resume soon, one that has
// been silent for long most likely ended, and its chunks should leave the
// cache at the pace its silence grows.
const lateFactor = 2

// absPos is an epoch position counted from the start of epoch 0.
func (st *stream) absPos(p epochPos) int64 {
	return int64(p.epoch)*int64(st.DS.Index.NumSamples()) + int64(p.pos)
}

// order returns the order of one epoch of the stream, from the few it
// holds or from the shared memo, and holds it.
func (st *stream) order(o *order.Orders, epoch uint64) (*order.Epoch, error) {
	for i, e := range st.held {
		if e != nil && st.heldEpoch[i] == epoch {
			return e, nil
		}
	}
	e, err := o.Epoch(st.Stream, epoch)
	if err != nil {
		return nil, err
	}
	// Replace the held epoch furthest from this one.
	far, dist := 0, uint64(0)
	for i, h := range st.held {
		if h == nil {
			far = i
			break
		}
		d := max(st.heldEpoch[i], epoch) - min(st.heldEpoch[i], epoch)
		if d > dist {
			far, dist = i, d
		}
	}
	st.held[far], st.heldEpoch[far] = e, epoch
	return e, nil
}

// position returns the position next use is measured from: the start of
// the oldest batch in flight or, if the stream's batches arrive out of
// order, the leading edge less their lag and a batch, whichever is
// earlier; else the leading edge. The position may be negative: that far
// before the end of the previous epoch.
func (st *stream) position() epochPos {
	p := st.edge
	if st.lag > 0 {
		p.pos -= st.lag + st.margin
	}
	for ip := range st.inflight {
		if ip.before(p) {
			p = ip
		}
	}
	return p
}

// Schedule follows the job streams' positions and, from the seeded order,
// knows when every chunk will next be needed. It publishes that as an
// immutable use table, rebuilt only when a stream crosses a window
// boundary, starts or ends, so that the cache policy (which runs under the
// cache's lock) and the prefetcher read distances without computing
// anything or taking the schedule's lock.
type Schedule struct {
	orders *order.Orders
	// capacity is the cache's, in bytes: prefetch reads only what the
	// cache can keep until it is used (UseTable.Prefetchable).
	capacity int64
	// local reports whether this node reads chunk c of ds from the store
	// itself: on a cluster a node prefetches only those (the chunks it
	// owns, or stands in for while their owner is down); other nodes'
	// chunks come from them.
	local func(ds *catalog.Dataset, c int) bool
	clock func() time.Time
	zero  time.Time // the origin of the schedule's time frame

	mu      sync.Mutex
	streams map[order.Stream]*stream
	gen     uint64

	uses atomic.Pointer[UseTable]
	// publishCost is how long the last table took to build (wall time):
	// rebuilds for a late stream are spaced by a multiple of it.
	publishCost time.Duration
	// ticks counts requests: a policy re-keys the chunks of the streams'
	// current windows when it moved (their clocks did).
	ticks atomic.Uint64

	// Turns (turn.go): the longest a batch waits for one, a channel
	// closed and replaced whenever turns move, and figures.
	maxTurnWait     time.Duration
	turns           chan struct{}
	waitSeq         uint64 // the last place in the line given
	waited, overdue atomic.Int64
}

// Config configures a Schedule.
type Config struct {
	// Orders computes the streams' orders.
	Orders *order.Orders
	// Local tells which chunks this node reads itself (see Upcoming).
	Local func(ds *catalog.Dataset, c int) bool
	// Capacity is the cache's, in bytes.
	Capacity int64
	// MaxTurnWait bounds a batch's wait for its stream's turn (turn.go);
	// 0 means no turns are taken: every batch goes ahead at once.
	MaxTurnWait time.Duration
}

// New returns a schedule.
func New(c Config) *Schedule {
	s := &Schedule{orders: c.Orders, local: c.Local, capacity: c.Capacity, maxTurnWait: c.MaxTurnWait, clock: time.Now,
		streams: map[order.Stream]*stream{}, turns: make(chan struct{})}
	s.zero = s.clock()
	return s
}

// nowAt is t in the schedule's time frame: ns since its zero, never
// negative.
func (s *Schedule) nowAt(t time.Time) int64 { return max(t.Sub(s.zero).Nanoseconds(), 0) }

// now is the present in the schedule's time frame.
func (s *Schedule) now() int64 { return s.nowAt(s.clock()) }

// Ticks counts the requests the schedule has seen; each moves a stream's
// clock.
func (s *Schedule) Ticks() uint64 { return s.ticks.Load() }

// UseTable is, per dataset version and chunk, when some followed stream
// will next need the chunk, in the schedule's time frame (ns since its
// zero): every stream's position converted to time by its own measured
// pace and divided by its weight, the soonest of them; Never when no
// stream needs the chunk in this epoch or the next. Evicting the chunk
// with the largest key is Belady's rule over the merged future of every
// job, comparing a fast job's and a slow job's uses as the times they
// will happen, not as positions in their own orders.
//
// Chunks of the windows streams are in now are needed by their next
// requests, whose times move with every request: their keys are read
// from the streams' clocks (hot), the rest are fixed when the table is
// built, once a stream crosses into another window.
type UseTable struct {
	gen      uint64
	built    int64                    // when, in the schedule's frame
	now      func() int64             // the schedule's clock
	datasets map[string][]datasetUses // by name: one per version in use
	// hot lists the chunks of some stream's current window, for a policy
	// to re-key when the streams' clocks move.
	hot []chunkcache.Key
	// hotFits reports whether the hot chunks fit in the cache together;
	// horizon is the latest key of the other chunks that fit beside them,
	// soonest first (Prefetchable). -1: none.
	hotFits bool
	horizon int64
	// crossing is when the first stream is expected to leave its current
	// window (Displaces); shared, whether several streams use the cache.
	crossing int64
	shared   bool
	// straddle: some stream served now is in more than one window (its
	// readers straddle a window boundary); Displaces.
	straddle bool
}

type datasetUses struct {
	ds   *catalog.Dataset
	dist []int64 // chunk ID → key of its next use past the current windows
	// hot are, per chunk of some stream's current window, the clocks of
	// those streams.
	hot map[int32][]*clock
	// weight is, per chunk, the largest importance weight (over the mean)
	// an importance stream gives it; nil without importance streams.
	weight []float32
}

// Distance is k's next-use key in t, now.
func (t *UseTable) Distance(k chunkcache.Key) int64 {
	if t == nil {
		return Never
	}
	return t.DistanceAt(k, t.Now())
}

// Now is the present in the table's time frame (its schedule's clock).
func (t *UseTable) Now() int64 {
	if t.now == nil {
		return t.built
	}
	return t.now()
}

// DistanceAt is k's next-use key in t at now (in the schedule's frame): a
// policy re-keying many chunks reads the clock once.
func (t *UseTable) DistanceAt(k chunkcache.Key, now int64) int64 {
	if t == nil {
		return Never
	}
	for _, du := range t.datasets[k.Dataset] {
		c, ok := du.ds.ChunkOf(k)
		if !ok {
			continue
		}
		d := du.dist[c]
		for _, ck := range du.hot[int32(c)] {
			d = min(d, ck.key(now))
		}
		if d == Never && du.weight != nil {
			// Importance-aware eviction: of the chunks no schedule needs,
			// the lightest go first and the heaviest stay, to be drawn
			// early in the next epoch (docs/importance.md). They still go
			// before any chunk a schedule needs. The planner keys them by
			// the same rule.
			d = evict.FarKey(du.weight[c])
		}
		return d
	}
	return Never
}

// farFuture bounds the distances of chunks no schedule needs: Never, less
// at most an importance weight's worth (UseTable.Distance).
const farFuture = Never - 1<<40

// Needed reports whether a distance is a scheduled use.
func Needed(d int64) bool { return d < farFuture }

// Prefetchable reports whether reading k ahead cannot be undone before it
// is used: k is among the chunks needed soonest — the hot ones first —
// that the cache holds together. A chunk beyond that would be evicted
// for a sooner one before its use (by Belady's rule, which the policy
// follows), a read wasted and a sooner chunk displaced to make it.
func (t *UseTable) Prefetchable(k chunkcache.Key) bool {
	if t == nil || !t.hotFits {
		return false
	}
	for _, du := range t.datasets[k.Dataset] {
		c, ok := du.ds.ChunkOf(k)
		if !ok {
			continue
		}
		if len(du.hot[int32(c)]) > 0 {
			return true
		}
		return du.dist[c] <= t.horizon
	}
	return false
}

// Displaces reports whether a prefetch of a chunk needed at need (its
// key), which takes lead to read (ns: the prefetcher's measure), may
// evict a chunk some stream still needs, later. Only if it is needed by
// the time the first stream leaves its window: until then every chunk a
// stream's current window holds is needed, and afterwards the chunks of
// the window left are the better victims (needed only in a later window,
// or epoch), which a read made earlier would have passed over for a chunk
// needed sooner than they are. A prefetch needed later takes only room
// that is free or that no stream needs — unless it is needed less than
// lead after that crossing: a read begun only once the better victims are
// free would come too late, and the batch that needs the chunk would wait
// for it. That is the case of streams that leave their windows at nearly
// the same time, as a mixture's components of equal weight and chunk
// sizes do: the second component's next window would be read on demand,
// every window (measured at a cache of a quarter of the dataset, two
// ranks, samples of 10 KiB: 139 of 297 loads on demand, against 8 of 297
// for one dataset; docs/benchmarks.md, "The mixture's prefetch").
//
// With several streams, prefetch takes only such room: the first stream
// to leave its window is known only as well as the streams' measured
// paces, and a read made for one stream before another's window ends
// passes over that window's chunks, the better victims, for chunks some
// stream needs (in docs/benchmarks.md, "Several jobs", that costs a tenth
// more reads at four jobs).
//
// Nor while a stream's readers straddle two windows (its ranks read
// concurrently, the trailing one still in a window the leading one has
// left): that window's chunks become the better victims as soon as the
// trailing reader leaves it, so a read made before then passes over them
// for chunks needed later. Measured at a cache of a quarter of the
// dataset, two ranks (docs/benchmarks.md, "Mixing two datasets"): one
// dataset read 1.10–1.18 of the optimum's bytes with such reads and
// 1.04–1.06 without them, a two-dataset mixture 1.07–1.09 and 1.04–1.06.
func (t *UseTable) Displaces(need, lead int64) bool {
	return t != nil && !t.shared && !t.straddle && need-max(lead, 0) <= t.crossing
}

// Hot lists the chunks of the windows streams are in now.
func (t *UseTable) Hot() []chunkcache.Key {
	if t == nil {
		return nil
	}
	return t.hot
}

// Table returns the latest use table.
func (s *Schedule) Table() *UseTable { return s.uses.Load() }

// Distance is k's next-use distance in the latest table.
func (s *Schedule) Distance(k chunkcache.Key) int64 { return s.Table().Distance(k) }

// streamLocked returns the stream of js, following it if it is new.
func (s *Schedule) streamLocked(js order.Stream, at epochPos, now time.Time) *stream {
	st, ok := s.streams[js]
	if ok {
		return st
	}
	if len(s.streams) >= maxStreams {
		var oldest *stream
		for _, o := range s.streams {
			if oldest == nil || o.lastSeen.Before(oldest.lastSeen) {
				oldest = o
			}
		}
		delete(s.streams, oldest.Stream)
	}
	st = &stream{Stream: js, edge: at, lastSeen: now, inflight: map[epochPos]int{}, began: map[epochPos]int64{}, origin: epochPos{pos: -1}, weight: 1, clock: &clock{}}
	st.clock.weight.Store(math.Float64bits(1))
	st.clock.next.Store(s.nowAt(now))
	s.streams[js] = st
	return st
}

// Inflight is a batch registered with Begin, to be passed to Finish.
type Inflight struct {
	js order.Stream
	at epochPos
}

// MaxStreamInflight bounds the batches one job stream may have being
// served at once. A job reads a few batches ahead per rank; one that sends
// hundreds at once would fill the queue for cache room (256 requests)
// alone and starve every other job, so beyond this it is told to back off.
const MaxStreamInflight = 64

// ErrStreamBusy is Begin's answer to a stream over MaxStreamInflight.
var ErrStreamBusy = fmt.Errorf("%w: this job has %d batches being served already; read fewer ahead", chunkcache.ErrBusy, MaxStreamInflight)

// Begin records that a batch starting at start is being served, so that
// the chunks it still has to pin keep counting as needed now, and moves
// the stream's clock (see clock).
// global is the job's global batch, batch size × world, in samples (0:
// unknown, as for a peer's request); weight is the job's (0 means 1). A
// stream with MaxStreamInflight batches in flight gets ErrStreamBusy
// instead.
func (s *Schedule) Begin(js order.Stream, epoch uint64, start, global int, weight float64) (Inflight, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := epochPos{epoch, start}
	now := s.clock()
	st := s.streamLocked(js, at, now)
	busy := 0
	for _, n := range st.inflight {
		busy += n
	}
	if busy >= MaxStreamInflight {
		return Inflight{}, ErrStreamBusy
	}
	st.lag -= st.lag / 64
	if epoch == st.edge.epoch && start < st.edge.pos {
		st.lag = max(st.lag, st.edge.pos-start)
	}
	if global > 0 {
		st.margin = global
	}
	if len(st.inflight) == 0 && !st.lastFinish.IsZero() {
		dt := float64(now.Sub(st.lastFinish))
		if st.gap == 0 {
			st.gap = max(dt, 1)
		} else {
			st.gap += (dt - st.gap) / 8
		}
	}
	if st.inflight[at] == 0 {
		st.began[at] = s.nowAt(now)
	}
	st.inflight[at]++
	if weight <= 0 {
		weight = 1
	}
	st.weight = weight
	st.clock.weight.Store(math.Float64bits(weight))
	s.clockLocked(st, now)
	s.refreshLocked(st)
	return Inflight{js, at}, nil
}

// clockLocked publishes st's clock after its batches in flight changed.
func (s *Schedule) clockLocked(st *stream, now time.Time) {
	if len(st.inflight) > 0 {
		oldest := int64(math.MaxInt64)
		for _, b := range st.began {
			oldest = min(oldest, b)
		}
		st.clock.oldest.Store(oldest)
		st.clock.inflight.Store(true)
	} else {
		gap := st.gap
		if gap == 0 {
			gap = s.medianLocked(func(o *stream) float64 { return o.gap }, 0)
		}
		st.clock.next.Store(s.nowAt(now) + int64(gap))
		st.clock.inflight.Store(false)
	}
	s.ticks.Add(1)
}

// medianLocked is the median of f over the streams where it is known
// (> 0), or def.
func (s *Schedule) medianLocked(f func(*stream) float64, def float64) float64 {
	var vs []float64
	for _, o := range s.streams {
		if v := f(o); v > 0 {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return def
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// rateLocked records that st's leading edge is at p at now, and updates
// its rate once rateSpan has passed since the last measure.
func (st *stream) rateLocked(p epochPos, now time.Time, moved bool) {
	pos := st.absPos(p)
	dt := now.Sub(st.anchorAt)
	switch {
	case st.anchorAt.IsZero() || pos < st.anchorPos || dt > streamIdle:
		st.anchorAt, st.anchorPos = now, pos // first, resumed earlier, or back from a pause
	case moved && dt >= rateSpan:
		r := float64(pos-st.anchorPos) / float64(dt)
		if st.rate == 0 {
			st.rate = r
		} else {
			st.rate += (r - st.rate) / 4
		}
		st.anchorAt, st.anchorPos = now, pos
	}
}

// Finish ends what Begin started.
func (s *Schedule) Finish(f Inflight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.streams[f.js]
	if !ok {
		return
	}
	n, ok := st.inflight[f.at]
	if !ok {
		return // finished already
	}
	if n <= 1 {
		delete(st.inflight, f.at)
		delete(st.began, f.at)
	} else {
		st.inflight[f.at] = n - 1
	}
	now := s.clock()
	if len(st.inflight) == 0 {
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
// stream's current window and the ahead windows after it (Upcoming): what
// to prefetch.
func (s *Schedule) Advance(js order.Stream, epoch uint64, end int, ahead int) []Use {
	st, moved := s.advance(js, epoch, end)
	if !moved {
		return nil
	}
	return s.upcoming(st, ahead)
}

func (s *Schedule) advance(js order.Stream, epoch uint64, end int) (st stream, moved bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	pruned := false
	for k, o := range s.streams {
		if now.Sub(o.lastSeen) > streamIdle && len(o.inflight) == 0 {
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
			if k.Imp.Job == js.Imp.Job && k.DS.Name == js.DS.Name && o.edge.epoch < epoch && len(o.inflight) == 0 {
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
		s.admitLocked(now)
		s.turnsMovedLocked() // publishes
	} else {
		s.refreshLocked(cur)
	}
	return *cur, moved
}

// originOf is the window start that next use is measured from for st: the
// start of the window holding st's position, in that position's epoch
// (the previous one if the position is negative).
func (s *Schedule) originOf(st *stream) (epochPos, *order.Epoch, bool) {
	p := st.position()
	if p.pos < 0 {
		if p.epoch == 0 {
			p.pos = 0
		} else if prev, err := st.order(s.orders, p.epoch-1); err == nil {
			p = epochPos{p.epoch - 1, max(prev.NumSamples()+p.pos, 0)}
		}
	}
	e, err := st.order(s.orders, p.epoch)
	if err != nil || e.NumSamples() == 0 {
		return epochPos{}, nil, false
	}
	p.pos = e.WindowStart(e.WindowOf(min(p.pos, e.NumSamples()-1)))
	return p, e, true
}

// refreshLocked republishes the use table if st's origin moved, or if
// the streams are late (lateLocked).
func (s *Schedule) refreshLocked(st *stream) {
	if o, _, ok := s.originOf(st); ok && o != st.origin {
		if s.passTurnLocked(st, s.clock()) {
			s.turnsMovedLocked() // publishes
			return
		}
		s.publishLocked()
		return
	}
	if s.lateLocked() {
		s.publishLocked()
	}
}

// Rebuilds of the use table for late streams (lateLocked) are at
// least lateRebuildGap apart, and at least lateRebuildCost times the last
// build's duration, so that a stream stalled for long costs at most about
// a twentieth of a core in rebuilds, however many chunks its datasets
// have.
const (
	lateRebuildGap  = 5 * time.Millisecond
	lateRebuildCost = 20
)

// lateLocked reports whether the use table is to be rebuilt because the
// streams are late: past the time the table expected the first of them
// to leave its window (UseTable.crossing), so that the uses after that
// window are keyed in the past. A batch the late stream begins now would
// otherwise rank its own window's chunks, keyed by when it began, after
// the next window's, and a load would evict the chunks needed first. Rebuilt from now, every
// later use is keyed after the present again, in the order the streams
// will need them. (Keying each overdue chunk by its own lateness, as
// this once did, kept the current window first but inverted the rest:
// the window overdue longest — the next one — was keyed furthest, and
// evicted first.)
func (s *Schedule) lateLocked() bool {
	t := s.uses.Load()
	if t == nil || t.crossing == Never {
		return false
	}
	now := s.now()
	return now > t.crossing && now-t.built >= max(int64(lateRebuildGap), lateRebuildCost*int64(s.publishCost))
}

// weightKey names an importance job on a dataset.
type weightKey struct{ dataset, job string }

// publishLocked builds and publishes the use table from every stream's
// origin, edge and pace: O(streams × chunks), once per window a stream
// crosses, plus a sort of the needed chunks for the prefetch horizon.
func (s *Schedule) publishLocked() {
	began := time.Now()
	defer func() { s.publishCost = time.Since(began) }()
	s.gen++
	now := s.now()
	t := &UseTable{gen: s.gen, built: now, now: s.now, datasets: map[string][]datasetUses{}, crossing: Never}
	// The weights that keep chunks are those of each importance job's
	// latest stream: every epoch of such a job is a stream of its own
	// (it names its snapshot), and the streams of its past epochs, still
	// followed for a while, would otherwise mix their snapshots' rankings
	// into what the cache keeps for the next epoch.
	latest := map[weightKey]*stream{}
	for _, st := range s.streams {
		if !st.ImportanceJob() {
			continue
		}
		k := weightKey{st.DS.Name, st.Imp.Job}
		if l, ok := latest[k]; !ok || l.edge.before(st.edge) {
			latest[k] = st
		}
	}
	rate := s.medianLocked(func(o *stream) float64 { return o.rate }, defaultRate)
	t.shared = s.sharedLocked()
	// Streams that hold a turn (turn.go) first: they are served now, and
	// the first of them to leave its window is when a waiting stream's
	// turn is expected to come. A waiting stream's uses are keyed from
	// then.
	var waiting []*stream
	for _, st := range s.streams {
		if st.waiting() {
			waiting = append(waiting, st)
			continue
		}
		s.publishStream(t, st, now, true, rate, latest)
	}
	slices.SortFunc(waiting, func(a, b *stream) int { return cmp.Compare(a.waitSeq, b.waitSeq) })
	base := t.crossing
	if base == Never {
		base = now
	}
	for i, st := range waiting {
		s.publishStream(t, st, base+int64(i), false, rate, latest)
	}
	t.finish(s.capacity)
	s.uses.Store(t)
}

// publishStream adds st's uses to t, its times counted from base: now
// for a stream served now, whose current windows are hot (read from its
// clock); when its turn is expected for a stream that waits, whose
// current windows are then keyed as its next ones are.
func (s *Schedule) publishStream(t *UseTable, st *stream, base int64, served bool, rate float64, latest map[weightKey]*stream) {
	origin, e, ok := s.originOf(st)
	st.origin = origin
	if !ok {
		return
	}
	// A stream later than its clock expects (a job that paused, or
	// ended) is expected to go on as late again as it already is
	// (clock.key): its later uses move out with it.
	if !st.clock.inflight.Load() {
		if late := s.now() - st.clock.next.Load(); late > 0 {
			base += lateFactor * late
		}
	}
	// An importance stream's next epoch is drawn from a snapshot not
	// sealed yet: its uses are not projected; the chunks' weights stand
	// in for them (UseTable.Distance).
	var next *order.Epoch
	if !st.ImportanceJob() {
		var err error
		if next, err = st.order(s.orders, origin.epoch+1); err != nil {
			return
		}
	}
	du := t.usesOf(st.DS)
	if e.Weight != nil && latest[weightKey{st.DS.Name, st.Imp.Job}] == st {
		if du.weight == nil {
			du.weight = make([]float32, len(du.dist))
		}
		for c, w := range e.Weight[:len(du.weight)] {
			du.weight[c] = max(du.weight[c], w)
		}
	}
	first, last, edge := st.hotWindows(e, origin)
	// Time per sample of this stream, weighted.
	r := st.rate
	if r <= 0 {
		r = rate
	}
	perSample := 1 / (r * st.weight)
	at := func(d int) int64 { return base + int64(float64(max(d, 0))*perSample) }
	if served {
		if first < last {
			t.straddle = true
		}
		if last+1 < int32(e.NumWindows()) {
			t.crossing = min(t.crossing, at(e.WindowStart(int(last+1))-edge))
		} else {
			t.crossing = min(t.crossing, at(left(e, edge)))
		}
	}
	cur := e.ChunkWindow[0:len(du.dist)]
	rest := left(e, edge)
	for c, cw := range cur {
		var d int
		switch {
		case cw >= first && cw <= last:
			if served {
				du.hot[int32(c)] = append(du.hot[int32(c)], st.clock)
				continue
			}
			d = 0
		case cw > last:
			d = e.WindowStart(int(cw)) - edge
		case next != nil && next.ChunkWindow[c] >= 0:
			// Read earlier in this epoch, or not at all: next needed in
			// the next epoch, if that reads it.
			d = rest + next.WindowStart(int(next.ChunkWindow[c]))
		default:
			continue
		}
		du.dist[c] = min(du.dist[c], at(d))
	}
}

// hotWindows returns the windows of e (the order of origin's epoch) that
// st is in now — from the origin's to the leading edge's, to the epoch's
// end if the edge is past it — and the edge's position in e (its end if
// the edge is in a later epoch), from which later uses are measured.
func (st *stream) hotWindows(e *order.Epoch, origin epochPos) (first, last int32, edge int) {
	first = int32(e.WindowOf(min(origin.pos, e.NumSamples()-1)))
	last = int32(e.NumWindows() - 1)
	edge = st.edge.pos
	if st.edge.epoch == origin.epoch {
		last = int32(e.WindowOf(min(edge, e.NumSamples()-1)))
	} else {
		edge = e.NumSamples()
	}
	return first, max(first, last), edge
}

// finish lists the hot chunks and finds the prefetch horizon: the hot
// chunks first, then the others soonest first, as many as fit in
// capacity bytes.
func (t *UseTable) finish(capacity int64) {
	type use struct {
		key  int64
		size int64
	}
	var hotBytes int64
	var later []use
	for _, list := range t.datasets {
		for _, du := range list {
			for c := range du.hot {
				t.hot = append(t.hot, du.ds.ChunkKey(int(c)))
				hotBytes += du.ds.Index.Chunk(int(c)).Size
			}
			for c, d := range du.dist {
				if d < farFuture && len(du.hot[int32(c)]) == 0 {
					later = append(later, use{d, du.ds.Index.Chunk(c).Size})
				}
			}
		}
	}
	t.hotFits = hotBytes <= capacity
	t.horizon = -1
	if !t.hotFits {
		return
	}
	slices.SortFunc(later, func(a, b use) int { return int(min(max(a.key-b.key, -1), 1)) })
	// Chunks of one window share a key; a window that does not fit
	// whole is left out whole.
	room, below := capacity-hotBytes, int64(-1) // below: the last key before the current run
	for i, u := range later {
		if i > 0 && u.key != later[i-1].key {
			below = later[i-1].key
		}
		if u.size > room {
			t.horizon = below
			return
		}
		room -= u.size
		t.horizon = u.key
	}
}

// left is the samples of e from pos to its end.
func left(e *order.Epoch, pos int) int { return max(e.NumSamples()-pos, 0) }

// usesOf returns the table's entry for a dataset version, added if new.
func (t *UseTable) usesOf(ds *catalog.Dataset) *datasetUses {
	list := t.datasets[ds.Name]
	for i := range list {
		if list[i].ds == ds {
			return &t.datasets[ds.Name][i]
		}
	}
	du := datasetUses{ds: ds, dist: make([]int64, len(ds.Counts)), hot: map[int32][]*clock{}}
	for c := range du.dist {
		du.dist[c] = Never
	}
	t.datasets[ds.Name] = append(list, du)
	return &t.datasets[ds.Name][len(list)]
}

// Use is a chunk some epoch of a stream will need.
type Use struct {
	Stream order.Stream
	Chunk  int
	Epoch  uint64
}

// upcoming lists the chunks of the windows a stream needs next that this
// node reads itself: the rest of its current window and the next ahead
// windows, continuing into the next epoch at the boundary, in the order
// they will be needed.
func (s *Schedule) upcoming(st stream, ahead int) []Use {
	var out []Use
	e, err := s.orders.Epoch(st.Stream, st.edge.epoch)
	if err != nil || e.NumSamples() == 0 {
		return nil
	}
	w := e.WindowOf(min(st.edge.pos, e.NumSamples()-1))
	epoch := st.edge.epoch
	for range ahead + 1 {
		if w >= e.NumWindows() {
			if st.ImportanceJob() {
				return out // the next epoch's snapshot is not sealed yet
			}
			epoch++
			if e, err = s.orders.Epoch(st.Stream, epoch); err != nil {
				return out
			}
			w = 0
		}
		for _, c := range e.WindowChunks(w) {
			if s.local(st.DS, c) {
				out = append(out, Use{st.Stream, c, epoch})
			}
		}
		w++
	}
	return out
}
