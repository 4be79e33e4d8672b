package gateway

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/chunkcache"
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

// never is the next-use distance of a chunk that no followed stream needs.
const never = math.MaxInt64

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
	jobStream
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
	// schedule.originOf); the use table is rebuilt when it changes.
	origin epochPos
	// held keeps the orders of the few epochs around the stream's
	// position, so that rebuilding the use table for every stream does
	// not go to the shared memo, which a flood of streams would cycle
	// (it holds 64 epochs) and make every rebuild recompute orders.
	held      [3]*epochOrder
	heldEpoch [3]uint64
}

// order returns the order of one epoch of the stream, from the few it
// holds or from the shared memo, and holds it.
func (st *stream) order(o *orders, epoch uint64) (*epochOrder, error) {
	for i, e := range st.held {
		if e != nil && st.heldEpoch[i] == epoch {
			return e, nil
		}
	}
	e, err := o.epoch(st.jobStream, epoch)
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

// schedule follows the job streams' positions and, from the seeded order,
// knows when every chunk will next be needed. It publishes that as an
// immutable use table, rebuilt only when a stream crosses a window
// boundary, starts or ends, so that the cache policy (which runs under the
// cache's lock) and the prefetcher read distances without computing
// anything or taking the schedule's lock.
type schedule struct {
	orders *orders
	clock  func() time.Time

	mu      sync.Mutex
	streams map[jobStream]*stream
	gen     uint64

	uses atomic.Pointer[useTable]
}

func newSchedule(o *orders) *schedule {
	return &schedule{orders: o, clock: time.Now, streams: map[jobStream]*stream{}}
}

// useTable is, per dataset and chunk, the number of samples some followed
// stream will serve before it needs the chunk: 0 while the chunk's window
// is current, never when no stream needs it in this epoch or the next.
// Distances are measured from the start of each stream's current window,
// so they change only when a stream crosses into another window.
type useTable struct {
	gen      uint64
	datasets map[string]datasetUses
}

type datasetUses struct {
	ds   *loadedDataset
	dist []int64 // chunk ID → distance
	// weight is, per chunk, the largest importance weight (over the mean)
	// an importance stream gives it; nil without importance streams.
	weight []float32
}

// distance is k's next-use distance in t.
func (t *useTable) distance(k chunkcache.Key) int64 {
	if t == nil {
		return never
	}
	du, ok := t.datasets[k.Dataset]
	if !ok {
		return never
	}
	c, ok := du.ds.chunkOf(k)
	if !ok {
		return never
	}
	d := du.dist[c]
	if d == never && du.weight != nil && du.weight[c] > 0 {
		// Importance-aware eviction: of the chunks no schedule needs,
		// the lightest go first and the heaviest stay, to be drawn
		// early in the next epoch (docs/importance.md). They still go
		// before any chunk a schedule needs.
		d -= 1 + int64(min(du.weight[c], 1<<20)*(1<<16))
	}
	return d
}

// farFuture bounds the distances of chunks no schedule needs: never, less
// at most an importance weight's worth (useTable.distance).
const farFuture = never - 1<<40

// needed reports whether a distance is a scheduled use.
func needed(d int64) bool { return d < farFuture }

// table returns the latest use table.
func (s *schedule) table() *useTable { return s.uses.Load() }

// distance is k's next-use distance in the latest table.
func (s *schedule) distance(k chunkcache.Key) int64 { return s.table().distance(k) }

// streamLocked returns the stream of s, following it if it is new.
func (s *schedule) streamLocked(js jobStream, at epochPos, now time.Time) *stream {
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
		delete(s.streams, oldest.jobStream)
	}
	st = &stream{jobStream: js, edge: at, lastSeen: now, inflight: map[epochPos]int{}, origin: epochPos{pos: -1}}
	s.streams[js] = st
	return st
}

// inflight is a batch registered with begin, to be passed to finish.
type inflight struct {
	js jobStream
	at epochPos
}

// maxStreamInflight bounds the batches one job stream may have being
// served at once. A job reads a few batches ahead per rank; one that sends
// hundreds at once would fill the queue for cache room (256 requests)
// alone and starve every other job, so beyond this it is told to back off.
const maxStreamInflight = 64

// errStreamBusy is begin's answer to a stream over maxStreamInflight.
var errStreamBusy = fmt.Errorf("%w: this job has %d batches being served already; read fewer ahead", chunkcache.ErrBusy, maxStreamInflight)

// begin records that a batch starting at start is being served, so that
// the chunks it still has to pin keep counting as needed now. global is
// the job's global batch, batch size × world, in samples. A stream with
// maxStreamInflight batches in flight gets errStreamBusy instead.
func (s *schedule) begin(js jobStream, epoch uint64, start, global int) (inflight, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := epochPos{epoch, start}
	st := s.streamLocked(js, at, s.clock())
	busy := 0
	for _, n := range st.inflight {
		busy += n
	}
	if busy >= maxStreamInflight {
		return inflight{}, errStreamBusy
	}
	st.lag -= st.lag / 64
	if epoch == st.edge.epoch && start < st.edge.pos {
		st.lag = max(st.lag, st.edge.pos-start)
	}
	st.margin = global
	st.inflight[at]++
	s.refreshLocked(st)
	return inflight{js, at}, nil
}

// finish ends what begin started.
func (s *schedule) finish(f inflight) {
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
	} else {
		st.inflight[f.at] = n - 1
	}
	s.refreshLocked(st)
}

// advance records that a stream served epoch positions up to end. It
// returns the stream's state after the update and whether it moved.
func (s *schedule) advance(js jobStream, epoch uint64, end int) (st stream, moved bool) {
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
	if !known && js.importanceJob() {
		// Each epoch of an importance job is a stream of its own (it
		// names its snapshot); the job's earlier epochs are over, and
		// their orders must not hold the cache.
		for k, o := range s.streams {
			if k.imp.job == js.imp.job && k.ds.name == js.ds.name && o.edge.epoch < epoch && len(o.inflight) == 0 {
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
	if pruned {
		s.publishLocked()
	} else {
		s.refreshLocked(cur)
	}
	return *cur, moved
}

// originOf is the window start that next use is measured from for st: the
// start of the window holding st's position, in that position's epoch
// (the previous one if the position is negative).
func (s *schedule) originOf(st *stream) (epochPos, *epochOrder, bool) {
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

// refreshLocked republishes the use table if st's origin moved.
func (s *schedule) refreshLocked(st *stream) {
	if o, _, ok := s.originOf(st); ok && o != st.origin {
		s.publishLocked()
	}
}

// publishLocked builds and publishes the use table from every stream's
// origin: O(streams × chunks), once per window a stream crosses.
func (s *schedule) publishLocked() {
	s.gen++
	t := &useTable{gen: s.gen, datasets: map[string]datasetUses{}}
	// The weights that keep chunks are those of each importance job's
	// latest stream: every epoch of such a job is a stream of its own
	// (it names its snapshot), and the streams of its past epochs, still
	// followed for a while, would otherwise mix their snapshots' rankings
	// into what the cache keeps for the next epoch.
	latest := map[weightKey]*stream{}
	for _, st := range s.streams {
		if !st.importanceJob() {
			continue
		}
		k := weightKey{st.ds.name, st.imp.job}
		if l, ok := latest[k]; !ok || l.edge.before(st.edge) {
			latest[k] = st
		}
	}
	for _, st := range s.streams {
		origin, e, ok := s.originOf(st)
		st.origin = origin
		if !ok {
			continue
		}
		// An importance stream's next epoch is drawn from a snapshot not
		// sealed yet: its uses are not projected; the chunks' weights
		// stand in for them (useTable.distance).
		var next *epochOrder
		if !st.importanceJob() {
			var err error
			if next, err = st.order(s.orders, origin.epoch+1); err != nil {
				continue
			}
		}
		du, ok := t.datasets[st.ds.name]
		if !ok || du.ds != st.ds {
			du = datasetUses{ds: st.ds, dist: make([]int64, len(st.ds.counts))}
			for c := range du.dist {
				du.dist[c] = never
			}
			t.datasets[st.ds.name] = du
		}
		if e.weight != nil && latest[weightKey{st.ds.name, st.imp.job}] == st {
			if du.weight == nil {
				du.weight = make([]float32, len(du.dist))
				t.datasets[st.ds.name] = du
			}
			for c, w := range e.weight[:len(du.weight)] {
				du.weight[c] = max(du.weight[c], w)
			}
		}
		cur := e.chunkWindow[0:len(du.dist)]
		now := int32(e.WindowOf(origin.pos))
		left := int64(e.NumSamples() - origin.pos)
		for c, cw := range cur {
			d := int64(never)
			switch {
			case cw == now:
				d = 0
			case cw > now:
				d = int64(e.WindowStart(int(cw)) - origin.pos)
			case next != nil && next.chunkWindow[c] >= 0:
				// Read earlier in this epoch, or not at all: next
				// needed in the next epoch, if that reads it.
				d = left + int64(next.WindowStart(int(next.chunkWindow[c])))
			}
			du.dist[c] = min(du.dist[c], d)
		}
	}
	s.uses.Store(t)
}

// weightKey names an importance job on a dataset.
type weightKey struct{ dataset, job string }

// chunkUse is a chunk some epoch will need.
type chunkUse struct {
	chunk int
	epoch uint64
}

// upcoming lists the chunks of the windows a stream needs next: the rest of
// its current window and the next ahead windows, continuing into the next
// epoch at the boundary, in the order they will be needed.
func (s *schedule) upcoming(st stream, ahead int) []chunkUse {
	var out []chunkUse
	e, err := s.orders.epoch(st.jobStream, st.edge.epoch)
	if err != nil || e.NumSamples() == 0 {
		return nil
	}
	w := e.WindowOf(min(st.edge.pos, e.NumSamples()-1))
	epoch := st.edge.epoch
	for range ahead + 1 {
		if w >= e.NumWindows() {
			if st.importanceJob() {
				return out // the next epoch's snapshot is not sealed yet
			}
			epoch++
			if e, err = s.orders.epoch(st.jobStream, epoch); err != nil {
				return out
			}
			w = 0
		}
		for _, c := range e.WindowChunks(w) {
			out = append(out, chunkUse{c, epoch})
		}
		w++
	}
	return out
}
