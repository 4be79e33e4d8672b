package balance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAssignKeepsTheBatch checks, on random batches, what balancing must
// keep: every position once, each rank exactly its share, in ascending
// order, its cost the sum of its samples', and never a costlier busiest
// rank than the plain cut's.
func TestAssignKeepsTheBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for n := range 500 {
		world := 1 + r.IntN(16)
		shares := make([]int, world)
		total := 0
		for k := range shares {
			shares[k] = r.IntN(9)
			total += shares[k]
		}
		costs := make([]uint64, total)
		for i := range costs {
			costs[i] = uint64(r.ExpFloat64() * float64(1+r.IntN(1000)))
		}
		a, err := Assign(costs, shares)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plain(costs, shares)
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]bool, total)
		for k, got := range a.Ranks {
			if len(got) != shares[k] {
				t.Fatalf("case %d: rank %d takes %d, its share is %d", n, k, len(got), shares[k])
			}
			if !slices.IsSorted(got) {
				t.Fatalf("case %d: rank %d's positions %v are not ascending", n, k, got)
			}
			var c uint64
			for _, i := range got {
				if seen[i] {
					t.Fatalf("case %d: position %d twice", n, i)
				}
				seen[i] = true
				c += costs[i]
			}
			if c != a.Costs[k] {
				t.Fatalf("case %d: rank %d's cost %d, its samples' %d", n, k, a.Costs[k], c)
			}
		}
		if slices.Max(a.Costs) > slices.Max(p.Costs) {
			t.Fatalf("case %d: busiest rank %d balanced, %d plainly cut", n, slices.Max(a.Costs), slices.Max(p.Costs))
		}
		again, _ := Assign(costs, shares)
		if !slices.EqualFunc(a.Ranks, again.Ranks, slices.Equal) {
			t.Fatalf("case %d: two calls differ", n)
		}
	}
}

func TestAssignRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		costs  []uint64
		shares []int
	}{
		{"no ranks", []uint64{1}, nil},
		{"shares short", []uint64{1, 2, 3}, []int{1, 1}},
		{"negative share", []uint64{1}, []int{2, -1}},
		{"costs past 2^62", []uint64{1 << 61, 1 << 61}, []int{1, 1}},
	} {
		if _, err := Assign(c.costs, c.shares); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
}

func TestRatio(t *testing.T) {
	if r := Ratio([]uint64{0, 0}); r != 1 {
		t.Errorf("no cost: %v", r)
	}
	if r := Ratio([]uint64{3, 1}); r != 1.5 {
		t.Errorf("3, 1: %v", r)
	}
}

func BenchmarkAssign(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, shape := range []struct{ world, size int }{{8, 8}, {64, 16}, {512, 4}} {
		costs := make([]uint64, shape.world*shape.size)
		for i := range costs {
			costs[i] = uint64(r.ExpFloat64() * 1e7)
		}
		shares := make([]int, shape.world)
		for k := range shares {
			shares[k] = shape.size
		}
		b.Run(fmt.Sprintf("world=%d/b=%d", shape.world, shape.size), func(b *testing.B) {
			for b.Loop() {
				if _, err := Assign(costs, shares); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
