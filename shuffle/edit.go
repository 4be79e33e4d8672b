package shuffle

import (
	"fmt"
	"iter"
	"math/bits"
	"slices"
)

// Edits: a named job's chain of edits made during its run — exclusions
// (samples left out from a position on, docs/shuffle.md §14) and appends
// (files appended to its dataset taken from a position on, §15) — applied
// to the epochs' orders themselves, in the order they were made. Each
// edit applies from position From of epoch Epoch of the order the edits
// before it make, and to every position of every later epoch; a chain's
// edits are in the order of their steps, so their epochs never decrease.
//
// Epoch e's order is the order of §5 over the chunks of the newest
// version an append before e grew (the version the job read first if
// none), without the samples the newest exclusion before e leaves out,
// then each edit of epoch e applied over the order before it, in turn:
// an append merges its new chunks' own order in after the window holding
// its position (NewAppendedOver), an exclusion leaves its samples out
// from its position on (each exclusion's Drop holds its samples and every
// earlier exclusion's). So every position before an edit's is what it
// was under the edits before it, and the gateway (internal/batch/layout)
// and the planner compute every epoch of a job by this one function.

// A Drop is the samples an exclusion leaves out: a set of sample IDs of a
// dataset version, counted per chunk. IDs past its bitset, the samples of
// chunks appended since, are not in it. Immutable once made; safe for
// concurrent use.
type Drop struct {
	bits  []uint64
	chunk []int32 // per chunk of the version it was made over: its samples in the set
	n     int
}

// NewDrop is the set of sample IDs bits marks (bit id%64 of word id/64),
// over a version whose chunks hold counts samples each, in ID order.
func NewDrop(bits []uint64, counts []int) *Drop {
	d := &Drop{bits: bits, chunk: make([]int32, len(counts))}
	first := 0
	for c, k := range counts {
		d.chunk[c] = int32(d.count(first, first+k))
		d.n += int(d.chunk[c])
		first += k
	}
	return d
}

// count is the number of dropped samples among IDs lo up to hi.
func (d *Drop) count(lo, hi int) int {
	k := 0
	for lo < hi {
		w := lo / 64
		if w >= len(d.bits) {
			break
		}
		word := d.bits[w] >> (lo % 64)
		if take := min(64-lo%64, hi-lo); take < 64 {
			word &= 1<<take - 1
		}
		k += bits.OnesCount64(word)
		lo = (w + 1) * 64
	}
	return k
}

// Dropped reports whether sample id is in the set.
func (d *Drop) Dropped(id int) bool {
	w := id / 64
	return id >= 0 && w < len(d.bits) && d.bits[w]&(1<<(id%64)) != 0
}

// Len is the number of samples in the set.
func (d *Drop) Len() int { return d.n }

// InChunk is the number of chunk c's samples in the set (0 for a chunk
// appended after the version it was made over).
func (d *Drop) InChunk(c int) int {
	if c < len(d.chunk) {
		return int(d.chunk[c])
	}
	return 0
}

// Bits is the set's bitset, shared: not to be modified.
func (d *Drop) Bits() []uint64 { return d.bits }

// IDs yields the set's sample IDs in increasing order.
func (d *Drop) IDs() iter.Seq[int] {
	return func(yield func(int) bool) {
		for w, b := range d.bits {
			for b != 0 {
				if !yield(w*64 + bits.TrailingZeros64(b)) {
					return
				}
				b &= b - 1
			}
		}
	}
}

// EmptyChunks counts the chunks of counts every sample of which is in the
// set: from the epoch after an exclusion's on, the chunks no batch reads.
func (d *Drop) EmptyChunks(counts []int) int {
	k := 0
	for c, n := range counts {
		if n > 0 && d.InChunk(c) == n {
			k++
		}
	}
	return k
}

// An Edit is one edit of a job's chain as its orders take it: an append
// (Chunks > 0: the version it extends has Chunks chunks, and it takes the
// chunks after them, up to the next append's version or the whole
// dataset) or an exclusion (Drop: the samples it and every exclusion
// before it leave out), applying from position From of epoch Epoch's
// order.
type Edit struct {
	Epoch  uint64
	From   int
	Chunks int
	Drop   *Drop
}

// MaxEdits bounds a job's chain of edits: each is an order built on the
// one before, and a node reads them all.
const MaxEdits = 64

// checkChain refuses a chain that is not one over counts: edits of both
// kinds or neither, epochs that decrease, appends that do not grow the
// version before them within counts, more than MaxEdits edits or
// MaxAppends appends.
func checkChain(counts []int, chain []Edit) error {
	if len(chain) > MaxEdits {
		return fmt.Errorf("shuffle: a chain of %d edits; at most %d", len(chain), MaxEdits)
	}
	appends, top := 0, 0
	for i, e := range chain {
		if (e.Chunks > 0) == (e.Drop != nil) || e.From < 0 || i > 0 && e.Epoch < chain[i-1].Epoch {
			return fmt.Errorf("shuffle: edit %d of %d (from position %d of epoch %d) is not one edit of a chain", i, len(chain), e.From, e.Epoch)
		}
		if e.Chunks == 0 {
			continue
		}
		if appends++; appends > MaxAppends {
			return fmt.Errorf("shuffle: a chain of more than %d appends", MaxAppends)
		}
		if e.Chunks < top || e.Chunks > len(counts) {
			return fmt.Errorf("shuffle: append %d of %d extends %d chunks, after a version of %d, in a dataset of %d: not a chain", i, len(chain), e.Chunks, top, len(counts))
		}
		top = e.Chunks
	}
	return nil
}

// EditedEpoch is epoch epoch's order of a job that made the edits of
// chain in turn (first first) over counts, the chunks of the dataset
// version the chain's last append grew (the version the job reads, if
// it made none): see the rule above. A chain without an edit in force by
// epoch is the order of §5 over the version the job read first.
func EditedEpoch(counts []int, chain []Edit, seed, epoch uint64, window int) (Base, error) {
	if err := checkChain(counts, chain); err != nil {
		return nil, err
	}
	// version(i) is the chunks of the version append i grows the job to.
	version := func(i int) int {
		for _, e := range chain[i+1:] {
			if e.Chunks > 0 {
				return e.Chunks
			}
		}
		return len(counts)
	}
	chunks := len(counts) // the version in force at the epoch's start
	if i := slices.IndexFunc(chain, func(e Edit) bool { return e.Chunks > 0 }); i >= 0 {
		chunks = chain[i].Chunks
	}
	var drop *Drop // the exclusion in force at the epoch's start
	for i, e := range chain {
		switch {
		case e.Epoch >= epoch:
		case e.Chunks > 0:
			chunks = version(i)
		default:
			drop = e.Drop
		}
	}
	var o Base
	o, err := NewEpoch(counts[:chunks], seed, epoch, window)
	if err != nil {
		return nil, err
	}
	if drop != nil {
		o = excludeOrder(o, drop, counts[:chunks], 0)
	}
	k := 0 // an append's place among the chain's appends: its merge's stream
	for i, e := range chain {
		switch {
		case e.Chunks > 0 && e.Epoch == epoch:
			if o, err = NewAppendedOver(o, counts[:version(i)], e.Chunks, seed, epoch, window, e.From, k); err != nil {
				return nil, err
			}
			chunks = version(i)
		case e.Epoch == epoch:
			o = excludeOrder(o, e.Drop, counts[:chunks], e.From)
		}
		if e.Chunks > 0 {
			k++
		}
	}
	return o, nil
}

// excluded is an epoch's order without a Drop's samples at base
// positions from on. Its windows are base's, each shorter by its dropped
// samples, and name only the chunks that keep a sample there. The base
// may itself leave out an earlier exclusion's samples after a position:
// a window of it after that position lacks them, which the Drop holds
// too (each exclusion's set holds the earlier ones'), so a chunk's
// samples left are its count less the Drop's. It costs O(chunks) to make,
// and a window of base's to read a window.
type excluded struct {
	base   Base
	d      *Drop
	from   int     // base positions before from are kept whole
	starts []int   // per window its first position, then the length
	chunks [][]int // per window: its chunks that keep a sample
}

func excludeOrder(base Base, d *Drop, counts []int, from int) *excluded {
	nw := base.NumWindows()
	e := &excluded{base: base, d: d, from: from, starts: make([]int, nw+1), chunks: make([][]int, nw)}
	pos := 0
	for w := range nw {
		e.starts[w] = pos
		bs, be := base.WindowStart(w), base.NumSamples()
		if w+1 < nw {
			be = base.WindowStart(w + 1)
		}
		chunks := base.WindowChunks(w)
		switch {
		case be <= from:
			pos += be - bs
			e.chunks[w] = chunks
		case bs >= from:
			kept := make([]int, 0, len(chunks))
			for _, c := range chunks {
				if k := counts[c] - d.InChunk(c); k > 0 {
					pos += k
					kept = append(kept, c)
				}
			}
			e.chunks[w] = kept
		default:
			// The window holding from: a chunk is kept if one of its
			// samples is, before from or not dropped.
			first := make([]int, len(counts)+1)
			for c, k := range counts {
				first[c+1] = first[c] + k
			}
			keep := map[int]bool{}
			for _, id := range e.Window(w) {
				pos++
				c, _ := slices.BinarySearch(first, id+1)
				keep[c-1] = true
			}
			for _, c := range chunks {
				if keep[c] {
					e.chunks[w] = append(e.chunks[w], c)
				}
			}
		}
	}
	e.starts[nw] = pos
	return e
}

func (e *excluded) NumSamples() int          { return e.starts[len(e.starts)-1] }
func (e *excluded) NumWindows() int          { return len(e.chunks) }
func (e *excluded) WindowChunks(w int) []int { return e.chunks[w] }

func (e *excluded) WindowStart(w int) int {
	if w == len(e.chunks) {
		return e.NumSamples()
	}
	return e.starts[w]
}

func (e *excluded) WindowOf(pos int) int {
	return windowAt(e.starts, pos)
}

// Window is base's window w without the dropped samples at base
// positions from e.from on, a new slice.
func (e *excluded) Window(w int) []int {
	ids := e.base.Window(w)
	bs := e.base.WindowStart(w)
	out := ids[:0]
	for i, id := range ids {
		if bs+i < e.from || !e.d.Dropped(id) {
			out = append(out, id)
		}
	}
	return out
}

// windowAt is the window holding position pos, given every window's
// first position and the epoch's end (starts has one more entry than
// there are windows).
func windowAt(starts []int, pos int) int {
	w, _ := slices.BinarySearchFunc(starts[1:], pos, func(end, pos int) int {
		if end > pos {
			return 1
		}
		return -1
	})
	return w
}
