package usetable

import (
	"cmp"
	"slices"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// refreshLocked republishes the use table if st's origin moved, or if
// the streams are late (lateLocked).
func (s *Table) refreshLocked(st *stream) {
	if o, _, ok := s.originOf(st); ok && o != st.origin {
		if s.passTurnLocked(st, s.clock()) {
			s.turns.wake()
			if waitingOf(s.streams) != s.published {
				// Who waits changed: keyed at once (turnsMovedLocked).
				s.publishLocked()
				return
			}
			// Given its turn back at once: its new origin is all
			// that moved, rebuilt as any window crossing is.
		}
		s.republishLocked()
		return
	}
	if s.lateLocked() {
		s.republishLocked()
	}
}

// republishLocked rebuilds the use table, or, within Coalesce, marks it
// to be rebuilt when Coalesce returns, or, sooner after the last rebuild
// than the spacer allows, marks it to be rebuilt when it does.
func (s *Table) republishLocked() {
	if s.coalescing > 0 || len(s.streams) > spacedAbove && !s.rebuilds.due() {
		s.stale = true
		return
	}
	s.publishLocked()
}

// The rebuilds that streams' moves ask for (a stream crossing into its
// next window, a late stream) come at least rebuildCost times the last
// rebuild's duration after it ends, so that rebuilding takes at most
// about a twentieth of a core however many streams there are. A rebuild
// is O(streams × chunks) and every stream asks for one at each window it
// crosses, so without a bound the rebuilds of n streams cost O(n²): at
// 1,024 jobs of their own on one gateway they were a quarter to a third
// of its CPU, and its batches/s a quarter of its best (docs/benchmarks.md,
// Many streams). A table left stale meanwhile still holds every stream's
// later windows, keyed by when its pace said they would come; the
// streams' clocks move between rebuilds as before. Rebuilds on turns'
// moves are not put off, nor those of a table of spacedAbove streams or
// fewer: their rebuilds come a stream's crossing at a time, each costing
// a few streams' work, and what the table says right after a crossing
// (which chunks a leaving node's warm-up copies, what a prefetch reads)
// stays exact.
const (
	rebuildCost = 20
	spacedAbove = 16
)

// spacer spaces the use table's rebuilds (rebuildCost), timed by the
// table's clock (a test's that stands still spaces nothing). Its fields
// are guarded by the Table's mu; clock and fire are set by New, fire
// rebuilding a table left stale once the spacing has passed.
type spacer struct {
	clock func() time.Time
	last  time.Time     // when the last rebuild ended
	cost  time.Duration // how long it took
	armed bool          // fire is due to run
	fire  func()
}

// built records a rebuild that began at began (by clock) and has just
// ended.
func (p *spacer) built(began time.Time) {
	p.last = p.clock()
	p.cost = p.last.Sub(began)
}

// due reports whether a rebuild may run now; if not, it arms fire for
// when one may.
func (p *spacer) due() bool {
	if p.clock == nil {
		return true
	}
	wait := rebuildCost*p.cost - p.clock().Sub(p.last)
	if wait <= 0 {
		return true
	}
	if !p.armed && p.fire != nil {
		p.armed = true
		time.AfterFunc(wait, p.fire)
	}
	return false
}

// Coalesce runs f, the calls of one batch's visit (Begin, Advance and
// Finish of each of its parts), rebuilding the use table at most once,
// when f returns, for all the windows its streams crossed: a batch of a
// mixture has a part per source it draws from, and a rebuild per part
// cost a batch O(parts × chunks of every source) — the allocations of a
// mixture of 100 sources were 41 % table rebuilds (issue 43's schedule
// bench). Rebuilds that other requests' calls ask for while f runs are
// put off until it returns too, so f must not wait on anything (a turn,
// a read). A table rebuilt on a turn's move is not put off.
func (s *Table) Coalesce(f func()) {
	s.mu.Lock()
	s.coalescing++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.coalescing--
		if s.stale && (len(s.streams) <= spacedAbove || s.rebuilds.due()) {
			s.stale = false
			s.publishLocked()
		}
	}()
	f()
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
// to leave its window (Snapshot.crossing), so that the uses after that
// window are keyed in the past. A batch the late stream begins now would
// otherwise rank its own window's chunks, keyed by when it began, after
// the next window's, and a load would evict the chunks needed first. Rebuilt from now, every
// later use is keyed after the present again, in the order the streams
// will need them. (Keying each overdue chunk by its own lateness, as
// this once did, kept the current window first but inverted the rest:
// the window overdue longest — the next one — was keyed furthest, and
// evicted first.)
func (s *Table) lateLocked() bool {
	t := s.uses.Load()
	if t == nil || t.crossing == Never {
		return false
	}
	now := s.now()
	return now > t.crossing && now-t.built >= max(int64(lateRebuildGap), lateRebuildCost*int64(s.rebuilds.cost))
}

// weightKey names an importance job on a dataset.
type weightKey struct{ dataset, job string }

// publishLocked builds and publishes the use table from every stream's
// origin, edge and pace: O(streams × chunks), once per window a stream
// crosses, plus a sort of the needed chunks for the prefetch horizon.
func (s *Table) publishLocked() {
	defer s.rebuilds.built(s.clock())
	s.gen++
	now := s.now()
	// Sized as the last table was: a table is rebuilt at nearly every
	// batch of a mixture of many sources, and growing its maps each time
	// cost as much again in garbage.
	var hot int
	if last := s.uses.Load(); last != nil {
		hot = len(last.clocks)
	}
	t := &Snapshot{gen: s.gen, built: now, now: s.now, datasets: make(map[string][]datasetUses, len(s.streams)),
		clocks: make(map[hotChunk][]*clock, hot), crossing: Never}
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
	rate := median(s.streams, func(o *stream) float64 { return o.rate }, defaultRate)
	t.shared = shared(s.streams, s.clock())
	for _, st := range s.streams {
		if st.Pace.Changes() {
			t.phased = true
			break
		}
	}
	// Streams that hold a turn (turn.go) first: they are served now, and
	// the first of them to leave its window is when a waiting stream's
	// turn is expected to come. A waiting stream's uses are keyed from
	// then.
	var waiting []*stream
	s.published = waitSet{}
	for _, st := range s.streams {
		s.published.add(st)
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
func (s *Table) publishStream(t *Snapshot, st *stream, base int64, served bool, rate float64, latest map[weightKey]*stream) {
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
	// in for them (Snapshot.Distance).
	var next *jobstream.EpochOrder
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
	// A schedule's component is read at its measured rate until a phase
	// ahead changes its pace (jobstream.Pace): its uses after the switch are
	// keyed as the new pace reaches them.
	at := func(d int) int64 { return base + int64(st.Pace.Ahead(origin.epoch, edge, d)*perSample) }
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
		if !s.local(st.DS, c) && !s.keep(st.DS, c) {
			// Another node reads it for the batches: a copy here (a
			// chunk this node owned before a membership change) is the
			// first to go, before a chunk it owns that a job needs later
			// — unless its new owner will ask this node for it (Keep).
			continue
		}
		// A chunk this node reads only while its owner is down or out of
		// reach is kept for the windows at hand and the next, not for
		// later ones nor the next epoch: its owner, back, reads it then,
		// and keeping it would evict this node's own chunks, which it
		// would read again once the fault heals.
		// A chunk kept for its new owner (Keep) is not one: its
		// owner asks for it when the jobs need it, however far on.
		standIn := s.own != nil && !s.own(st.DS, c) && !s.keep(st.DS, c)
		if standIn {
			// And it goes before every chunk this node owns, whatever
			// their keys (Snapshot.victimKey): its reads while the
			// fault lasts take free room, or a stand-in's, never an
			// own chunk's.
			if du.standIn == nil {
				du.standIn = make([]bool, len(du.dist))
			}
			du.standIn[c] = true
		}
		// d is the chunk's window's start, use its first sample's
		// (Snapshot.evictKey).
		var d, use int
		switch {
		case cw >= first && cw <= last:
			if served {
				k := hotChunk{st.DS, int32(c)}
				t.clocks[k] = append(t.clocks[k], st.clock)
				continue
			}
			d, use = 0, 0
		case cw > last:
			if standIn && cw > last+1 {
				continue
			}
			d, use = e.WindowStart(int(cw))-edge, e.Start(c)-edge
		case standIn:
			continue
		case next != nil && next.ChunkWindow[c] >= 0:
			// Read earlier in this epoch, or not at all: next needed in
			// the next epoch, if that reads it.
			d, use = rest+next.WindowStart(int(next.ChunkWindow[c])), rest+next.Start(c)
		default:
			continue
		}
		du.dist[c] = min(du.dist[c], at(d))
		du.first[c] = min(du.first[c], at(use))
	}
}

// usesOf returns the table's entry for a dataset version, added if new.
func (t *Snapshot) usesOf(ds *catalog.Dataset) *datasetUses {
	list := t.datasets[ds.Name]
	for i := range list {
		if list[i].ds == ds {
			return &t.datasets[ds.Name][i]
		}
	}
	du := datasetUses{ds: ds, dist: make([]int64, len(ds.Counts)), first: make([]int64, len(ds.Counts))}
	for c := range du.dist {
		du.dist[c], du.first[c] = Never, Never
	}
	t.datasets[ds.Name] = append(list, du)
	return &t.datasets[ds.Name][len(list)]
}

// finish lists the hot chunks and finds the prefetch horizon: the hot
// chunks first, then the others soonest first, as many as fit in
// capacity bytes; and the latest key the cache keeps (Keeps): the
// others alone, as many as fit.
func (t *Snapshot) finish(capacity int64) {
	type use struct {
		key  int64
		size int64
	}
	var hotBytes int64
	// Sized once: the table is rebuilt whenever a stream crosses a
	// window, and appends that grow a list of every chunk of every
	// source left as much again in garbage each time.
	chunks := 0
	for _, list := range t.datasets {
		for _, du := range list {
			chunks += len(du.dist)
		}
	}
	later := make([]use, 0, chunks)
	t.hot = make([]chunkcache.Key, 0, len(t.clocks))
	for k := range t.clocks {
		t.hot = append(t.hot, k.ds.ChunkKey(int(k.c)))
		hotBytes += k.ds.Index.Chunk(int(k.c)).Size
	}
	for _, list := range t.datasets {
		for _, du := range list {
			for c, d := range du.dist {
				if d < farFuture && len(t.clocks[hotChunk{du.ds, int32(c)}]) == 0 {
					later = append(later, use{d, du.ds.ChunkSize(c)})
				}
			}
		}
	}
	t.hotFits = hotBytes <= capacity
	t.horizon, t.keeps = -1, -1
	if !t.hotFits {
		return
	}
	slices.SortFunc(later, func(a, b use) int { return int(min(max(a.key-b.key, -1), 1)) })
	// Chunks of one window share a key; a window that does not fit
	// whole is left out whole.
	fit := func(room int64) int64 {
		last, below := int64(-1), int64(-1) // below: the last key before the current run
		for i, u := range later {
			if i > 0 && u.key != later[i-1].key {
				below = later[i-1].key
			}
			if u.size > room {
				return below
			}
			room -= u.size
			last = u.key
		}
		return last
	}
	t.horizon = fit(capacity - hotBytes)
	t.keeps = fit(capacity)
}
