package importance

import (
	"math"
	"slices"
)

// Floor is the smallest sample weight, as a fraction of the largest
// possible one: the least important samples are drawn a tenth as often as
// the most important, never less, so no sample starves.
const Floor = 0.1

// sampleWeights returns SHADE's rank-based weights of the scores
// (docs/importance.md §3): the samples sorted by score ascending, sample i
// of rank ρ_i in 1..n weighs max(ρ_i / n, Floor). Samples with equal scores
// share the average of their ranks, ρ = L + (E+1)/2 with L samples scoring
// lower and E scoring the same; computed as (2L+E+1) / (2n), one exactly
// rounded division of exact integers. Sharing ranks keeps equal scores at
// equal weights: all samples scoring the same (a snapshot that learnt
// nothing) weigh the same, whatever their IDs.
//
// Scores are finite and >= 0 with -0 stored as +0, so the order of their
// bit patterns is the order of their values; a single sort of
// (bits << 32 | ID) keys ranks them.
func sampleWeights(scores []float32) []float64 {
	n := len(scores)
	keys := make([]uint64, n)
	for i, s := range scores {
		keys[i] = uint64(math.Float32bits(s))<<32 | uint64(i)
	}
	slices.Sort(keys)
	w := make([]float64, n)
	for a := 0; a < n; {
		bits := keys[a] >> 32
		b := a + 1
		for b < n && keys[b]>>32 == bits {
			b++
		}
		r := float64(2*a+(b-a)+1) / float64(2*n)
		r = max(r, Floor)
		for _, k := range keys[a:b] {
			w[uint32(k)] = r
		}
		a = b
	}
	return w
}
