package planner

// lruCache is LRU over byte sizes: on a miss it evicts the least recently
// used chunks until the new one fits. The recency order is a doubly linked
// list threaded through two arrays indexed by chunk ID, with a sentinel at
// index len(sizes): chunk IDs are dense, so this needs no map and no
// allocation per access, which matters at millions of accesses.
type lruCache struct {
	sizes          []int64
	capacity, used int64
	prev, next     []int32 // the list; next[head] is the most recent
	resident       []bool
	head           int32 // the sentinel
}

func newLRUCache(sizes []int64, capacity int64) *lruCache {
	n := len(sizes)
	l := &lruCache{
		sizes:    sizes,
		capacity: capacity,
		prev:     make([]int32, n+1),
		next:     make([]int32, n+1),
		resident: make([]bool, n),
		head:     int32(n),
	}
	l.prev[n], l.next[n] = int32(n), int32(n)
	return l
}

func (l *lruCache) pin(_ int, c int32) bool {
	if !l.resident[c] {
		return false
	}
	l.unlink(c) // out of the list: not evictable while pinned
	return true
}

func (l *lruCache) admit(c int32) bool {
	size := l.sizes[c]
	if size > l.capacity {
		return false // read through, never admitted
	}
	for l.used+size > l.capacity && l.next[l.head] != l.head {
		v := l.prev[l.head] // the least recently used
		l.unlink(v)
		l.resident[v] = false
		l.used -= l.sizes[v]
	}
	if l.used+size > l.capacity {
		return false // larger than the room the pinned chunks leave: read through
	}
	l.resident[c] = true
	l.used += size
	return true
}

func (l *lruCache) release(_ int, c int32) { l.pushFront(c) }

func (l *lruCache) unlink(c int32) {
	p, n := l.prev[c], l.next[c]
	l.next[p], l.prev[n] = n, p
}

func (l *lruCache) pushFront(c int32) {
	f := l.next[l.head]
	l.prev[c], l.next[c] = l.head, f
	l.prev[f], l.next[l.head] = c, c
}
