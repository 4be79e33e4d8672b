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
	// FirstUse maps chunk ID → the epoch position of its first sample;
	// -1 if the epoch does not read it. The use table keys a chunk of a
	// later window by it (Start), as the planner's Belady does, so that
	// the chunks of one window do not tie. nil where the order knows its
	// chunks' windows only (a clip job's).
	FirstUse []int32
}

// Start is the epoch position at which chunk c, which the epoch reads,
// is first read: FirstUse's, else its window's start.
func (e *EpochOrder) Start(c int) int {
	if e.FirstUse != nil && e.FirstUse[c] >= 0 {
		return int(e.FirstUse[c])
	}
	return e.WindowStart(int(e.ChunkWindow[c]))
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
