package planner

import "container/heap"

// beladyCache is Belady's rule over byte sizes: on a miss it evicts the
// resident chunk whose next use is furthest in the future (chunks never used
// again first, their next use being never) until the new one fits. The
// resident chunks are a max-heap keyed by next use, so an access costs
// O(log resident chunks): a hit moves the chunk's key to its following use
// and fixes the heap, an eviction pops the top.
type beladyCache struct {
	sizes          []int64
	capacity, used int64
	next           []int // next[i]: the access after i to the same chunk
	heap           chunkHeap
}

func newBeladyCache(sizes []int64, capacity int64, next []int) *beladyCache {
	b := &beladyCache{
		sizes:    sizes,
		capacity: capacity,
		next:     next,
		heap:     newChunkHeap(len(sizes)),
	}
	return b
}

func (b *beladyCache) pin(_ int, c int32) bool {
	p := b.heap.pos[c]
	if p < 0 {
		return false
	}
	b.heap.remove(int(p)) // not evictable while pinned; still counted in used
	return true
}

func (b *beladyCache) admit(c int32) bool {
	size := b.sizes[c]
	if size > b.capacity {
		return false // read through, never admitted
	}
	for b.used+size > b.capacity && b.heap.Len() > 0 {
		b.used -= b.sizes[b.heap.pop()]
	}
	if b.used+size > b.capacity {
		return false // larger than the room the pinned chunks leave: read through
	}
	b.used += size
	return true
}

// release makes c evictable again, keyed by the use after access i.
func (b *beladyCache) release(i int, c int32) {
	b.heap.push(heapEntry{key: int64(b.next[i]), chunk: c})
}

// chunkHeap is a max-heap of the resident chunks by key, then by release
// order (seq, ascending), for container/heap: Belady's rule keys a chunk
// by its next access, the importance-aware policy by its next access this
// epoch or its weight (aware.go). pos is indexed by chunk ID: pos[c] is c's
// index in entries, or -1 when c is not in the heap, which is how a hit is
// found. Entries carry their key so that comparisons read one array.
type chunkHeap struct {
	entries []heapEntry
	pos     []int32
}

type heapEntry struct {
	key   int64  // the larger goes first
	seq   uint64 // among equal keys, the smaller goes first
	chunk int32
}

func newChunkHeap(chunks int) chunkHeap {
	h := chunkHeap{pos: make([]int32, chunks)}
	for c := range h.pos {
		h.pos[c] = -1
	}
	return h
}

// push adds e and restores the heap: heap.Push without boxing e into an
// interface, which at millions of misses is measurable garbage.
func (h *chunkHeap) push(e heapEntry) {
	h.Push(e)
	heap.Fix(h, len(h.entries)-1)
}

// pop removes and returns the chunk that goes first: heap.Pop without the
// interface.
func (h *chunkHeap) pop() int32 {
	last := len(h.entries) - 1
	h.Swap(0, last)
	c := h.entries[last].chunk
	h.entries = h.entries[:last]
	h.pos[c] = -1
	if last > 0 {
		heap.Fix(h, 0)
	}
	return c
}

// remove takes the entry at index p out of the heap.
func (h *chunkHeap) remove(p int) {
	last := len(h.entries) - 1
	h.Swap(p, last)
	h.pos[h.entries[last].chunk] = -1
	h.entries = h.entries[:last]
	if p < last {
		heap.Fix(h, p)
	}
}

func (h *chunkHeap) Len() int { return len(h.entries) }

func (h *chunkHeap) Less(i, j int) bool {
	a, b := &h.entries[i], &h.entries[j]
	if a.key != b.key {
		return a.key > b.key
	}
	return a.seq < b.seq
}

func (h *chunkHeap) Swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.pos[h.entries[i].chunk] = int32(i)
	h.pos[h.entries[j].chunk] = int32(j)
}

// Push implements heap.Interface; x must be a heapEntry.
func (h *chunkHeap) Push(x any) {
	e := x.(heapEntry)
	h.pos[e.chunk] = int32(len(h.entries))
	h.entries = append(h.entries, e)
}

// Pop implements heap.Interface, removing the last entry.
func (h *chunkHeap) Pop() any {
	last := len(h.entries) - 1
	e := h.entries[last]
	h.entries = h.entries[:last]
	h.pos[e.chunk] = -1
	return e
}
