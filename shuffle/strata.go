package shuffle

import (
	"fmt"
	"slices"
)

// Domain constants of the stratified chunk order: "brandstr" seeds each
// stratum's own chunk permutation, "brandstp" the order in which strata
// take turns. Both are ASCII read big-endian, like domainChunks.
const (
	domainStratum      uint64 = 0x6272616e64737472 // "brandstr"
	domainStratumOrder uint64 = 0x6272616e64737470 // "brandstp"
)

// NewStratifiedEpoch is NewEpoch with a chunk order that spreads every
// stratum evenly over the epoch, so that each window draws its chunks from
// the strata in proportion to their sizes. strata[c] is chunk c's stratum
// in [0, numStrata). A cluster uses a chunk's owning node as its stratum:
// with windows of 8 chunks over 4 nodes, a uniform chunk order leaves a
// node without a chunk of the window one time in ten, and no assignment of
// samples to ranks can then keep a quarter of the batch on its node.
//
// The order (docs/shuffle.md §7.2): each stratum's chunks, ascending, are
// permuted by the Fisher–Yates shuffle of the stream (seed, epoch,
// "brandstr", stratum). The j-th of the n_k chunks of stratum k is placed at
// (2j+1)/(2n_k), the centre of its share of the epoch, and the chunks are
// sorted by place; chunks of different strata at the same place go in the
// order of a permutation of the strata drawn from the stream (seed, epoch,
// "brandstp", 0). Windows and their sample permutations are then exactly
// those of NewEpoch. With one stratum it is a uniform chunk permutation,
// though not NewEpoch's.
func NewStratifiedEpoch(counts, strata []int, numStrata int, seed, epoch uint64, window int) (*Epoch, error) {
	first, err := firstIDs(counts, window)
	if err != nil {
		return nil, err
	}
	if len(strata) != len(counts) || numStrata < 1 {
		return nil, fmt.Errorf("%w: %d strata for %d chunks over %d strata", ErrInvalid, len(strata), len(counts), numStrata)
	}
	members := make([][]int, numStrata)
	for c, k := range strata {
		if k < 0 || k >= numStrata {
			return nil, fmt.Errorf("%w: stratum %d of chunk %d outside [0, %d)", ErrInvalid, k, c, numStrata)
		}
		members[k] = append(members[k], c)
	}
	turn := make([]int, numStrata) // turn[k]: stratum k's place among ties
	{
		perm := make([]int, numStrata)
		for k := range perm {
			perm[k] = k
		}
		s := newStream(seed, epoch, domainStratumOrder, 0)
		s.Shuffle(perm, 0)
		for i, k := range perm {
			turn[k] = i
		}
	}
	type placed struct{ c, j, k int }
	all := make([]placed, 0, len(counts))
	for k, m := range members {
		s := newStream(seed, epoch, domainStratum, uint64(k))
		s.Shuffle(m, 0)
		for j, c := range m {
			all = append(all, placed{c, j, k})
		}
	}
	slices.SortFunc(all, func(a, b placed) int {
		// (2j_a+1)/(2n_a) against (2j_b+1)/(2n_b), exactly: chunk counts
		// below 2^31 keep the products below 2^63.
		na, nb := uint64(len(members[a.k])), uint64(len(members[b.k]))
		l, r := uint64(2*a.j+1)*nb, uint64(2*b.j+1)*na
		switch {
		case l < r:
			return -1
		case l > r:
			return 1
		}
		return turn[a.k] - turn[b.k]
	})
	order := make([]int, len(all))
	for i, p := range all {
		order[i] = p.c
	}
	return newEpoch(first, order, seed, epoch, window), nil
}
