package jobmodel

import (
	"cmp"
	"slices"
)

// maxSwaps bounds the improving swaps of §13.3's step 2.
const maxSwaps = 256

// Assign is docs/shuffle.md §13.3's assignment of a global batch whose
// items cost costs (in batch order) to ranks that take shares[r] items
// each: per rank its items' places in the batch, ascending. Written from
// the document's Python reference: every rank and every pair scanned.
func Assign(costs []uint64, shares []int) [][]int {
	world := len(shares)
	ranks := make([][]int, world)
	load := make([]int64, world)
	byCost := make([]int, len(costs))
	for i := range byCost {
		byCost[i] = i
	}
	slices.SortStableFunc(byCost, func(a, b int) int {
		return cmp.Or(cmp.Compare(costs[b], costs[a]), cmp.Compare(a, b))
	})
	// 1. Longest first, to the cheapest rank with room (the lower among
	// equals).
	for _, i := range byCost {
		best := -1
		for r := range world {
			if len(ranks[r]) < shares[r] && (best < 0 || load[r] < load[best]) {
				best = r
			}
		}
		ranks[best] = append(ranks[best], i)
		load[best] += int64(costs[i])
	}
	// 2. Improving swaps with the costliest rank.
	for range maxSwaps {
		hi := 0
		for r := range world {
			if load[r] > load[hi] {
				hi = r
			}
		}
		var los []int
		for r := range world {
			if load[r] < load[hi] {
				los = append(los, r)
			}
		}
		slices.SortStableFunc(los, func(a, b int) int { return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b)) })
		swapped := false
		for _, lo := range los {
			gap := load[hi] - load[lo]
			bi, bj, bd := -1, -1, int64(-1)
			for _, i := range ranks[hi] {
				for _, j := range ranks[lo] {
					d := int64(costs[i]) - int64(costs[j])
					if d <= 0 || d >= gap {
						continue
					}
					score := 2*d - gap
					if score < 0 {
						score = -score
					}
					if bd < 0 || score < bd || score == bd && (i < bi || i == bi && j < bj) {
						bi, bj, bd = i, j, score
					}
				}
			}
			if bi < 0 {
				continue
			}
			ranks[hi][slices.Index(ranks[hi], bi)] = bj
			ranks[lo][slices.Index(ranks[lo], bj)] = bi
			d := int64(costs[bi]) - int64(costs[bj])
			load[hi] -= d
			load[lo] += d
			swapped = true
			break
		}
		if !swapped {
			break
		}
	}
	for r := range ranks {
		slices.Sort(ranks[r])
	}
	return ranks
}

// SeparateRepeats is docs/importance.md §6's separate_repeats over a
// rank's keys, in place: no sample twice in a row, a repeat moved forward
// past the next different key, or else back into a gap between two
// others. A rank's share of an assigned global batch (docs/shuffle.md
// §7.2) is so separated where its draws can repeat (a mixture's small
// component, an importance epoch). Written from the document's
// pseudocode.
func SeparateRepeats(a []string) {
	for i := 1; i < len(a); i++ {
		d := a[i]
		if d != a[i-1] {
			continue
		}
		if j := slices.IndexFunc(a[i+1:], func(x string) bool { return x != d }); j >= 0 {
			a[i], a[i+1+j] = a[i+1+j], a[i]
			continue
		}
		for k := range i {
			if a[k] != d && (k == 0 || a[k-1] != d) {
				copy(a[k+1:i+1], a[k:i])
				a[k] = d
				break
			}
		}
	}
}
