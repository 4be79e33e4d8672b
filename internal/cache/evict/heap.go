package evict

import (
	"container/heap"
	"fmt"
	"iter"
	"math"
)

// Heap is an indexed max-heap of dense integer IDs, the resident chunks of
// a cache (chunk IDs in the planner, slots the gateway maps its chunk keys
// to), ordered by key, the largest first, then by seq, the smallest first:
// the top is the chunk to evict. Each ID is in the heap at most once;
// the index from ID to position is what lets a hit, a pin or a re-key
// find its entry in O(1) and fix it in O(log n).
//
// Entries equal in both key and seq come out in an order that depends only
// on the operations made, as container/heap's would: the same operations
// give the same order, which is what lets a simulation be replayed
// exactly.
//
// The zero Heap is empty and ready to use; IDs may be any in
// [0, math.MaxInt32], the index growing to the largest pushed. NewHeap
// sizes it for a known range up front.
type Heap struct {
	entries []entry // in heap order
	pos     []int32 // pos[id]: id's index in entries; -1 when absent
}

// entry carries its key and seq so that a comparison reads one array.
type entry struct {
	key int64
	seq uint64
	id  int32
}

// NewHeap returns an empty heap indexing IDs 0..n-1 without growing.
func NewHeap(n int) *Heap {
	h := &Heap{}
	h.grow(n)
	return h
}

// Len returns the number of IDs in the heap.
func (h *Heap) Len() int { return len(h.entries) }

// Contains reports whether id is in the heap.
func (h *Heap) Contains(id int) bool { return id >= 0 && id < len(h.pos) && h.pos[id] >= 0 }

// Push adds id with key and seq. It panics if id is already in the heap
// or outside [0, math.MaxInt32].
func (h *Heap) Push(id int, key int64, seq uint64) {
	if h.Contains(id) {
		panic(fmt.Sprintf("evict: Push(%d): already in the heap", id))
	}
	h.insert(id, key, seq)
}

// Update sets id's key and seq, adding id if it is not in the heap (a
// cache's touch of a chunk, resident before or new). It panics if id is
// outside [0, math.MaxInt32].
func (h *Heap) Update(id int, key int64, seq uint64) {
	if !h.Contains(id) {
		h.insert(id, key, seq)
		return
	}
	p := int(h.pos[id])
	h.entries[p].key, h.entries[p].seq = key, seq
	h.fix(p)
}

// SetKey sets id's key, keeping its seq, if id is in the heap: one chunk
// whose next use moved while the others' did not.
func (h *Heap) SetKey(id int, key int64) {
	if !h.Contains(id) {
		return
	}
	p := int(h.pos[id])
	if h.entries[p].key != key {
		h.entries[p].key = key
		h.fix(p)
	}
}

// Remove takes id out of the heap and reports whether it was in it.
func (h *Heap) Remove(id int) bool {
	if !h.Contains(id) {
		return false
	}
	p, last := int(h.pos[id]), len(h.entries)-1
	h.pos[id] = -1
	if p != last {
		h.entries[p] = h.entries[last]
		h.pos[h.entries[p].id] = int32(p)
	}
	h.entries = h.entries[:last]
	if p < last {
		h.fix(p)
	}
	return true
}

// Pop removes and returns the ID that goes first: the largest key, the
// smallest seq among equal keys. It panics on an empty heap.
func (h *Heap) Pop() int {
	if len(h.entries) == 0 {
		panic("evict: Pop of an empty heap")
	}
	id := int(h.entries[0].id)
	h.Remove(id)
	return id
}

// Rekey sets every entry's key to key(id), keeping its seq, and restores
// the order in O(n): for a cache whose keys all move at once (the gateway's
// use table changing, the planner entering another epoch).
func (h *Heap) Rekey(key func(id int) int64) {
	for i := range h.entries {
		h.entries[i].key = key(int(h.entries[i].id))
	}
	for i := len(h.entries)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// Victims yields the IDs in eviction order, as Pop would return them
// (entries equal in both key and seq in some order of their own), without
// changing the heap: a frontier of candidate positions, itself a heap,
// starts at the root and replaces each position it yields by its
// children, so the first k cost O(k log k). The heap must not change
// while the walk is under way (collect the victims, then Remove them).
func (h *Heap) Victims() iter.Seq[int] {
	return func(yield func(int) bool) {
		if len(h.entries) == 0 {
			return
		}
		f := &frontier{h: h, at: []int32{0}}
		for len(f.at) > 0 {
			p := heap.Pop(f).(int32)
			if !yield(int(h.entries[p].id)) {
				return
			}
			for _, c := range [2]int32{2*p + 1, 2*p + 2} {
				if int(c) < len(h.entries) {
					heap.Push(f, c)
				}
			}
		}
	}
}

// insert adds id, which is not in the heap.
func (h *Heap) insert(id int, key int64, seq uint64) {
	if id < 0 || id > math.MaxInt32 {
		panic(fmt.Sprintf("evict: ID %d outside [0, %d]", id, math.MaxInt32))
	}
	if id >= len(h.pos) {
		h.grow(max(id+1, 2*len(h.pos)))
	}
	p := len(h.entries)
	h.entries = append(h.entries, entry{key: key, seq: seq, id: int32(id)})
	h.pos[id] = int32(p)
	h.up(p)
}

// grow extends the index to IDs 0..n-1.
func (h *Heap) grow(n int) {
	if n <= len(h.pos) {
		return
	}
	pos := make([]int32, n)
	copy(pos, h.pos)
	for id := len(h.pos); id < n; id++ {
		pos[id] = -1
	}
	h.pos = pos
}

// before reports whether entry i goes before entry j.
func (h *Heap) before(i, j int) bool {
	a, b := &h.entries[i], &h.entries[j]
	if a.key != b.key {
		return a.key > b.key
	}
	return a.seq < b.seq
}

func (h *Heap) swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.pos[h.entries[i].id] = int32(i)
	h.pos[h.entries[j].id] = int32(j)
}

// fix restores the order around position p after its entry changed.
func (h *Heap) fix(p int) {
	if !h.up(p) {
		h.down(p)
	}
}

// up moves the entry at p towards the root while it goes before its
// parent, and reports whether it moved.
func (h *Heap) up(p int) bool {
	moved := false
	for p > 0 {
		parent := (p - 1) / 2
		if !h.before(p, parent) {
			break
		}
		h.swap(p, parent)
		p, moved = parent, true
	}
	return moved
}

// down moves the entry at p towards the leaves while a child goes before
// it.
func (h *Heap) down(p int) {
	n := len(h.entries)
	for {
		best, l := p, 2*p+1
		if l < n && h.before(l, best) {
			best = l
		}
		if r := l + 1; r < n && h.before(r, best) {
			best = r
		}
		if best == p {
			return
		}
		h.swap(p, best)
		p = best
	}
}

// frontier is Victims' heap of candidate positions in h.entries, ordered
// as the entries there are, for container/heap.
type frontier struct {
	h  *Heap
	at []int32
}

func (f *frontier) Len() int           { return len(f.at) }
func (f *frontier) Less(i, j int) bool { return f.h.before(int(f.at[i]), int(f.at[j])) }
func (f *frontier) Swap(i, j int)      { f.at[i], f.at[j] = f.at[j], f.at[i] }
func (f *frontier) Push(x any)         { f.at = append(f.at, x.(int32)) }
func (f *frontier) Pop() any {
	x := f.at[len(f.at)-1]
	f.at = f.at[:len(f.at)-1]
	return x
}
