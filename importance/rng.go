package importance

import (
	"math"

	"github.com/brandgw/brand/internal/seeded"
)

// The random streams of the importance order are specified in
// docs/importance.md, in the same way and with the same seed derivation as
// the uniform shuffle's (docs/shuffle.md §1–4), but with their own domain
// constants, so that no importance stream ever coincides with a shuffle
// stream of the same seed and epoch. Every constant and loop direction here
// is load-bearing and pinned by testdata/golden.json.
//
// The derivation is package seeded's, shared with the shuffle; the
// domains are this package's own.

// Domain constants: ASCII read as big-endian integers.
const (
	domainKeys   uint64 = 0x6272616e64696d6b // "brandimk": the chunks' selection keys
	domainDraws  uint64 = 0x6272616e64696d64 // "brandimd": a chunk's weighted draws, index = chunk ID
	domainWindow uint64 = 0x6272616e64696d77 // "brandimw": a window's permutation, index = window
)

// The seed derivation and the stream are package seeded's, the shuffle's
// too: importance streams are seeded.New with the domains above.
// streamSeeds names the derivation for the golden tests.
func streamSeeds(seed, epoch, domain, index uint64) (seed1, seed2 uint64) {
	return seeded.Seeds(seed, epoch, domain, index)
}

// stream is a seeded.Stream with the unit draws of docs/importance.md §2.
type stream struct{ seeded.Stream }

func newStream(seed, epoch, domain, index uint64) stream {
	return stream{seeded.New(seed, epoch, domain, index)}
}

const (
	twoPow52 = 1.0 / (1 << 52)
	twoPow53 = 1.0 / (1 << 53)
)

// unitOpen returns ((x >> 12) + 0.5) · 2^-52 for the next output x: a
// float64 in the open interval (0, 1), never 0 or 1, so its logarithm is
// finite and negative. Both operations are exact: (x >> 12) + 0.5 needs 53
// significant bits. (With x >> 11 the sum would need 54 and could round up
// to 2^53, giving u = 1.)
func (s *stream) unitOpen() float64 {
	return (float64(s.Uint64()>>12) + 0.5) * twoPow52
}

// unitHalfOpen returns (x >> 11) · 2^-53 for the next output x: a float64 in
// [0, 1). Both operations are exact.
func (s *stream) unitHalfOpen() float64 {
	return float64(s.Uint64()>>11) * twoPow53
}

// logSpec is the natural logarithm as specified in docs/importance.md: the
// FreeBSD msun e_log.c algorithm (Go's portable math.Log), written with an
// explicit float64 conversion around every product so that no compiler may
// fuse a multiply and an add (the Go spec allows fusion otherwise). Go's
// math.Log runs architecture code on amd64 that may differ in the last bit,
// and other languages' libm may too; the order's keys must be identical
// everywhere, so the package computes its own. It is called only with x in
// (0, 1), normal and finite.
func logSpec(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
		ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
		l1    = 6.666666666666735130e-01   // 0x3fe5555555555593
		l2    = 3.999999999940941908e-01   // 0x3fd999999997fa04
		l3    = 2.857142874366239149e-01   // 0x3fd2492494229359
		l4    = 2.222219843214978396e-01   // 0x3fcc71c51d8e78af
		l5    = 1.818357216161805012e-01   // 0x3fc7466496cb03de
		l6    = 1.531383769920937332e-01   // 0x3fc39a09d078c69f
		l7    = 1.479819860511658591e-01   // 0x3fc2f112df3e5244
	)
	f1, ki := math.Frexp(x) // x = f1 · 2^ki, f1 in [0.5, 1): exact
	if f1 < math.Sqrt2/2 {
		f1 *= 2 // exact
		ki--
	}
	f := f1 - 1 // exact (Sterbenz)
	k := float64(ki)

	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	r := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
}
