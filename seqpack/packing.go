package seqpack

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/brandgw/brand/shuffle"
)

// A Packing is one epoch of a token stream packed into sequences: for each
// window of the epoch's document order, where its sequences start, and the
// means to lay out any range of sequences on demand. It holds O(windows)
// memory and never materialises the epoch's sequences.
//
// Sequence s belongs to the window holding its first token: in BestFit a
// window's documents fill its sequences alone; in Concat a sequence that
// starts in one window may end in the next ones.
//
// A Packing is immutable after NewPacking returns and safe for concurrent use
// if its DocumentOrder and Tokens are. Slices it returns belong to the caller.
type Packing struct {
	order       DocumentOrder
	tokens      Tokens
	spec        Spec
	seed, epoch uint64
	starts      []int // starts[w] is window w's first sequence; len windows+1
	// at[w] is the token position (EOS counted) of window w's first
	// document in the epoch's stream: Concat only.
	at    []int
	total int // the documents' tokens (and EOS tokens in Concat)
	split int // documents in more than one sequence
}

// NewPacking packs epoch epoch of a job of seed seed: the documents of
// order, each of tokens(doc) tokens, into sequences as spec says
// (docs/shuffle.md §12). seed and epoch are those the order was drawn
// with (a mixture component's pass in place of the epoch); they seed
// BestFit's permutation of each window's sequences.
//
// It reads every window of the order once and keeps only each window's
// first sequence: O(documents · log) time in BestFit (each window packed
// and its sequences counted), O(documents) in Concat, O(windows) memory
// kept, and scratch for one window. An invalid spec, a negative token
// count or a total past math.MaxInt yields an error wrapping ErrInvalid.
func NewPacking(order DocumentOrder, tokens Tokens, spec Spec, seed, epoch uint64) (*Packing, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	nw := order.NumWindows()
	e := &Packing{order: order, tokens: tokens, spec: spec, seed: seed, epoch: epoch, starts: make([]int, nw+1)}
	seq := spec.Seq
	var p *packer
	if spec.Mode == BestFit {
		p = newPacker(seq)
	} else {
		e.at = make([]int, nw+1)
	}
	sum := 0 // the tokens so far, an EOS a document counted
	for w := range nw {
		docs := order.Window(w)
		for _, d := range docs {
			n := tokens(d)
			if n < 0 {
				return nil, fmt.Errorf("%w: document %d has %d tokens", ErrInvalid, d, n)
			}
			if n >= math.MaxInt-sum {
				return nil, fmt.Errorf("%w: the epoch's token count overflows int at document %d", ErrInvalid, d)
			}
			sum += n + 1
			if spec.Mode == Concat {
				// The document and its EOS are tokens [t, t+n] of the
				// stream: split if that crosses a multiple of seq.
				t := e.total
				if t/seq != (t+n)/seq {
					e.split++
				}
				e.total += n + 1
			}
		}
		if spec.Mode == Concat {
			// Sequence s starts in window w if token s·seq does.
			e.at[w+1] = e.total
			e.starts[w+1] = (e.total + seq - 1) / seq
			continue
		}
		shape := p.count(docs, tokens)
		e.total += shape.tokens
		e.split += shape.split
		e.starts[w+1] = e.starts[w] + shape.sequences()
	}
	return e, nil
}

// Spec returns the epoch's sequence length and mode.
func (e *Packing) Spec() Spec { return e.spec }

// NumSequences returns the number of sequences in the epoch.
func (e *Packing) NumSequences() int { return e.starts[len(e.starts)-1] }

// NumTokens returns the tokens that are not pad in the epoch's sequences:
// its documents' tokens, and in Concat one EOS a document. The epoch's
// fill is NumTokens() / (NumSequences() · seq).
func (e *Packing) NumTokens() int { return e.total }

// Split returns how many documents the epoch lays out in more than one
// sequence: in BestFit those longer than seq, in Concat those (EOS
// counted) that cross a cut.
func (e *Packing) Split() int { return e.split }

// NumWindows returns the order's number of windows.
func (e *Packing) NumWindows() int { return len(e.starts) - 1 }

// WindowStart returns the first sequence of window w, for w in
// [0, NumWindows]: WindowStart(NumWindows()) is NumSequences(). A window
// that starts no sequence starts where the next one does. It panics if w
// is out of range.
func (e *Packing) WindowStart(w int) int {
	if w < 0 || w >= len(e.starts) {
		panic(fmt.Sprintf("pack: WindowStart(%d) outside [0, %d]", w, len(e.starts)-1))
	}
	return e.starts[w]
}

// WindowOf returns the window sequence s belongs to, s in
// [0, NumSequences()): a binary search, O(log windows). It panics
// otherwise.
func (e *Packing) WindowOf(s int) int {
	e.checkRange("WindowOf", s, s+1)
	return sort.Search(e.NumWindows(), func(w int) bool { return e.starts[w+1] > s })
}

// WindowsRead returns the windows [first, last] whose documents sequences
// [start, end) hold, start < end: the windows a reader of the range needs.
// In BestFit those the sequences belong to; in Concat the last sequence
// may reach into later windows. It panics unless
// 0 <= start < end <= NumSequences().
func (e *Packing) WindowsRead(start, end int) (first, last int) {
	e.checkRange("WindowsRead", start, end)
	if start == end {
		panic(fmt.Sprintf("pack: WindowsRead(%d, %d) of no sequence", start, end))
	}
	if e.spec.Mode == BestFit {
		return e.WindowOf(start), e.WindowOf(end - 1)
	}
	seq := e.spec.Seq
	return e.tokenWindow(start * seq), e.tokenWindow(min(end*seq, e.total) - 1)
}

// tokenWindow is the window holding token t of a Concat stream.
func (e *Packing) tokenWindow(t int) int {
	return sort.Search(e.NumWindows(), func(w int) bool { return e.at[w+1] > t })
}

// Window returns window w's sequences, WindowStart(w) onward, in epoch
// order, as a fresh slice: in BestFit the window's documents packed and
// permuted, O(documents in the window · log) and scratch of O(seq); in
// Concat the stream cut from the window's first whole sequence on,
// O(documents of the windows read). A server serving many ranges of one
// window should keep its result. It panics if w is not in
// [0, NumWindows).
func (e *Packing) Window(w int) []Sequence {
	if w < 0 || w >= e.NumWindows() {
		panic(fmt.Sprintf("pack: window %d outside [0, %d)", w, e.NumWindows()))
	}
	if e.spec.Mode == Concat {
		return e.appendConcat(nil, e.starts[w], e.starts[w+1])
	}
	return newPacker(e.spec.Seq).pack(e.order.Window(w), e.tokens, e.seed, e.epoch, w)
}

// AppendRange appends sequences [start, end) of the epoch to dst and
// returns the extended slice. It lays out only the windows the range
// reads, each as Window does. It panics unless
// 0 <= start <= end <= NumSequences().
func (e *Packing) AppendRange(dst []Sequence, start, end int) []Sequence {
	e.checkRange("AppendRange", start, end)
	if start == end {
		return dst
	}
	if e.spec.Mode == Concat {
		return e.appendConcat(dst, start, end)
	}
	p := newPacker(e.spec.Seq)
	for w, s := e.WindowOf(start), start; s < end; w++ {
		ws, we := e.starts[w], e.starts[w+1]
		if ws == we {
			continue
		}
		seqs := p.pack(e.order.Window(w), e.tokens, e.seed, e.epoch, w)
		hi := min(end, we)
		dst = append(dst, seqs[s-ws:hi-ws]...)
		s = hi
	}
	return dst
}

// Batch returns the sequences p.Rank takes from global batch m of the
// epoch: the cut of shuffle.Params.BatchRange over NumSequences(), so
// that batch sizes, world, rank, drop_last and offset count sequences as
// they count samples of an ordinary job. Errors are BatchRange's.
func (e *Packing) Batch(p shuffle.Params, m int) ([]Sequence, error) {
	start, end, err := p.BatchRange(e.NumSequences(), m)
	if err != nil {
		return nil, err
	}
	return e.AppendRange(make([]Sequence, 0, end-start), start, end), nil
}

// appendConcat appends sequences [start, end) of a Concat epoch to dst:
// tokens [start·seq, min(end·seq, total)) of the stream of the windows'
// documents, each followed by its EOS, the last sequence of the epoch
// padded.
func (e *Packing) appendConcat(dst []Sequence, start, end int) []Sequence {
	if start == end {
		return dst
	}
	seq := e.spec.Seq
	t := start * seq
	w := e.tokenWindow(t)
	docs := e.order.Window(w)
	// The document holding token t, and t's offset in it.
	i, x := 0, e.at[w]
	for x+e.tokens(docs[i])+1 <= t {
		x += e.tokens(docs[i]) + 1
		i++
	}
	off := t - x
	// A piece a sequence and one a document start: as many pieces as
	// that, unless the range reads on into later windows.
	pieces := make([]Piece, 0, end-start+len(docs)-i)
	ends := make([]int, 0, end-start) // each sequence's end in pieces
	pads := make([]int, 0, end-start)
	for range end - start {
		room := seq
		for room > 0 && docs != nil {
			d := docs[i]
			ext := e.tokens(d) + 1
			n := min(room, ext-off)
			pieces = append(pieces, Piece{Doc: d, Offset: off, Len: n, EOS: off+n == ext})
			room -= n
			if off += n; off < ext {
				continue
			}
			off = 0
			if i++; i < len(docs) {
				continue
			}
			// The next window with documents, if any.
			i, docs = 0, nil
			for w++; w < e.NumWindows() && e.at[w+1] == e.at[w]; w++ {
			}
			if w < e.NumWindows() {
				docs = e.order.Window(w)
			}
		}
		ends = append(ends, len(pieces))
		pads = append(pads, room)
	}
	lo := 0
	dst = slices.Grow(dst, len(ends))
	for j, hi := range ends {
		dst = append(dst, Sequence{Pieces: pieces[lo:hi:hi], Pad: pads[j]})
		lo = hi
	}
	return dst
}

func (e *Packing) checkRange(op string, start, end int) {
	if start < 0 || end < start || end > e.NumSequences() {
		panic(fmt.Sprintf("pack: %s(%d, %d) outside [0, %d]", op, start, end, e.NumSequences()))
	}
}
