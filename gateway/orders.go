package gateway

import (
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/shuffle"
)

// jobStream identifies the order a job reads: the dataset, seed and window.
// Every rank, batch size, world size and offset of one job — and any other
// job with the same three — read the same sequence of epochs, so the
// schedule, prefetch and statistics follow streams, not requests.
type jobStream struct {
	ds     *loadedDataset
	seed   uint64
	window int
	// imp names the importance job a stream belongs to and the snapshot
	// its epochs are drawn from; zero for the uniform shuffle. An
	// importance job's first epoch names no snapshot and reads the uniform
	// order, but is still the job's: its next epoch is not that order's.
	imp importanceStream
}

// importanceStream is the part of a stream an importance snapshot fixes.
type importanceStream struct {
	job, version string
	hot          int
}

// streamOf is the stream a job reads on ds.
func streamOf(ds *loadedDataset, job api.Job) jobStream {
	js := jobStream{ds: ds, seed: job.Seed, window: job.Window}
	if i := job.Importance; i.On() {
		js.imp.job = i.Job
		if i.Version != "" {
			js.imp.version, js.imp.hot = i.Version, i.Hot
		}
	}
	return js
}

// sampled reports whether the stream draws by importance.
func (js jobStream) sampled() bool { return js.imp.version != "" }

// importanceJob reports whether the stream is an epoch of an importance
// job: its next epoch is drawn from a snapshot not sealed yet, so the
// schedule does not project it, and the job's later epochs supersede it.
func (js jobStream) importanceJob() bool { return js.imp.job != "" }

// epochOrder is one epoch's order with the per-chunk window table the
// schedule asks for on every stream move.
type epochOrder struct {
	order
	chunkWindow []int32 // chunk ID → its window in this epoch; -1 if the epoch does not read it
	// weight is, for an importance epoch, each chunk's importance (its
	// samples' weights, importance.Epoch.ChunkWeight) over the mean: what
	// the cache keeps when no stream's schedule needs a chunk. nil for a
	// uniform epoch.
	weight []float32
}

// order is what the gateway reads of an epoch's order: *shuffle.Epoch, or
// *importance.Epoch for a stream drawing by importance.
type order interface {
	NumSamples() int
	NumWindows() int
	WindowChunks(w int) []int
	WindowStart(w int) int
	WindowOf(pos int) int
	Window(w int) []int
}

type orderKey struct {
	jobStream
	epoch uint64
}

type windowKey struct {
	orderKey
	w int
}

// orders computes and memoises epoch orders and the sample order of their
// windows. Both are pure functions of the key, so a lost or duplicated
// entry costs only recomputation; the bounds keep a flood of distinct
// seeds or epochs from holding memory.
type orders struct {
	epochs *lru.Cache[orderKey, *epochOrder]
	// sampledEpochs holds importance epochs, which cost 8 bytes a sample
	// rather than O(chunks): fewer of them.
	sampledEpochs *lru.Cache[orderKey, *epochOrder]
	snapshots     *snapshots
	windows       *lru.Cache[windowKey, []int]
	// assignments memoises global batches' assignments to ranks.
	assignments *lru.Cache[assignKey, [][]int]
	// nodes is the cluster's node count: above 1, chunk orders are
	// stratified by owner (shuffle.NewStratifiedEpoch), so that every
	// window holds chunks of every node.
	nodes int
}

// Bounds of the memoised orders: an epoch costs O(chunks), a window the
// samples of its chunks.
const (
	maxMemoEpochs = 64
	// An importance epoch holds 8 bytes a sample.
	maxMemoSampledEpochs = 8
	maxMemoWindows       = 32
	// An assignment holds one global batch's IDs.
	maxMemoAssignments = 64
)

func newOrders(nodes int, snaps *snapshots) *orders {
	e, _ := lru.New[orderKey, *epochOrder](maxMemoEpochs)
	se, _ := lru.New[orderKey, *epochOrder](maxMemoSampledEpochs)
	w, _ := lru.New[windowKey, []int](maxMemoWindows)
	a, _ := lru.New[assignKey, [][]int](maxMemoAssignments)
	return &orders{epochs: e, sampledEpochs: se, snapshots: snaps, windows: w, assignments: a, nodes: max(nodes, 1)}
}

// epoch returns the order of one epoch of a stream.
func (o *orders) epoch(s jobStream, epoch uint64) (*epochOrder, error) {
	k := orderKey{s, epoch}
	memo := o.epochs
	if s.sampled() {
		memo = o.sampledEpochs
	}
	if e, ok := memo.Get(k); ok {
		return e, nil
	}
	var e order
	var err error
	var weight []float32
	switch {
	case s.sampled():
		snap, ok := o.snapshots.get(s.ds, s.imp.job, s.imp.version)
		if !ok {
			return nil, fmt.Errorf("%w: importance snapshot %s of job %s is not loaded", ErrNotFound, s.imp.version, s.imp.job)
		}
		var ie *importance.Epoch
		ie, err = importance.NewEpoch(s.ds.counts, snap, s.seed, epoch, s.window, s.imp.hot)
		if err == nil {
			weight = chunkWeights(ie, len(s.ds.counts))
		}
		e = ie
	case o.nodes > 1:
		e, err = shuffle.NewStratifiedEpoch(s.ds.counts, s.ds.owners(o.nodes), o.nodes, s.seed, epoch, s.window)
	default:
		e, err = shuffle.NewEpoch(s.ds.counts, s.seed, epoch, s.window)
	}
	if err != nil {
		return nil, err
	}
	eo := &epochOrder{order: e, chunkWindow: make([]int32, len(s.ds.counts)), weight: weight}
	for c := range eo.chunkWindow {
		eo.chunkWindow[c] = -1
	}
	for w := range e.NumWindows() {
		for _, c := range e.WindowChunks(w) {
			eo.chunkWindow[c] = int32(w)
		}
	}
	memo.Add(k, eo)
	return eo, nil
}

// chunkWeights are an importance epoch's chunk weights over their mean.
func chunkWeights(e *importance.Epoch, chunks int) []float32 {
	w := make([]float32, chunks)
	var sum float64
	for c := range w {
		sum += e.ChunkWeight(c)
	}
	if sum == 0 {
		return w
	}
	mean := sum / float64(chunks)
	for c := range w {
		w[c] = float32(e.ChunkWeight(c) / mean)
	}
	return w
}

// window returns the sample order of window w of an epoch; the slice is
// shared and must not be modified.
func (o *orders) window(s jobStream, epoch uint64, e *epochOrder, w int) []int {
	k := windowKey{orderKey{s, epoch}, w}
	if ids, ok := o.windows.Get(k); ok {
		return ids
	}
	ids := e.Window(w)
	o.windows.Add(k, ids)
	return ids
}

// appendRange appends the sample IDs at epoch positions [start, end) of a
// stream's epoch, from its memoised windows.
func (o *orders) appendRange(dst []int, js jobStream, e *epochOrder, epoch uint64, start, end int) []int {
	for pos := start; pos < end; {
		w := e.WindowOf(pos)
		ws := e.WindowStart(w)
		win := o.window(js, epoch, e, w)
		take := min(end, ws+len(win)) - pos
		dst = append(dst, win[pos-ws:pos-ws+take]...)
		pos += take
	}
	return dst
}

// assignKey names one global batch's assignment to ranks: everything that
// decides it but the rank.
type assignKey struct {
	orderKey
	batchSize, world, offset int
	dropLast                 bool
	m                        int
}

// assigned returns the samples job's rank receives from global batch m of
// a stream's epoch under locality-aware assignment (cluster.Assign): the
// global batch's samples, each rank first given those whose chunk its
// home node owns. Every rank of the batch asks for the same assignment,
// so the whole of it is memoised.
func (o *orders) assigned(js jobStream, e *epochOrder, epoch uint64, job api.Job, n, m int) ([]int, error) {
	k := assignKey{orderKey{js, epoch}, job.BatchSize, job.World, job.Offset, job.DropLast, m}
	if a, ok := o.assignments.Get(k); ok {
		return a[job.Rank], nil
	}
	p := job.Params
	share := make([]int, p.World)
	start, end := n, 0
	for r := range share {
		p.Rank = r
		s, e, err := p.BatchRange(n, m)
		if err != nil {
			return nil, err
		}
		share[r] = e - s
		start, end = min(start, s), max(end, e)
	}
	if start > end {
		start = end
	}
	ids := o.appendRange(make([]int, 0, end-start), js, e, epoch, start, end)
	owners := js.ds.owners(o.nodes)
	owner := make([]int, len(ids))
	for i, id := range ids {
		c, _, _, _ := js.ds.index.SampleRange(id)
		owner[i] = owners[c]
	}
	a, err := cluster.Assign(ids, owner, share, o.nodes)
	if err != nil {
		return nil, err
	}
	if js.sampled() {
		// Assignment takes a subsequence for each rank, which can put
		// two draws of one sample next to each other.
		for _, r := range a.Ranks {
			importance.SeparateRepeats(r)
		}
	}
	o.assignments.Add(k, a.Ranks)
	return a.Ranks[job.Rank], nil
}
