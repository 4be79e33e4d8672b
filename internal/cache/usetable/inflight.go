package usetable

import "container/heap"

// inflight is a stream's batches being served: how many began at each
// start position and when the first of them began, who they are served
// to (admission: Begin), and the oldest position and start among them.
//
// A job of a thousand ranks has a thousand batches in flight, and every
// Begin and Finish asks for the oldest: a scan of them all under the use
// table's lock cost a seventh of the gateway's CPU at 1,024 streams. So
// the oldest are kept in two heaps whose entries are cleared lazily (an
// entry of a position no longer in flight, or of an earlier start of
// one begun again, is dropped when it reaches the top), rebuilt from the
// maps when stale entries outnumber the live ones: O(log n) a change,
// amortised.
type inflight struct {
	n     map[epochPos]int   // batches begun at each start position
	began map[epochPos]int64 // when the first of them began
	pos   posHeap
	time  timeHeap

	// serving counts the batches in n; ranks, those of each rank named
	// by its request; width is the widest world those requests named (0:
	// none yet). Begin admits by them.
	serving int
	ranks   map[int]int
	width   int
}

func newInflight() inflight {
	return inflight{n: map[epochPos]int{}, began: map[epochPos]int64{}, ranks: map[int]int{}}
}

// len is the number of distinct positions in flight.
func (f *inflight) len() int { return len(f.n) }

// add records a batch at at, begun at now (the time frame's), served to
// who.
func (f *inflight) add(at epochPos, now int64, who Rank) {
	if f.n[at] == 0 {
		f.began[at] = now
		heap.Push(&f.pos, at)
		heap.Push(&f.time, timed{at, now})
	}
	f.n[at]++
	f.serving++
	if who.World > 0 {
		f.ranks[who.Rank]++
	}
}

// remove ends a batch at at served to who, and reports whether one was
// in flight there.
func (f *inflight) remove(at epochPos, who Rank) bool {
	n, ok := f.n[at]
	if !ok {
		return false
	}
	if n <= 1 {
		delete(f.n, at)
		delete(f.began, at)
	} else {
		f.n[at] = n - 1
	}
	f.serving--
	if who.World > 0 {
		if k := f.ranks[who.Rank]; k <= 1 {
			delete(f.ranks, who.Rank)
		} else {
			f.ranks[who.Rank] = k - 1
		}
	}
	if stale := f.pos.Len() + f.time.Len() - 2*len(f.n); stale > 2*len(f.n)+64 {
		f.rebuild()
	}
	return true
}

// oldest is the earliest position in flight; false if none is.
func (f *inflight) oldest() (epochPos, bool) {
	for f.pos.Len() > 0 {
		if p := f.pos[0]; f.n[p] > 0 {
			return p, true
		}
		heap.Pop(&f.pos)
	}
	return epochPos{}, false
}

// oldestBegan is when the oldest batch in flight began; false if none is.
func (f *inflight) oldestBegan() (int64, bool) {
	for f.time.Len() > 0 {
		if t := f.time[0]; f.n[t.at] > 0 && f.began[t.at] == t.began {
			return t.began, true
		}
		heap.Pop(&f.time)
	}
	return 0, false
}

// rebuild makes the heaps anew from the maps, with no stale entry.
func (f *inflight) rebuild() {
	f.pos, f.time = f.pos[:0], f.time[:0]
	for p, b := range f.began {
		f.pos = append(f.pos, p)
		f.time = append(f.time, timed{p, b})
	}
	heap.Init(&f.pos)
	heap.Init(&f.time)
}

// posHeap is a min-heap of positions (container/heap).
type posHeap []epochPos

func (h posHeap) Len() int           { return len(h) }
func (h posHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h posHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *posHeap) Push(x any)        { *h = append(*h, x.(epochPos)) }
func (h *posHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// timed is a position and when its first batch began.
type timed struct {
	at    epochPos
	began int64
}

// timeHeap is a min-heap of starts (container/heap).
type timeHeap []timed

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].began < h[j].began }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(timed)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
