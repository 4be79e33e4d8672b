package shuffle

import (
	"fmt"
	"math/rand/v2"
)

// appendDomain keeps an append's merge's random stream apart from the
// shuffle's (seed, epoch) streams.
const appendDomain = 0x617070656e64 // "append"

// chainMix spreads a record's position in its chain over the merge's
// seed, so that each record of a chain has a random stream of its own;
// the first record's (position 0) is the single record's.
const chainMix = 0x9e3779b97f4a7c15

// MaxAppends bounds the records of a job's chain of appends (the
// records a job may take one after another): an index records the 16
// versions it extends (chunkindex.MaxAncestors), and a gateway finds the
// version a job read before its first record as one of them.
const MaxAppends = 16

// A Base is what an append's merge reads of the order it extends: an
// Epoch, or another append's merge.
type Base interface {
	NumSamples() int
	NumWindows() int
	WindowStart(w int) int
	WindowOf(pos int) int
	WindowChunks(w int) []int
	Window(w int) []int
}

// Appended is the order of the epoch of an append record (docs/shuffle.md
// §15) over counts whose first old chunks are those of an order the job
// read before (its base): the base's windows up to and including the one
// holding the record's first position, then its remaining windows and
// those of the new chunks' own order (the same seed, epoch and window
// over the new chunks alone; chunk and sample IDs after the old ones)
// interleaved by a merge seeded by (seed, epoch) and the record's place
// in its chain, each next window taken from a side with probability in
// proportion to the windows it has left. The gateway serves a job with
// the records by it (internal/batch/layout) and the planner plans the job
// by it (AppendedEpoch), so the two cannot disagree.
//
// It costs O(chunks) to make and a window of a side to read a window.
// Immutable and safe for concurrent use.
type Appended struct {
	sides     [2]Base
	chunkBase [2]int
	idBase    [2]int
	wins      []side
	starts    []int // per window its first position, then the length
}

// side is a window of one of an Appended's two orders.
type side struct{ k, w int }

// NewAppended is the order of the epoch of an append record whose first
// position is from, over counts whose first old chunks are the version
// the job read (Appended): the first record of a chain, over the old
// chunks' own order.
func NewAppended(counts []int, old int, seed, epoch uint64, window, from int) (*Appended, error) {
	oe, err := NewEpoch(counts[:old], seed, epoch, window)
	if err != nil {
		return nil, err
	}
	return NewAppendedOver(oe, counts, old, seed, epoch, window, from, 0)
}

// NewAppendedOver is the order of the epoch of the record at place k of a
// job's chain (0 for the first), whose first position is from, over
// base: the order in force before it over counts' first old chunks.
func NewAppendedOver(base Base, counts []int, old int, seed, epoch uint64, window, from, k int) (*Appended, error) {
	ne, err := NewEpoch(counts[old:], seed, epoch, window)
	if err != nil {
		return nil, err
	}
	// The new chunks' IDs follow the old chunks' (not base's samples: an
	// exclusion may have left some out of base).
	firstNew := 0
	for _, k := range counts[:old] {
		firstNew += k
	}
	m := &Appended{sides: [2]Base{base, ne}, chunkBase: [2]int{0, old}, idBase: [2]int{0, firstNew}}
	keep := base.NumWindows()
	if from < base.NumSamples() {
		keep = base.WindowOf(from) + 1
	}
	for w := range keep {
		m.wins = append(m.wins, side{0, w})
	}
	r := rand.New(rand.NewPCG(seed^uint64(k)*chainMix, epoch^appendDomain))
	next := [2]int{keep, 0}
	left := [2]int{base.NumWindows() - keep, ne.NumWindows()}
	for left[0]+left[1] > 0 {
		k := 0
		if r.IntN(left[0]+left[1]) >= left[0] {
			k = 1
		}
		m.wins = append(m.wins, side{k, next[k]})
		next[k]++
		left[k]--
	}
	m.starts = make([]int, len(m.wins)+1)
	for i, sw := range m.wins {
		m.starts[i+1] = m.starts[i] + windowLen(m.sides[sw.k], sw.w)
	}
	return m, nil
}

// A Grown is one record of a job's chain of appends, as its orders take
// it: the version it extends has Chunks chunks, and it applies from
// position From of epoch Epoch's order.
type Grown struct {
	Chunks int
	Epoch  uint64
	From   int
}

// AppendedEpoch is epoch epoch's order of a job that took the records of
// chain in turn (first first, each extending the version of the one
// before, the last over all of counts; docs/shuffle.md §15): EditedEpoch
// of a chain of appends alone. One record gives exactly NewAppended's
// order in its epoch.
func AppendedEpoch(counts []int, chain []Grown, seed, epoch uint64, window int) (Base, error) {
	if len(chain) == 0 || len(chain) > MaxAppends {
		return nil, fmt.Errorf("shuffle: a chain of %d append records; 1 to %d", len(chain), MaxAppends)
	}
	edits := make([]Edit, len(chain))
	for i, g := range chain {
		if g.Chunks < 1 {
			return nil, fmt.Errorf("shuffle: append record %d of %d extends %d chunks: not a chain over %d chunks", i, len(chain), g.Chunks, len(counts))
		}
		edits[i] = Edit{Epoch: g.Epoch, From: g.From, Chunks: g.Chunks}
	}
	return EditedEpoch(counts, edits, seed, epoch, window)
}

// windowLen is the samples of window w of e.
func windowLen(e Base, w int) int {
	end := e.NumSamples()
	if w+1 < e.NumWindows() {
		end = e.WindowStart(w + 1)
	}
	return end - e.WindowStart(w)
}

// NumSamples is the epoch's samples: the old chunks' and the new ones'.
func (m *Appended) NumSamples() int { return m.starts[len(m.starts)-1] }

// NumWindows is the windows of both sides.
func (m *Appended) NumWindows() int { return len(m.wins) }

// WindowStart is window w's first position.
func (m *Appended) WindowStart(w int) int { return m.starts[w] }

// WindowOf is the window holding position pos.
func (m *Appended) WindowOf(pos int) int {
	return windowAt(m.starts, pos)
}

// WindowChunks is window w's chunks, in order.
func (m *Appended) WindowChunks(w int) []int {
	sw := m.wins[w]
	cs := m.sides[sw.k].WindowChunks(sw.w)
	if m.chunkBase[sw.k] == 0 {
		return cs
	}
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c + m.chunkBase[sw.k]
	}
	return out
}

// Window is window w's sample IDs in order, a new slice.
func (m *Appended) Window(w int) []int {
	sw := m.wins[w]
	ids := m.sides[sw.k].Window(sw.w)
	if b := m.idBase[sw.k]; b != 0 {
		for i := range ids {
			ids[i] += b
		}
	}
	return ids
}
