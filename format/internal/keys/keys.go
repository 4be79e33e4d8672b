// Package keys makes the sample keys of formats whose samples are
// numbered within an object: stem + "/" + the number, zero-padded to a
// fixed width (wider numbers take the digits they need). A dataset of
// millions of samples has millions of keys, so a run of them is one
// string and each key a substring of it: one allocation a run, not one
// a key.
package keys

import (
	"slices"
	"strconv"
)

// Len is the length of sample i's key under stem, padded to width.
func Len(stem string, i, width int) int { return len(stem) + 1 + max(width, digits(i)) }

// Append appends the keys of samples first..first+n-1 under stem.
func Append(dst []string, stem string, first, n, width int) []string {
	size := 0
	for i := first; i < first+n; i++ {
		size += Len(stem, i, width)
	}
	b := make([]byte, 0, size)
	for i := first; i < first+n; i++ {
		b = append(append(b, stem...), '/')
		for range width - digits(i) {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, int64(i), 10)
	}
	all := string(b)
	dst = slices.Grow(dst, n)
	for i := first; i < first+n; i++ {
		l := Len(stem, i, width)
		dst = append(dst, all[:l])
		all = all[l:]
	}
	return dst
}

// Working is what Append allocates for samples first..first+n-1 under
// stem into a nil dst: the run's bytes twice (built, then the string)
// and a string header a key.
func Working(stem string, first, n, width int) int64 {
	size := 0
	for i := first; i < first+n; i++ {
		size += Len(stem, i, width)
	}
	return 2*int64(size) + 16*int64(n)
}

// One is sample i's key.
func One(stem string, i, width int) string { return Append(nil, stem, i, 1, width)[0] }

func digits(i int) int {
	n := 1
	for ; i >= 10; i /= 10 {
		n++
	}
	return n
}
