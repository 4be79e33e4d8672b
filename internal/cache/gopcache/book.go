package gopcache

import (
	"slices"

	"github.com/brandgw/brand/internal/cache/evict"
)

// Key names one decoded GOP: GOP GOP of video Video as the samples of one
// horizon want it.
type Key struct {
	// Horizon is the horizon's ID (Horizon.ID).
	Horizon    string
	Video, GOP int
}

// Use is one sample's use of a GOP: the sample's epoch position and the
// frames it wants of the GOP, by PTS, ascending.
type Use struct {
	Pos    int
	Frames []int64
}

// A Horizon is a run of epoch positions [Start, End) of one stream's
// epoch whose samples' GOPs are decoded together: a GOP is decoded once
// for every sample of the horizon that wants it, if its frames can be
// held until the last of them is served.
type Horizon struct {
	// ID names the horizon among every horizon of every stream the node
	// serves (the stream's order, the epoch, the horizon's number).
	ID         string
	Start, End int
	// Uses are the uses of GOP gop of video by the horizon's samples,
	// each sample once, ascending by Pos: the same slice for the same
	// GOP every time (the caller memoises it).
	Uses func(video, gop int) []Use
}

// Decision is what Acquire decided for one GOP a batch wants.
type Decision struct {
	// Hit: the GOP's frames are held (or being decoded: Filling), every
	// frame the batch wants among them; the entry is pinned until
	// Release.
	Hit bool
	// Short: the GOP is held without a frame the batch wants (one the
	// batch that decoded it could not: an open GOP's leading picture
	// whose GOP before it had not read, or a batch served again); it
	// decodes its own.
	Short bool
	// Frames are, on a miss, the frames to decode, ascending: with Keep,
	// every frame the horizon's samples not yet served want (and the
	// batch's own), which the entry holds once Filled; without, the
	// batch's own alone.
	Frames []int64
	// Keep: the entry is made, pinned and filling, its Bytes counted,
	// until Filled (or Abort, if its decode fails).
	Keep  bool
	Bytes int64
	// Evicted are entries dropped to make room: their frames are freed.
	Evicted []Key
}

// Book is the decoded-GOP cache's policy, with no frames of its own: which
// entries are held, their bytes against the limit, who still wants them,
// and which go to make room. The gateway's Cache keeps its frames by it,
// and a plan simulates it by serving an epoch's batches in order, so the
// two decide alike by construction. Not safe for concurrent use.
type Book struct {
	limit, used int64
	entries     map[Key]*entry
	slots       []*entry // by heap ID
	free        []int    // heap IDs free for reuse
	heap        evict.Heap
	horizons    map[string]*horizon
	tick        uint64 // Served calls
	seq         uint64
}

// entry is one held (or filling) GOP.
type entry struct {
	key     Key
	id      int
	h       *horizon
	frames  []int64 // held, ascending
	uses    []int   // the positions of the horizon's samples that want it, ascending
	next    int     // index in uses of the first not yet served
	left    int     // uses not yet served
	bytes   int64
	pins    int
	filling bool
}

// horizon is what the book knows of a horizon: which positions were
// served, and its entries.
type horizon struct {
	h       Horizon
	served  []bool // by position − Start
	low     int    // the first position not served
	nserved int
	last    uint64 // the tick of its last Acquire or Served
	entries map[Key]*entry
}

// StaleTicks is how many Served calls (batches) a horizon may go without
// an Acquire or a Served before its entries are the first to go: a stream
// abandoned mid-horizon (a job stopped, a client gone) leaves samples
// that will never be served.
const StaleTicks = 4096

// NewBook returns a book of at most limit bytes of frames.
func NewBook(limit int64) *Book {
	return &Book{limit: limit, entries: map[Key]*entry{}, horizons: map[string]*horizon{}}
}

// Limit is the book's bound in bytes; Used what its entries take.
func (b *Book) Limit() int64 { return b.limit }

// Used is the bytes its entries (held or filling) take.
func (b *Book) Used() int64 { return b.used }

// Len is the entries held or filling.
func (b *Book) Len() int { return len(b.entries) }

// Frames returns entry k's frames, ascending, nil if it is not held.
func (b *Book) Frames(k Key) []int64 {
	if e := b.entries[k]; e != nil {
		return e.frames
	}
	return nil
}

func (b *Book) horizon(h *Horizon) *horizon {
	r := b.horizons[h.ID]
	if r == nil {
		r = &horizon{h: *h, served: make([]bool, max(h.End-h.Start, 0)), low: h.Start, entries: map[Key]*entry{}}
		b.horizons[h.ID] = r
	}
	if b.tick-r.last > StaleTicks {
		// Stale until now: its entries are keyed by their next use again.
		r.last = b.tick
		for _, e := range r.entries {
			b.heap.SetKey(e.id, b.key(e))
		}
	}
	r.last = b.tick
	return r
}

// Acquire decides what a batch does for key k, a GOP its samples own
// (their uses of it, in horizon h) want, each of its frames taking
// frameBytes. Held with every frame own wants:
// a hit, pinned. Otherwise a miss: when samples of the horizon not yet
// served, besides own's, want it and its frames fit — within the limit,
// after evicting entries wanted later than it (by their next use's
// distance from their horizon's first position not served: the furthest
// first) and none pinned — the entry is kept: made now, pinned and
// filling, to hold every frame those samples and own's want of which can
// says it can decode (can(pts): the batch read what decoding it needs).
// Else the batch decodes own's frames for itself alone.
func (b *Book) Acquire(h *Horizon, k Key, own []Use, can func(pts int64) bool, frameBytes int64) Decision {
	r := b.horizon(h)
	mine := union(nil, own)
	if e := b.entries[k]; e != nil {
		if subset(mine, e.frames) {
			e.pins++
			return Decision{Hit: true}
		}
		return Decision{Frames: mine, Short: true}
	}
	uses := h.Uses(k.Video, k.GOP)
	ownPos := make(map[int]bool, len(own))
	for _, u := range own {
		ownPos[u.Pos] = true
	}
	var keep []int // positions of the uses not yet served
	frames := mine
	future := -1
	for _, u := range uses {
		if r.isServed(u.Pos) {
			continue
		}
		keep = append(keep, u.Pos)
		if !ownPos[u.Pos] && future < 0 {
			future = u.Pos
		}
		for _, pts := range u.Frames {
			if can == nil || can(pts) {
				frames = append(frames, pts)
			}
		}
	}
	if future < 0 {
		return Decision{Frames: mine}
	}
	slices.Sort(frames)
	frames = slices.Compact(frames)
	bytes := int64(len(frames)) * frameBytes
	if bytes > b.limit {
		return Decision{Frames: mine}
	}
	dist := int64(future - r.low)
	var victims []*entry
	room := b.limit - b.used
	if room < bytes {
		for id := range b.heap.Victims() {
			v := b.slots[id]
			if v.pins > 0 {
				continue
			}
			if b.key(v) <= dist {
				break
			}
			victims = append(victims, v)
			if room += v.bytes; room >= bytes {
				break
			}
		}
	}
	if room < bytes {
		return Decision{Frames: mine}
	}
	d := Decision{Frames: frames, Keep: true, Bytes: bytes}
	for _, v := range victims {
		d.Evicted = append(d.Evicted, v.key)
		b.drop(v)
	}
	e := &entry{key: k, h: r, frames: frames, uses: keep, left: len(keep), bytes: bytes, pins: 1, filling: true}
	b.add(e)
	return d
}

// Filled marks a kept entry's decode done: its frames are held.
func (b *Book) Filled(k Key) {
	if e := b.entries[k]; e != nil {
		e.filling = false
	}
}

// Filling reports whether entry k is being decoded.
func (b *Book) Filling(k Key) bool {
	e := b.entries[k]
	return e != nil && e.filling
}

// Abort drops a kept entry whose decode failed.
func (b *Book) Abort(k Key) {
	if e := b.entries[k]; e != nil {
		b.drop(e)
	}
}

// Release unpins entry k after a hit or a kept fill, and reports whether
// it was dropped then: every sample that wants it was served while it was
// pinned.
func (b *Book) Release(k Key) bool {
	e := b.entries[k]
	if e == nil {
		return false
	}
	e.pins--
	if e.pins <= 0 && e.left == 0 {
		b.drop(e)
		return true
	}
	return false
}

// Served records that the samples at positions pos of horizon h were
// served (their batch written), and returns the entries dropped because
// no sample left wants them.
func (b *Book) Served(h *Horizon, pos []int) []Key {
	b.tick++
	r := b.horizon(h)
	var dropped []Key
	for _, p := range pos {
		if p < h.Start || p >= h.End || r.isServed(p) {
			continue
		}
		r.served[p-h.Start] = true
		r.nserved++
		for _, e := range r.entries {
			if _, ok := slices.BinarySearch(e.uses, p); ok {
				e.left--
			}
		}
	}
	for r.low < h.End && r.isServed(r.low) {
		r.low++
	}
	for _, e := range sortedEntries(r.entries) {
		for e.next < len(e.uses) && r.isServed(e.uses[e.next]) {
			e.next++
		}
		if e.left == 0 && e.pins == 0 {
			dropped = append(dropped, e.key)
			b.drop(e)
			continue
		}
		b.heap.SetKey(e.id, b.key(e))
	}
	if r.nserved == len(r.served) && len(r.entries) == 0 {
		delete(b.horizons, h.ID)
	}
	// Horizons no batch has touched for StaleTicks: their entries go
	// first, and the records of those without entries go.
	for id, o := range b.horizons {
		if b.tick-o.last <= StaleTicks {
			continue
		}
		if len(o.entries) == 0 {
			delete(b.horizons, id)
			continue
		}
		for _, e := range o.entries {
			b.heap.SetKey(e.id, evict.Never)
		}
	}
	return dropped
}

// key is entry e's eviction key: its next use's distance from its
// horizon's first position not served; Never once no sample wants it or
// its horizon went stale.
func (b *Book) key(e *entry) int64 {
	if e.next >= len(e.uses) || b.tick-e.h.last > StaleTicks {
		return evict.Never
	}
	return int64(e.uses[e.next] - e.h.low)
}

func (b *Book) add(e *entry) {
	if n := len(b.free); n > 0 {
		e.id = b.free[n-1]
		b.free = b.free[:n-1]
		b.slots[e.id] = e
	} else {
		e.id = len(b.slots)
		b.slots = append(b.slots, e)
	}
	b.entries[e.key] = e
	e.h.entries[e.key] = e
	b.used += e.bytes
	b.seq++
	b.heap.Push(e.id, b.key(e), b.seq)
}

func (b *Book) drop(e *entry) {
	if b.entries[e.key] != e {
		return
	}
	delete(b.entries, e.key)
	delete(e.h.entries, e.key)
	b.heap.Remove(e.id)
	b.slots[e.id] = nil
	b.free = append(b.free, e.id)
	b.used -= e.bytes
	if len(e.h.entries) == 0 && e.h.nserved == len(e.h.served) {
		delete(b.horizons, e.h.h.ID)
	}
}

func (r *horizon) isServed(p int) bool {
	i := p - r.h.Start
	return i >= 0 && i < len(r.served) && r.served[i]
}

// sortedEntries are a horizon's entries in key order, so that what is
// done with them never depends on a map's order.
func sortedEntries(m map[Key]*entry) []*entry {
	out := make([]*entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
		if a.key.Video != b.key.Video {
			return a.key.Video - b.key.Video
		}
		return a.key.GOP - b.key.GOP
	})
	return out
}

// union is the frames the uses want, ascending, each once, appended to
// dst.
func union(dst []int64, uses []Use) []int64 {
	for _, u := range uses {
		dst = append(dst, u.Frames...)
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// subset reports whether every frame of a (ascending) is in b (ascending).
func subset(a, b []int64) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
	}
	return true
}
