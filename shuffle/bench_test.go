package shuffle

import "testing"

func benchCounts(chunks, perChunk int) []int {
	counts := make([]int, chunks)
	for c := range counts {
		counts[c] = perChunk
	}
	return counts
}

// BenchmarkNewEpoch measures the per-epoch setup for a 10,000-chunk dataset:
// the chunk permutation and the window starts, O(chunks).
func BenchmarkNewEpoch(b *testing.B) {
	counts := benchCounts(10000, 640)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := NewEpoch(counts, 1, uint64(i), 8); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatch measures one rank's batch of 256 from 640-sample chunks in
// windows of 8 chunks (5,120 samples per window), cycling through the
// batches of an epoch so that both window heads and tails are measured.
func BenchmarkBatch(b *testing.B) {
	e, err := NewEpoch(benchCounts(1000, 640), 1, 0, 8)
	if err != nil {
		b.Fatal(err)
	}
	nb := NumBatches(e.NumSamples(), 256, 1, true)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Batch(i%nb, 256, 1, 0, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWindow measures materialising a whole 5,120-sample window, the
// unit a gateway would cache to serve all of a window's batches.
func BenchmarkWindow(b *testing.B) {
	e, err := NewEpoch(benchCounts(1000, 640), 1, 0, 8)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.Window(i % e.NumWindows())
	}
}
