package shuffle

import (
	"math/rand/v2"
	"slices"
)

// appendDomain keeps an append's merge's random stream apart from the
// shuffle's (seed, epoch) streams.
const appendDomain = 0x617070656e64 // "append"

// Appended is the order of the epoch of an append record (docs/shuffle.md
// §15) over counts whose first old chunks a job read before: the old
// chunks' order's windows up to and including the one holding the
// record's first position, then its remaining windows and those of the
// new chunks' own order (the same seed, epoch and window over the new
// chunks alone; chunk and sample IDs after the old ones) interleaved by
// a merge seeded by (seed, epoch), each next window taken from a side
// with probability in proportion to the windows it has left. The gateway
// serves a job with the record by it (internal/batch/layout) and the
// planner plans the job by it, so the two cannot disagree.
//
// It costs O(chunks) to make and a window of a side to read a window.
// Immutable and safe for concurrent use.
type Appended struct {
	sides     [2]*Epoch
	chunkBase [2]int
	idBase    [2]int
	wins      []side
	starts    []int // per window its first position, then the length
}

// side is a window of one of an Appended's two orders.
type side struct{ k, w int }

// NewAppended is the order of the epoch of an append record whose first
// position is from, over counts whose first old chunks are the version
// the job read (Appended).
func NewAppended(counts []int, old int, seed, epoch uint64, window, from int) (*Appended, error) {
	oe, err := NewEpoch(counts[:old], seed, epoch, window)
	if err != nil {
		return nil, err
	}
	ne, err := NewEpoch(counts[old:], seed, epoch, window)
	if err != nil {
		return nil, err
	}
	m := &Appended{sides: [2]*Epoch{oe, ne}, chunkBase: [2]int{0, old}}
	for _, n := range counts[:old] {
		m.idBase[1] += n
	}
	keep := oe.NumWindows()
	if from < oe.NumSamples() {
		keep = oe.WindowOf(from) + 1
	}
	for w := range keep {
		m.wins = append(m.wins, side{0, w})
	}
	r := rand.New(rand.NewPCG(seed, epoch^appendDomain))
	next := [2]int{keep, 0}
	left := [2]int{oe.NumWindows() - keep, ne.NumWindows()}
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

// windowLen is the samples of window w of e.
func windowLen(e *Epoch, w int) int {
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
	w, _ := slices.BinarySearchFunc(m.starts[1:], pos, func(end, pos int) int {
		if end > pos {
			return 1
		}
		return -1
	})
	return w
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
