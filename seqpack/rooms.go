package seqpack

import "math/bits"

// rooms holds the open bins of a best-fit packing by their room (the
// tokens a bin can still take) and answers best fit's one question: the
// bin with the least room of at least n, the lowest-numbered among those
// with equal room. A bin with no room is not held: nothing fits it.
//
// The rooms that hold a bin are a bit set of three levels of 64-bit
// words, so the least room at least n is found in three word scans; the
// bins of one room are a pairing heap by bin number, linked through
// per-bin arrays, so that a room's lowest-numbered bin is its heap's
// root. Only a chosen bin ever leaves its room (it is the root), and it
// comes back into a smaller one, so each placement costs one search,
// one delete-min and one insert: O(log bins) amortised, with no
// allocation once the arrays have grown.
//
// A rooms is scratch for one packing at a time, reset between windows.
type rooms struct {
	l0, l1, l2 []uint64 // bit r of l0: room r holds a bin; bit i of l1: word i of l0 is not 0; l2 likewise
	head       []int32  // per room, 1 + the root of its heap of bins; 0 for none
	child, sib []int32  // per bin, 1 + its first child and next sibling in its heap; 0 for none
	pairs      []int32  // scratch of pop
}

// newRooms returns rooms for bins of at most seq tokens.
func newRooms(seq int) *rooms {
	n0 := (seq + 63) / 64
	n1 := (n0 + 63) / 64
	n2 := (n1 + 63) / 64
	return &rooms{l0: make([]uint64, n0), l1: make([]uint64, n1), l2: make([]uint64, n2), head: make([]int32, seq)}
}

// reset empties r for a packing of bins bins, given each bin's room.
func (r *rooms) reset(room []int32) {
	for _, x := range room {
		if x > 0 {
			r.head[x] = 0
			r.l0[x>>6] = 0
			r.l1[x>>12] = 0
			r.l2[x>>18] = 0
		}
	}
	r.child, r.sib = r.child[:0], r.sib[:0]
}

// open adds bin b, the next bin's number, with room x > 0.
func (r *rooms) open(b, x int32) {
	r.child = append(r.child, 0)
	r.sib = append(r.sib, 0)
	r.insert(b, x)
}

// insert puts bin b into room x > 0.
func (r *rooms) insert(b, x int32) {
	h := r.head[x]
	if h == 0 {
		r.l0[x>>6] |= 1 << (x & 63)
		r.l1[x>>12] |= 1 << ((x >> 6) & 63)
		r.l2[x>>18] |= 1 << ((x >> 12) & 63)
		r.head[x] = b + 1
		return
	}
	r.head[x] = r.meld(h, b+1)
}

// take removes and returns the lowest-numbered bin of room x, which holds
// one.
func (r *rooms) take(x int32) int32 {
	h := r.head[x]
	rest := r.pop(h)
	r.head[x] = rest
	if rest == 0 {
		if r.l0[x>>6] &^= 1 << (x & 63); r.l0[x>>6] == 0 {
			if r.l1[x>>12] &^= 1 << ((x >> 6) & 63); r.l1[x>>12] == 0 {
				r.l2[x>>18] &^= 1 << ((x >> 12) & 63)
			}
		}
	}
	return h - 1
}

// fit returns the least room of at least n that holds a bin, or -1.
func (r *rooms) fit(n int) int32 {
	i := n >> 6 // word of l0
	if i >= len(r.l0) {
		return -1
	}
	if w := r.l0[i] & (^uint64(0) << (n & 63)); w != 0 {
		return int32(i<<6 | bits.TrailingZeros64(w))
	}
	i++ // the next words of l0, found through l1
	j := i >> 6
	if j < len(r.l1) {
		if w := r.l1[j] & (^uint64(0) << (i & 63)); w != 0 {
			i = j<<6 | bits.TrailingZeros64(w)
			return int32(i<<6 | bits.TrailingZeros64(r.l0[i]))
		}
	}
	j++ // the next words of l1, found through l2
	for k := j >> 6; k < len(r.l2); k++ {
		w := r.l2[k]
		if k == j>>6 {
			w &= ^uint64(0) << (j & 63)
		}
		if w != 0 {
			j = k<<6 | bits.TrailingZeros64(w)
			i = j<<6 | bits.TrailingZeros64(r.l1[j])
			return int32(i<<6 | bits.TrailingZeros64(r.l0[i]))
		}
	}
	return -1
}

// meld joins two heaps by their roots (1 + bin), the lower bin on top.
func (r *rooms) meld(a, b int32) int32 {
	if b < a {
		a, b = b, a
	}
	r.sib[b-1] = r.child[a-1]
	r.child[a-1] = b
	return a
}

// pop removes root h (1 + bin) and returns the root of its children
// joined by the two-pass pairing: pairs left to right, then the pairs
// melded right to left.
func (r *rooms) pop(h int32) int32 {
	c := r.child[h-1]
	r.child[h-1] = 0
	r.pairs = r.pairs[:0]
	for c != 0 {
		a := c
		b := r.sib[a-1]
		r.sib[a-1] = 0
		if b == 0 {
			r.pairs = append(r.pairs, a)
			break
		}
		c = r.sib[b-1]
		r.sib[b-1] = 0
		r.pairs = append(r.pairs, r.meld(a, b))
	}
	var root int32
	for i := len(r.pairs) - 1; i >= 0; i-- {
		if root == 0 {
			root = r.pairs[i]
		} else {
			root = r.meld(r.pairs[i], root)
		}
	}
	return root
}
