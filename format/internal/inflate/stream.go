package inflate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrWindow marks compressed bytes that Stream cannot decompress within
// its window: a ZSTD frame whose window is larger than StreamWindow, a
// Snappy copy reaching further back than SnappyWindow. The bytes may be
// good: whoever must read them decompresses them whole (Into).
var ErrWindow = errkind.New(errkind.Internal, "inflate: reaches back past the window a stream keeps")

const (
	// StreamWindow is the largest ZSTD window Stream decodes (the
	// library's encoders use at most 8 MiB, zstd's level 19 too).
	StreamWindow = 8 << 20
	// SnappyWindow is the history Stream keeps of a Snappy block, at
	// least (a copy from further back may still be in its buffer). The
	// reference compressor (google/snappy: pyarrow's, DuckDB's, Spark's)
	// and golang/snappy copy from within the last 64 KiB; s2's
	// Snappy-compatible blocks (klauspost/compress/snappy: arrow-go's)
	// from anywhere in the block, often from near, not always.
	SnappyWindow = 1 << 20
	// lz4Window is an LZ4 block's: its offsets are 16-bit.
	lz4Window = 64 << 10
)

// Stream returns a reader of src decompressed with c that holds a
// window of its output, never all of it: reading it through — to read a
// page's values' lengths and pass over their bytes — costs the codec's
// window, not the data's size. Beside the reader's own buffers (at most
// twice the window for Snappy and LZ4 blocks; StreamWindow and a block
// for ZSTD; what Working says for the others) nothing is allocated. A
// copy or a frame reaching past the window fails with ErrWindow, bytes
// that do not decompress with ErrCorrupt. The reader ends where src's
// data does; a caller that needs a stated length reads no more.
func Stream(c Codec, src []byte) (io.ReadCloser, error) {
	s := &Streams{}
	r, err := s.Open(c, src)
	if err != nil {
		return nil, err
	}
	return &streamCloser{Reader: r, s: s}, nil
}

type streamCloser struct {
	io.Reader
	s *Streams
}

func (c *streamCloser) Close() error { c.s.Close(); return nil }

// Streams opens streams (Stream) one after the other, each reusing the
// last one's buffers — a ZSTD decoder's window, a Snappy or LZ4 block's —
// so that a reader of many pages holds one window, not one a page. The
// zero value is ready; Close gives its decoder back. Not safe for
// concurrent use: a stream is read until the next Open.
type Streams struct {
	// Keep makes its Snappy and LZ4 streams keep what their reader
	// reads, and pass over what it skips (Skipper): a copy from further
	// back than the window then finds what was read, and fails with
	// ErrWindow only where it was skipped. For a reader that reads a
	// little of much and skips the rest (a page's values' lengths, or
	// its short values around a long one), which holds what it reads.
	Keep bool

	zstd *zstd.Decoder
	lz   []byte
}

// A Skipper is a stream whose reader may pass over its next n bytes
// without reading them (Streams.Keep's).
type Skipper interface {
	Skip(n int64) (int64, error)
}

// Open is Stream of src, with s's buffers; the stream opened before is
// done with.
func (s *Streams) Open(c Codec, src []byte) (io.Reader, error) {
	switch c {
	case Snappy:
		n, k := binary.Uvarint(src)
		if k <= 0 || n > 1<<32 {
			return nil, corrupt(c, errors.New("no length"))
		}
		return s.lzStream(src[k:], int(n), SnappyWindow, snappyNext), nil
	case LZ4Block:
		return s.lzStream(src, -1, lz4Window, lz4Next), nil
	case ZSTD:
		var err error
		if s.zstd == nil {
			s.zstd, err = zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(StreamWindow))
		} else {
			err = s.zstd.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return nil, corrupt(c, err)
		}
		return &codecStream{c: c, r: s.zstd}, nil
	case Gzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, corrupt(c, err)
		}
		return &codecStream{c: c, r: r}, nil
	case Brotli:
		return &codecStream{c: c, r: brotli.NewReader(bytes.NewReader(src))}, nil
	case LZ4Frame:
		return &codecStream{c: c, r: lz4.NewReader(bytes.NewReader(src))}, nil
	}
	return nil, fmt.Errorf("inflate: no stream of codec %d", uint8(c))
}

// Close gives back s's ZSTD decoder. s may be used again.
func (s *Streams) Close() {
	if s.zstd != nil {
		s.zstd.Close()
		s.zstd = nil
	}
}

func (s *Streams) lzStream(src []byte, n, win int, next func(*lzStream) error) *lzStream {
	if len(s.lz) != 2*win {
		s.lz = make([]byte, 2*win)
	}
	return &lzStream{src: src, buf: s.lz, win: win, left: n, next: next, keepRead: s.Keep}
}

// codecStream is a library's stream reader, its errors classified.
type codecStream struct {
	c Codec
	r io.Reader
}

func (s *codecStream) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		return n, fmt.Errorf("%w: %s: %v", ErrWindow, s.c, err)
	}
	return n, corrupt(s.c, err)
}

// lzStream decodes a block of literals and back-references (Snappy's,
// LZ4's) into a buffer of twice its window: once the buffer is full and
// read, its last window's bytes move to its start, so that a copy finds
// its source there. What its reader read (Read, not Skip) it keeps, so
// that a copy from further back finds it too: a Snappy block whose
// short values repeat a prefix from its start across a 100 MB value
// between (s2 writes such copies) reads through, keeping what was read.
// A copy from skipped bytes that left the window makes bytes of no
// known value: reading one fails with ErrWindow, skipping it is fine.
type lzStream struct {
	src   []byte
	buf   []byte // the window, then new output: buf[:n], of which buf[:r] is read
	n, r  int
	win   int
	start int64 // the output position of buf[0]
	pos   int64 // output bytes made
	left  int   // bytes the block says it makes and it has not (Snappy); -1: unstated
	next  func(*lzStream) error

	lit      int // literal bytes left, at src[0:]
	cp, back int // copy bytes left, and its offset
	token    byte
	match    bool // LZ4: the sequence's match follows its literals

	keepRead bool
	kept     []byte     // the output read, in order (keepRead)
	spans    []keptSpan // its runs: where each starts in the output and in kept
	unknown  []posRange // output in buf of no known value, ascending
}

// keptSpan is a run of read output: from output position pos, at kept[at:].
type keptSpan struct {
	pos int64
	at  int
}

// posRange is output positions [from, to).
type posRange struct{ from, to int64 }

func (s *lzStream) Read(p []byte) (int, error) {
	for s.r == s.n {
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	k := min(len(p), s.n-s.r)
	from := s.start + int64(s.r)
	if s.isUnknown(from, from+int64(k)) {
		return 0, fmt.Errorf("%w: bytes copied from bytes skipped %d or more bytes back", ErrWindow, s.win)
	}
	copy(p, s.buf[s.r:s.r+k])
	if s.keepRead {
		s.keep(from, s.buf[s.r:s.r+k])
	}
	s.r += k
	return k, nil
}

// Skip passes over the next n bytes of output without keeping them.
func (s *lzStream) Skip(n int64) (int64, error) {
	var done int64
	for done < n {
		if s.r == s.n {
			if err := s.fill(); err != nil {
				return done, err
			}
			continue
		}
		k := min(int64(s.n-s.r), n-done)
		s.r += int(k)
		done += k
	}
	return done, nil
}

func (s *lzStream) keep(pos int64, b []byte) {
	if k := len(s.spans); k == 0 || s.spans[k-1].pos+int64(len(s.kept)-s.spans[k-1].at) != pos {
		s.spans = append(s.spans, keptSpan{pos: pos, at: len(s.kept)})
	}
	s.kept = append(s.kept, b...)
}

// isUnknown reports whether output [from, to) holds a byte of no known
// value.
func (s *lzStream) isUnknown(from, to int64) bool {
	i := sort.Search(len(s.unknown), func(i int) bool { return s.unknown[i].to > from })
	return i < len(s.unknown) && s.unknown[i].from < to
}

// markUnknown marks output byte pos, the last made, of no known value.
func (s *lzStream) markUnknown(pos int64) {
	if l := len(s.unknown); l > 0 && s.unknown[l-1].to == pos {
		s.unknown[l-1].to++
		return
	}
	s.unknown = append(s.unknown, posRange{pos, pos + 1})
}

// source returns output byte q, where it is known: in the window, or
// read before it left.
func (s *lzStream) source(q int64) (byte, bool) {
	if q >= s.start {
		return s.buf[q-s.start], !s.isUnknown(q, q+1)
	}
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].pos > q }) - 1
	if i < 0 {
		return 0, false
	}
	end := len(s.kept)
	if i+1 < len(s.spans) {
		end = s.spans[i+1].at
	}
	at := s.spans[i].at + int(q-s.spans[i].pos)
	if at >= end {
		return 0, false
	}
	return s.kept[at], true
}

// fill makes more output: the current literal's or copy's, or reads the
// next element (io.EOF at the block's end).
func (s *lzStream) fill() error {
	if s.n == len(s.buf) {
		drop := s.n - s.win
		copy(s.buf, s.buf[drop:s.n])
		s.n, s.r = s.win, s.win
		s.start += int64(drop)
		for len(s.unknown) > 0 && s.unknown[0].to <= s.start {
			s.unknown = s.unknown[1:]
		}
	}
	room := len(s.buf) - s.n
	switch {
	case s.lit > 0:
		k := min(s.lit, room)
		if k > len(s.src) {
			return s.corrupt("a literal past the block's end")
		}
		copy(s.buf[s.n:], s.src[:k])
		s.src, s.lit = s.src[k:], s.lit-k
		s.n += k
		s.pos += int64(k)
	case s.cp > 0:
		if int64(s.back) > s.pos {
			return s.corrupt("a copy from before the block's start")
		}
		k := min(s.cp, room)
		q := s.pos - int64(s.back)
		switch {
		case q >= s.start && len(s.unknown) == 0:
			for i := range k { // byte by byte: a copy may overlap itself
				s.buf[s.n+i] = s.buf[s.n+i-s.back]
			}
		case !s.keepRead && q < s.start:
			return fmt.Errorf("%w: a copy from %d bytes back", ErrWindow, s.back)
		default:
			for i := range k { // a byte is unknown where its source is
				b, ok := s.source(q + int64(i))
				s.buf[s.n+i] = b
				if !ok {
					s.markUnknown(s.pos + int64(i))
				}
			}
		}
		s.cp -= k
		s.n += k
		s.pos += int64(k)
	default:
		return s.next(s)
	}
	return nil
}

func (s *lzStream) corrupt(why string) error {
	c := Snappy
	if s.left < 0 {
		c = LZ4Block
	}
	return corrupt(c, errors.New(why))
}

// made counts n bytes of the next element against what the block says
// it makes, if it says.
func (s *lzStream) made(n int) error {
	if s.left < 0 {
		return nil
	}
	if n > s.left {
		return s.corrupt("more bytes than its length says")
	}
	s.left -= n
	return nil
}

// snappyNext reads a Snappy element (format_description.txt).
func snappyNext(s *lzStream) error {
	if len(s.src) == 0 {
		if s.left != 0 {
			return s.corrupt("fewer bytes than its length says")
		}
		return io.EOF
	}
	b := s.src
	tag := b[0]
	switch tag & 3 {
	case 0:
		n := int(tag >> 2)
		at := 1
		if n >= 60 {
			k := n - 59 // 1 to 4 bytes of length
			if len(b) < 1+k {
				return s.corrupt("a literal's length cut short")
			}
			var x uint32
			for i := range k {
				x |= uint32(b[1+i]) << (8 * i)
			}
			n, at = int(x), 1+k
		}
		s.src, s.lit = b[at:], n+1
		return s.made(s.lit)
	case 1:
		if len(b) < 2 {
			return s.corrupt("a copy cut short")
		}
		s.cp, s.back, s.src = 4+int(tag>>2&7), int(tag&0xe0)<<3|int(b[1]), b[2:]
	case 2:
		if len(b) < 3 {
			return s.corrupt("a copy cut short")
		}
		s.cp, s.back, s.src = 1+int(tag>>2), int(binary.LittleEndian.Uint16(b[1:])), b[3:]
	case 3:
		if len(b) < 5 {
			return s.corrupt("a copy cut short")
		}
		s.cp, s.back, s.src = 1+int(tag>>2), int(binary.LittleEndian.Uint32(b[1:])), b[5:]
	}
	if s.back == 0 {
		return s.corrupt("a copy of offset 0")
	}
	return s.made(s.cp)
}

// lz4Next reads the next part of an LZ4 sequence (lz4_Block_format.md):
// its token and literals, then its match; the block ends after a
// sequence's literals.
func lz4Next(s *lzStream) error {
	if !s.match {
		if len(s.src) == 0 {
			return io.EOF
		}
		s.token, s.src = s.src[0], s.src[1:]
		n, err := lz4Len(s, int(s.token>>4))
		if err != nil {
			return err
		}
		s.lit, s.match = n, true
		return nil
	}
	s.match = false
	if len(s.src) == 0 {
		return io.EOF // the last sequence: literals alone
	}
	if len(s.src) < 2 {
		return s.corrupt("an offset cut short")
	}
	s.back, s.src = int(binary.LittleEndian.Uint16(s.src)), s.src[2:]
	if s.back == 0 {
		return s.corrupt("a match of offset 0")
	}
	n, err := lz4Len(s, int(s.token&15))
	if err != nil {
		return err
	}
	s.cp = n + 4
	return nil
}

// lz4Len is a length of n, its nibble, and the bytes that extend it
// when it is 15.
func lz4Len(s *lzStream, n int) (int, error) {
	if n < 15 {
		return n, nil
	}
	for {
		if len(s.src) == 0 {
			return 0, s.corrupt("a length cut short")
		}
		b := s.src[0]
		s.src = s.src[1:]
		n += int(b)
		if n > 1<<31 {
			return 0, s.corrupt("a length past 2 GiB")
		}
		if b != 255 {
			return n, nil
		}
	}
}
