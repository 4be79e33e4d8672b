package parquet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/format"
)

// Decoding a chunk as its bytes arrive (DecodeStream).
//
// Decode reads a row group's column chunks from one buffer the whole
// range was read into, and copies each image out of it: by then the
// buffer has left the processor's cache, and the copy is most of what a
// cold Parquet epoch costs the gateway over a tar one (docs/benchmarks.md).
// DecodeStream reads the image column's pages from the response body
// itself, each value straight into the place its member will have in the
// resident form, and checks its CRC32C while it is still in the cache;
// every other column chunk, and the image column's page headers and small
// pages, go into src as before. Decode then runs over src as always,
// except that the image values are already where they go.
//
// Where they go is not known when they arrive: the column is stored
// column-major, so a row's label, and which row a dictionary value
// belongs to, come later. A value is placed on trust: the k-th value of
// the column (a dictionary's, then PLAIN pages') as row k's image, its
// member where it would be if every other field of each row had one
// member of at most a block (a label, a short text). pyarrow's dictionary
// is in order of first use, so this holds for a row group without a
// repeated image. When the decode finds otherwise, the resident form is
// still the same bytes: a value whose member lands earlier than it was
// placed (a row before it had fewer members) moves down into it; before
// a member would write over a value not yet used (a longer member, a
// value used out of order, a repeated image), the values not yet used
// are moved to a buffer of the pools (placement.rescue) and copied from
// there.

// streamMin is the smallest page streamed: a smaller one is read into src
// and decoded from there.
const streamMin = 64 << 10

// streamValue is the fewest bytes a value a streamed page has, by its
// header's count.
const streamValue = 1 << 10

// streamBuf is the size of the buffer page headers and snappy tags are
// read through: a read of a value at least this long goes from the body
// straight into its place.
const streamBuf = 4 << 10

// DecodeStream implements format.Streamer.
func (d *decoder) DecodeStream(c int, sel format.Selection, open func(format.Range) (io.ReadCloser, error), src, dst []byte, wo format.WriterOptions) error {
	_, err := d.streamed(c, sel, open, src, dst, wo)
	return err
}

// streamed is DecodeStream, returning the placement it streamed with.
func (d *decoder) streamed(c int, sel format.Selection, open func(format.Range) (io.ReadCloser, error), src, dst []byte, wo format.WriterOptions) (pl *placement, err error) {
	if c < 0 || c >= d.ds.numChunks() {
		return nil, fmt.Errorf("parquet: no chunk %d", c)
	}
	ranges, bound := d.Extent(c, sel)
	if int64(len(src)) != format.Concat(ranges) || int64(len(dst)) < bound {
		return nil, fmt.Errorf("parquet: buffers of %d and %d bytes for ranges of %d and a resident bound of %d", len(src), len(dst), format.Concat(ranges), bound)
	}
	gs := d.ds.span(c)
	if pl = d.plan(gs, sel, dst, wo); pl == nil {
		return nil, fmt.Errorf("parquet: chunk %d has no column to stream: %w", c, format.ErrNotStreamed)
	}
	defer pl.release()
	ch := &gs[0]
	defer func() {
		if p := recover(); p != nil {
			err = d.damaged(ch, "", fmt.Errorf("the reader failed: %v", p))
		}
	}()
	at := int64(0)
	for _, r := range ranges {
		if err := d.streamRange(gs, pl, open, r, src[at:at+r.Len]); err != nil {
			return pl, err
		}
		at += r.Len
	}
	return pl, d.decode(c, sel, src, dst, wo, pl)
}

// colAt is a column chunk in a range: its row group, its leaf, where it
// is in the range.
type colAt struct {
	g, leaf int
	off     int64
	m       *colMeta
}

// streamRange reads range r into seg (its part of src), streaming the
// pages of the column chunks pl streams.
func (d *decoder) streamRange(gs []chunk, pl *placement, open func(format.Range) (io.ReadCloser, error), r format.Range, seg []byte) error {
	var cols []colAt
	for gi := range gs {
		for l := range gs[gi].cols {
			m := &gs[gi].cols[l]
			if m.length > 0 && m.start >= r.Off && m.start+m.length <= r.End() {
				cols = append(cols, colAt{g: gi, leaf: l, off: m.start - r.Off, m: m})
			}
		}
	}
	slices.SortFunc(cols, func(a, b colAt) int { return int(a.off - b.off) })
	rc, err := open(r)
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, streamBuf)
	pos := int64(0)
	for _, c := range cols {
		if c.off < pos {
			continue // overlapping column chunks: the footer's business, Decode reports it
		}
		if _, err := io.ReadFull(br, seg[pos:c.off]); err != nil {
			return readFailed(r, err)
		}
		pos = c.off
		b := seg[pos : pos+c.m.length]
		if l, ok := pl.leaf[gs[c.g].at]; ok && l == c.leaf {
			if err := d.streamColumn(&gs[c.g], c.leaf, pl, br, b, r); err != nil {
				return err
			}
		} else if _, err := io.ReadFull(br, b); err != nil {
			return readFailed(r, err)
		}
		pos += c.m.length
	}
	if _, err := io.ReadFull(br, seg[pos:]); err != nil {
		return readFailed(r, err)
	}
	return nil
}

// readFailed is the store's failure reading range r: not the bytes'
// fault, so not damage.
func readFailed(r format.Range, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading bytes %d+%d: %w", r.Off, r.Len, err)
}

// streamColumn reads column chunk leaf of row group ch from br into b,
// its bytes in src, but for the bodies of the pages it streams: their
// values go where pl places them.
func (d *decoder) streamColumn(ch *chunk, leaf int, pl *placement, br *bufio.Reader, b []byte, r format.Range) error {
	m := &ch.cols[leaf]
	n := d.schema.leaves[leaf]
	// The pages streamed decompress to at most the footer's count of the
	// column chunk's bytes, which its bound was made from, and each to
	// arrow-go's page limit, as checkPages holds every page to: a page
	// past them is read into src, where Decode refuses it.
	budget := m.unc
	for pos := 0; pos < len(b); {
		peek, err := br.Peek(min(len(b)-pos, br.Size()))
		if err != nil {
			return readFailed(r, err)
		}
		h, err := parsePageHeader(peek)
		end := pos + h.len + int(h.comp)
		if err != nil || h.comp < 0 || end > len(b) || end <= pos {
			// A header too long to peek at, or damage Decode names:
			// the rest of the column chunk into src.
			if _, err := io.ReadFull(br, b[pos:]); err != nil {
				return readFailed(r, err)
			}
			return nil
		}
		if _, err := io.ReadFull(br, b[pos:pos+h.len]); err != nil {
			return readFailed(r, err)
		}
		body := b[pos+h.len : end]
		if !streamable(h, m, n) || int64(h.unc) > budget || int64(h.unc) > pq.DefaultMaxUncompressedPageSize || int64(h.comp) > pq.DefaultMaxCompressedPageSize {
			if _, err := io.ReadFull(br, body); err != nil {
				return readFailed(r, err)
			}
			pos = end
			continue
		}
		sp, err := pl.streamPage(h, m.codec, n.def, br, body)
		if err != nil {
			var rf *readFailure
			if errors.As(err, &rf) {
				return readFailed(r, rf.err)
			}
			return d.damaged(ch, d.schema.leafName(leaf), fmt.Errorf("page at byte %d: %v", pos, err))
		}
		pl.pages[pageKey{ch.at, leaf, m.start + int64(pos)}] = sp
		budget -= int64(h.unc)
		pos = end
	}
	return nil
}

// leafName is leaf l's dotted path, for a message.
func (s *schema) leafName(l int) string {
	return strings.Join(s.leaves[l].path(), ".")
}

// streamable reports whether page h of column chunk m (of leaf n, a byte
// array that is not repeated) is streamed: a PLAIN dictionary or PLAIN
// data page with RLE levels, snappy or not compressed, with no CRC (which
// is over the body, checked from src), of at least streamMin bytes and
// streamValue bytes a value.
func streamable(h pageHeader, m *colMeta, n *node) bool {
	if h.hasCRC || h.comp < streamMin || (m.codec != 0 && m.codec != 1) {
		return false
	}
	if h.numValues <= 0 || int64(h.unc) < int64(h.numValues)*streamValue {
		return false // small values: nothing to gain, and a value's bookkeeping to pay
	}
	switch h.typ {
	case pageDict:
		return h.encoding == encPlain || h.encoding == encPlainDict
	case pageData:
		return h.encoding == encPlain && (n.def == 0 || h.defEnc == encRLE)
	case pageDataV2:
		return h.encoding == encPlain && h.repLen == 0 && h.levelsLen >= 0 && h.levelsLen <= h.comp && h.levelsLen <= h.unc
	}
	return false
}

// pageKey names a page: its chunk's row group, leaf and offset in the
// object.
type pageKey struct {
	group, leaf int
	off         int64
}

// streamedPage is a page whose values were placed: the first's index in
// the placement and their count, and (a data page) its definition levels.
type streamedPage struct {
	base, count int
	defs        []byte
}

// readFailure is the reader's error while streaming a page: the store's,
// not the page's.
type readFailure struct{ err error }

func (e *readFailure) Error() string { return e.err.Error() }

// valueSource reads a page's decompressed bytes from the body.
type valueSource interface {
	read(p []byte) error
	remaining() int
	done() bool
}

// rawSource is an uncompressed page's body.
type rawSource struct {
	r    *bufio.Reader
	left int
}

func (s *rawSource) read(p []byte) error {
	if len(p) > s.left {
		return errSnappyShort
	}
	if _, err := io.ReadFull(s.r, p); err != nil {
		return err
	}
	s.left -= len(p)
	return nil
}
func (s *rawSource) remaining() int { return s.left }
func (s *rawSource) done() bool     { return s.left == 0 }

// snappySource is a snappy page's body.
type snappySource struct{ s *snappyStream }

func (s snappySource) read(p []byte) error { return s.s.read(p) }
func (s snappySource) remaining() int      { return s.s.remaining() }
func (s snappySource) done() bool          { return s.s.done() }

// fromReader tells a failure of the reader (the store) from the page's.
func fromReader(err error) error {
	if err == nil || errors.Is(err, errSnappyCorrupt) || errors.Is(err, errSnappyShort) {
		return err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errSnappyCorrupt // the body ended before the page did
	}
	return &readFailure{err}
}

// streamPage reads page h's body (len(body) bytes, which stay unwritten
// but for a v2 page's levels) from br, placing its values.
func (pl *placement) streamPage(h pageHeader, codec int8, maxDef int, br *bufio.Reader, body []byte) (*streamedPage, error) {
	sp := &streamedPage{base: len(pl.vals)}
	comp, unc := int(h.comp), int(h.unc)
	compressed := codec == 1
	if h.typ == pageDataV2 {
		lv := int(h.levelsLen)
		if _, err := io.ReadFull(br, body[:lv]); err != nil {
			return nil, &readFailure{err}
		}
		sp.defs = body[:lv]
		comp, unc = comp-lv, unc-lv
		compressed = compressed && h.compressed
	}
	var src valueSource
	if compressed {
		pl.snappy.expect(0)
		if err := pl.snappy.resetFrom(br, comp, unc); err != nil {
			return nil, fromReader(err)
		}
		src = snappySource{&pl.snappy}
	} else {
		if comp != unc {
			return nil, fmt.Errorf("%d bytes where its header says %d", comp, unc)
		}
		src = &rawSource{r: br, left: comp}
	}
	// The bytes a copy element may refer back to stay where they were
	// written until the page is done: lengths and levels in small
	// arenas never reused within it.
	small := func(n int) []byte {
		if cap(pl.arena)-len(pl.arena) < n {
			pl.arena = make([]byte, 0, max(n, 4<<10))
		}
		b := pl.arena[len(pl.arena) : len(pl.arena)+n : len(pl.arena)+n]
		pl.arena = pl.arena[:len(pl.arena)+n]
		return b
	}
	if h.typ == pageData && maxDef > 0 {
		lb := small(4)
		if err := src.read(lb); err != nil {
			return nil, fromReader(err)
		}
		k := int(binary.LittleEndian.Uint32(lb))
		if k > src.remaining() {
			return nil, fmt.Errorf("definition levels of %d bytes in a page of %d", k, src.remaining())
		}
		sp.defs = small(k)
		if err := src.read(sp.defs); err != nil {
			return nil, fromReader(err)
		}
	}
	for src.remaining() > 0 {
		if len(pl.vals)-sp.base == int(h.numValues) {
			return nil, fmt.Errorf("more values than the %d its header counts", h.numValues)
		}
		lb := small(4)
		if src.remaining() < 4 {
			return nil, fmt.Errorf("a value's length past the page's end")
		}
		if err := src.read(lb); err != nil {
			return nil, fromReader(err)
		}
		n := int(binary.LittleEndian.Uint32(lb))
		if uint64(n) > uint64(src.remaining()) {
			return nil, fmt.Errorf("a value of %d bytes in the page's last %d", n, src.remaining())
		}
		v := pl.place(n)
		if err := src.read(v); err != nil {
			return nil, fromReader(err)
		}
		pl.vals = append(pl.vals, v)
		pl.crcs = append(pl.crcs, crc32.Checksum(v, castagnoli))
	}
	if !src.done() {
		return nil, errSnappyCorrupt
	}
	sp.count = len(pl.vals) - sp.base
	if h.typ == pageDict && sp.count != int(h.numValues) {
		return nil, fmt.Errorf("a dictionary of %d values, its header says %d", sp.count, h.numValues)
	}
	pl.arena = nil
	return sp, nil
}

// errWhole is a chunk DecodeStream streamed that Decode cannot read from
// what it placed (a page of the streamed column flatCol does not read):
// it is read again whole, by the caller.
var errWhole = fmt.Errorf("parquet: a streamed column chunk flatCol cannot read: %w", format.ErrNotStreamed)
