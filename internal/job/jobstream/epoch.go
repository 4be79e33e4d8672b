package jobstream

// EpochOrder is one epoch's order, memoised (layout.Orders), with the
// per-chunk window table the use table asks for on every stream move.
type EpochOrder struct {
	Order
	// ChunkWindow maps chunk ID → its window in this epoch; -1 if the
	// epoch does not read it.
	ChunkWindow []int32
	// Weight is, for an importance epoch, each chunk's importance (its
	// samples' weights, importance.Epoch.ChunkWeight) over the mean: what
	// the cache keeps when no stream needs a chunk. nil for a
	// uniform epoch.
	Weight []float32
}

// Order is what is read of an epoch's order: *shuffle.Epoch, or
// *importance.Epoch for a stream drawing by importance.
type Order interface {
	NumSamples() int
	NumWindows() int
	WindowChunks(w int) []int
	WindowStart(w int) int
	WindowOf(pos int) int
	Window(w int) []int
}
