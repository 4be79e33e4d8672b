package planner

import "github.com/brandgw/brand/internal/cache/evict"

// diskTier is a disk of whole chunks below a simulated cache, as the
// gateway keeps one with `brand serve --disk-cache DIR --disk-cache-size
// D` (internal/cache/disktier). It is inclusive: a chunk may be in RAM and on
// disk at once. A RAM miss of a chunk it holds is a disk read (read); a
// RAM miss of any other chunk is a store read, and the chunk is then
// offered to the disk (offer). Chunks read from the disk are not written
// again.
//
// The disk ranks its chunks by the eviction key of the RAM policy above it
// (diskRule): furthest next use first under Belady, the importance-aware
// key under ImportanceAware, and under LRU all alike. A chunk's next use
// moves with every access to it, RAM hits included (hit), as the
// gateway's schedule does; its recency, which orders equal ranks and
// LRU's, moves only when the disk writes or reads it, as the gateway's
// tier counts it.
//
// A diskTier of capacity 0 holds nothing and is no disk: read always
// reports false and offer writes nothing, so a simulation with it gives
// the figures of one without a disk exactly.
type diskTier struct {
	sizes          []int64
	capacity, used int64
	rule           diskRule
	next           []int // next[i]: the access after i to the same chunk; nil for LRU
	// heap holds the chunks on disk keyed by rank, seq the clock at their
	// last write or read: the top is the next victim.
	heap    evict.Heap
	nextUse []int    // per chunk on disk: the access after its last one
	lastUse []uint64 // per chunk on disk: its seq in heap
	epoch   int32    // the epoch being served, which ImportanceAware ranks by
	clock   uint64
	victims []int // offer's scratch
}

// diskRule is how a disk tier ranks its chunks: by the next-use key of the
// RAM policy above it, the largest going first.
type diskRule struct {
	// recency ranks every chunk alike (LRU): the least recently used goes
	// first and any chunk may make room for a new one.
	recency bool
	// trace and far, for ImportanceAware: a chunk whose next use is in
	// the epoch being served is ranked by that use, any other by far[c]
	// (evict.FarKey of its weight), as awareCache keys its chunks.
	trace []Access
	far   []int64
}

// rank is the key of chunk c, next being the access after its last one,
// in epoch.
func (r diskRule) rank(c int32, next int, epoch int32) int64 {
	switch {
	case r.recency:
		return 0
	case r.far != nil && (next == never || r.trace[next].Epoch != epoch):
		return r.far[c]
	}
	return int64(next) // never is evict.Never: needed never, ranked furthest
}

// disk returns a disk tier of capacity bytes for a simulation of s under
// policy p; far is ImportanceAware's far keys (awareCache.far), nil for
// the other policies.
func (s *simulator) disk(capacity int64, p Policy, far []int64) *diskTier {
	d := &diskTier{sizes: s.sizes, capacity: capacity}
	if capacity == 0 {
		return d
	}
	d.nextUse = make([]int, len(s.sizes))
	d.lastUse = make([]uint64, len(s.sizes))
	switch p {
	case LRU:
		d.rule = diskRule{recency: true}
	case ImportanceAware:
		d.rule = diskRule{trace: s.trace, far: far}
		d.next = s.nextUses()
	default:
		d.next = s.nextUses()
	}
	return d
}

// startEpoch tells the disk that the trace's access i begins a run of
// another epoch's accesses: ImportanceAware's ranks change with the epoch,
// as awareCache's keys do.
func (d *diskTier) startEpoch(i int) {
	if d.rule.far == nil {
		return
	}
	d.epoch = d.rule.trace[i].Epoch
	d.heap.Rekey(d.key)
}

// rank records access i to chunk c, on disk, and returns c's rank.
func (d *diskTier) rank(i int, c int32) int64 {
	if d.next != nil {
		d.nextUse[c] = d.next[i]
	}
	return d.rule.rank(c, d.nextUse[c], d.epoch)
}

// hit records access i to chunk c, a RAM hit: if the disk holds c, its
// rank follows c's next use; its recency stays, the disk not being read.
func (d *diskTier) hit(i int, c int32) {
	if d.heap.Contains(int(c)) {
		d.heap.SetKey(int(c), d.rank(i, c))
	}
}

// read reports whether the disk holds c, missed by RAM at access i, and if
// it does, reads it: c's rank and recency follow the access.
func (d *diskTier) read(i int, c int32) bool {
	if !d.heap.Contains(int(c)) {
		return false
	}
	d.clock++
	d.lastUse[c] = d.clock
	d.heap.Update(int(c), d.rank(i, c), d.clock)
	return true
}

// offer offers the disk chunk c, just read from the store by access i, and
// reports whether it was written. If the free room holds c, it is written.
// Otherwise victims are taken in rank order, the furthest next use first
// (under LRU the least recently used, any chunk), but only chunks ranked
// strictly after c itself: if they make room for c, they are removed and c
// written; if not, nothing is removed and c is not written. A chunk larger
// than the disk is never written.
func (d *diskTier) offer(i int, c int32) bool {
	size := d.sizes[c]
	if d.capacity == 0 || size > d.capacity {
		return false
	}
	own := d.rank(i, c)
	if need := d.used + size - d.capacity; need > 0 {
		// Pop victims while they are ranked after c and room is short;
		// if they do not make room, put them back. Every chunk on disk
		// has its own seq, so the heap's order afterwards is what it
		// was: popping costs O(log n) and allocates nothing, where
		// walking Victims allocates a frontier.
		d.victims = d.victims[:0]
		for need > 0 && d.heap.Len() > 0 {
			v := d.heap.Pop()
			d.victims = append(d.victims, v)
			if !d.rule.recency && d.key(v) <= own {
				break // this one and all after it are needed no later than c
			}
			need -= d.sizes[v]
		}
		if need > 0 {
			for _, v := range d.victims {
				d.heap.Push(v, d.key(v), d.lastUse[v])
			}
			return false
		}
		for _, v := range d.victims {
			d.used -= d.sizes[v]
		}
	}
	d.used += size
	d.clock++
	d.lastUse[c] = d.clock
	d.heap.Push(int(c), own, d.clock)
	return true
}

// key is chunk v's rank as the heap holds it.
func (d *diskTier) key(v int) int64 {
	return d.rule.rank(int32(v), d.nextUse[v], d.epoch)
}
