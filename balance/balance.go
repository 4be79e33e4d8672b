package balance

import (
	"container/heap"
	"fmt"
	"github.com/brandgw/brand/internal/errkind"
	"slices"
)

// ErrInvalid marks inputs Assign cannot balance: shares that do not add
// up to the batch, a negative share, costs past MaxTotal.
var ErrInvalid = errkind.New(errkind.Invalid, "balance: invalid input")

// MaxSwaps bounds the improving swaps Assign makes after its greedy
// placement. Each swap lowers the sum of the squares of the ranks' costs,
// so the loop ends anyway; the bound keeps a batch's cost predictable.
const MaxSwaps = 256

// MaxTotal bounds the sum of a batch's costs, so that every comparison of
// twice a cost difference with a gap fits a signed 64-bit integer. A
// sequence's attention cost is at most seq² ≤ 2^40, and a batch of 2^16
// of them is far below it.
const MaxTotal = 1 << 62

// An Assignment is which rank of a global batch takes which of its
// samples.
type Assignment struct {
	// Ranks[r] holds the positions in the global batch of rank r's
	// samples, ascending.
	Ranks [][]int
	// Costs[r] is the sum of rank r's samples' costs.
	Costs []uint64
}

// Plain is the plain cut of a global batch (docs/shuffle.md §6): rank r
// takes the next shares[r] positions. Its Costs are the costs the ranks
// would carry unbalanced, for comparison.
func Plain(costs []uint64, shares []int) (Assignment, error) {
	if err := check(costs, shares); err != nil {
		return Assignment{}, err
	}
	a := Assignment{Ranks: make([][]int, len(shares)), Costs: make([]uint64, len(shares))}
	at := 0
	for r, s := range shares {
		a.Ranks[r] = make([]int, s)
		for k := range s {
			a.Ranks[r][k] = at
			a.Costs[r] += costs[at]
			at++
		}
	}
	return a, nil
}

// Assign gives each rank r exactly shares[r] of the positions of a global
// batch whose samples cost costs[i], so that the ranks' costs are as even
// as the rule of the package doc makes them: longest first to the
// cheapest rank with room, then improving swaps with the costliest rank.
// The shares must add up to len(costs), and the costs to less than
// MaxTotal; errors wrap ErrInvalid.
func Assign(costs []uint64, shares []int) (Assignment, error) {
	if err := check(costs, shares); err != nil {
		return Assignment{}, err
	}
	world := len(shares)
	items := make([]int, len(costs))
	for i := range items {
		items[i] = i
	}
	slices.SortStableFunc(items, func(x, y int) int {
		switch {
		case costs[x] > costs[y]:
			return -1
		case costs[x] < costs[y]:
			return 1
		}
		return x - y
	})
	ranks := make([][]int, world)
	load := make([]uint64, world)
	room := &rankHeap{load: load}
	for r, s := range shares {
		ranks[r] = make([]int, 0, s)
		if s > 0 {
			room.ranks = append(room.ranks, r)
		}
	}
	heap.Init(room)
	for _, i := range items {
		r := room.ranks[0]
		ranks[r] = append(ranks[r], i)
		load[r] += costs[i]
		if len(ranks[r]) == shares[r] {
			heap.Pop(room)
		} else {
			heap.Fix(room, 0)
		}
	}
	for range MaxSwaps {
		if !swapOnce(costs, ranks, load) {
			break
		}
	}
	for _, r := range ranks {
		slices.Sort(r)
	}
	return Assignment{Ranks: ranks, Costs: load}, nil
}

// check validates Assign's and Plain's inputs.
func check(costs []uint64, shares []int) error {
	if len(shares) == 0 {
		return fmt.Errorf("%w: no ranks", ErrInvalid)
	}
	total := 0
	for r, s := range shares {
		if s < 0 {
			return fmt.Errorf("%w: rank %d's share is %d", ErrInvalid, r, s)
		}
		total += s
	}
	if total != len(costs) {
		return fmt.Errorf("%w: shares add up to %d for a batch of %d", ErrInvalid, total, len(costs))
	}
	var sum uint64
	for _, c := range costs {
		if c >= MaxTotal || sum+c >= MaxTotal {
			return fmt.Errorf("%w: the batch's costs add up to more than 2^62", ErrInvalid)
		}
		sum += c
	}
	return nil
}

// swapOnce makes the improving swap the package doc describes, and
// reports whether there was one: hi is the costliest rank (the lowest
// among equals); the other ranks are tried from the cheapest (the lowest
// among equals), and the first that admits a swap of samples i (hi's) and
// j (its) with 0 < cost_i − cost_j < gap, gap the two ranks' difference,
// swaps the pair that minimises |2·(cost_i − cost_j) − gap|, then the
// earliest i, then the earliest j.
func swapOnce(costs []uint64, ranks [][]int, load []uint64) bool {
	hi := 0
	for r := range load {
		if load[r] > load[hi] {
			hi = r
		}
	}
	others := make([]int, 0, len(load)-1)
	for r := range load {
		if r != hi && load[r] < load[hi] {
			others = append(others, r)
		}
	}
	slices.SortFunc(others, func(x, y int) int {
		switch {
		case load[x] < load[y]:
			return -1
		case load[x] > load[y]:
			return 1
		}
		return x - y
	})
	for _, lo := range others {
		gap := int64(load[hi] - load[lo])
		bi, bj, ok := bestSwap(costs, ranks[hi], ranks[lo], gap)
		if !ok {
			continue
		}
		i, j := ranks[hi][bi], ranks[lo][bj]
		ranks[hi][bi], ranks[lo][bj] = j, i
		load[hi] = load[hi] - costs[i] + costs[j]
		load[lo] = load[lo] - costs[j] + costs[i]
		return true
	}
	return false
}

// bestSwap returns the places in hi and lo of the pair swapOnce makes,
// if any: for each of hi's samples, a binary search over lo's by cost
// finds the two costs nearest the ideal one, the earliest sample of each.
func bestSwap(costs []uint64, hi, lo []int, gap int64) (bi, bj int, ok bool) {
	// lo's places sorted by (cost, position): a run of equal costs
	// starts with its earliest sample.
	byCost := make([]int, len(lo))
	for k := range byCost {
		byCost[k] = k
	}
	slices.SortFunc(byCost, func(x, y int) int {
		cx, cy := costs[lo[x]], costs[lo[y]]
		switch {
		case cx < cy:
			return -1
		case cx > cy:
			return 1
		}
		return lo[x] - lo[y]
	})
	var best struct {
		dev      int64
		pi, pj   int
		ati, atj int
	}
	found := false
	consider := func(ai, k int) {
		ci, cj := int64(costs[hi[ai]]), int64(costs[lo[byCost[k]]])
		d := ci - cj
		if d <= 0 || d >= gap {
			return
		}
		dev := 2*d - gap
		if dev < 0 {
			dev = -dev
		}
		pi, pj := hi[ai], lo[byCost[k]]
		if !found || dev < best.dev || dev == best.dev && (pi < best.pi || pi == best.pi && pj < best.pj) {
			best.dev, best.pi, best.pj, best.ati, best.atj = dev, pi, pj, ai, byCost[k]
			found = true
		}
	}
	for ai, i := range hi {
		ci := int64(costs[i])
		// The first of lo's samples with 2·cost ≥ 2·cost_i − gap: the
		// nearest cost at or above the ideal, and the run before it the
		// nearest below.
		k, _ := slices.BinarySearchFunc(byCost, 2*ci-gap, func(x int, t int64) int {
			v := 2 * int64(costs[lo[x]])
			switch {
			case v < t:
				return -1
			case v > t:
				return 1
			}
			return 0
		})
		if k < len(byCost) {
			consider(ai, runStart(costs, lo, byCost, k))
		}
		if k > 0 {
			consider(ai, runStart(costs, lo, byCost, k-1))
		}
	}
	return best.ati, best.atj, found
}

// runStart is the first place of the run of equal costs holding place k
// of byCost.
func runStart(costs []uint64, lo, byCost []int, k int) int {
	c := costs[lo[byCost[k]]]
	for k > 0 && costs[lo[byCost[k-1]]] == c {
		k--
	}
	return k
}

// rankHeap is the ranks with room, the cheapest first (the lower among
// equals).
type rankHeap struct {
	ranks []int
	load  []uint64
}

func (h *rankHeap) Len() int { return len(h.ranks) }
func (h *rankHeap) Less(a, b int) bool {
	x, y := h.ranks[a], h.ranks[b]
	return h.load[x] < h.load[y] || h.load[x] == h.load[y] && x < y
}
func (h *rankHeap) Swap(a, b int) { h.ranks[a], h.ranks[b] = h.ranks[b], h.ranks[a] }
func (h *rankHeap) Push(x any)    { h.ranks = append(h.ranks, x.(int)) }
func (h *rankHeap) Pop() any {
	r := h.ranks[len(h.ranks)-1]
	h.ranks = h.ranks[:len(h.ranks)-1]
	return r
}

// Ratio is the ranks' largest cost over their mean: 1 for a perfect
// balance (and for a batch of no cost).
func Ratio(costs []uint64) float64 {
	var sum, top uint64
	for _, c := range costs {
		sum += c
		top = max(top, c)
	}
	if sum == 0 {
		return 1
	}
	return float64(top) * float64(len(costs)) / float64(sum)
}

// Attention is a packed sequence's attention cost: the sum of the
// squares of its pieces' lengths (docs/shuffle.md §13.2). Its pad costs
// nothing.
func Attention(lengths []int) uint64 {
	var c uint64
	for _, n := range lengths {
		c += uint64(n) * uint64(n)
	}
	return c
}
