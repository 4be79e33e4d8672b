package parquet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
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
	src  []byte        // the elements not yet read
	from *bufio.Reader // or, where not nil, the reader they come from (resetFrom)
	in   int           // and how many of its bytes the block has left
	left int           // output bytes not yet produced
	pos  int           // output bytes produced

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

// resetFrom starts decoding the block of clen bytes that r gives next,
// which must decompress to exactly n bytes. Its literals are read from r
// straight into the slices read is handed: for a body read from the
// store, the only copy of their bytes is the kernel's. Its elements'
// tags, a few bytes each, pass through r's buffer.
func (s *snappyStream) resetFrom(r *bufio.Reader, clen, n int) error {
	*s = snappyStream{from: r, in: clen, left: n, starts: s.starts[:0], segs: s.segs[:0]}
	clear(s.segs[:cap(s.segs)])
	var got uint64
	for shift := 0; ; shift += 7 {
		b, err := s.tagByte()
		if err != nil || shift > 63 {
			return errSnappyCorrupt
		}
		got |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
	}
	if got != uint64(n) {
		return errSnappyCorrupt
	}
	return nil
}

// tagByte reads the next byte of an element's tag.
func (s *snappyStream) tagByte() (byte, error) {
	if s.from == nil {
		if len(s.src) == 0 {
			return 0, errSnappyCorrupt
		}
		b := s.src[0]
		s.src = s.src[1:]
		return b, nil
	}
	if s.in == 0 {
		return 0, errSnappyCorrupt
	}
	b, err := s.from.ReadByte()
	if err != nil {
		return 0, s.readErr(err)
	}
	s.in--
	return b, nil
}

// readErr is a failure of the reader: the block ends early (corrupt) or
// the reader failed, which is no fault of the block's.
func (s *snappyStream) readErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errSnappyCorrupt
	}
	return err
}

// srcLeft is how many of the block's bytes are still to be read.
func (s *snappyStream) srcLeft() int {
	if s.from != nil {
		return s.in
	}
	return len(s.src)
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
	return s.left == 0 && s.lit == 0 && s.cp == 0 && s.srcLeft() == 0
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
		if s.lit > 0 && s.from != nil {
			n := min(len(p), s.lit)
			if _, err := io.ReadFull(s.from, p[:n]); err != nil {
				return s.readErr(err)
			}
			s.in, s.lit, s.pos, s.left, p = s.in-n, s.lit-n, s.pos+n, s.left-n, p[n:]
			continue
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
	tag, err := s.tagByte()
	if err != nil {
		return err
	}
	var n, off int
	var b [4]byte // the tag's bytes after its first
	more := func(k int) error {
		for i := range k {
			if b[i], err = s.tagByte(); err != nil {
				return err
			}
		}
		return nil
	}
	switch tag & 3 {
	case 0: // literal
		x := int(tag >> 2)
		if x >= 60 {
			k := x - 59
			if err := more(k); err != nil {
				return err
			}
			var v uint32
			for i := range k {
				v |= uint32(b[i]) << (8 * i)
			}
			x = int(v)
		}
		n = x + 1
		if n <= 0 || n > s.srcLeft() || n > s.left {
			return errSnappyCorrupt
		}
		s.lit = n
		return nil
	case 1: // copy, an 11-bit offset
		if err := more(1); err != nil {
			return err
		}
		n = 4 + int(tag>>2)&7
		off = int(tag&0xe0)<<3 | int(b[0])
	case 2: // copy, a 16-bit offset
		if err := more(2); err != nil {
			return err
		}
		n = 1 + int(tag>>2)
		off = int(binary.LittleEndian.Uint16(b[:]))
	case 3: // copy, a 32-bit offset
		if err := more(4); err != nil {
			return err
		}
		n = 1 + int(tag>>2)
		off = int(binary.LittleEndian.Uint32(b[:]))
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
