package seqpack

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// realisticTokens returns n documents' token counts from a length mix like
// a web-and-books corpus's: a fifth very short (10 to 100 tokens), the
// rest log-normal around 500 tokens (σ 1.2: about 12 % past 2,048 tokens,
// 1 % past 8,192, the longest near 10^5), the same on every run.
func realisticTokens(n int) []int32 {
	r := rand.New(rand.NewPCG(2026, 42))
	out := make([]int32, n)
	for d := range out {
		if r.IntN(5) == 0 {
			out[d] = int32(10 + r.IntN(91))
			continue
		}
		out[d] = int32(max(1, min(1<<20, math.Round(500*math.Exp(1.2*r.NormFloat64())))))
	}
	return out
}

// corpus is a generated token dataset: chunks of perChunk documents.
type corpus struct {
	tokens []int32
	counts []int
}

func newCorpus(docs, perChunk int) corpus {
	c := corpus{tokens: realisticTokens(docs)}
	for left := docs; left > 0; left -= perChunk {
		c.counts = append(c.counts, min(perChunk, left))
	}
	return c
}

func (c corpus) tokenCount(d int) int { return int(c.tokens[d]) }

func (c corpus) epoch(tb testing.TB, window int, spec Spec) *Packing {
	tb.Helper()
	o, err := shuffle.NewEpoch(c.counts, 1, 0, window)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := NewPacking(o, c.tokenCount, spec, 1, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func fill(e *Packing) float64 {
	return float64(e.NumTokens()) / float64(e.NumSequences()) / float64(e.Spec().Seq)
}

// TestFillRealisticMix: best fit fills at least 99 % of the tokens of a
// realistic length mix at seq 2,048 and 8,192 with windows of 1,000
// documents or more, while cutting only documents longer than seq
// (TestBestFitEveryTokenOnce). It logs the fill of every window size
// (smaller windows have fewer documents to fit: 100 documents fill about
// 95 % at seq 8,192), and of concat.
func TestFillRealisticMix(t *testing.T) {
	for _, perChunk := range []int{100, 1000, 10_000} {
		c := newCorpus(400_000, perChunk)
		for _, seq := range []int{2048, 8192} {
			for _, window := range []int{1, 8} {
				e := c.epoch(t, window, Spec{Seq: seq, Mode: BestFit})
				f := fill(e)
				t.Logf("seq %d, windows of %d documents: bestfit fill %.4f %%, %d sequences, %d documents split",
					seq, window*perChunk, 100*f, e.NumSequences(), e.Split())
				if window*perChunk >= 1000 && f < 0.99 {
					t.Errorf("seq %d, windows of %d documents: bestfit fill %.4f %%, want at least 99 %%", seq, window*perChunk, 100*f)
				}
			}
			if perChunk == 10_000 {
				e := c.epoch(t, 8, Spec{Seq: seq, Mode: Concat})
				t.Logf("seq %d: concat fill %.4f %%, %d documents split", seq, 100*fill(e), e.Split())
			}
		}
	}
}

// benchCorpus is 10 M documents in 1,000 chunks of 10,000, shared by the
// benchmarks.
var benchCorpus = sync.OnceValue(func() corpus { return newCorpus(10_000_000, 10_000) })

// BenchmarkNewPacking packs a whole epoch of 10 M documents (about 10^10
// tokens) in windows of 8 chunks (80,000 documents) and keeps each
// window's sequence count: what a gateway memoises once per (stream,
// epoch). It reports the fill and the time per document.
func BenchmarkNewPacking(b *testing.B) {
	c := benchCorpus()
	for _, bc := range []struct {
		name string
		spec Spec
	}{
		{"bestfit/seq=2048", Spec{Seq: 2048, Mode: BestFit}},
		{"bestfit/seq=8192", Spec{Seq: 8192, Mode: BestFit}},
		{"concat/seq=2048", Spec{Seq: 2048, Mode: Concat}},
		{"concat/seq=8192", Spec{Seq: 8192, Mode: Concat}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o, err := shuffle.NewEpoch(c.counts, 1, 0, 8)
			if err != nil {
				b.Fatal(err)
			}
			var e *Packing
			for b.Loop() {
				if e, err = NewPacking(o, c.tokenCount, bc.spec, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(1e6*(1-fill(e)), "pad_ppm")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(c.tokens)), "ns/doc")
		})
	}
}

// BenchmarkWindow lays out one window of 80,000 documents whole: packed,
// permuted and its pieces written, as a gateway does once per window it
// serves (then keeps).
func BenchmarkWindow(b *testing.B) {
	c := benchCorpus()
	for _, bc := range []struct {
		name string
		spec Spec
	}{
		{"bestfit/seq=2048", Spec{Seq: 2048, Mode: BestFit}},
		{"bestfit/seq=8192", Spec{Seq: 8192, Mode: BestFit}},
		{"concat/seq=2048", Spec{Seq: 2048, Mode: Concat}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// Only the first 24 windows: their counts are all NewPacking
			// needs to be asked about them.
			o, err := shuffle.NewEpoch(c.counts[:24*8], 1, 0, 8)
			if err != nil {
				b.Fatal(err)
			}
			e, err := NewPacking(o, c.tokenCount, bc.spec, 1, 0)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				e.Window(i % e.NumWindows())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/80_000, "ns/doc")
		})
	}
}
