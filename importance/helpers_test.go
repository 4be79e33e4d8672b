package importance

import (
	"math"
	"math/rand/v2"
	"testing"
)

// dataset is a Dataset for tests: an index ID and a sample count.
type dataset struct {
	id string
	n  int
}

func (d dataset) ID() string      { return d.id }
func (d dataset) NumSamples() int { return d.n }

// uniformCounts returns c chunks of s samples.
func uniformCounts(c, s int) []int {
	counts := make([]int, c)
	for i := range counts {
		counts[i] = s
	}
	return counts
}

// skewedScores returns n heavy-tailed scores (log-normal, sigma 1.5), as
// losses of a model that finds most samples easy and a few hard, independent
// of the chunk a sample is in.
func skewedScores(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0))
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.Exp(r.NormFloat64() * 1.5))
	}
	return s
}

// clusteredScores returns scores whose scale depends on the chunk, as when
// chunks were packed by class or source and some classes are hard: each
// chunk's samples scale a log-normal by a chunk factor, itself log-normal.
func clusteredScores(counts []int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	var s []float32
	for _, k := range counts {
		f := math.Exp(r.NormFloat64() * 1.5)
		for range k {
			s = append(s, float32(f*math.Exp(r.NormFloat64()*0.5)))
		}
	}
	return s
}

func mustSnapshot(t testing.TB, scores []float32) *Snapshot {
	t.Helper()
	s, err := NewSnapshot(dataset{"0123456789abcdef", len(scores)}, "job", 0, scores)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustEpoch(t testing.TB, counts []int, snap *Snapshot, seed, epoch uint64, window, hot int) *Epoch {
	t.Helper()
	e, err := NewEpoch(counts, snap, seed, epoch, window, hot)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// wholeOrder returns the epoch's sample IDs, window by window.
func wholeOrder(e *Epoch) []int {
	var ids []int
	for w := range e.NumWindows() {
		ids = append(ids, e.Window(w)...)
	}
	return ids
}
