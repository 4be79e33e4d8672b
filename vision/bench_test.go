package vision

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// BenchmarkNewEpoch packs 100,000 samples of a VLM-like mix (randomItems)
// in windows of 10,000, with and without a cap of images, and reports
// the fill (tokens not pad over all).
func BenchmarkNewEpoch(b *testing.B) {
	const n, seq = 100_000, 4096
	items := randomItems(rand.New(rand.NewPCG(1, 2)), n, seq)
	order, err := shuffle.NewEpoch(func() []int {
		c := make([]int, n/1000)
		for i := range c {
			c[i] = 1000
		}
		return c
	}(), 1, 0, 10)
	if err != nil {
		b.Fatal(err)
	}
	for _, cap := range []int{0, 8} {
		b.Run(fmt.Sprintf("cap%d", cap), func(b *testing.B) {
			var e *Epoch
			for b.Loop() {
				if e, err = NewEpoch(order, func(id int) Item { return items[id] }, seq, cap, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
			pad := 0
			for i := range e.NumSequences() {
				pad += e.Sequence(i).Pad
			}
			b.ReportMetric(1-float64(pad)/float64(e.NumSequences()*seq), "fill")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
		})
	}
}
