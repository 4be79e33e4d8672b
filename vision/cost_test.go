package vision

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/shuffle"
)

// TestCost: a sequence's cost is its samples' attention (tokens²) and
// their encoders' (patches² an image), as the test computes them from
// what it knows of each sample.
func TestCost(t *testing.T) {
	r := Rule{Patch: 14, Merge: 2, Width: 56, Height: 28, Image: 1, Start: -1, End: -1}
	rd := &Reader{Rule: r}
	s := Sample{IDs: make([]int32, 10), Images: []Image{{Span: Span{Len: 2}}, {Span: Span{Len: 2}}}}
	it := rd.item(s)
	// 56×28 at patch 14 is 4×2 = 8 patches, 2 tokens merged 2×2: 8² each.
	if want := (Item{Tokens: 10, Images: 2, Vision: 4, Encoder: 2 * 64}); it != want {
		t.Fatalf("item %+v; want %+v", it, want)
	}
	items := []Item{it, {Tokens: 7}}
	if got := Cost(Sequence{Samples: []int{0, 1}, Pad: 5}, items); got != 100+128+49 {
		t.Fatalf("cost %d; want %d", got, 100+128+49)
	}
}

// TestBalanceByCost: balance= over vision sequences weighed by Cost keeps
// every global batch's multiset of sequences and each rank's count (the
// plain cut's), and evens the ranks' vision tokens and compute on a long
// tail of images: max ÷ mean of the costs no worse than the plain cut's
// on any batch, and better over the epoch. (How near 1 it gets depends
// on the tail: one sequence of a huge image outweighs a rank alone.)
func TestBalanceByCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const seq, n, world, batch = 4096, 12000, 8, 4
	items := make([]Item, n)
	for i := range items {
		it := Item{Tokens: 10 + rng.IntN(200)}
		k := 0
		if rng.IntN(4) == 0 {
			k = 1 + rng.IntN(3)
		}
		for range k {
			v := 16 + rng.IntN(64)
			if rng.IntN(20) == 0 {
				v = 800 + rng.IntN(1000) // the long tail: large images
			}
			it.Tokens += v
			it.Images++
			it.Encoder += uint64(4*v) * uint64(4*v)
		}
		it.Tokens = min(it.Tokens, seq)
		items[i] = it
	}
	order, err := shuffle.NewEpoch(slices.Repeat([]int{1000}, 12), 1, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEpoch(order, func(id int) Item { return items[id] }, seq, 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	shares := slices.Repeat([]int{batch}, world)
	var plainSum, balancedSum float64
	batches := e.NumSequences() / (world * batch)
	for m := range batches {
		var qs []Sequence
		for rank := range world {
			b, err := e.Batch(shuffle.Params{Window: 4, BatchSize: batch, World: world, Rank: rank}, m)
			if err != nil {
				t.Fatal(err)
			}
			qs = append(qs, b...)
		}
		costs := make([]uint64, len(qs))
		for i, q := range qs {
			costs[i] = Cost(q, items)
		}
		plain, err := balance.Plain(costs, shares)
		if err != nil {
			t.Fatal(err)
		}
		bal, err := balance.Assign(costs, shares)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for r, pos := range bal.Ranks {
			if len(pos) != batch {
				t.Fatalf("batch %d: rank %d takes %d sequences; the plain cut %d", m, r, len(pos), batch)
			}
			got = append(got, pos...)
		}
		slices.Sort(got)
		for i, p := range got {
			if p != i {
				t.Fatalf("batch %d: positions %v are not the batch's, each once", m, got)
			}
		}
		pr, br := balance.Ratio(plain.Costs), balance.Ratio(bal.Costs)
		if br > pr {
			t.Fatalf("batch %d: balanced max/mean %.3f, plain %.3f", m, br, pr)
		}
		plainSum += pr
		balancedSum += br
	}
	pm, bm := plainSum/float64(batches), balancedSum/float64(batches)
	t.Logf("%d global batches of %d sequences: cost max/mean %.3f plain, %.3f balanced", batches, world*batch, pm, bm)
	if bm >= pm {
		t.Fatalf("max/mean %.3f balanced, %.3f plain: want balanced below plain", bm, pm)
	}
}
