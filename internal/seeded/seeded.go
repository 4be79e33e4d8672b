// Package seeded is the seeded random stream Brand's orders are drawn from:
// the shuffle's chunk and window permutations, the importance order's keys
// and draws, the cluster's ownership scores (through Mix64). It is part of
// a cross-language specification (docs/shuffle.md §2): every constant and
// every loop direction is load-bearing, pinned by the golden vectors and
// Python references of the packages that use it. Each user derives its
// streams with its own domain constants, so that no two purposes ever share
// a generator.
package seeded

import (
	"math/bits"
	"math/rand/v2"
)

// golden is SplitMix64's increment, 2^64 divided by the golden ratio, odd.
const golden uint64 = 0x9e3779b97f4a7c15

// Mix64 is the SplitMix64 finalizer (Stafford's "Mix13"): a bijection on
// uint64 that spreads every input bit over every output bit. Mix64(0) = 0,
// which is why the seed derivation starts from a nonzero domain constant.
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Seeds derives the two PCG seeds of one stream from a job's seed, the
// epoch, a domain constant and an index. Each input is folded in through
// the bijection Mix64, so for fixed other inputs distinct values of any one
// input give distinct generators; the final two steps are the first two
// outputs of a SplitMix64 generator whose state is h.
func Seeds(seed, epoch, domain, index uint64) (seed1, seed2 uint64) {
	h := Mix64(domain)
	h = Mix64(h ^ seed)
	h = Mix64(h ^ epoch)
	h = Mix64(h ^ index)
	h += golden
	seed1 = Mix64(h)
	h += golden
	seed2 = Mix64(h)
	return seed1, seed2
}

// Stream is a seeded source of uniform integers. It uses math/rand/v2's PCG
// only through Uint64, whose algorithm (128-bit LCG, DXSM output) Go
// documents and promises not to change; bounded integers and shuffling are
// implemented here so that the whole algorithm is specified independently
// of Go's rand.IntN and rand.Shuffle.
type Stream struct {
	pcg rand.PCG
}

// New returns the stream of (seed, epoch, domain, index).
func New(seed, epoch, domain, index uint64) Stream {
	var s Stream
	s.pcg.Seed(Seeds(seed, epoch, domain, index))
	return s
}

// Seed reseeds the stream's PCG directly (tests of the bounded draws).
func (s *Stream) Seed(seed1, seed2 uint64) { s.pcg.Seed(seed1, seed2) }

// Uint64 returns the stream's next 64 bits.
func (s *Stream) Uint64() uint64 { return s.pcg.Uint64() }

// Bounded returns a uniform integer in [0, n) for n >= 1 using Lemire's
// nearly-divisionless method: the high word of x*n, rejecting x when the
// low word falls below 2^64 mod n, which would otherwise bias the result.
func (s *Stream) Bounded(n uint64) uint64 {
	hi, lo := bits.Mul64(s.pcg.Uint64(), n)
	if lo < n {
		thresh := -n % n // 2^64 mod n
		for lo < thresh {
			hi, lo = bits.Mul64(s.pcg.Uint64(), n)
		}
	}
	return hi
}

// Shuffle permutes a with the Fisher–Yates (Durstenfeld) shuffle, walking
// i downward from len(a)-1 to 1 and swapping a[i] with a[Bounded(i+1)].
//
// Because step i never touches positions above i, positions [stop, len(a))
// hold their final values once step max(stop, 1) is done; Shuffle stops
// there. stop <= 1 performs the full shuffle. This lets a reader of the
// tail of a window skip the random draws that only affect its head, while
// producing exactly the values the full shuffle would.
func (s *Stream) Shuffle(a []int, stop int) { ShuffleOf(s, a, stop) }

// ShuffleOf is Stream.Shuffle over a slice of any element type, for
// callers that keep what they shuffle compact (a mixture's slots are a
// byte each): the same draws, the same swaps.
func ShuffleOf[T any](s *Stream, a []T, stop int) {
	if stop < 1 {
		stop = 1
	}
	for i := len(a) - 1; i >= stop; i-- {
		j := int(s.Bounded(uint64(i) + 1))
		a[i], a[j] = a[j], a[i]
	}
}
