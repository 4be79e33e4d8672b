package planner

import "github.com/brandgw/brand/internal/cache/evict"

// beladyCache is Belady's rule over byte sizes: on a miss it evicts the
// resident chunk whose next use is furthest in the future (chunks never used
// again first, their next use being never) until the new one fits. The
// resident, unpinned chunks are an evict.Heap keyed by next use, so an
// access costs O(log resident chunks): a pin takes the chunk out, its
// release puts it back keyed by its following use, an eviction pops the
// top. The heap is the one the gateway's next-use policy orders its
// chunks with.
type beladyCache struct {
	sizes          []int64
	capacity, used int64
	next           []int // next[i]: the access after i to the same chunk
	heap           *evict.Heap
}

func newBeladyCache(sizes []int64, capacity int64, next []int) *beladyCache {
	return &beladyCache{
		sizes:    sizes,
		capacity: capacity,
		next:     next,
		heap:     evict.NewHeap(len(sizes)),
	}
}

func (b *beladyCache) pin(_ int, c int32) bool {
	// Not evictable while pinned; still counted in used.
	return b.heap.Remove(int(c))
}

func (b *beladyCache) admit(c int32) bool {
	size := b.sizes[c]
	if size > b.capacity {
		return false // read through, never admitted
	}
	for b.used+size > b.capacity && b.heap.Len() > 0 {
		b.used -= b.sizes[b.heap.Pop()]
	}
	if b.used+size > b.capacity {
		return false // larger than the room the pinned chunks leave: read through
	}
	b.used += size
	return true
}

// release makes c evictable again, keyed by the use after access i.
func (b *beladyCache) release(i int, c int32) {
	b.heap.Push(int(c), int64(b.next[i]), 0)
}
