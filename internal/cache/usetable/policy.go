package usetable

import (
	"iter"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/evict"
)

// tablePolicy (NewPolicy) is the cache policy that evicts the chunk
// whose next use is furthest away (Belady's rule on the known order);
// chunks no stream needs go first, the least recently used first among
// equals; then the chunks this node stands in for, before any it owns
// (Snapshot.victimKey). Its heap is the planner's (internal/cache/evict), so the gateway and
// its simulation order chunks by one implementation.
//
// The cache calls it under its lock, so it must be cheap and must not call
// out: it keeps the resident chunks in a heap ordered by their keys in
// one use table, and reads the use table's latest snapshot and request count
// with atomic loads. When the table has changed (a stream crossed a
// window), the next Victims re-keys the heap in O(resident chunks); when
// only requests came (the streams' clocks moved), it re-keys the resident
// chunks of the current windows, O(hot × log resident); otherwise Touch
// and Remove cost O(log resident chunks) and Victims O(k log k) for the k
// victims the cache looks at. Chunk keys map to dense slots, reused once
// a chunk leaves.
type tablePolicy struct {
	latest func() *Snapshot
	ticks  func() uint64
	table  *Snapshot // the table the heap is ordered by
	tick   uint64    // the request count its hot keys are from
	seq    uint64
	heap   evict.Heap
	slot   map[chunkcache.Key]int
	keys   []chunkcache.Key // by slot
	free   []int            // slots no chunk holds
}

// NewPolicy returns the use table's eviction policy, which orders chunks by
// their keys in the latest use table; ticks counts the requests that move
// the streams' clocks (Table.Ticks).
func NewPolicy(latest func() *Snapshot, ticks func() uint64) *tablePolicy {
	return &tablePolicy{latest: latest, ticks: ticks, slot: map[chunkcache.Key]int{}}
}

// Touch implements chunkcache.Policy.
func (p *tablePolicy) Touch(k chunkcache.Key) {
	p.seq++
	s, ok := p.slot[k]
	if !ok {
		if n := len(p.free); n > 0 {
			s, p.free = p.free[n-1], p.free[:n-1]
			p.keys[s] = k
		} else {
			s = len(p.keys)
			p.keys = append(p.keys, k)
		}
		p.slot[k] = s
	}
	key := int64(Never)
	if p.table != nil {
		key = p.table.victimKey(k, p.table.Now())
	}
	p.heap.Update(s, key, p.seq)
}

// Remove implements chunkcache.Policy.
func (p *tablePolicy) Remove(k chunkcache.Key) {
	s, ok := p.slot[k]
	if !ok {
		return
	}
	delete(p.slot, k)
	p.heap.Remove(s)
	p.keys[s] = chunkcache.Key{}
	p.free = append(p.free, s)
}

// Victims implements chunkcache.Policy: the heap's order, walked without
// changing it.
func (p *tablePolicy) Victims() iter.Seq[chunkcache.Key] {
	tick := p.ticks()
	switch t := p.latest(); {
	case t != p.table:
		p.table, p.tick = t, tick
		if t != nil {
			now := t.Now()
			p.heap.Rekey(func(s int) int64 { return t.victimKey(p.keys[s], now) })
		}
	case tick != p.tick && t != nil:
		p.tick = tick
		now := t.Now()
		for _, k := range t.hot {
			if s, ok := p.slot[k]; ok {
				p.heap.SetKey(s, t.victimKey(k, now))
			}
		}
	}
	return func(yield func(chunkcache.Key) bool) {
		for s := range p.heap.Victims() {
			if !yield(p.keys[s]) {
				return
			}
		}
	}
}
