package usetable

import "testing"

// BenchmarkBeginFinishWide is a batch begun and finished by one rank of
// a job whose other ranks hold `ranks` batches in flight: what every
// request of a wide job costs under the use table's lock.
func BenchmarkBeginFinishWide(b *testing.B) {
	for _, ranks := range []int{8, 1024} {
		b.Run(map[int]string{8: "ranks=8", 1024: "ranks=1024"}[ranks], func(b *testing.B) {
			s, js := testSchedule(b)
			n := js.DS.Index.NumSamples()
			for r := 1; r < ranks; r++ {
				if _, err := s.Begin(js, uint64(r/n), r%n, 0, ranks, 1, Rank{r, ranks}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				at := ranks + i%n
				f, err := s.Begin(js, uint64(at/n), at%n, 0, ranks, 1, Rank{0, ranks})
				if err != nil {
					b.Fatal(err)
				}
				s.Finish(f)
			}
		})
	}
}
