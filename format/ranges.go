package format

import (
	"fmt"
	"io"
	"sort"
)

// Read is the bytes a chunk's read fetched, addressed by their offsets in
// the object: src holds ranges back to back. It is an io.ReaderAt over
// the object that answers only inside the ranges, so a format's decoder
// (or the library it uses) reads the object as if it had it whole.
type Read struct {
	ranges []Range
	at     []int64 // at[i] is where ranges[i] starts in src
	src    []byte
}

// NewRead returns the read of ranges (ascending, not overlapping) whose
// bytes are src, or an error when src is not exactly their length.
func NewRead(ranges []Range, src []byte) (*Read, error) {
	r := &Read{ranges: ranges, at: make([]int64, len(ranges)), src: src}
	var n int64
	for i, rg := range ranges {
		if i > 0 && rg.Off < ranges[i-1].End() {
			return nil, fmt.Errorf("format: ranges not ascending: %d+%d after %d+%d", rg.Off, rg.Len, ranges[i-1].Off, ranges[i-1].Len)
		}
		r.at[i] = n
		n += rg.Len
	}
	if n != int64(len(src)) {
		return nil, fmt.Errorf("%w: read %d bytes for ranges of %d", ErrDamaged, len(src), n)
	}
	return r, nil
}

// Bytes returns the object's bytes [off, off+n) without a copy, or an
// error wrapping ErrDamaged when they are not all inside one range read.
func (r *Read) Bytes(off, n int64) ([]byte, error) {
	i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].End() > off })
	if n < 0 || i == len(r.ranges) || off < r.ranges[i].Off || off+n > r.ranges[i].End() {
		return nil, fmt.Errorf("%w: bytes %d+%d of the object were not read", ErrDamaged, off, n)
	}
	s := r.at[i] + off - r.ranges[i].Off
	return r.src[s : s+n : s+n], nil
}

// ReadAt reads the object's bytes at off; past the ranges read it fails
// with an error wrapping ErrDamaged (io.EOF only at the last range's end).
func (r *Read) ReadAt(p []byte, off int64) (int, error) {
	i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].End() > off })
	if i == len(r.ranges) || off < r.ranges[i].Off {
		if len(r.ranges) > 0 && off == r.ranges[len(r.ranges)-1].End() {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: byte %d of the object was not read", ErrDamaged, off)
	}
	s := r.at[i] + off - r.ranges[i].Off
	n := copy(p, r.src[s:r.at[i]+r.ranges[i].Len])
	if n < len(p) {
		if i == len(r.ranges)-1 {
			return n, io.EOF
		}
		m, err := r.ReadAt(p[n:], off+int64(n))
		return n + m, err
	}
	return n, nil
}
