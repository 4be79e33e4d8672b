package parquet

import (
	"encoding/binary"
	"errors"
	"slices"
	"sort"
)

// snappyStream decodes one snappy block (a page's compressed bytes) a
// piece at a time, into whatever slices its caller hands it: a page's
// value lengths into the page buffer, its values' bytes straight into
// their members in the resident form. A library decoder writes a block
// into one contiguous buffer, which the values must then be copied out
// of; for a row group of photos that copy is as much work again as the
// decompression (BenchmarkDecodeHub), one pass over every byte fewer.
//
// A copy element refers back to output already written, wherever it was
// written: the stream keeps the slices it wrote into (segments), in
// output order, and reads a copy's source from them. Every slice handed
// to read must stay unchanged until the stream is done.
//
// It decodes snappy's block format exactly (github.com/google/snappy's
// format_description.txt): a copy with offset 0, which S2 (a superset a
// library decoder also accepts) uses as "repeat", is refused as snappy
// refuses it. FuzzSnappyStream holds it to klauspost/compress's decoder.
type snappyStream struct {
	src  []byte // the elements not yet read
	left int    // output bytes not yet produced
	pos  int    // output bytes produced

	// the element being produced
	lit  int // literal bytes left, at src[0:]
	cp   int // copy bytes left
	back int // its offset

	starts []int    // each segment's output position
	segs   [][]byte // the segments, in output order
}

var (
	errSnappyCorrupt = errors.New("snappy: corrupt input")
	errSnappyShort   = errors.New("snappy: fewer bytes than asked for")
)

// reset starts decoding block b, which must decompress to exactly n
// bytes.
func (s *snappyStream) reset(b []byte, n int) error {
	got, k := binary.Uvarint(b)
	if k <= 0 || got != uint64(n) {
		return errSnappyCorrupt
	}
	*s = snappyStream{src: b[k:], left: n, starts: s.starts[:0], segs: s.segs[:0]}
	clear(s.segs[:cap(s.segs)])
	return nil
}

// expect makes room for k reads' segments at once, so that a page of
// values does not grow the lists read by read.
func (s *snappyStream) expect(k int) {
	if cap(s.starts)-len(s.starts) < k {
		s.starts = slices.Grow(s.starts, k)
		s.segs = slices.Grow(s.segs, k)
	}
}

// remaining is how many output bytes are still to be read.
func (s *snappyStream) remaining() int { return s.left }

// done reports whether the block was read whole: every output byte
// produced and every element used.
func (s *snappyStream) done() bool {
	return s.left == 0 && s.lit == 0 && s.cp == 0 && len(s.src) == 0
}

// read decodes the next len(p) output bytes into p.
func (s *snappyStream) read(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if len(p) > s.left {
		return errSnappyShort
	}
	s.starts = append(s.starts, s.pos)
	s.segs = append(s.segs, p)
	for len(p) > 0 {
		if s.lit == 0 && s.cp == 0 {
			if err := s.element(); err != nil {
				return err
			}
		}
		if s.lit > 0 {
			n := copy(p[:min(len(p), s.lit)], s.src)
			s.src, s.lit, s.pos, s.left, p = s.src[n:], s.lit-n, s.pos+n, s.left-n, p[n:]
			continue
		}
		n := min(len(p), s.cp)
		s.copyBack(p[:n])
		s.cp, s.pos, s.left, p = s.cp-n, s.pos+n, s.left-n, p[n:]
	}
	return nil
}

// element reads the next element's tag: a literal's length, or a copy's
// length and offset.
func (s *snappyStream) element() error {
	if len(s.src) == 0 {
		return errSnappyCorrupt
	}
	tag := s.src[0]
	var n, off int
	switch tag & 3 {
	case 0: // literal
		x := int(tag >> 2)
		k := 1
		if x >= 60 {
			k += x - 59
			if len(s.src) < k {
				return errSnappyCorrupt
			}
			var v uint32
			for i := 1; i < k; i++ {
				v |= uint32(s.src[i]) << (8 * (i - 1))
			}
			x = int(v)
		}
		n = x + 1
		if n <= 0 || n > len(s.src)-k || n > s.left {
			return errSnappyCorrupt
		}
		s.src, s.lit = s.src[k:], n
		return nil
	case 1: // copy, an 11-bit offset
		if len(s.src) < 2 {
			return errSnappyCorrupt
		}
		n = 4 + int(tag>>2)&7
		off = int(tag&0xe0)<<3 | int(s.src[1])
		s.src = s.src[2:]
	case 2: // copy, a 16-bit offset
		if len(s.src) < 3 {
			return errSnappyCorrupt
		}
		n = 1 + int(tag>>2)
		off = int(binary.LittleEndian.Uint16(s.src[1:]))
		s.src = s.src[3:]
	case 3: // copy, a 32-bit offset
		if len(s.src) < 5 {
			return errSnappyCorrupt
		}
		n = 1 + int(tag>>2)
		off = int(binary.LittleEndian.Uint32(s.src[1:]))
		s.src = s.src[5:]
	}
	if off <= 0 || off > s.pos || n > s.left {
		return errSnappyCorrupt
	}
	s.cp, s.back = n, off
	return nil
}

// copyBack writes p, which starts at output position s.pos, from the
// output s.back bytes before it. Where the copy overlaps itself (an
// offset shorter than its length: a repeated pattern) it goes in steps of
// at most the offset, each reading only bytes already written.
func (s *snappyStream) copyBack(p []byte) {
	at := s.pos
	for len(p) > 0 {
		n := min(len(p), s.back)
		s.gather(p[:n], at-s.back)
		p, at = p[n:], at+n
	}
}

// gather fills p from the output at position from on, across segments.
func (s *snappyStream) gather(p []byte, from int) {
	i := sort.SearchInts(s.starts, from+1) - 1
	for len(p) > 0 {
		seg := s.segs[i][from-s.starts[i]:]
		n := copy(p, seg)
		p, from = p[n:], from+n
		i++
	}
}
