package usetable

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/job/jobstream"
	"github.com/brandgw/brand/shuffle"
)

// Bounds on the job streams the use table follows. A stream that sends no
// request for streamIdle is forgotten and its chunks stop counting as
// needed. At most maxStreams are followed: a new stream beyond that
// displaces the one seen longest ago, so a flood of distinct seeds costs a
// bounded amount of work per window change, not per stream ever seen.
// The bound follows a mixture of the most components whole, beside 64
// other streams: at 64 in all, a mixture of 100 sources displaced a
// component stream at nearly every part, so that the use table forgot its
// pace and its chunks' uses and made it anew (issue 43).
const (
	streamIdle = 2 * time.Minute
	maxStreams = shuffle.MaxMixComponents + 64
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
	jobstream.Stream
	edge     epochPos
	lastSeen time.Time
	inflight inflight // the batches being served
	// lag is how far behind the leading edge batches have arrived, in
	// samples: the largest lateness seen, decaying slowly so that a
	// client that stops reordering is eventually trusted again.
	lag int
	// margin is one global batch (batch size × world), in samples.
	margin int
	// origin is the window start next use was last measured from (see
	// Table.originOf); the use table is rebuilt when it changes.
	origin epochPos
	// held keeps the orders of the few epochs around the stream's
	// position, so that rebuilding the use table for every stream does
	// not go to the shared memo, which a flood of streams would cycle
	// (it holds 64 epochs) and make every rebuild recompute orders.
	held      [3]*jobstream.EpochOrder
	heldEpoch [3]uint64

	// The stream's pace, in the use table's time frame. gap is how long
	// the job takes between one batch served and its next request (ns,
	// a moving average; its think time, 0 for a job that reads as fast
	// as it is served); rate is how fast its leading edge moves (samples
	// per ns), measured from (anchorAt, anchorPos) once rateSpan has
	// passed. 0: not known yet.
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

// streamLocked returns the stream of js, following it if it is new.
func (s *Table) streamLocked(js jobstream.Stream, at epochPos, now time.Time) *stream {
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
	st = &stream{Stream: js, edge: at, lastSeen: now, inflight: newInflight(), origin: epochPos{pos: -1}, weight: 1, clock: &clock{}}
	st.clock.weight.Store(math.Float64bits(1))
	st.clock.next.Store(s.nowAt(now))
	s.streams[js] = st
	return st
}

// absPos is an epoch position counted from the start of epoch 0.
func (st *stream) absPos(p epochPos) int64 {
	return int64(p.epoch)*int64(st.DS.Index.NumSamples()) + int64(p.pos)
}

// order returns the order of one epoch of the stream, from the few it
// holds or from the shared memo, and holds it.
func (st *stream) order(o Orders, epoch uint64) (*jobstream.EpochOrder, error) {
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
	if ip, ok := st.inflight.oldest(); ok && ip.before(p) {
		p = ip
	}
	return p
}

// originOf is the window start that next use is measured from for st: the
// start of the window holding st's position, in that position's epoch
// (the previous one if the position is negative).
func (s *Table) originOf(st *stream) (epochPos, *jobstream.EpochOrder, bool) {
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

// hotWindows returns the windows of e (the order of origin's epoch) that
// st is in now — from the origin's to the leading edge's, to the epoch's
// end if the edge is past it — and the edge's position in e (its end if
// the edge is in a later epoch), from which later uses are measured.
func (st *stream) hotWindows(e *jobstream.EpochOrder, origin epochPos) (first, last int32, edge int) {
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

// left is the samples of e from pos to its end.
func left(e *jobstream.EpochOrder, pos int) int { return max(e.NumSamples()-pos, 0) }

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

// clockLocked publishes st's clock after its batches in flight changed.
func (s *Table) clockLocked(st *stream, now time.Time) {
	if oldest, ok := st.inflight.oldestBegan(); ok {
		st.clock.oldest.Store(oldest)
		st.clock.inflight.Store(true)
	} else {
		gap := st.gap
		if gap == 0 {
			gap = median(s.streams, func(o *stream) float64 { return o.gap }, 0)
		}
		st.clock.next.Store(s.nowAt(now) + int64(gap))
		st.clock.inflight.Store(false)
	}
	s.ticks.Add(1)
}

// median is the median of f over the streams where it is known (> 0),
// or def. The caller holds the streams' lock (Table.mu).
func median(streams map[jobstream.Stream]*stream, f func(*stream) float64, def float64) float64 {
	var vs []float64
	for _, o := range streams {
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
