package evict

import "math"

// Never is the key of a chunk nothing will use again and that weighs
// nothing: the largest, evicted first.
const Never = math.MaxInt64

// farCap bounds a weight over the mean in FarKey, so that the largest far
// key step (2^20 · 2^16 = 2^36) leaves every far key far above any
// next-use distance.
const farCap = 1 << 20

// RelativeWeights returns each weight over the weights' mean, as float32:
// the form in which FarKey compares them, and in which the gateway keeps a
// stream's chunk weights. If the weights sum to 0 (or there are none) all
// are 0, which FarKey keys as Never.
func RelativeWeights(w []float64) []float32 {
	q := make([]float32, len(w))
	var sum float64
	for _, x := range w {
		sum += x
	}
	if sum == 0 {
		return q
	}
	mean := sum / float64(len(w))
	for c, x := range w {
		q[c] = float32(x / mean)
	}
	return q
}

// FarKey is the eviction key of a chunk no order needs in the current
// epoch, of weight q over the mean (RelativeWeights): Never less one and q
// in steps of 1/65536, q capped at 2^20, so that the lightest has the
// largest key and goes first, and the heaviest stays to be drawn early in
// the next epoch. A chunk of weight 0 (or less, or NaN) keeps Never.
func FarKey(q float32) int64 {
	if !(q > 0) {
		return Never
	}
	return Never - 1 - int64(min(q, farCap)*(1<<16))
}

// JobEpoch names one epoch of one job in a demand trace of several jobs
// (the gateway's, merged as its jobs were served).
type JobEpoch struct {
	Job   int
	Epoch uint64
}
