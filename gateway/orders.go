package gateway

import (
	lru "github.com/hashicorp/golang-lru/v2"

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
}

// epochOrder is one epoch's order with the per-chunk window table the
// schedule asks for on every stream move.
type epochOrder struct {
	*shuffle.Epoch
	chunkWindow []int32 // chunk ID → its window in this epoch
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
	epochs  *lru.Cache[orderKey, *epochOrder]
	windows *lru.Cache[windowKey, []int]
}

// Bounds of the memoised orders: an epoch costs O(chunks), a window the
// samples of its chunks.
const (
	maxMemoEpochs  = 64
	maxMemoWindows = 32
)

func newOrders() *orders {
	e, _ := lru.New[orderKey, *epochOrder](maxMemoEpochs)
	w, _ := lru.New[windowKey, []int](maxMemoWindows)
	return &orders{epochs: e, windows: w}
}

// epoch returns the order of one epoch of a stream.
func (o *orders) epoch(s jobStream, epoch uint64) (*epochOrder, error) {
	k := orderKey{s, epoch}
	if e, ok := o.epochs.Get(k); ok {
		return e, nil
	}
	e, err := shuffle.NewEpoch(s.ds.counts, s.seed, epoch, s.window)
	if err != nil {
		return nil, err
	}
	eo := &epochOrder{Epoch: e, chunkWindow: make([]int32, len(s.ds.counts))}
	for w := range e.NumWindows() {
		for _, c := range e.WindowChunks(w) {
			eo.chunkWindow[c] = int32(w)
		}
	}
	o.epochs.Add(k, eo)
	return eo, nil
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
