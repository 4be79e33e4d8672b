package seqpack

import "slices"

// posBits is how many low bits of an item's sort key hold its position
// in the window: a window of up to 2^40 documents.
const posBits = 40

// packer runs best fit over one window at a time (docs/shuffle.md §12.1),
// keeping its scratch from window to window. Not safe for concurrent use.
type packer struct {
	seq   int
	keys  []uint64 // per remainder: (seq-1-length)<<posBits | position, sorted
	spare []uint64 // radixSort's other buffer
	room  []int32  // per bin, its room
	binOf []int32  // per key, in sorted order, its bin
	rooms *rooms
}

func newPacker(seq int) *packer { return &packer{seq: seq, rooms: newRooms(seq)} }

// window is the shape of one window's packing.
type window struct {
	full   int // sequences of one whole seq-sized piece
	bins   int // sequences best fit filled
	tokens int // the documents' tokens
	split  int // documents longer than seq, cut
}

func (w window) sequences() int { return w.full + w.bins }

// count packs the window's documents docs and returns its shape, keeping
// the remainders' keys sorted in p.keys and each one's bin in p.binOf.
func (p *packer) count(docs []int, tokens Tokens) window {
	seq := p.seq
	var w window
	p.keys = slices.Grow(p.keys[:0], len(docs))
	for pos, d := range docs {
		n := tokens(d)
		w.tokens += n
		if n > seq {
			w.split++
		}
		w.full += n / seq
		if r := n % seq; r > 0 {
			p.keys = append(p.keys, uint64(seq-1-r)<<posBits|uint64(pos))
		}
	}
	// Longest first, ties by position in the window: the keys' order.
	p.keys, p.spare = radixSort(p.keys, p.spare, seq)
	p.rooms.reset(p.room)
	p.room = p.room[:0]
	p.binOf = slices.Grow(p.binOf[:0], len(p.keys))
	for _, k := range p.keys {
		n := int32(seq - 1 - int(k>>posBits))
		b := int32(-1)
		if x := p.rooms.fit(int(n)); x >= 0 {
			b = p.rooms.take(x)
			p.room[b] = x - n
			if x > n {
				p.rooms.insert(b, x-n)
			}
		} else { // a new bin; a remainder is shorter than seq, so it has room left
			b = int32(len(p.room))
			p.room = append(p.room, int32(seq)-n)
			p.rooms.open(b, int32(seq)-n)
		}
		p.binOf = append(p.binOf, b)
	}
	w.bins = len(p.room)
	return w
}

// pack returns window w's sequences in epoch order: the window's shape
// as count gives it, its sequences' pieces laid out, then permuted by the
// window's stream (seed, epoch, "brandpak", w).
func (p *packer) pack(docs []int, tokens Tokens, seed, epoch uint64, w int) []Sequence {
	shape := p.count(docs, tokens)
	seq := p.seq
	n := shape.sequences()
	// The sequences before the permutation: the whole pieces, in the
	// window's order, then the bins in the order best fit opened them.
	// first[j] is sequence j's first piece in pieces, whose pieces are in
	// that order; a bin's pieces in the order best fit placed them.
	first := make([]int, n+1)
	for j := range shape.full {
		first[j+1] = first[j] + 1
	}
	for _, b := range p.binOf {
		first[shape.full+int(b)+1]++
	}
	for j := shape.full; j < n; j++ {
		first[j+1] += first[j]
	}
	pieces := make([]Piece, first[n])
	j := 0
	for _, d := range docs {
		for k := range tokens(d) / seq {
			pieces[j] = Piece{Doc: d, Offset: k * seq, Len: seq}
			j++
		}
	}
	next := first[shape.full : n+1 : n+1] // each bin's next piece
	next = slices.Clone(next)
	for i, k := range p.keys {
		d := docs[k&(1<<posBits-1)]
		r := seq - 1 - int(k>>posBits)
		b := p.binOf[i]
		pieces[next[b]] = Piece{Doc: d, Offset: tokens(d) - r, Len: r}
		next[b]++
	}
	perm := make([]int, n)
	for j := range perm {
		perm[j] = j
	}
	permute(perm, seed, epoch, w)
	out := make([]Sequence, n)
	for j, q := range perm {
		ps := pieces[first[q]:first[q+1]:first[q+1]]
		pad := 0
		if q >= shape.full {
			pad = int(p.room[q-shape.full])
		}
		out[j] = Sequence{Pieces: ps, Pad: pad}
	}
	return out
}

// radixDigit is the bits radixSort sorts by in one pass.
const radixDigit = 11

// radixSort sorts keys, whose positions (their low posBits bits) ascend,
// by the rest, seq-1-length < seq: a stable least-significant-digit radix
// sort of one pass per 11 bits of seq, so that equal lengths keep their
// positions' order and the keys end sorted. It returns the sorted keys
// and the other buffer, both to be kept for the next window.
func radixSort(keys, spare []uint64, seq int) (sorted, other []uint64) {
	spare = slices.Grow(spare[:0], len(keys))[:len(keys)]
	var count [1 << radixDigit]int
	for shift := posBits; (seq-1)>>(shift-posBits) > 0; shift += radixDigit {
		clear(count[:])
		for _, k := range keys {
			count[(k>>shift)&(1<<radixDigit-1)]++
		}
		at := 0
		for d, n := range count {
			count[d] = at
			at += n
		}
		for _, k := range keys {
			d := (k >> shift) & (1<<radixDigit - 1)
			spare[count[d]] = k
			count[d]++
		}
		keys, spare = spare, keys
	}
	return keys, spare
}
