package transform

import "math"

// The random resized crop draws its aspect ratio log-uniformly, which
// needs a logarithm and an exponential. math.Log and math.Exp are accurate
// to within an ulp but not correctly rounded, and Go computes them in
// assembly on some architectures and in Go on others; Python's come from
// the C library. A last-bit difference can move a rounded crop side by one
// pixel, so the draws would not be the same on every replica nor in the
// Python reference. detLog and detExp are instead defined by a fixed
// sequence of IEEE-754 double operations (+, −, ×, ÷, sqrt, each correctly
// rounded in every language), written out in docs/transform.md §3. They
// are accurate to a few ulps over the ranges used, which is irrelevant:
// what matters is that they are the same everywhere.
//
// Go may fuse x*y+z into one instruction on some architectures (arm64);
// an explicit float64 conversion of the product forbids that, so every
// product that is added to something is wrapped in one.

// detLog is the natural logarithm of x > 0 (finite), by square roots down
// to [15/16, 17/16] and the series 2·atanh(z) = log((1+z)/(1−z)).
func detLog(x float64) float64 {
	k := 0
	for x > 1.0625 || x < 0.9375 {
		x = math.Sqrt(x)
		k++
	}
	z := (x - 1) / (x + 1)
	z2 := z * z
	s := 0.0
	for n := 10; n >= 0; n-- {
		s = float64(s*z2) + 1/float64(2*n+1)
	}
	r := 2 * z * s
	for ; k > 0; k-- {
		r *= 2
	}
	return r
}

// detExp is e^x for finite x of moderate size (|x| < 700), by halving down
// to |x| ≤ 1/16, a Taylor series in Horner form, and squaring back.
func detExp(x float64) float64 {
	k := 0
	for x > 0.0625 || x < -0.0625 {
		x /= 2
		k++
	}
	s := 1.0
	for n := 14; n >= 1; n-- {
		s = 1 + float64(s*x)/float64(n)
	}
	for ; k > 0; k-- {
		s *= s
	}
	return s
}
