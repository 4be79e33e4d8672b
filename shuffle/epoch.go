package shuffle

import (
	"fmt"
	"math"
	"sort"
)

// An Epoch is the sample order of one epoch of one job: the permuted chunk
// list cut into windows, and the means to compute any window's sample
// permutation on demand. It holds O(chunks) memory and never materialises
// the whole order.
//
// Its windows (WindowSize, ChunkOrder, NumWindows, WindowChunks,
// WindowStart, WindowOf) are those of the embedded Windows.
//
// An Epoch is immutable after NewEpoch returns and is safe for concurrent
// use by any number of goroutines. Slices it returns from ChunkOrder and
// WindowChunks share its memory and must not be modified; slices from
// Window, AppendRange, Batch and ChunksOfRange belong to the caller.
type Epoch struct {
	seed, epoch uint64
	first       []int // first[c] is chunk c's first global sample ID; len chunks+1
	Windows           // the permuted chunk IDs, cut into windows
}

// NewEpoch computes the chunk order of epoch epoch for a dataset whose chunk
// c holds counts[c] samples (global IDs [first_c, first_c+counts[c]) with
// first_c the prefix sum), cut into windows of window chunks. Chunks with no
// samples are allowed and take their place in the chunk order like any other.
// NewEpoch keeps no reference to counts. It costs O(len(counts)) time and
// memory.
//
// A negative count, a window below 1, or counts whose total overflows int
// yield an error wrapping ErrInvalid.
func NewEpoch(counts []int, seed, epoch uint64, window int) (*Epoch, error) {
	first, err := firstIDs(counts, window)
	if err != nil {
		return nil, err
	}
	order := make([]int, len(counts))
	for c := range order {
		order[c] = c
	}
	s := newStream(seed, epoch, domainChunks, 0)
	s.Shuffle(order, 0)
	return newEpoch(first, order, seed, epoch, window), nil
}

// newEpoch cuts a chunk order into windows; first holds the chunks' first
// sample IDs (len chunks+1).
func newEpoch(first, order []int, seed, epoch uint64, window int) *Epoch {
	count := func(c int) int { return first[c+1] - first[c] }
	return &Epoch{seed: seed, epoch: epoch, first: first, Windows: NewWindows(order, window, count)}
}

// firstIDs checks the window and the counts and returns the chunks' first
// sample IDs: the prefix sums of counts, with the total last.
func firstIDs(counts []int, window int) ([]int, error) {
	if err := checkWindow(window); err != nil {
		return nil, err
	}
	first := make([]int, len(counts)+1)
	for c, k := range counts {
		if k < 0 {
			return nil, fmt.Errorf("%w: counts[%d] = %d; sample counts must be >= 0", ErrInvalid, c, k)
		}
		if k > math.MaxInt-first[c] {
			return nil, fmt.Errorf("%w: total sample count overflows int at chunk %d", ErrInvalid, c)
		}
		first[c+1] = first[c] + k
	}
	return first, nil
}

// NumSamples returns the number of samples in the epoch, the sum of counts.
func (e *Epoch) NumSamples() int { return e.first[len(e.first)-1] }

// NumChunks returns the number of chunks, len(counts).
func (e *Epoch) NumChunks() int { return len(e.order) }

// Window returns the sample IDs of window w in epoch order, as a fresh
// slice: the IDs of its chunks (in chunk order, each chunk's IDs ascending)
// permuted by the window's own stream. It costs O(samples in the window). It
// panics if w is not in [0, NumWindows).
func (e *Epoch) Window(w int) []int {
	e.checkWindow(w)
	return e.shuffledWindow(make([]int, 0, e.starts[w+1]-e.starts[w]), w, 0)
}

// AppendRange appends the sample IDs at epoch positions [start, end) to dst
// and returns the extended slice. It computes only the windows the range
// touches, each in O(samples in the window). It panics unless
// 0 <= start <= end <= NumSamples().
func (e *Epoch) AppendRange(dst []int, start, end int) []int {
	e.checkRange("AppendRange", start, end)
	if start == end {
		return dst
	}
	var scratch []int
	for w, pos := e.WindowOf(start), start; pos < end; w++ {
		ws, we := e.starts[w], e.starts[w+1]
		lo, hi := pos-ws, min(end, we)-ws
		if cap(scratch) < we-ws {
			scratch = make([]int, 0, we-ws)
		}
		scratch = e.shuffledWindow(scratch[:0], w, lo)
		dst = append(dst, scratch[lo:hi]...)
		pos = ws + hi
	}
	return dst
}

// ChunksOfRange returns the distinct chunk IDs that hold the samples at epoch
// positions [start, end), in order of first use. These are the chunks a
// reader of the range needs, in the order it needs them: a subset of the
// chunks of the windows the range touches, computed from those windows'
// permutations at the cost of AppendRange. It panics unless
// 0 <= start <= end <= NumSamples().
func (e *Epoch) ChunksOfRange(start, end int) []int {
	ids := e.AppendRange(nil, start, end)
	var chunks []int
	seen := make(map[int]struct{})
	for _, id := range ids {
		c := e.chunkOf(id)
		if _, ok := seen[c]; !ok {
			seen[c] = struct{}{}
			chunks = append(chunks, c)
		}
	}
	return chunks
}

// shuffledWindow appends window w's sample list to dst, permutes it with the
// window's stream, and returns it. Only positions [stop, len) of the result
// are guaranteed final (see stream.shuffle); stop 0 gives the whole window.
func (e *Epoch) shuffledWindow(dst []int, w, stop int) []int {
	base := len(dst)
	for _, c := range e.WindowChunks(w) {
		for id := e.first[c]; id < e.first[c+1]; id++ {
			dst = append(dst, id)
		}
	}
	s := newStream(e.seed, e.epoch, domainWindow, uint64(w))
	s.Shuffle(dst[base:], stop)
	return dst
}

// chunkOf returns the chunk holding global sample ID id, skipping empty
// chunks, by binary search over the prefix sums.
func (e *Epoch) chunkOf(id int) int {
	return sort.Search(len(e.order), func(c int) bool { return e.first[c+1] > id })
}

func (e *Epoch) checkRange(op string, start, end int) {
	if start < 0 || end < start || end > e.NumSamples() {
		panic(fmt.Sprintf("shuffle: %s(%d, %d) outside [0, %d]", op, start, end, e.NumSamples()))
	}
}
