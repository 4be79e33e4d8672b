package shuffle

import (
	"errors"
	"testing"
)

// TestOffsetResumeExactlyOnce is the elastic-resume property: a job that
// consumed the first P positions of an epoch at one world size and resumes
// at another with Offset P covers every remaining position exactly once.
func TestOffsetResumeExactlyOnce(t *testing.T) {
	tests := []struct {
		name             string
		n, batch         int
		world, consumed  int // batches consumed at world before the resume
		newWorld, newBat int
	}{
		{"4 to 3", 2000, 64, 4, 5, 3, 64},
		{"4 to 8", 2000, 64, 4, 5, 8, 64},
		{"4 to 1", 2000, 64, 4, 5, 1, 64},
		{"batch size changes", 1001, 16, 2, 7, 5, 9},
		{"resume at the last batch", 300, 10, 4, 7, 2, 10},
		{"nothing consumed", 100, 8, 2, 0, 3, 8},
	}
	for _, tt := range tests {
		for _, dropLast := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				seen := make([]int, tt.n)
				first := Params{Window: 1, BatchSize: tt.batch, World: tt.world}
				for m := range tt.consumed {
					for r := range tt.world {
						p := first
						p.Rank = r
						s, e, err := p.BatchRange(tt.n, m)
						if err != nil {
							t.Fatal(err)
						}
						for i := s; i < e; i++ {
							seen[i]++
						}
					}
				}
				offset := min(tt.consumed*tt.batch*tt.world, tt.n)
				next := Params{Window: 1, BatchSize: tt.newBat, World: tt.newWorld, DropLast: dropLast, Offset: offset}
				for m := range next.NumBatches(tt.n) {
					for r := range tt.newWorld {
						p := next
						p.Rank = r
						s, e, err := p.BatchRange(tt.n, m)
						if err != nil {
							t.Fatal(err)
						}
						if s < offset {
							t.Fatalf("batch %d rank %d starts at %d, before the offset %d", m, r, s, offset)
						}
						for i := s; i < e; i++ {
							seen[i]++
						}
					}
				}
				g := tt.newBat * tt.newWorld
				dropped := 0
				if dropLast {
					dropped = (tt.n - offset) % g
				}
				for i, c := range seen {
					want := 1
					if i >= tt.n-dropped {
						want = 0 // the remainder's partial final batch, dropped
					}
					if c != want {
						t.Fatalf("position %d served %d times, want %d (drop_last %t)", i, c, want, dropLast)
					}
				}
			})
		}
	}
}

func TestOffsetBounds(t *testing.T) {
	p := Params{Window: 1, BatchSize: 4, World: 2}
	for _, tt := range []struct {
		offset, n   int
		batches     int
		rankSamples int
	}{
		{0, 10, 2, 4 + 2},
		{8, 10, 1, 2},
		{10, 10, 0, 0},
		{11, 10, 0, 0},
	} {
		p.Offset = tt.offset
		if got := p.NumBatches(tt.n); got != tt.batches {
			t.Errorf("offset %d of %d: NumBatches = %d, want %d", tt.offset, tt.n, got, tt.batches)
		}
		if got := p.RankSamples(tt.n); got != tt.rankSamples {
			t.Errorf("offset %d of %d: RankSamples = %d, want %d", tt.offset, tt.n, got, tt.rankSamples)
		}
	}
	p.Offset = 11
	if _, _, err := p.BatchRange(10, 0); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("offset past the epoch: %v, want ErrOutOfRange", err)
	}
	p.Offset = -1
	if err := p.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative offset: %v, want ErrInvalid", err)
	}
}
