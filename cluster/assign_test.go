package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

func TestHome(t *testing.T) {
	tests := []struct {
		world, nodes int
		want         []int
	}{
		{8, 4, []int{0, 0, 1, 1, 2, 2, 3, 3}},
		{3, 2, []int{0, 0, 1}},
		{5, 2, []int{0, 0, 0, 1, 1}},
		{7, 3, []int{0, 0, 0, 1, 1, 2, 2}},
		{4, 4, []int{0, 1, 2, 3}},
		{2, 4, []int{0, 2}}, // fewer ranks than nodes: nodes 1 and 3 host none
		{3, 5, []int{0, 1, 3}},
		{1, 3, []int{0}},
		{6, 1, []int{0, 0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		got := make([]int, tt.world)
		for r := range got {
			got[r] = Home(r, tt.world, tt.nodes)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("homes of world %d over %d nodes = %v, want %v", tt.world, tt.nodes, got, tt.want)
		}
	}
}

// TestHomeBlocks: homes are contiguous non-decreasing blocks starting at
// node 0; with at least as many ranks as nodes every node hosts ⌊W/N⌋ or
// ⌈W/N⌉ ranks, with fewer no node hosts two.
func TestHomeBlocks(t *testing.T) {
	for world := 1; world <= 40; world++ {
		for nodes := 1; nodes <= 12; nodes++ {
			hosted := make([]int, nodes)
			prev := 0
			for r := range world {
				k := Home(r, world, nodes)
				if k < prev || k >= nodes || (r == 0 && k != 0) {
					t.Fatalf("world %d over %d nodes: rank %d at node %d after node %d", world, nodes, r, k, prev)
				}
				prev = k
				hosted[k]++
			}
			lo, hi := world/nodes, (world+nodes-1)/nodes
			for k, h := range hosted {
				if h < lo || h > hi {
					t.Fatalf("world %d over %d nodes: node %d hosts %d ranks, want %d..%d", world, nodes, k, h, lo, hi)
				}
			}
		}
	}
	// Large worlds do not overflow.
	if got := Home(1<<40-1, 1<<40, 1<<20); got != 1<<20-1 {
		t.Errorf("Home of the last of 2^40 ranks over 2^20 nodes = %d", got)
	}
}

// assignCase is one random global batch for the Assign property tests.
type assignCase struct {
	ids, owner, share []int
	nodes             int
	kind              string // how owner was drawn
}

func (c assignCase) String() string {
	return fmt.Sprintf("%s: ids=%v owner=%v share=%v nodes=%d", c.kind, c.ids, c.owner, c.share, c.nodes)
}

// randomAssignCases draws global batches over world ∈ {1,2,3,8,16} ranks
// and nodes ∈ {1,2,4,5}, with shares from shuffle.BatchRange's cut: full
// batches and short final ones, whose last ranks take few or no samples.
// The owners are uniform, skewed to one node, all one node, or each sample's
// plain-cut home (where Assign must change nothing).
func randomAssignCases(n int) []assignCase {
	r := rand.New(rand.NewPCG(7, 11))
	kinds := []string{"uniform", "skewed", "one-node", "at-home"}
	out := make([]assignCase, 0, n)
	for i := range n {
		world := []int{1, 2, 3, 8, 16}[r.IntN(5)]
		nodes := []int{1, 2, 4, 5}[r.IntN(4)]
		b := 1 + r.IntN(12)
		g := b * world
		// An epoch of a few batches, its last one full or short; take
		// the last batch or an earlier one.
		nb := 1 + r.IntN(3)
		epoch := (nb-1)*g + 1 + r.IntN(g)
		m := nb - 1
		if r.IntN(3) == 0 {
			m = r.IntN(nb)
		}
		share := make([]int, world)
		for rank := range world {
			s, e, err := shuffle.BatchRange(epoch, m, b, world, rank, false)
			if err != nil {
				panic(err)
			}
			share[rank] = e - s
		}
		size := 0
		for _, s := range share {
			size += s
		}
		ids := r.Perm(epoch)[:size] // any distinct IDs, in epoch order
		owner := make([]int, size)
		kind := kinds[i%len(kinds)]
		favourite := r.IntN(nodes)
		pos := 0
		for rank, s := range share {
			for range s {
				switch kind {
				case "uniform":
					owner[pos] = r.IntN(nodes)
				case "skewed":
					owner[pos] = favourite
					if r.IntN(3) == 0 {
						owner[pos] = r.IntN(nodes)
					}
				case "one-node":
					owner[pos] = favourite
				case "at-home":
					owner[pos] = Home(rank, world, nodes)
				}
				pos++
			}
		}
		out = append(out, assignCase{ids: ids, owner: owner, share: share, nodes: nodes, kind: kind})
	}
	return out
}

// plainCut is what each rank takes without locality: consecutive slices
// of the global batch.
func plainCut(ids, share []int) [][]int {
	out := make([][]int, len(share))
	pos := 0
	for r, s := range share {
		out[r] = ids[pos : pos+s]
		pos += s
	}
	return out
}

func TestAssignProperties(t *testing.T) {
	for _, c := range randomAssignCases(2000) {
		a, err := Assign(c.ids, c.owner, c.share, c.nodes)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		world := len(c.share)
		if len(a.Ranks) != world {
			t.Fatalf("%v: %d ranks", c, len(a.Ranks))
		}
		posOf := make(map[int]int, len(c.ids))
		for i, id := range c.ids {
			posOf[id] = i
		}
		capacity, count := make([]int, c.nodes), make([]int, c.nodes)
		for r, s := range c.share {
			capacity[Home(r, world, c.nodes)] += s
		}
		for _, k := range c.owner {
			count[k]++
		}
		seen := make(map[int]bool, len(c.ids))
		away := 0
		for r, rank := range a.Ranks {
			if len(rank) != c.share[r] {
				t.Fatalf("%v: rank %d got %d samples, its share is %d", c, r, len(rank), c.share[r])
			}
			for j, id := range rank {
				p, ok := posOf[id]
				if !ok || seen[id] {
					t.Fatalf("%v: rank %d got %d, not in the batch or given twice", c, r, id)
				}
				seen[id] = true
				if j > 0 && posOf[rank[j-1]] >= p {
					t.Fatalf("%v: rank %d's samples %v are not in epoch order", c, r, rank)
				}
				if c.owner[p] != Home(r, world, c.nodes) {
					away++
				}
			}
		}
		if len(seen) != len(c.ids) {
			t.Fatalf("%v: %d of %d samples assigned", c, len(seen), len(c.ids))
		}
		surplus := 0
		for k := range c.nodes {
			surplus += max(0, count[k]-capacity[k])
		}
		if a.Moved != surplus || away != surplus {
			t.Fatalf("%v: Moved %d, %d samples away from their owner's ranks; the minimum is %d", c, a.Moved, away, surplus)
		}
		// Step 1: a node keeps its own samples, the earliest first, up to
		// its capacity.
		home := make(map[int]int, len(c.ids))
		for r, rank := range a.Ranks {
			for _, id := range rank {
				home[id] = Home(r, world, c.nodes)
			}
		}
		kept := make([]int, c.nodes)
		for i, k := range c.owner {
			if kept[k] < capacity[k] {
				kept[k]++
				if home[c.ids[i]] != k {
					t.Fatalf("%v: sample %d, among node %d's first %d, left its node for node %d", c, c.ids[i], k, capacity[k], home[c.ids[i]])
				}
			}
		}
		if c.nodes == 1 || c.kind == "at-home" {
			if want := plainCut(c.ids, c.share); !slices.EqualFunc(a.Ranks, want, slices.Equal) || a.Moved != 0 {
				t.Fatalf("%v: Assign = %v (moved %d), want the plain cut %v", c, a.Ranks, a.Moved, want)
			}
		}
	}
}

// TestAssignSmall works two batches by hand (docs/shuffle.md §7.2).
func TestAssignSmall(t *testing.T) {
	// World 4 over 2 nodes: ranks 0, 1 on node 0, ranks 2, 3 on node 1;
	// each node's capacity is 4. Node 0 owns 5 samples: its first four
	// stay, the fifth (70) goes to node 1, whose ranks take its three own
	// samples and 70, in epoch order.
	a, err := Assign(
		[]int{10, 20, 30, 40, 50, 60, 70, 80},
		[]int{0, 1, 0, 0, 0, 1, 0, 1},
		[]int{2, 2, 2, 2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{10, 30}, {40, 50}, {20, 60}, {70, 80}}
	if !slices.EqualFunc(a.Ranks, want, slices.Equal) || a.Moved != 1 {
		t.Errorf("Assign = %v moved %d, want %v moved 1", a.Ranks, a.Moved, want)
	}

	// Three nodes, all samples on node 2, which hosts no rank (world 2 over
	// 3 nodes: homes 0 and 1). The largest deficit takes first, ties to the
	// lower node: node 0 (share 3) takes the first three, node 1 the rest.
	a, err = Assign([]int{5, 4, 3, 2, 1}, []int{2, 2, 2, 2, 2}, []int{3, 2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want = [][]int{{5, 4, 3}, {2, 1}}
	if !slices.EqualFunc(a.Ranks, want, slices.Equal) || a.Moved != 5 {
		t.Errorf("Assign = %v moved %d, want %v moved 5", a.Ranks, a.Moved, want)
	}
}

func TestAssignErrors(t *testing.T) {
	tests := []struct {
		name              string
		ids, owner, share []int
		nodes             int
		msg               string
	}{
		{"fewer owners than samples", []int{1, 2, 3}, []int{0, 0}, []int{3}, 1, "2 owners for 3 samples"},
		{"more owners than samples", []int{1}, []int{0, 0}, []int{1}, 1, "2 owners for 1 samples"},
		{"shares short", []int{1, 2, 3}, []int{0, 0, 0}, []int{1, 1}, 1, "shares sum to 2 for 3 samples"},
		{"shares long", []int{1, 2}, []int{0, 0}, []int{2, 1}, 1, "shares sum to 3 for 2 samples"},
		{"no ranks", []int{}, []int{}, []int{}, 1, "shares sum"},
		{"no nodes", []int{1}, []int{0}, []int{1}, 0, "over 0 nodes"},
		{"owner past the nodes", []int{1, 2}, []int{0, 2}, []int{1, 1}, 2, "owner 2 of sample 2 outside [0, 2)"},
		{"negative owner", []int{1, 2}, []int{-1, 0}, []int{1, 1}, 2, "owner -1 of sample 1 outside [0, 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Assign(tt.ids, tt.owner, tt.share, tt.nodes)
			if err == nil {
				t.Fatalf("Assign = %v, want an error", a)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Assign: %q does not say %q", err, tt.msg)
			}
		})
	}
}

// TestAssignEmptyBatch: a batch with no samples (ranks of a short final
// batch past the end) is valid and gives every rank an empty list.
func TestAssignEmptyBatch(t *testing.T) {
	a, err := Assign(nil, nil, []int{0, 0, 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Ranks) != 3 || a.Moved != 0 {
		t.Fatalf("Assign of an empty batch = %+v", a)
	}
	for r, rank := range a.Ranks {
		if rank == nil || len(rank) != 0 {
			t.Errorf("rank %d = %#v, want an empty list", r, rank)
		}
	}
}

// TestAssignRejectsNegativeShare: a negative share is as invalid as shares
// that do not sum to the batch, and must be reported as an error. Shares
// such as [-1, 3] pass the sum check, so Assign must check each share.
func TestAssignRejectsNegativeShare(t *testing.T) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Assign(shares [-1 3]) panicked instead of returning an error: %v", p)
		}
	}()
	a, err := Assign([]int{1, 2}, []int{0, 0}, []int{-1, 3}, 2)
	if err == nil {
		t.Fatalf("Assign(shares [-1 3]) = %+v, want an error", a)
	}
}
