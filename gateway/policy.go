package gateway

import (
	"container/heap"
	"iter"

	"github.com/brandgw/brand/chunkcache"
)

// schedulePolicy is the cache policy that evicts the chunk whose next use is
// furthest away (Belady's rule on the known schedule); chunks no stream
// needs go first, the least recently used first among equals.
//
// The cache calls it under its lock, so it must be cheap and must not call
// out: it keeps the resident chunks in a heap ordered by their distance in
// one use table, and reads the schedule's latest table with an atomic load.
// When the table has changed (a stream crossed a window), the next Victims
// re-keys the heap in O(resident chunks); otherwise Touch and Remove cost
// O(log resident chunks) and Victims O(k log k) for the k victims the cache
// looks at.
type schedulePolicy struct {
	latest func() *useTable
	table  *useTable // the table the heap is ordered by
	seq    uint64
	heap   []*policyEntry
	byKey  map[chunkcache.Key]*policyEntry
}

type policyEntry struct {
	key   chunkcache.Key
	dist  int64  // next-use distance in table
	seq   uint64 // last touch
	index int    // position in heap
}

func newSchedulePolicy(latest func() *useTable) *schedulePolicy {
	return &schedulePolicy{latest: latest, byKey: map[chunkcache.Key]*policyEntry{}}
}

// evictsBefore reports whether a goes before b: further next use first,
// then least recently touched.
func evictsBefore(a, b *policyEntry) bool {
	if a.dist != b.dist {
		return a.dist > b.dist
	}
	return a.seq < b.seq
}

// Touch implements chunkcache.Policy.
func (p *schedulePolicy) Touch(k chunkcache.Key) {
	p.seq++
	e, ok := p.byKey[k]
	if !ok {
		e = &policyEntry{key: k, index: len(p.heap)}
		p.byKey[k] = e
		p.heap = append(p.heap, e)
	}
	e.seq = p.seq
	e.dist = p.table.distance(k)
	p.fix(e.index)
}

// Remove implements chunkcache.Policy.
func (p *schedulePolicy) Remove(k chunkcache.Key) {
	e, ok := p.byKey[k]
	if !ok {
		return
	}
	delete(p.byKey, k)
	i, last := e.index, len(p.heap)-1
	if i != last {
		p.swap(i, last)
	}
	p.heap[last] = nil
	p.heap = p.heap[:last]
	if i < last {
		p.fix(i)
	}
}

// Victims implements chunkcache.Policy. It walks the heap in order without
// changing it: a frontier of candidates, itself a heap, starts at the root
// and replaces each yielded entry by its children.
func (p *schedulePolicy) Victims() iter.Seq[chunkcache.Key] {
	if t := p.latest(); t != p.table {
		p.table = t
		for _, e := range p.heap {
			e.dist = t.distance(e.key)
		}
		for i := len(p.heap)/2 - 1; i >= 0; i-- {
			p.down(i)
		}
	}
	return func(yield func(chunkcache.Key) bool) {
		if len(p.heap) == 0 {
			return
		}
		f := frontier{entries: p.heap, at: []int{0}}
		for len(f.at) > 0 {
			i := heap.Pop(&f).(int)
			if !yield(p.heap[i].key) {
				return
			}
			for _, c := range []int{2*i + 1, 2*i + 2} {
				if c < len(p.heap) {
					heap.Push(&f, c)
				}
			}
		}
	}
}

// frontier is Victims' heap of candidate positions in the policy's heap.
type frontier struct {
	entries []*policyEntry
	at      []int
}

func (f *frontier) Len() int           { return len(f.at) }
func (f *frontier) Less(i, j int) bool { return evictsBefore(f.entries[f.at[i]], f.entries[f.at[j]]) }
func (f *frontier) Swap(i, j int)      { f.at[i], f.at[j] = f.at[j], f.at[i] }
func (f *frontier) Push(x any)         { f.at = append(f.at, x.(int)) }
func (f *frontier) Pop() any {
	x := f.at[len(f.at)-1]
	f.at = f.at[:len(f.at)-1]
	return x
}

func (p *schedulePolicy) swap(i, j int) {
	p.heap[i], p.heap[j] = p.heap[j], p.heap[i]
	p.heap[i].index, p.heap[j].index = i, j
}

func (p *schedulePolicy) fix(i int) {
	if !p.up(i) {
		p.down(i)
	}
}

func (p *schedulePolicy) up(i int) bool {
	moved := false
	for i > 0 {
		parent := (i - 1) / 2
		if !evictsBefore(p.heap[i], p.heap[parent]) {
			break
		}
		p.swap(i, parent)
		i, moved = parent, true
	}
	return moved
}

func (p *schedulePolicy) down(i int) {
	for {
		best := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(p.heap) && evictsBefore(p.heap[c], p.heap[best]) {
				best = c
			}
		}
		if best == i {
			return
		}
		p.swap(i, best)
		i = best
	}
}
