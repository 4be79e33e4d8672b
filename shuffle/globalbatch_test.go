package shuffle_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// TestGlobalBatch: a global batch is every rank's slice of it, in rank
// order, and the batches of an epoch tile it from the offset, the last
// one short without drop_last and absent with it.
func TestGlobalBatch(t *testing.T) {
	for _, tt := range []struct {
		name       string
		p          shuffle.Params
		n, m       int
		start, end int
		shares     []int
	}{
		{"full", shuffle.Params{Window: 1, BatchSize: 3, World: 2}, 20, 1, 6, 12, []int{3, 3}},
		{"short last", shuffle.Params{Window: 1, BatchSize: 3, World: 2}, 20, 3, 18, 20, []int{2, 0}},
		{"short second rank", shuffle.Params{Window: 1, BatchSize: 3, World: 2}, 22, 3, 18, 22, []int{3, 1}},
		{"offset", shuffle.Params{Window: 1, BatchSize: 2, World: 3, Offset: 5}, 20, 2, 17, 20, []int{2, 1, 0}},
		{"rank ignored", shuffle.Params{Window: 1, BatchSize: 4, World: 2, Rank: 1}, 9, 1, 8, 9, []int{1, 0}},
	} {
		start, end, err := tt.p.GlobalBatch(tt.n, tt.m)
		shares, err2 := tt.p.AppendShares(nil, tt.n, tt.m)
		if err != nil || err2 != nil || start != tt.start || end != tt.end || !slices.Equal(shares, tt.shares) {
			t.Errorf("%s: [%d, %d) %v (%v, %v); want [%d, %d) %v", tt.name, start, end, shares, err, err2, tt.start, tt.end, tt.shares)
		}
	}
	p := shuffle.Params{Window: 1, BatchSize: 3, World: 2, DropLast: true}
	if _, _, err := p.GlobalBatch(20, 3); !errors.Is(err, shuffle.ErrOutOfRange) {
		t.Errorf("the dropped last batch: %v, want ErrOutOfRange", err)
	}
	if _, err := p.AppendShares(nil, 20, -1); !errors.Is(err, shuffle.ErrOutOfRange) {
		t.Errorf("batch -1: %v, want ErrOutOfRange", err)
	}
}

// TestGlobalBatchesTileTheEpoch: for every cut, the global batches follow
// one another from the offset, each the union of the ranks' slices.
func TestGlobalBatchesTileTheEpoch(t *testing.T) {
	for n := range 30 {
		for _, p := range []shuffle.Params{
			{Window: 1, BatchSize: 1, World: 1},
			{Window: 1, BatchSize: 4, World: 3},
			{Window: 1, BatchSize: 4, World: 3, DropLast: true},
			{Window: 1, BatchSize: 2, World: 5, Offset: min(n, 7)},
			{Window: 1, BatchSize: 7, World: 2, Offset: min(n, 3), DropLast: true},
		} {
			at := p.Offset
			for m := range p.NumBatches(n) {
				start, end, err := p.GlobalBatch(n, m)
				if err != nil || start != at || end <= start {
					t.Fatalf("%+v, %d samples, batch %d: [%d, %d) %v; want it to start at %d", p, n, m, start, end, err, at)
				}
				shares, _ := p.AppendShares(nil, n, m)
				pos := start
				for r, k := range shares {
					q := p
					q.Rank = r
					s, e, _ := q.BatchRange(n, m)
					if e-s != k || (k > 0 && s != pos) {
						t.Fatalf("%+v, %d samples, batch %d, rank %d: share %d at %d; BatchRange [%d, %d)", p, n, m, r, k, pos, s, e)
					}
					pos += k
				}
				if pos != end {
					t.Fatalf("%+v, %d samples, batch %d: shares end at %d, the batch at %d", p, n, m, pos, end)
				}
				at = end
			}
			if want := n; !p.DropLast && at != want {
				t.Errorf("%+v, %d samples: batches end at %d", p, n, at)
			}
		}
	}
}
