package shuffle

import "github.com/brandgw/brand/internal/seeded"

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

// The seed derivation and the stream are package seeded's: the shuffle's
// streams are seeded.New with the domains above (docs/shuffle.md §2).
// streamSeeds names the derivation for the golden and reference tests.
func streamSeeds(seed, epoch, domain, index uint64) (seed1, seed2 uint64) {
	return seeded.Seeds(seed, epoch, domain, index)
}

// stream is a seeded.Stream: Uint64, Bounded and Shuffle(a, stop).
type stream struct{ seeded.Stream }

func newStream(seed, epoch, domain, index uint64) stream {
	return stream{seeded.New(seed, epoch, domain, index)}
}
