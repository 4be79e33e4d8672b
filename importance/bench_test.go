package importance

import "testing"

// benchEpoch is a dataset of 1,600 chunks of 640 samples (1,024,000).
func benchEpoch(b *testing.B) ([]int, *Snapshot) {
	counts := uniformCounts(1600, 640)
	return counts, mustSnapshot(b, skewedScores(sumInts(counts), 1))
}

func BenchmarkNewEpoch(b *testing.B) {
	counts, snap := benchEpoch(b)
	b.ResetTimer()
	for i := range b.N {
		mustEpoch(b, counts, snap, 1, uint64(i), 8, 160)
	}
}

func BenchmarkWindow(b *testing.B) {
	counts, snap := benchEpoch(b)
	e := mustEpoch(b, counts, snap, 1, 1, 8, 160)
	b.ResetTimer()
	for i := range b.N {
		e.Window(i % e.NumWindows())
	}
}

func BenchmarkSeal(b *testing.B) {
	ds := dataset{"0123456789abcdef", 1024000}
	acc, _ := NewAccumulator(ds, "job", 1)
	ids := make([]int, ds.n/2)
	losses := make([]float32, len(ids))
	for i := range ids {
		ids[i] = 2 * i
		losses[i] = float32(i%97) / 7
	}
	if err := acc.Add(ids, losses); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Seal(nil, acc); err != nil {
			b.Fatal(err)
		}
	}
}
