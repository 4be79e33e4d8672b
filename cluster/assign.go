package cluster

import (
	"container/heap"
	"fmt"
	"slices"
)

// Home returns the node of rank r in a world of world ranks spread over
// nodes nodes in contiguous blocks: ⌊r·nodes/world⌋.
func Home(r, world, nodes int) int {
	return int(int64(r) * int64(nodes) / int64(world))
}

// An Assignment is which rank of a global batch receives which sample.
type Assignment struct {
	// Ranks[r] holds rank r's sample IDs, in epoch order.
	Ranks [][]int
	// Moved counts the samples the balancing step gave to a node that
	// does not own their chunk because their owner's ranks were full.
	Moved int
}

// Assign distributes the samples of one global batch over the world's
// ranks so that each rank receives, as far as the batch allows, samples
// whose chunk its home node owns. ids is the global batch in epoch order,
// owner[i] the node owning ids[i]'s chunk, and share[r] the number of
// samples rank r takes (what the plain cut gives it, so sum(share) must be
// len(ids)). nodes is the number of nodes.
//
// The algorithm (docs/shuffle.md §7.2):
//
//  1. A node's capacity is the sum of its ranks' shares. Each node keeps
//     its own samples, the first in epoch order, up to its capacity; the
//     rest are its surplus, and the room left is its deficit.
//  2. While some node has a surplus: take the node with the largest
//     surplus and the node with the largest deficit (ties to the lower
//     node number) and move min(surplus, deficit) samples, the earliest in
//     epoch order of the surplus, from the first to the second.
//  3. Each node's samples, sorted by epoch position, are cut in order of
//     its ranks: its lowest rank takes the first share of them, and so on.
//
// Within a rank the order is the epoch's, so it stays shuffled.
func Assign(ids, owner, share []int, nodes int) (Assignment, error) {
	world := len(share)
	if len(owner) != len(ids) {
		return Assignment{}, fmt.Errorf("cluster: %d owners for %d samples", len(owner), len(ids))
	}
	total := 0
	for r, s := range share {
		if s < 0 {
			return Assignment{}, fmt.Errorf("cluster: rank %d's share is %d; shares must be >= 0", r, s)
		}
		total += s
	}
	if total != len(ids) || nodes < 1 || world < 1 {
		return Assignment{}, fmt.Errorf("cluster: shares sum to %d for %d samples over %d nodes", total, len(ids), nodes)
	}
	capacity := make([]int, nodes)
	for r, s := range share {
		capacity[Home(r, world, nodes)] += s
	}
	// got[k] holds the batch positions node k receives.
	got := make([][]int, nodes)
	surplus := make([][]int, nodes)
	for i, k := range owner {
		if k < 0 || k >= nodes {
			return Assignment{}, fmt.Errorf("cluster: owner %d of sample %d outside [0, %d)", k, ids[i], nodes)
		}
		if len(got[k]) < capacity[k] {
			got[k] = append(got[k], i)
		} else {
			surplus[k] = append(surplus[k], i)
		}
	}
	var full, empty countHeap
	for k := range nodes {
		if n := len(surplus[k]); n > 0 {
			full = append(full, nodeCount{k, n})
		}
		if n := capacity[k] - len(got[k]); n > 0 {
			empty = append(empty, nodeCount{k, n})
		}
	}
	heap.Init(&full)
	heap.Init(&empty)
	moved := 0
	for full.Len() > 0 && empty.Len() > 0 {
		s, d := heap.Pop(&full).(nodeCount), heap.Pop(&empty).(nodeCount)
		t := min(s.n, d.n)
		from := surplus[s.node]
		at := len(from) - s.n // the earliest not yet moved
		got[d.node] = append(got[d.node], from[at:at+t]...)
		moved += t
		if s.n > t {
			heap.Push(&full, nodeCount{s.node, s.n - t})
		}
		if d.n > t {
			heap.Push(&empty, nodeCount{d.node, d.n - t})
		}
	}
	out := Assignment{Ranks: make([][]int, world), Moved: moved}
	next := make([]int, nodes) // per node: how far its ranks have cut
	for k := range got {
		slices.Sort(got[k])
	}
	for r, s := range share {
		k := Home(r, world, nodes)
		pos := got[k][next[k] : next[k]+s]
		next[k] += s
		rank := make([]int, len(pos))
		for j, i := range pos {
			rank[j] = ids[i]
		}
		out.Ranks[r] = rank
	}
	return out, nil
}

// nodeCount is a node and how many samples it has to give or take.
type nodeCount struct{ node, n int }

// countHeap is a max-heap of nodeCounts: the largest count first, the
// lower node number on a tie.
type countHeap []nodeCount

func (h countHeap) Len() int { return len(h) }
func (h countHeap) Less(i, j int) bool {
	if h[i].n != h[j].n {
		return h[i].n > h[j].n
	}
	return h[i].node < h[j].node
}
func (h countHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *countHeap) Push(x any)   { *h = append(*h, x.(nodeCount)) }
func (h *countHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
