package dataset

import (
	"math/bits"
	"math/rand/v2"
)

// packStream is the second PCG seed of every pack order: the ASCII bytes
// "brandpck" read as a big-endian integer. It keeps pack orders apart from
// the shuffle package's streams even for equal seeds.
const packStream uint64 = 0x6272616e6470636b

// packOrder returns the order in which Pack writes n samples (indexes into
// the key-sorted samples) for a seed. It is part of what makes a pack
// reproducible, so it is specified here independently of Go's rand.Shuffle
// and rand.IntN, whose algorithms are not promised to stay the same:
//
//   - a math/rand/v2 PCG (128-bit LCG, DXSM output; its Uint64 is documented
//     and stable) seeded with (seed, packStream);
//   - the identity permutation 0..n-1, shuffled by Fisher–Yates walking i
//     down from n-1 to 1 and swapping a[i] with a[j], j uniform in [0, i],
//     drawn by Lemire's multiply-shift method with rejection (no modulo bias).
//
// The generator and the loop are those of the shuffle specification
// (docs/shuffle.md), so its Python reference reproduces a pack order:
// PCG(seed, 0x6272616e6470636b) passed to fisher_yates in
// shuffle/testdata/reference.py. testdata/pack-order.golden pins the output.
func packOrder(n int, seed uint64) []int {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	pcg := rand.NewPCG(seed, packStream)
	for i := n - 1; i >= 1; i-- {
		j := int(boundedUint64(pcg, uint64(i)+1))
		a[i], a[j] = a[j], a[i]
	}
	return a
}

// boundedUint64 returns a uniform integer in [0, n), n >= 1: the high word
// of x*n for a random x, rejecting x when the low word falls below 2^64 mod n.
func boundedUint64(pcg *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(pcg.Uint64(), n)
	if lo < n {
		thresh := -n % n // 2^64 mod n
		for lo < thresh {
			hi, lo = bits.Mul64(pcg.Uint64(), n)
		}
	}
	return hi
}
