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
	bytes  [][]byte // bytes[i] is ranges[i]'s
}

// NewRead returns the read of ranges (ascending, not overlapping) whose
// bytes are src, or an error when src is not exactly their length.
func NewRead(ranges []Range, src []byte) (*Read, error) {
	r := &Read{}
	var n int64
	for _, rg := range ranges {
		if rg.Len < 0 || n+rg.Len > int64(len(src)) {
			return nil, fmt.Errorf("%w: read %d bytes for ranges of more", ErrDamaged, len(src))
		}
		if err := r.Add(rg, src[n:n+rg.Len:n+rg.Len]); err != nil {
			return nil, err
		}
		n += rg.Len
	}
	if n != int64(len(src)) {
		return nil, fmt.Errorf("%w: read %d bytes for ranges of %d", ErrDamaged, len(src), n)
	}
	return r, nil
}

// Add adds range rg, its bytes b, after the ranges read: what a decoder
// reads in place of some of them (a column chunk it wrote again,
// addressed past the object's end).
func (r *Read) Add(rg Range, b []byte) error {
	if n := len(r.ranges); n > 0 && rg.Off < r.ranges[n-1].End() {
		return fmt.Errorf("format: ranges not ascending: %d+%d after %d+%d", rg.Off, rg.Len, r.ranges[n-1].Off, r.ranges[n-1].Len)
	}
	if int64(len(b)) != rg.Len {
		return fmt.Errorf("%w: %d bytes for a range of %d", ErrDamaged, len(b), rg.Len)
	}
	r.ranges, r.bytes = append(r.ranges, rg), append(r.bytes, b)
	return nil
}

// Bytes returns the object's bytes [off, off+n) without a copy, or an
// error wrapping ErrDamaged when they are not all inside one range read.
func (r *Read) Bytes(off, n int64) ([]byte, error) {
	i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].End() > off })
	if n < 0 || i == len(r.ranges) || off < r.ranges[i].Off || off+n > r.ranges[i].End() {
		return nil, fmt.Errorf("%w: bytes %d+%d of the object were not read", ErrDamaged, off, n)
	}
	s := off - r.ranges[i].Off
	return r.bytes[i][s : s+n : s+n], nil
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
	n := copy(p, r.bytes[i][off-r.ranges[i].Off:])
	if n < len(p) {
		if i == len(r.ranges)-1 {
			return n, io.EOF
		}
		m, err := r.ReadAt(p[n:], off+int64(n))
		return n + m, err
	}
	return n, nil
}
