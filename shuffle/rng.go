package shuffle

import (
	"math/bits"
	"math/rand/v2"
)

// The random streams below are part of the shuffle's cross-language
// specification (docs/shuffle.md). Every constant and every loop direction is
// load-bearing: changing any of them changes every epoch of every job, so they
// are pinned by golden vectors and by a Python reference implementation.

// Domain constants separate the chunk-order stream from the window streams so
// that the chunk permutation of an epoch and the permutation of its window 0
// never share a generator. They are the ASCII bytes "brandchk" and "brandwin"
// read as big-endian integers.
const (
	domainChunks uint64 = 0x6272616e6463686b // "brandchk"
	domainWindow uint64 = 0x6272616e6477696e // "brandwin"
)

// golden is SplitMix64's increment, 2^64 divided by the golden ratio, odd.
const golden uint64 = 0x9e3779b97f4a7c15

// mix64 is the SplitMix64 finalizer (Stafford's "Mix13"): a bijection on
// uint64 that spreads every input bit over every output bit. Note mix64(0) = 0,
// which is why the seed derivation starts from a nonzero domain constant.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// streamSeeds derives the two PCG seeds for one stream from the job's seed,
// the epoch, a domain constant and an index (the window index; 0 for the
// chunk stream). Each input is folded in through the bijection mix64, so for
// fixed other inputs distinct values of any one input give distinct
// generators; the final two steps are the first two outputs of a SplitMix64
// generator whose state is h.
func streamSeeds(seed, epoch, domain, index uint64) (seed1, seed2 uint64) {
	h := mix64(domain)
	h = mix64(h ^ seed)
	h = mix64(h ^ epoch)
	h = mix64(h ^ index)
	h += golden
	seed1 = mix64(h)
	h += golden
	seed2 = mix64(h)
	return seed1, seed2
}

// stream is a seeded source of uniform integers. It uses math/rand/v2's PCG
// only through Uint64, whose algorithm (128-bit LCG, DXSM output) Go documents
// and promises not to change; bounded integers and shuffling are implemented
// here so that the whole algorithm is specified independently of Go's
// rand.IntN and rand.Shuffle.
type stream struct {
	pcg rand.PCG
}

func newStream(seed, epoch, domain, index uint64) stream {
	var s stream
	s.pcg.Seed(streamSeeds(seed, epoch, domain, index))
	return s
}

// bounded returns a uniform integer in [0, n) for n >= 1 using Lemire's
// nearly-divisionless method: the high word of x*n, rejecting x when the low
// word falls below 2^64 mod n, which would otherwise bias the result.
func (s *stream) bounded(n uint64) uint64 {
	hi, lo := bits.Mul64(s.pcg.Uint64(), n)
	if lo < n {
		thresh := -n % n // 2^64 mod n
		for lo < thresh {
			hi, lo = bits.Mul64(s.pcg.Uint64(), n)
		}
	}
	return hi
}

// shuffle permutes a with the Fisher–Yates (Durstenfeld) shuffle, walking i
// downward from len(a)-1 to 1 and swapping a[i] with a[bounded(i+1)].
//
// Because step i never touches positions above i, positions [stop, len(a))
// hold their final values once step max(stop, 1) is done; shuffle stops
// there. stop <= 1 performs the full shuffle. This lets a reader of the tail
// of a window skip the random draws that only affect its head, while producing
// exactly the values the full shuffle would.
func (s *stream) shuffle(a []int, stop int) {
	if stop < 1 {
		stop = 1
	}
	for i := len(a) - 1; i >= stop; i-- {
		j := int(s.bounded(uint64(i) + 1))
		a[i], a[j] = a[j], a[i]
	}
}
