package planner

import (
	"fmt"
	"sort"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/evict"
)

// The gateway's next-use policy does not know a job's next use of a chunk
// access by access, as Belady's rule does: its use table
// (internal/cache/usetable) keys chunks by window. Every chunk of the
// windows the stream is in is needed by its next batch (hot), and they
// go least recently used first among themselves; a chunk of a later
// window is keyed by where that window starts; one read earlier in the
// epoch by where the next epoch's order first needs it; one neither
// epoch needs, never. The table is rebuilt only when the stream's origin
// — the window its oldest batch in flight is in — moves, and the windows
// it holds hot run from the origin's to the leading edge's at that
// rebuild. A cache smaller than the windows a job reads at once makes
// its choices by these keys, so a plan of what the gateway reads
// simulates them (NextUse), not Belady's rule.
//
// What it leaves out is the use table's clock: a stream slower than its
// measured pace finds its next window keyed before its current one until
// a rebuild for lateness (at least 5 ms apart) puts them back in order,
// and evictions in between choose otherwise (docs/planner.md, *Clip
// jobs*).

// windowTable is what the use table holds of a stream once rebuilt: the
// epoch of its origin and the windows it holds hot, [first, last], in
// that epoch's order.
type windowTable struct {
	epoch       int
	first, last int32
}

// windowPos is a position in the stream's sequence of epochs.
type windowPos struct{ epoch, pos int }

func (a windowPos) before(b windowPos) bool {
	return a.epoch < b.epoch || a.epoch == b.epoch && a.pos < b.pos
}

// windowTrace is a trace's orders, by epoch, and the table each of its
// batches is read under.
type windowTrace struct {
	orders map[int]*api.PlanOrder
	offset map[int]int64 // samples of the trace's epochs before each
	tables []windowTable // per batch
}

// newWindowTrace checks t's orders (ascending, consecutive, covering
// every batch's epoch and the one after the last, their chunk windows one
// per chunk of a dataset of chunks chunks) and follows the one stream
// that reads t's batches through the use table's rebuilds: each batch's
// Begin and Advance (one rebuild at most, as the gateway coalesces
// them), its read, then its Finish.
func newWindowTrace(t api.PlanTrace, chunks int) (*windowTrace, error) {
	w := &windowTrace{orders: map[int]*api.PlanOrder{}, offset: map[int]int64{}}
	var at int64
	for i := range t.Orders {
		o := &t.Orders[i]
		if i > 0 && o.Epoch != t.Orders[i-1].Epoch+1 {
			return nil, fmt.Errorf("%w: the trace's orders are of epochs %d then %d; want consecutive epochs", ErrInvalid, t.Orders[i-1].Epoch, o.Epoch)
		}
		if len(o.ChunkWindows) != chunks || o.Samples < 0 || len(o.WindowStarts) == 0 && o.Samples > 0 ||
			!sort.IntsAreSorted(o.WindowStarts) || len(o.WindowStarts) > 0 && (o.WindowStarts[0] != 0 || o.WindowStarts[len(o.WindowStarts)-1] > o.Samples) {
			return nil, fmt.Errorf("%w: epoch %d's order: %d samples, %d windows, %d chunk windows for %d chunks", ErrInvalid, o.Epoch, o.Samples, len(o.WindowStarts), len(o.ChunkWindows), chunks)
		}
		for _, cw := range o.ChunkWindows {
			if cw < -1 || int(cw) >= len(o.WindowStarts) {
				return nil, fmt.Errorf("%w: epoch %d's order names window %d of %d", ErrInvalid, o.Epoch, cw, len(o.WindowStarts))
			}
		}
		w.orders[o.Epoch], w.offset[o.Epoch] = o, at
		at += int64(o.Samples)
	}
	var edge, origin windowPos
	var table windowTable
	started := false
	rebuild := func(position windowPos) {
		e := w.orders[position.epoch]
		o := windowPos{position.epoch, e.WindowStarts[windowOf(e, position.pos)]}
		if started && o == origin {
			return
		}
		started, origin = true, o
		table = windowTable{epoch: o.epoch, first: int32(windowOf(e, o.pos)), last: int32(len(e.WindowStarts) - 1)}
		if edge.epoch == o.epoch {
			table.last = int32(windowOf(e, edge.pos))
		}
		table.last = max(table.first, table.last)
	}
	for k, b := range t.Batches {
		e, ok := w.orders[b.Epoch]
		if !ok || w.orders[b.Epoch+1] == nil {
			return nil, fmt.Errorf("%w: batch %d is of epoch %d; the trace's orders must hold it and the one after", ErrInvalid, k, b.Epoch)
		}
		if b.Start < 0 || b.End <= b.Start || b.End > e.Samples {
			return nil, fmt.Errorf("%w: batch %d is positions [%d, %d) of an epoch of %d", ErrInvalid, k, b.Start, b.End, e.Samples)
		}
		start := windowPos{b.Epoch, b.Start}
		if !started {
			edge = start
		}
		if end := (windowPos{b.Epoch, b.End}); edge.before(end) {
			edge = end
		}
		rebuild(min2(edge, start))
		w.tables = append(w.tables, table)
		rebuild(edge)
	}
	return w, nil
}

// min2 is the earlier of two positions.
func min2(a, b windowPos) windowPos {
	if b.before(a) {
		return b
	}
	return a
}

// windowOf is the window of e holding position pos (its last sample's
// past the end), as layout's orders answer it: the first window that
// ends after pos, empty windows skipped.
func windowOf(e *api.PlanOrder, pos int) int {
	pos = min(pos, e.Samples-1)
	n := len(e.WindowStarts)
	return sort.Search(n, func(w int) bool { return w == n-1 || e.WindowStarts[w+1] > pos })
}

// hot is the key of a chunk of a window the stream is in: before every
// other; such chunks go least recently used first.
const hot = -1

// key is chunk c's eviction key under table t: hot, the start of the
// later window of t's epoch that first needs it, or of the next epoch's
// (in samples from the trace's first epoch), or never.
func (w *windowTrace) key(t windowTable, c int32) int64 {
	e := w.orders[t.epoch]
	switch cw := e.ChunkWindows[c]; {
	case cw >= t.first && cw <= t.last:
		return hot
	case cw > t.last:
		return w.offset[t.epoch] + int64(e.WindowStarts[cw])
	}
	if n := w.orders[t.epoch+1]; n != nil {
		if cw := n.ChunkWindows[c]; cw >= 0 {
			return w.offset[t.epoch+1] + int64(n.WindowStarts[cw])
		}
	}
	return evict.Never
}

// windowCache is the gateway's next-use policy over a windowTrace: the
// resident, unpinned chunks in an evict.Heap (the gateway's) keyed by
// the table of the batch being read, the least recently released first
// among equal keys; re-keyed whenever a batch is read under another
// table, as the gateway's policy re-keys its heap when the use table is
// rebuilt.
type windowCache struct {
	sizes          []int64
	capacity, used int64
	heap           *evict.Heap
	w              *windowTrace
	batchOf        []int32 // per access, its batch
	table          windowTable
	keyed          bool
	seq            uint64
}

func newWindowCache(sizes []int64, capacity int64, w *windowTrace, batchOf []int32) *windowCache {
	return &windowCache{sizes: sizes, capacity: capacity, heap: evict.NewHeap(len(sizes)), w: w, batchOf: batchOf}
}

func (b *windowCache) pin(i int, c int32) bool {
	if t := b.w.tables[b.batchOf[i]]; !b.keyed || t != b.table {
		b.table, b.keyed = t, true
		b.heap.Rekey(func(id int) int64 { return b.w.key(t, int32(id)) })
	}
	return b.heap.Remove(int(c))
}

func (b *windowCache) admit(c int32) bool {
	size := b.sizes[c]
	if size > b.capacity {
		return false
	}
	for b.used+size > b.capacity && b.heap.Len() > 0 {
		b.used -= b.sizes[b.heap.Pop()]
	}
	if b.used+size > b.capacity {
		return false
	}
	b.used += size
	return true
}

func (b *windowCache) release(_ int, c int32) {
	b.seq++
	b.heap.Push(int(c), b.w.key(b.table, c), b.seq)
}
