package gateway

import (
	"cmp"
	"iter"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkcache"
)

// streamIdle is how long a job stream may go without a request before the
// schedule forgets it and its chunks stop counting as needed.
const streamIdle = 2 * time.Minute

// never is the next-use distance of a chunk that no active stream needs.
const never = math.MaxInt64

// streamKey identifies a job stream. The order of an epoch depends only on
// the dataset, seed and window, so every rank, batch size and world size of
// one job — and any other job with the same three — share a stream.
type streamKey struct {
	dataset string
	seed    uint64
	window  int
}

// stream is a job's position: the leading edge (the furthest epoch
// position requested so far), which prefetch runs ahead of, and the batches
// still being served, whose chunks must count as needed until they are
// pinned: the schedule measures next use from the oldest of them.
//
// A client that keeps several batches in flight sends them at once, and
// they can reach the gateway out of order: the batch before the leading
// edge may not have arrived yet when a prefetch looks for room. So once a
// stream has shown such lateness, next use is measured from further back:
// the lateness seen, plus one global batch.
type stream struct {
	epoch    uint64
	pos      int // epoch position just past the furthest batch requested
	lastSeen time.Time
	ds       *served
	inflight map[epochPos]int // start positions of batches being served
	// lag is how far behind the leading edge batches have arrived, in
	// samples: the largest lateness seen, decaying slowly so that a
	// client that stops reordering is eventually trusted again.
	lag int
	// margin is one global batch (batch size × world), in samples.
	margin int
}

type epochPos struct {
	epoch uint64
	pos   int
}

// now returns the position next use is measured from: the start of the
// oldest batch in flight or, if the stream's batches arrive out of order,
// the leading edge less their lag and a batch, whichever is earlier; else
// the leading edge. The position may be negative: that far before the end
// of the previous epoch.
func (st *stream) now() (uint64, int) {
	e, p := st.epoch, st.pos
	if st.lag > 0 {
		p -= st.lag + st.margin
	}
	for ip := range st.inflight {
		if ip.epoch < e || (ip.epoch == e && ip.pos < p) {
			e, p = ip.epoch, ip.pos
		}
	}
	return e, p
}

// inflight is a batch registered with begin, to be passed to finish.
type inflight struct {
	key streamKey
	at  epochPos
}

// begin records that a batch starting at start is being served, so that
// the chunks it still has to pin keep counting as needed now. global is
// the job's global batch, batch size × world, in samples.
func (s *schedule) begin(ds *served, seed uint64, window int, epoch uint64, start, global int) inflight {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := streamKey{ds.name, seed, window}
	st, ok := s.streams[k]
	if !ok {
		st = &stream{epoch: epoch, pos: start, ds: ds, lastSeen: s.now()}
		s.streams[k] = st
	}
	st.lag -= st.lag / 64
	if epoch == st.epoch && start < st.pos {
		st.lag = max(st.lag, st.pos-start)
	}
	st.margin = global
	if st.inflight == nil {
		st.inflight = map[epochPos]int{}
	}
	at := epochPos{epoch, start}
	st.inflight[at]++
	return inflight{k, at}
}

// finish ends what begin started.
func (s *schedule) finish(f inflight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.streams[f.key]
	if !ok {
		return
	}
	if st.inflight[f.at]--; st.inflight[f.at] <= 0 {
		delete(st.inflight, f.at)
	}
}

// schedule knows, from the streams' positions and the seeded order, when
// every chunk will next be needed. The cache's schedule policy evicts the
// chunk needed furthest in the future (Belady's rule), and the prefetcher
// uses the same distances to decide what it may displace.
type schedule struct {
	g   *Gateway
	now func() time.Time

	mu      sync.Mutex
	streams map[streamKey]*stream
	// chunkWindows caches, per epoch order, each chunk's window index.
	chunkWindows map[epochKey][]int32
}

func newSchedule(g *Gateway) *schedule {
	return &schedule{g: g, now: time.Now, streams: map[streamKey]*stream{}, chunkWindows: map[epochKey][]int32{}}
}

// observe records that a stream served epoch positions up to end. It
// returns the stream's state after the update, whether it moved, and
// whether it entered a later epoch than it was in.
func (s *schedule) observe(ds *served, seed uint64, window int, epoch uint64, end int) (st stream, moved, newEpoch bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, st := range s.streams {
		if now.Sub(st.lastSeen) > streamIdle && len(st.inflight) == 0 {
			delete(s.streams, k)
		}
	}
	k := streamKey{ds.name, seed, window}
	cur, ok := s.streams[k]
	switch {
	case !ok:
		cur = &stream{epoch: epoch, pos: end, ds: ds}
		s.streams[k] = cur
	case epoch > cur.epoch || (epoch == cur.epoch && end > cur.pos):
		newEpoch = epoch > cur.epoch
		cur.epoch, cur.pos = epoch, end
	case now.Sub(cur.lastSeen) > 30*time.Second:
		// A job resumed from an earlier point; follow it.
		cur.epoch, cur.pos = epoch, end
	default:
		cur.lastSeen = now
		return *cur, false, false
	}
	cur.lastSeen = now
	return *cur, true, newEpoch
}

// windowsOf returns each chunk's window index in one epoch's order.
func (s *schedule) windowsOf(ds *served, k epochKey) []int32 {
	if cw, ok := s.chunkWindows[k]; ok {
		return cw
	}
	e, err := s.g.epoch(ds, k.seed, k.epoch, k.window)
	if err != nil {
		return nil
	}
	cw := make([]int32, len(ds.counts))
	for w := range e.NumWindows() {
		for _, c := range e.WindowChunks(w) {
			cw[c] = int32(w)
		}
	}
	if len(s.chunkWindows) >= 16 {
		clear(s.chunkWindows)
	}
	s.chunkWindows[k] = cw
	return cw
}

// nextUseLocked is the number of samples any active stream will serve
// before it needs chunk c of dataset ds: 0 while its window is current,
// never when no stream needs it in this epoch or the next.
func (s *schedule) nextUseLocked(ds *served, c int) int64 {
	best := int64(never)
	for k, st := range s.streams {
		if k.dataset != ds.name {
			continue
		}
		stEpoch, stPos := st.now()
		if stPos < 0 {
			if stEpoch == 0 {
				stPos = 0
			} else if prev, err := s.g.epoch(ds, k.seed, stEpoch-1, k.window); err == nil {
				stEpoch, stPos = stEpoch-1, max(prev.NumSamples()+stPos, 0)
			}
		}
		cur := epochKey{ds.name, k.seed, stEpoch, k.window}
		e, err := s.g.epoch(ds, k.seed, stEpoch, k.window)
		if err != nil || e.NumSamples() == 0 {
			continue
		}
		pos := min(stPos, e.NumSamples()-1)
		windows := s.windowsOf(ds, cur)
		if windows == nil {
			continue
		}
		cw := int(windows[c])
		now := e.WindowOf(pos)
		var d int64
		switch {
		case cw == now:
			d = 0
		case cw > now:
			d = int64(e.WindowStart(cw) - pos)
		default:
			next := epochKey{ds.name, k.seed, stEpoch + 1, k.window}
			ne, err := s.g.epoch(ds, k.seed, stEpoch+1, k.window)
			nw := s.windowsOf(ds, next)
			if err != nil || nw == nil {
				continue
			}
			d = int64(e.NumSamples()-pos) + int64(ne.WindowStart(int(nw[c])))
		}
		best = min(best, d)
	}
	return best
}

// nextUse is nextUseLocked for callers without the lock.
func (s *schedule) nextUse(k chunkcache.Key) int64 {
	ds, err := s.g.dataset(k.Dataset)
	if err != nil {
		return never
	}
	c, ok := ds.chunkByKey[k.Object]
	if !ok || ds.index.Chunk(c).ETag != k.ETag {
		return never
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextUseLocked(ds, c)
}

// policy returns the cache policy that evicts by next use.
func (s *schedule) policy() chunkcache.Policy {
	return &schedulePolicy{s: s, touched: map[chunkcache.Key]uint64{}}
}

// schedulePolicy evicts the chunk whose next use is furthest away; chunks
// no stream needs go first, least recently used first among equals.
type schedulePolicy struct {
	s       *schedule
	seq     uint64
	touched map[chunkcache.Key]uint64
}

func (p *schedulePolicy) Touch(k chunkcache.Key) {
	p.seq++
	p.touched[k] = p.seq
}

func (p *schedulePolicy) Remove(k chunkcache.Key) { delete(p.touched, k) }

func (p *schedulePolicy) Victims() iter.Seq[chunkcache.Key] {
	return func(yield func(chunkcache.Key) bool) {
		type cand struct {
			k    chunkcache.Key
			next int64
			seq  uint64
		}
		cands := make([]cand, 0, len(p.touched))
		for k, seq := range p.touched {
			cands = append(cands, cand{k, p.s.nextUse(k), seq})
		}
		slices.SortFunc(cands, func(a, b cand) int {
			if c := cmp.Compare(b.next, a.next); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		for _, c := range cands {
			if !yield(c.k) {
				return
			}
		}
	}
}

// chunkUse is a chunk some epoch will need.
type chunkUse struct {
	chunk int
	epoch uint64
}

// upcoming lists the chunks of the windows a stream needs next: the rest of
// its current window and the next ahead windows, continuing into the next
// epoch at the boundary, in the order they will be needed.
func (s *schedule) upcoming(st stream, seed uint64, window, ahead int) []chunkUse {
	var out []chunkUse
	e, err := s.g.epoch(st.ds, seed, st.epoch, window)
	if err != nil || e.NumSamples() == 0 {
		return nil
	}
	w := e.WindowOf(min(st.pos, e.NumSamples()-1))
	epoch := st.epoch
	for range ahead + 1 {
		if w >= e.NumWindows() {
			epoch++
			if e, err = s.g.epoch(st.ds, seed, epoch, window); err != nil {
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
