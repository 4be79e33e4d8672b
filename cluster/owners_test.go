package cluster

import (
	"fmt"
	"testing"
)

func TestBalancedBoundsLoad(t *testing.T) {
	for _, tc := range []struct{ chunks, nodes int }{{64, 4}, {32, 4}, {1000, 16}, {256, 3}, {5, 8}} {
		t.Run(fmt.Sprintf("%dx%d", tc.chunks, tc.nodes), func(t *testing.T) {
			counts := make([]int, tc.chunks)
			total := 0
			for c := range counts {
				counts[c] = 90 + c%21 // uneven chunks
				total += counts[c]
			}
			key := IndexKey("balance-test")
			owners := BoundedOwners(key, counts, Positions(tc.nodes))
			load := make([]int, tc.nodes)
			kept := 0
			for c, k := range owners {
				load[k] += counts[c]
				if k == Owner(key, c, Positions(tc.nodes)) {
					kept++
				}
			}
			limit := (17*total + 16*tc.nodes - 1) / (16 * tc.nodes)
			for k, l := range load {
				// A chunk that fits nowhere may exceed the bound by one chunk.
				if l > limit+110 {
					t.Errorf("node %d owns %d samples, bound %d", k, l, limit)
				}
			}
			t.Logf("%d of %d chunks keep their rendezvous owner; loads %v (bound %d)", kept, tc.chunks, load, limit)
		})
	}
}

// TestBalancedMovesFewOnJoin: a node joining moves its share of chunks
// and, through the bound, a few more.
func TestBalancedMovesFewOnJoin(t *testing.T) {
	counts := make([]int, 4096)
	for c := range counts {
		counts[c] = 100
	}
	key := IndexKey("join-test")
	for _, n := range []int{4, 16} {
		before, after := BoundedOwners(key, counts, Positions(n)), BoundedOwners(key, counts, Positions(n+1))
		moved, toNew := 0, 0
		for c := range counts {
			if before[c] != after[c] {
				moved++
				if after[c] == n {
					toNew++
				}
			}
		}
		share := float64(len(counts)) / float64(n+1)
		t.Logf("%d → %d nodes: %d chunks moved, %d of them to the new node (its share %.0f)", n, n+1, moved, toNew, share)
		if float64(moved) > 1.6*share {
			t.Errorf("%d → %d nodes moved %d chunks, more than 1.6 × the new node's share %.0f", n, n+1, moved, share)
		}
	}
}

func TestBalancedIsPure(t *testing.T) {
	counts := []int{5, 7, 9, 11, 13, 2, 3, 100}
	a, b := BoundedOwners(IndexKey("x"), counts, Positions(3)), BoundedOwners(IndexKey("x"), counts, Positions(3))
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("Balanced is not deterministic")
	}
}
