package usetable

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
// amortised. The heaps are typed (push and pop below), not
// container/heap's: its Push and Pop box every entry in an interface,
// four allocations a batch on the warm path for a job with one batch in
// flight at a time.
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
		push(&f.pos, at, epochPos.before)
		push(&f.time, timed{at, now}, timed.sooner)
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
	if stale := len(f.pos) + len(f.time) - 2*len(f.n); stale > 2*len(f.n)+64 {
		f.rebuild()
	}
	return true
}

// oldest is the earliest position in flight; false if none is.
func (f *inflight) oldest() (epochPos, bool) {
	for len(f.pos) > 0 {
		if p := f.pos[0]; f.n[p] > 0 {
			return p, true
		}
		pop(&f.pos, epochPos.before)
	}
	return epochPos{}, false
}

// oldestBegan is when the oldest batch in flight began; false if none is.
func (f *inflight) oldestBegan() (int64, bool) {
	for len(f.time) > 0 {
		if t := f.time[0]; f.n[t.at] > 0 && f.began[t.at] == t.began {
			return t.began, true
		}
		pop(&f.time, timed.sooner)
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
	heapify(f.pos, epochPos.before)
	heapify(f.time, timed.sooner)
}

// timed is a position and when its first batch began.
type timed struct {
	at    epochPos
	began int64
}

// sooner orders timed entries by when they began.
func (t timed) sooner(u timed) bool { return t.began < u.began }

// A binary min-heap in a slice under less, h[0] its least.
type (
	posHeap  []epochPos
	timeHeap []timed
)

// push adds x to the heap h.
func push[S ~[]T, T any](h *S, x T, less func(a, b T) bool) {
	*h = append(*h, x)
	up(*h, len(*h)-1, less)
}

// pop removes the heap h's least entry.
func pop[S ~[]T, T any](h *S, less func(a, b T) bool) {
	s := *h
	last := len(s) - 1
	s[0], s[last] = s[last], s[0]
	*h = s[:last]
	down(*h, 0, less)
}

// heapify orders s as a heap.
func heapify[S ~[]T, T any](s S, less func(a, b T) bool) {
	for i := len(s)/2 - 1; i >= 0; i-- {
		down(s, i, less)
	}
}

func up[S ~[]T, T any](s S, i int, less func(a, b T) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !less(s[i], s[p]) {
			return
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func down[S ~[]T, T any](s S, i int, less func(a, b T) bool) {
	for {
		l := 2*i + 1
		if l >= len(s) {
			return
		}
		m := l
		if r := l + 1; r < len(s) && less(s[r], s[l]) {
			m = r
		}
		if !less(s[m], s[i]) {
			return
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
}
