package shuffle

import (
	"fmt"
	"sort"
)

// Windows is an epoch's chunk order cut into windows of a fixed number of
// chunks, with the epoch position at which each window's samples start:
// what a gateway schedules, caches and prefetches by. Epoch embeds it, and
// so does importance.Epoch, whose order has the same shape with other
// chunks and other sample counts, so that the two answer these questions
// with one implementation.
//
// A Windows is immutable after NewWindows returns and safe for concurrent
// use. Slices it returns share its memory and must not be modified.
type Windows struct {
	order  []int // chunk IDs in epoch order
	size   int   // chunks per window
	starts []int // starts[w] is window w's first epoch position; len windows+1
}

// NewWindows cuts order, chunk IDs in epoch order, into windows of size
// chunks (the last may hold fewer), chunk c taking samples(c) positions of
// the epoch. It keeps order, which the caller must not modify afterwards.
// It costs O(len(order)) time and memory. size must be at least 1.
func NewWindows(order []int, size int, samples func(c int) int) Windows {
	nw := (len(order) + size - 1) / size
	starts := make([]int, nw+1)
	for w := range nw {
		pos := starts[w]
		for _, c := range order[w*size : min((w+1)*size, len(order))] {
			pos += samples(c)
		}
		starts[w+1] = pos
	}
	return Windows{order: order, size: size, starts: starts}
}

// WindowSize returns the window size in chunks.
func (ws *Windows) WindowSize() int { return ws.size }

// ChunkOrder returns the chunk IDs in epoch order. The slice is the
// Windows' own: the caller must not modify it.
func (ws *Windows) ChunkOrder() []int { return ws.order[:len(ws.order):len(ws.order)] }

// NumWindows returns ceil(len(ChunkOrder()) / WindowSize()), the number of
// windows.
func (ws *Windows) NumWindows() int { return len(ws.starts) - 1 }

// WindowChunks returns the chunk IDs of window w in epoch order: ChunkOrder
// from w*WindowSize, WindowSize of them (fewer for the last window). The
// slice is the Windows' own: the caller must not modify it. It panics if w
// is not in [0, NumWindows).
func (ws *Windows) WindowChunks(w int) []int {
	ws.checkWindow(w)
	lo, hi := w*ws.size, min((w+1)*ws.size, len(ws.order))
	return ws.order[lo:hi:hi]
}

// WindowStart returns the epoch position of window w's first sample, for w
// in [0, NumWindows]; WindowStart(NumWindows()) is the epoch's length. A
// window whose chunks take no positions starts where the next one does.
// It panics if w is out of range.
func (ws *Windows) WindowStart(w int) int {
	if w < 0 || w >= len(ws.starts) {
		panic(fmt.Sprintf("shuffle: WindowStart(%d) outside [0, %d]", w, len(ws.starts)-1))
	}
	return ws.starts[w]
}

// WindowOf returns the window holding epoch position pos, which must be in
// [0, WindowStart(NumWindows())), the epoch's length; it panics otherwise.
// It is a binary search over window starts, O(log NumWindows).
func (ws *Windows) WindowOf(pos int) int {
	n := ws.starts[len(ws.starts)-1]
	if pos < 0 || pos >= n {
		panic(fmt.Sprintf("shuffle: WindowOf(%d) outside [0, %d)", pos, n))
	}
	// The first window ending after pos; empty windows end where they start
	// and are skipped.
	return sort.Search(ws.NumWindows(), func(w int) bool { return ws.starts[w+1] > pos })
}

// checkWindow panics unless w is in [0, NumWindows).
func (ws *Windows) checkWindow(w int) {
	if w < 0 || w >= ws.NumWindows() {
		panic(fmt.Sprintf("shuffle: window %d outside [0, %d)", w, ws.NumWindows()))
	}
}
