package vision

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/brandgw/brand/internal/seeded"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
)

// domainPack seeds the permutation of a window's sequences: the ASCII
// bytes "brandvis" read big-endian, like seqpack's "brandpak". Changing
// it changes every packed vision epoch.
const domainPack uint64 = 0x6272616e64766973

// An Item is what packing knows of a sample: its tokens (text and
// vision) and its images, and what balancing knows: its vision
// encoder's work (Encoder). An item of no tokens is in no sequence: a
// skipped sample.
type Item struct {
	Tokens, Images int
	// Vision is the sample's vision tokens: its images' placeholders
	// (Span.Len each), Start and End excluded. The encoder makes them,
	// from Merge² patches each.
	Vision int
	// Encoder is the sample's vision-encoder cost: Σ patches² over its
	// images (a ViT attends over each image's patches; patches are its
	// vision tokens × Merge²), in the units of Cost.
	Encoder uint64
}

// A Sequence is whole samples, by their IDs in the order, packed in
// that order, then Pad pad tokens. A sample is never cut: its images'
// spans stay with their pixels.
type Sequence struct {
	Samples []int
	Pad     int
}

// An Epoch is one epoch of a vision job as sequences: a pure function
// of the epoch's sample order, the samples' items, the sequence length,
// the cap of images a sequence, the seed and the epoch, and of nothing
// else (not the world size, the rank, the node): a run resumes at
// another world size by its offset in sequences (shuffle.Params.Offset),
// as a token job does.
//
// Each window of the order is packed on its own, best fit decreasing in
// two dimensions: samples longest first (ties by their place in the
// window), each into the open sequence with the least room left that
// holds its tokens and, under a cap, its images (ties: the sequence
// opened first), else a new one. The window's sequences are then
// permuted by the stream (seed, epoch, "brandvis", window) so that the
// long-first order does not reach the trainer. Unlike seqpack's
// BestFit, nothing is cut: the caller keeps samples longer than seq, or
// of more images than the cap, out (Item.Tokens 0; Layout does).
//
// An Epoch keeps every sequence: O(samples) memory. It is immutable and
// safe for concurrent use.
type Epoch struct {
	seq  int
	seqs []Sequence
}

// NewEpoch packs the order's samples of items(id) into sequences of seq
// tokens, at most maxImages images each (0: no cap). An item longer than
// seq, or of more images than the cap, wraps ErrTooLong naming it.
func NewEpoch(order seqpack.DocumentOrder, items func(id int) Item, seq, maxImages int, seed, epoch uint64) (*Epoch, error) {
	if seq < 1 || seq > seqpack.MaxSeq {
		return nil, fmt.Errorf("%w: seq %d; must be 1..%d", seqpack.ErrInvalid, seq, seqpack.MaxSeq)
	}
	e := &Epoch{seq: seq}
	p := newPacker(seq, maxImages)
	for w := range order.NumWindows() {
		ids := order.Window(w)
		for _, id := range ids {
			it := items(id)
			if it.Tokens > seq || it.Tokens < 0 || maxImages > 0 && it.Images > maxImages {
				return nil, fmt.Errorf("%w: sample %d of %d tokens and %d images; a sequence holds %d tokens and %d images (0: no cap)",
					ErrTooLong, id, it.Tokens, it.Images, seq, maxImages)
			}
		}
		e.seqs = append(e.seqs, p.pack(ids, items, seed, epoch, w)...)
	}
	return e, nil
}

// Seq is the sequences' length.
func (e *Epoch) Seq() int { return e.seq }

// NumSequences is the epoch's sequences.
func (e *Epoch) NumSequences() int { return len(e.seqs) }

// Sequence returns sequence i of the epoch (its slice is shared: not to
// be modified).
func (e *Epoch) Sequence(i int) Sequence { return e.seqs[i] }

// Batch returns the sequences p.Rank takes from global batch m: the cut
// of shuffle.Params.BatchRange over NumSequences, as a token job's
// (seqpack.Packing.Batch). Errors are BatchRange's.
func (e *Epoch) Batch(p shuffle.Params, m int) ([]Sequence, error) {
	start, end, err := p.BatchRange(len(e.seqs), m)
	if err != nil {
		return nil, err
	}
	return slices.Clone(e.seqs[start:end]), nil
}

// Cost is a vision sequence's compute for balance= (balance.Assign): its
// language model's attention, Σ tokens² over its samples (each sample
// attends within itself: its position_ids restart, as
// balance.Attention's pieces), plus its vision encoder's, Σ Item.Encoder.
// Both count pairs of tokens attended; the pad costs nothing. Weighing
// the ranks of a global batch by it moves sequences between ranks, never
// out of the batch.
func Cost(q Sequence, items []Item) uint64 {
	var c uint64
	for _, id := range q.Samples {
		it := items[id]
		c += uint64(it.Tokens)*uint64(it.Tokens) + it.Encoder
	}
	return c
}

// packer packs one window at a time. Not safe for concurrent use.
type packer struct {
	seq, cap int
	// byRoom[r] are the open sequences of r tokens of room, by the order
	// they were opened; nonEmpty has bit r set when byRoom[r] has one.
	byRoom   [][]int32
	nonEmpty []uint64
}

func newPacker(seq, maxImages int) *packer {
	return &packer{seq: seq, cap: maxImages, byRoom: make([][]int32, seq+1), nonEmpty: make([]uint64, (seq+64)/64)}
}

// bin is a sequence being filled.
type bin struct {
	room, images int
	samples      []int
}

// pack lays window w's samples ids out and permutes its sequences.
func (p *packer) pack(ids []int, items func(int) Item, seed, epoch uint64, w int) []Sequence {
	type entry struct{ pos, tokens, images int }
	es := make([]entry, 0, len(ids))
	for pos, id := range ids {
		if it := items(id); it.Tokens > 0 {
			es = append(es, entry{pos, it.Tokens, it.Images})
		}
	}
	slices.SortStableFunc(es, func(a, b entry) int { return b.tokens - a.tokens })
	var bins []bin
	for _, x := range es {
		b := p.fit(bins, x.tokens, x.images)
		if b < 0 {
			b = len(bins)
			bins = append(bins, bin{room: p.seq})
		} else {
			p.remove(b, bins[b].room)
		}
		bb := &bins[b]
		bb.room -= x.tokens
		bb.images += x.images
		bb.samples = append(bb.samples, ids[x.pos])
		if bb.room > 0 {
			p.insert(b, bb.room)
		}
	}
	for r, l := range p.byRoom { // leave the scratch empty for the next window
		if len(l) > 0 {
			p.byRoom[r] = l[:0]
		}
	}
	clear(p.nonEmpty)
	perm := make([]int, len(bins))
	for i := range perm {
		perm[i] = i
	}
	s := seeded.New(seed, epoch, domainPack, uint64(w))
	s.Shuffle(perm, 0)
	out := make([]Sequence, len(bins))
	for i, q := range perm {
		out[i] = Sequence{Samples: bins[q].samples, Pad: bins[q].room}
	}
	return out
}

// fit returns the open sequence of least room at least tokens that can
// take images more images (the first opened among equals), or -1.
func (p *packer) fit(bins []bin, tokens, images int) int {
	for r := p.next(tokens); r >= 0; r = p.next(r + 1) {
		for _, b := range p.byRoom[r] {
			if p.cap == 0 || bins[b].images+images <= p.cap {
				return int(b)
			}
		}
	}
	return -1
}

// next is the least room at least r that an open sequence has, or -1.
func (p *packer) next(r int) int {
	for i := r / 64; i < len(p.nonEmpty) && r <= p.seq; i++ {
		word := p.nonEmpty[i]
		if i == r/64 {
			word &^= 1<<(r%64) - 1
		}
		if word != 0 {
			return i*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

func (p *packer) insert(b, room int) {
	l := p.byRoom[room]
	i, _ := slices.BinarySearch(l, int32(b))
	p.byRoom[room] = slices.Insert(l, i, int32(b))
	p.nonEmpty[room/64] |= 1 << (room % 64)
}

func (p *packer) remove(b, room int) {
	l := p.byRoom[room]
	i, _ := slices.BinarySearch(l, int32(b))
	l = slices.Delete(l, i, i+1)
	p.byRoom[room] = l
	if len(l) == 0 {
		p.nonEmpty[room/64] &^= 1 << (room % 64)
	}
}
