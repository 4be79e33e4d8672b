package importance

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/brandgw/brand/shuffle"
)

// HotShare bounds the hot chunks' part of an epoch: together they may take
// at most half of its draws, so that at least half is left to the weighted
// random selection and every chunk keeps a chance to be read, however large
// the cache.
const HotShare = 0.5

// An Epoch is the importance-sampled order of one epoch: which chunks are
// read, in which order, how many samples are drawn from each, and the means
// to compute any window's samples on demand. It has the shape of
// shuffle.Epoch (windows of chunks, a sample permutation per window) so a
// gateway serves, schedules and prefetches it the same way, with two
// differences: only the chunks with draws appear in ChunkOrder and the
// windows (NumChunks still counts them all), and a window's samples are
// drawn with replacement, so an ID may repeat and some IDs of a read chunk
// may be missing.
//
// Its windows (WindowSize, ChunkOrder, NumWindows, WindowChunks,
// WindowStart, WindowOf) are those of the embedded shuffle.Windows, cut
// from the chunks with draws, each taking as many positions as it has
// draws; NumWindows is ceil(NumRead / WindowSize).
//
// An Epoch is immutable and safe for concurrent use. Slices returned by
// ChunkOrder and WindowChunks are its own and must not be modified.
type Epoch struct {
	seed, epoch     uint64
	first           []int     // first[c] is chunk c's first sample ID; len chunks+1
	weights         []float64 // per sample
	chunkW          []float64 // W_c
	scale           float64   // A: chunk c's target draws are W_c·A
	draws           []int     // draws[c]: samples drawn from chunk c, 0 if unread
	shuffle.Windows           // the chunks with draws, in epoch order
}

// NewEpoch computes the importance order of epoch epoch for a dataset of
// len(counts) chunks, chunk c holding counts[c] samples, from snap, the
// snapshot sealed after the previous epoch (docs/importance.md §3–6).
// window is the number of chunks per window, as in shuffle.NewEpoch. hot
// is how many chunks the reader expects to keep cached: up to that many of
// the heaviest chunks are read first, every epoch (within HotShare of the
// draws), so a cache that keeps the heaviest chunks serves them as hits.
// hot = 0 orders every chunk by its weighted random key.
//
// snap must hold one score per sample (ErrInvalid otherwise); for an epoch
// without a snapshot use shuffle.NewEpoch, or NewOrder, which chooses. It
// costs O(n log n) time for the ranks and O(n) memory kept for the Epoch's
// life (8 bytes a sample), n the number of samples.
func NewEpoch(counts []int, snap *Snapshot, seed, epoch uint64, window, hot int) (*Epoch, error) {
	if snap == nil {
		return nil, fmt.Errorf("%w: no snapshot; an epoch without one is shuffle.NewEpoch's", ErrInvalid)
	}
	if window < 1 || hot < 0 {
		return nil, fmt.Errorf("%w: window %d (want >= 1), hot %d (want >= 0)", ErrInvalid, window, hot)
	}
	first := make([]int, len(counts)+1)
	for c, k := range counts {
		if k < 0 || k > math.MaxInt-first[c] {
			return nil, fmt.Errorf("%w: counts[%d] = %d: negative, or the total overflows", ErrInvalid, c, k)
		}
		first[c+1] = first[c] + k
	}
	n := first[len(counts)]
	if n != snap.NumSamples() {
		return nil, fmt.Errorf("%w: snapshot has %d scores, the counts %d samples", ErrInvalid, snap.NumSamples(), n)
	}
	e := &Epoch{seed: seed, epoch: epoch, first: first,
		weights: sampleWeights(snap.scores), chunkW: make([]float64, len(counts)), draws: make([]int, len(counts))}
	for c := range counts {
		var sum float64
		for _, w := range e.weights[first[c]:first[c+1]] {
			sum += w
		}
		e.chunkW[c] = sum
	}
	e.scale = e.quotaScale()
	e.Windows = shuffle.NewWindows(e.allot(e.walk(hot)), window, e.Draws)
	return e, nil
}

// quotaScale computes A, the factor turning a chunk's weight into its
// target draws x_c = W_c · A (docs/importance.md §4): A = w_max / mean²,
// mean = T / n, T the sum of the chunk weights. A chunk whose samples have the mean weight gets
// K = w_max / mean draws per sample, so about 1/K of the dataset is read:
// K = 1 when all scores are equal (the uniform epoch's reads), K ≈ 2 for
// distinct scores (the mean rank weight is about half the largest).
func (e *Epoch) quotaScale() float64 {
	var total, wmax float64
	for _, w := range e.chunkW {
		total += w
	}
	for _, w := range e.weights {
		wmax = max(wmax, w)
	}
	mean := total / float64(len(e.weights))
	return wmax / float64(mean*mean)
}

// walk returns the non-empty chunks in the order their draws are allotted
// (§4): the hot set first, then the rest, each by Efraimidis–Spirakis key
// descending, ties by chunk ID.
func (e *Epoch) walk(hot int) []int {
	// One key per chunk, empty ones included, drawn in chunk ID order:
	// key_c = log(u_c) / W_c, the logarithm of u_c^(1/W_c).
	s := newStream(e.seed, e.epoch, domainKeys, 0)
	keys := make([]float64, len(e.chunkW))
	for c, w := range e.chunkW {
		u := s.unitOpen()
		if w > 0 {
			keys[c] = logSpec(u) / w
		}
	}
	var live []int
	for c, w := range e.chunkW {
		if w > 0 {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return nil
	}

	// The hot set: the heaviest chunks (ties by ID) while fewer than hot
	// and their target draws stay within HotShare of the epoch.
	a := e.scale
	isHot := make([]bool, len(e.chunkW))
	if hot > 0 {
		heavy := slices.Clone(live)
		slices.SortFunc(heavy, func(x, y int) int {
			return cmp.Or(cmp.Compare(e.chunkW[y], e.chunkW[x]), cmp.Compare(x, y))
		})
		budget := float64(HotShare * float64(len(e.weights)))
		var sum float64
		for _, c := range heavy[:min(hot, len(heavy))] {
			x := float64(e.chunkW[c] * a)
			if sum+x > budget {
				break
			}
			sum += x
			isHot[c] = true
		}
	}
	byKey := func(x, y int) int {
		return cmp.Or(cmp.Compare(keys[y], keys[x]), cmp.Compare(x, y))
	}
	var hotSet, rest []int
	for _, c := range live {
		if isHot[c] {
			hotSet = append(hotSet, c)
		} else {
			rest = append(rest, c)
		}
	}
	slices.SortFunc(hotSet, byKey)
	slices.SortFunc(rest, byKey)
	return append(hotSet, rest...)
}

// allot gives each chunk of the walk its draws by cumulative rounding
// (§4) and returns the chunks that got any, in walk order. With X_k the
// running sum of the target draws x_c = W_c · A over the walk's first k
// chunks, the first k chunks together get B_k = min(n, round-half-even(X_k))
// draws, the last chunk of the walk B = n; chunk k gets B_k − B_{k−1}. The
// total is exactly n, each chunk gets its target within one draw, and the
// chunks after the budget is spent get none and are not read.
func (e *Epoch) allot(walk []int) []int {
	n := len(e.weights)
	a := e.scale
	var order []int
	var x float64
	prev := 0
	for k, c := range walk {
		x += float64(e.chunkW[c] * a)
		b := min(n, int(math.RoundToEven(x)))
		if k == len(walk)-1 {
			b = n
		}
		if b > prev {
			e.draws[c] = b - prev
			order = append(order, c)
			prev = b
		}
		if prev == n {
			break
		}
	}
	return order
}

// NumSamples returns the epoch's length: the dataset's sample count, as in
// the uniform order.
func (e *Epoch) NumSamples() int { return len(e.weights) }

// NumChunks returns the number of chunks of the dataset, read or not.
func (e *Epoch) NumChunks() int { return len(e.chunkW) }

// NumRead returns the number of chunks read this epoch, len(ChunkOrder()).
func (e *Epoch) NumRead() int { return len(e.ChunkOrder()) }

// ChunkWeight returns W_c, the sum of chunk c's sample weights: the
// importance a cache should keep chunks by (the heaviest of the chunks
// still needed stay). It panics if c is out of range.
func (e *Epoch) ChunkWeight(c int) float64 { return e.chunkW[c] }

// SampleWeight returns sample i's rank-based weight, in [Floor, 1].
func (e *Epoch) SampleWeight(i int) float64 { return e.weights[i] }

// Draws returns the number of samples drawn from chunk c this epoch; 0
// means the chunk is not read.
func (e *Epoch) Draws(c int) int { return e.draws[c] }

// Window returns the sample IDs of window w in epoch order, as a fresh
// slice: each of its chunks' draws (§5), concatenated in chunk order and
// permuted by the window's stream. IDs may repeat. It costs O(samples of
// the window's chunks + draws). It panics if w is not in
// [0, NumWindows).
func (e *Epoch) Window(w int) []int {
	chunks := e.WindowChunks(w) // panics for a w out of range
	ids := make([]int, 0, e.WindowStart(w+1)-e.WindowStart(w))
	var prefix []float64
	for _, c := range chunks {
		ids, prefix = e.appendDraws(ids, prefix, c)
	}
	s := newStream(e.seed, e.epoch, domainWindow, uint64(w))
	s.Shuffle(ids, 0)
	SeparateRepeats(ids)
	return ids
}

// SeparateRepeats moves every sample that follows itself away from itself
// (docs/importance.md §6): WebDataset readers group consecutive tar members
// by key, so a sample twice in a row would read as one. A repeat swaps with
// the next different sample after it; when none is left after it, it moves
// back into the first gap between two other samples. Only a window more
// than half one sample can keep a repeat.
func SeparateRepeats(a []int) { SeparateRepeatsFunc(a, func(x, y int) bool { return x == y }) }

// SeparateRepeatsFunc is SeparateRepeats over any elements, same telling
// which are one sample: a mixture's draws of one sample in two passes of
// its component are.
func SeparateRepeatsFunc[T any](a []T, same func(x, y T) bool) {
	for i := 1; i < len(a); i++ {
		d := a[i]
		if !same(d, a[i-1]) {
			continue
		}
		j := i + 1
		for j < len(a) && same(a[j], d) {
			j++
		}
		if j < len(a) {
			a[i], a[j] = a[j], a[i]
			continue
		}
		for k := 0; k < i; k++ {
			if !same(a[k], d) && (k == 0 || !same(a[k-1], d)) {
				copy(a[k+1:i+1], a[k:i])
				a[k] = d
				break
			}
		}
	}
}

// appendDraws appends chunk c's draws to dst, in ascending ID order:
// Draws(c) samples chosen by systematic sampling over the chunk's sample
// weights with one uniform u from the chunk's own stream (§5). With
// q = Draws(c) and P_j the running sum of the chunk's weights, draw k
// takes the first sample j with P_j > ((u + k) · W_c) / q. A sample of
// weight w is thus drawn ⌊q·w/W_c⌋ or ⌈q·w/W_c⌉ times, never a number far
// from its share: a chunk whose samples weigh the same and that draws as
// many as it holds yields each exactly once. prefix is scratch space,
// returned for reuse.
func (e *Epoch) appendDraws(dst []int, prefix []float64, c int) ([]int, []float64) {
	ws := e.weights[e.first[c]:e.first[c+1]]
	prefix = prefix[:0]
	var sum float64
	for _, w := range ws {
		sum += w
		prefix = append(prefix, sum)
	}
	s := newStream(e.seed, e.epoch, domainDraws, uint64(c))
	u := s.unitHalfOpen()
	q := float64(e.draws[c])
	j := 0
	for k := range e.draws[c] {
		t := float64(float64(u+float64(k))*sum) / q
		// The points ascend, so the search resumes where the last ended.
		for j < len(prefix)-1 && prefix[j] <= t {
			j++
		}
		dst = append(dst, e.first[c]+j)
	}
	return dst, prefix
}

// AppendRange appends the sample IDs at epoch positions [start, end) to dst,
// computing only the windows the range touches. It panics unless
// 0 <= start <= end <= NumSamples().
func (e *Epoch) AppendRange(dst []int, start, end int) []int {
	if start < 0 || end < start || end > e.NumSamples() {
		panic(fmt.Sprintf("importance: AppendRange(%d, %d) outside [0, %d]", start, end, e.NumSamples()))
	}
	for pos := start; pos < end; {
		w := e.WindowOf(pos)
		ws, we := e.WindowStart(w), e.WindowStart(w+1)
		hi := min(end, we)
		dst = append(dst, e.Window(w)[pos-ws:hi-ws]...)
		pos = hi
	}
	return dst
}

// ChunksOfRange returns the distinct chunks holding the samples at epoch
// positions [start, end), in order of first use.
func (e *Epoch) ChunksOfRange(start, end int) []int {
	var chunks []int
	seen := make(map[int]struct{})
	for _, id := range e.AppendRange(nil, start, end) {
		c := sort.Search(len(e.chunkW), func(c int) bool { return e.first[c+1] > id })
		if _, ok := seen[c]; !ok {
			seen[c] = struct{}{}
			chunks = append(chunks, c)
		}
	}
	return chunks
}

// Batch returns the sample IDs rank takes from global batch m, cut from the
// epoch exactly as shuffle.Epoch.Batch cuts the uniform order; errors are
// shuffle.BatchRange's.
func (e *Epoch) Batch(m, batchSize, world, rank int, dropLast bool) ([]int, error) {
	start, end, err := shuffle.BatchRange(e.NumSamples(), m, batchSize, world, rank, dropLast)
	if err != nil {
		return nil, err
	}
	return e.AppendRange(make([]int, 0, end-start), start, end), nil
}

// Order is what a gateway serves an epoch from; *shuffle.Epoch and *Epoch
// both implement it.
type Order interface {
	NumSamples() int
	NumChunks() int
	WindowSize() int
	NumWindows() int
	WindowChunks(w int) []int
	WindowStart(w int) int
	WindowOf(pos int) int
	Window(w int) []int
	ChunkOrder() []int
	AppendRange(dst []int, start, end int) []int
	ChunksOfRange(start, end int) []int
	Batch(m, batchSize, world, rank int, dropLast bool) ([]int, error)
}

var (
	_ Order = (*Epoch)(nil)
	_ Order = (*shuffle.Epoch)(nil)
)

// OrderSpec is what fixes one epoch's order, beside the dataset's sample
// counts: the job's seed and window, the epoch, and how it reads — by
// importance from a snapshot, or the plain uniform shuffle. Nothing of a
// cluster enters it: a job's order is the same on one gateway and on a
// cluster of any size. NewOrder turns it into the order.
type OrderSpec struct {
	Counts []int // per chunk, its samples
	Seed   uint64
	Epoch  uint64
	Window int // chunks per window, >= 1
	// Snapshot, if not nil, draws the epoch by importance (NewEpoch) with
	// Hot hot chunks.
	Snapshot *Snapshot
	Hot      int
}

// NewOrder returns the order of an epoch: the importance order (NewEpoch)
// when s names a snapshot, else the uniform shuffle (shuffle.NewEpoch). It
// is the one statement of that choice: the gateway's orders and the
// planner's simulations both call it, so that a plan replays the order the
// gateway serves. An epoch 0, or any epoch of a job that sends no
// feedback, is thus exactly the uniform order.
//
// Errors are those of the function it chooses.
func NewOrder(s OrderSpec) (Order, error) {
	// Each branch checks its error itself: returning a nil *Epoch as an
	// Order would make a non-nil interface.
	switch {
	case s.Snapshot != nil:
		e, err := NewEpoch(s.Counts, s.Snapshot, s.Seed, s.Epoch, s.Window, s.Hot)
		if err != nil {
			return nil, err
		}
		return e, nil
	}
	e, err := shuffle.NewEpoch(s.Counts, s.Seed, s.Epoch, s.Window)
	if err != nil {
		return nil, err
	}
	return e, nil
}
