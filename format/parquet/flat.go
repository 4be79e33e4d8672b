package parquet

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/snappy"

	"github.com/brandgw/brand/format"
)

// flatCol reads a byte-array leaf that is not repeated — an image's
// bytes and path, a string — or an integer one (a label) from PLAIN and
// dictionary pages itself, rather than through arrow-go's column reader,
// which copies the column chunk, decompresses each page into fresh
// (zeroed) memory and hands out values through its own buffers: for
// photos of 30 KiB that is most of a decode's time (BenchmarkDecodeHub).
// Pages of other encodings, or levels in the deprecated BIT_PACKED
// encoding, are left to arrow-go (flatPages).
//
// A snappy page of byte arrays — PLAIN, or the dictionary of a
// dictionary-encoded column, as pyarrow writes an image column — is
// decompressed as its values are asked for (valueStream), so that into
// writes each value straight into its member: one pass over its bytes.
// The dictionary's values are decoded in order as rows first use them,
// where the first row to use a value takes it; a value used again is
// copied from where it went. Every other page is decompressed whole into
// a buffer of the node's pools (format.WriterOptions.Buffers) reused for
// the column chunk's pages, its dictionary into another, and each value
// copied once from there into the resident form.
type flatCol struct {
	pages     []flatPage
	codec     compress.Codec // nil: uncompressed
	snappy    bool
	bufs      format.Buffers
	maxDef    int16
	size      int   // an integer's bytes; 0: byte arrays
	remaining int64 // the column chunk's levels not yet read

	buf  []byte   // the page buffer, from bufs, cap the largest page
	dbuf []byte   // the dictionary's page, from bufs
	held [][]byte // what goes back to bufs

	// The dictionary's values decoded so far, where they are; dictN
	// values in all. A streamed dictionary (dictStream) is decoded as
	// rows ask for its values, any other whole at the start.
	dict       [][]byte
	dictN      int
	dictStream bool
	ds         valueStream

	// the current page
	left   int64 // its levels not yet read
	defs   levelReader
	defV   int16
	defN   int64
	vals   []byte // PLAIN: the values not yet read
	idx    *levelReader
	idxV   uint32
	idxN   int64
	plain  bool
	stream bool        // a PLAIN page read through vs
	vs     valueStream // its values

	// Values DecodeStream placed: the dictionary's first's index in pl
	// (-1: not placed); the current page's (placed), its first's and how
	// many it has and has given.
	pl                 *placement
	placedDict         int
	placed             bool
	pbase, pcount, pat int
}

// flatPage is a page's header and body in the column chunk; st, where
// DecodeStream placed its values instead (its body was never read into
// memory).
type flatPage struct {
	h    pageHeader
	body []byte
	st   *streamedPage
}

// flatPages returns the pages of column chunk b (already checked by
// checkPages) when flatCol reads them all: data pages PLAIN or
// dictionary-encoded, v1 levels RLE-encoded, a PLAIN dictionary, and a
// codec arrow-go has; ok is false otherwise.
func flatPages(b []byte, codec int8) (pages []flatPage, ok bool) {
	if codec != 0 {
		if _, err := compress.GetCodec(compress.Compression(codec)); err != nil {
			return nil, false
		}
	}
	for pos := 0; pos < len(b); {
		h, err := parsePageHeader(b[pos:])
		if err != nil {
			return nil, false
		}
		end := pos + h.len + int(h.comp)
		p := flatPage{h: h, body: b[pos+h.len : end]}
		pos = end
		switch h.typ {
		case pageDict:
			if h.encoding != encPlain && h.encoding != encPlainDict {
				return nil, false
			}
		case pageData, pageDataV2:
			if h.encoding != encPlain && h.encoding != encPlainDict && h.encoding != encRLEDict {
				return nil, false
			}
			if h.typ == pageData && h.defEnc != encRLE {
				return nil, false
			}
		default:
			continue
		}
		pages = append(pages, p)
	}
	return pages, true
}

// newFlatCol returns the reader of pages of a leaf whose values are
// byte arrays (size 0) or size-byte integers, of at most maxDef.
func newFlatCol(pages []flatPage, codec int8, maxDef int, size int, numValues int64, bufs format.Buffers, pl *placement) (*flatCol, error) {
	c := &flatCol{pages: pages, bufs: bufs, maxDef: int16(maxDef), size: size, remaining: numValues, pl: pl, placedDict: -1}
	if c.bufs == nil {
		c.bufs = unpooled{}
	}
	if codec != 0 {
		cd, err := compress.GetCodec(compress.Compression(codec))
		if err != nil {
			return nil, err
		}
		c.codec, c.snappy = cd, compress.Compression(codec) == compress.Codecs.Snappy
	}
	// One page buffer for the chunk, of its largest page's size.
	most := 0
	for _, p := range pages {
		if p.h.typ != pageDict && c.codec != nil && p.st == nil {
			most = max(most, int(p.h.unc))
		}
	}
	if most > 0 {
		c.buf = c.bufs.Get(int64(most))
		c.held = append(c.held, c.buf)
	}
	if len(pages) > 0 && pages[0].h.typ == pageDict {
		if err := c.dictionary(pages[0]); err != nil {
			c.release()
			return nil, fmt.Errorf("the dictionary: %v", err)
		}
		c.pages = pages[1:]
	}
	return c, nil
}

// dictionary starts reading dictionary page p: streamed where into can
// place its values, else decompressed and split whole.
func (c *flatCol) dictionary(p flatPage) error {
	c.dictN = int(p.h.numValues)
	if p.st != nil {
		c.placedDict = p.st.base
		c.dict = [][]byte{} // not nil: there is a dictionary
		return nil
	}
	if c.snappy && c.size == 0 {
		n := int(p.h.unc)
		c.dbuf = c.bufs.Get(int64(n))
		c.held = append(c.held, c.dbuf)
		if err := c.ds.reset(p.body, n, c.dictN, c.dbuf); err != nil {
			return err
		}
		c.dictStream = true
		c.dict = make([][]byte, 0, min(c.dictN, n/4))
		return nil
	}
	b, err := c.decompress(p, 0, &c.dbuf)
	if err != nil {
		return err
	}
	c.dict = make([][]byte, 0, min(c.dictN, len(b)/4))
	for range c.dictN {
		v, rest, err := c.plainValue(b)
		if err != nil {
			return err
		}
		c.dict, b = append(c.dict, v), rest
	}
	return nil
}

// unpooled allocates every buffer.
type unpooled struct{}

func (unpooled) Get(n int64) []byte { return make([]byte, 0, n) }
func (unpooled) Put([]byte)         {}

// release gives the column's buffers back to the pools.
func (c *flatCol) release() {
	for _, b := range c.held {
		c.bufs.Put(b)
	}
	c.held, c.buf, c.dbuf = nil, nil, nil
}

// decompress returns page p's bytes from skip on (a v2 page's levels are
// not compressed), decompressed into *buf (grown from the pools) unless
// the column is not compressed.
func (c *flatCol) decompress(p flatPage, skip int, buf *[]byte) ([]byte, error) {
	if c.codec == nil || (p.h.typ == pageDataV2 && !p.h.compressed) {
		if int(p.h.unc) != len(p.body) {
			return nil, fmt.Errorf("%d bytes where its header says %d", len(p.body), p.h.unc)
		}
		return p.body[skip:], nil
	}
	n := int(p.h.unc) - skip
	if cap(*buf) < n {
		*buf = c.bufs.Get(int64(n))
		c.held = append(c.held, *buf)
	}
	src := p.body[skip:]
	if c.snappy {
		// Snappy states its decoded length first: a page that claims
		// more than its header is refused before anything is made.
		if got, err := snappy.DecodedLen(src); err != nil || got != n {
			return nil, fmt.Errorf("decompresses to %d bytes, its header says %d (%v)", got, n, err)
		}
	}
	out, err := compress.Decode(c.codec, (*buf)[:n], src)
	if err != nil {
		return nil, err // package inflate's, which says so
	}
	if dst := (*buf)[:n]; len(out) != n || n > 0 && &out[0] != &dst[0] {
		return nil, fmt.Errorf("decompresses to %d bytes, its header says %d", len(out), n)
	}
	return out, nil
}

// plainValue splits a PLAIN value (an integer's bytes, or a byte
// array's u32 length and bytes) from what follows it.
func (c *flatCol) plainValue(b []byte) (v, rest []byte, err error) {
	if c.size > 0 {
		if len(b) < c.size {
			return nil, nil, fmt.Errorf("a value past the page's end")
		}
		return b[:c.size:c.size], b[c.size:], nil
	}
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("a value's length past the page's end")
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, fmt.Errorf("a value of %d bytes in the page's last %d", n, len(b)-4)
	}
	return b[4 : 4+n : 4+n], b[4+n:], nil
}

// page starts the next data page.
func (c *flatCol) page() error {
	for len(c.pages) > 0 {
		p := c.pages[0]
		c.pages = c.pages[1:]
		if p.h.typ == pageDict {
			return fmt.Errorf("a dictionary after data pages")
		}
		if p.h.numValues == 0 {
			continue
		}
		c.left = int64(p.h.numValues)
		c.defN = 0
		c.vals, c.idx, c.idxN = nil, nil, 0
		c.plain = p.h.encoding == encPlain
		c.stream = false
		c.placed = p.st != nil
		if c.placed {
			c.pbase, c.pcount, c.pat = p.st.base, p.st.count, 0
			c.defs = *newLevelReader(p.st.defs, int(c.maxDef))
			return nil
		}
		if c.plain && c.snappy && c.size == 0 && (p.h.typ == pageData || p.h.compressed) {
			return c.streamPage(p)
		}
		var data, defs []byte
		if p.h.typ == pageDataV2 {
			if int(p.h.levelsLen) > len(p.body) || p.h.repLen != 0 {
				return fmt.Errorf("a page's levels (%d bytes) do not fit it", p.h.levelsLen)
			}
			defs = p.body[:p.h.levelsLen]
			var err error
			if data, err = c.decompress(p, int(p.h.levelsLen), &c.buf); err != nil {
				return fmt.Errorf("a page %v", err)
			}
		} else {
			var err error
			if data, err = c.decompress(p, 0, &c.buf); err != nil {
				return fmt.Errorf("a page %v", err)
			}
			if c.maxDef > 0 {
				if defs, data, err = lengthPrefixed(data); err != nil {
					return fmt.Errorf("a page's definition levels: %v", err)
				}
			}
		}
		c.defs = *newLevelReader(defs, int(c.maxDef))
		if c.plain {
			c.vals = data
			return nil
		}
		if c.dict == nil {
			return fmt.Errorf("a dictionary-encoded page without a dictionary")
		}
		if len(data) < 1 || data[0] > 32 {
			return fmt.Errorf("a dictionary-encoded page without its indices' bit width")
		}
		c.idx = &levelReader{b: data[1:], width: int(data[0]), bytes: (int(data[0]) + 7) / 8}
		return nil
	}
	return fmt.Errorf("the pages end before the rows")
}

// next returns the next row's value, a slice of the page or the
// dictionary valid until the next call; ok is false for a null.
func (c *flatCol) next() ([]byte, bool, error) {
	ok, err := c.advance()
	if err != nil || !ok {
		return nil, false, err
	}
	v, err := c.value()
	if err != nil {
		return nil, false, err
	}
	return v, true, c.done()
}

// placer says where a value goes: place returns the slice of n bytes a
// value of n bytes is to be written into, given its first bytes (head,
// at most headLen of them: an image's magic), and whether what is
// written there stays (false: scratch room, reused).
type placer interface {
	place(n int64, head []byte) (dst []byte, kept bool, err error)
}

// headLen is how many of a value's first bytes into shows its placer.
const headLen = 16

// into writes the next row's value where pl places it — decompressed
// straight there from a streamed page or dictionary, else copied — and
// reports whether there was one (false for a null, pl not asked).
func (c *flatCol) into(pl placer) (bool, error) {
	ok, err := c.advance()
	if err != nil || !ok {
		return false, err
	}
	var v []byte
	switch {
	case c.placed:
		if c.pat == c.pcount {
			return false, fmt.Errorf("more values than the page holds")
		}
		c.pat++
		if err := c.pl.put(c.pbase+c.pat-1, pl); err != nil {
			return false, err
		}
		return true, c.done()
	case !c.plain && c.placedDict >= 0:
		k, err := c.index()
		if err != nil {
			return false, err
		}
		if err := c.pl.put(c.placedDict+k, pl); err != nil {
			return false, err
		}
		return true, c.done()
	case c.stream:
		if _, err := c.vs.place(pl); err != nil {
			return false, err
		}
		return true, c.done()
	case !c.plain && c.dictStream:
		k, err := c.index()
		if err != nil {
			return false, err
		}
		if k == len(c.dict) {
			// The dictionary's next value, which no row has used: it
			// goes where this row's does, and is used from there again.
			v, err := c.ds.place(pl)
			if err != nil {
				return false, fmt.Errorf("the dictionary: %v", err)
			}
			c.dict = append(c.dict, v)
			return true, c.done()
		}
		if v, err = c.dictAt(k); err != nil {
			return false, err
		}
	default:
		if v, err = c.value(); err != nil {
			return false, err
		}
	}
	dst, _, err := pl.place(int64(len(v)), v[:min(len(v), headLen)])
	if err != nil {
		return false, err
	}
	copy(dst, v)
	return true, c.done()
}

// advance moves to the next row's level, starting the next page when
// this one is used up, and reports whether the row has a value.
func (c *flatCol) advance() (bool, error) {
	if c.left == 0 {
		if c.remaining <= 0 {
			return false, fmt.Errorf("fewer values than rows")
		}
		if err := c.page(); err != nil {
			return false, err
		}
	}
	c.left--
	c.remaining--
	if c.maxDef > 0 {
		if c.defN == 0 {
			var err error
			if c.defV, c.defN, err = c.defs.take(c.left + 1); err != nil {
				return false, err
			}
		}
		c.defN--
		if c.defV != c.maxDef {
			return false, c.done()
		}
	}
	return true, nil
}

// value returns the value of the row advance reached.
func (c *flatCol) value() ([]byte, error) {
	if c.placed || !c.plain && c.placedDict >= 0 {
		return nil, fmt.Errorf("a placed value read other than into its member")
	}
	if c.stream {
		return c.vs.value()
	}
	if c.plain {
		v, rest, err := c.plainValue(c.vals)
		if err != nil {
			return nil, err
		}
		c.vals = rest
		return v, nil
	}
	k, err := c.index()
	if err != nil {
		return nil, err
	}
	return c.dictAt(k)
}

// index returns a dictionary-encoded row's index.
func (c *flatCol) index() (int, error) {
	if c.idxN == 0 {
		v, n, err := c.idx.next(c.left + 1)
		if err != nil {
			return 0, fmt.Errorf("a dictionary index: %v", err)
		}
		c.idxV, c.idxN = v, n
	}
	c.idxN--
	if uint64(c.idxV) >= uint64(c.dictN) {
		return 0, fmt.Errorf("a dictionary index of %d in a dictionary of %d values", c.idxV, c.dictN)
	}
	return int(c.idxV), nil
}

// dictAt returns dictionary value k, decoding a streamed dictionary up
// to it (into its page buffer) if no row has used it yet.
func (c *flatCol) dictAt(k int) ([]byte, error) {
	for len(c.dict) <= k {
		v, err := c.ds.value()
		if err != nil {
			return nil, fmt.Errorf("the dictionary: %v", err)
		}
		c.dict = append(c.dict, v)
	}
	return c.dict[k], nil
}

// streamPage starts snappy PLAIN page p, whose values are decompressed
// as they are read: a v1 page's definition levels first.
func (c *flatCol) streamPage(p flatPage) error {
	skip := 0
	if p.h.typ == pageDataV2 {
		if int(p.h.levelsLen) > len(p.body) || p.h.repLen != 0 {
			return fmt.Errorf("a page's levels (%d bytes) do not fit it", p.h.levelsLen)
		}
		skip = int(p.h.levelsLen)
	}
	n := int(p.h.unc) - skip
	if cap(c.buf) < n {
		c.buf = c.bufs.Get(int64(n))
		c.held = append(c.held, c.buf)
	}
	if err := c.vs.reset(p.body[skip:], n, int(p.h.numValues), c.buf); err != nil {
		return fmt.Errorf("a page %v", err)
	}
	c.stream = true
	defs := p.body[:skip]
	if p.h.typ == pageData && c.maxDef > 0 {
		var err error
		if defs, err = c.vs.value(); err != nil {
			return fmt.Errorf("a page's definition levels: %v", err)
		}
	}
	c.defs = *newLevelReader(defs, int(c.maxDef))
	return nil
}

// done checks, once the column chunk's last level is read, that its
// streamed page and dictionary hold nothing past what was read but
// values well formed: each is decompressed whole, as a library decoder
// checks it.
func (c *flatCol) done() error {
	if c.left > 0 {
		return nil
	}
	if c.placed {
		c.placed = false
		if c.pat != c.pcount {
			return fmt.Errorf("a page of %d values whose levels use %d", c.pcount, c.pat)
		}
	}
	if c.stream {
		c.stream = false
		if err := c.vs.finish(); err != nil {
			return fmt.Errorf("a page %v", err)
		}
	}
	if c.remaining > 0 || !c.dictStream {
		return nil
	}
	c.dictStream = false
	if c.dictN > 0 { // an all-null column chunk's dictionary may be empty
		if _, err := c.dictAt(c.dictN - 1); err != nil {
			return err
		}
	}
	if err := c.ds.finish(); err != nil {
		return fmt.Errorf("the dictionary: %v", err)
	}
	return nil
}

// valueStream reads PLAIN byte-array values (a u32 length, the bytes)
// from a snappy page as they are asked for: lengths, levels and values
// next reads into the page's buffer (arena), never reused within the
// page, since later copy elements may refer to them; values place
// places straight where they go.
type valueStream struct {
	sd    snappyStream
	arena []byte
}

// reset starts page body b, of n bytes decompressed and values values,
// with buf (of at least n bytes' capacity) for its arena.
func (v *valueStream) reset(b []byte, n, values int, buf []byte) error {
	if err := v.sd.reset(b, n); err != nil {
		return fmt.Errorf("decompresses to other than the %d bytes its header says (%v)", n, err)
	}
	// A value is read in three pieces at most (its length, its head, the
	// rest), levels in two; a page of many small values grows the lists
	// as it goes, whatever its header claims.
	v.sd.expect(min(3*values+2, 1024))
	v.arena = buf[:0]
	return nil
}

// take decompresses the next n bytes into the arena.
func (v *valueStream) take(n int) ([]byte, error) {
	if n > v.sd.remaining() || n > cap(v.arena)-len(v.arena) {
		return nil, fmt.Errorf("%d bytes past the page's end", n)
	}
	b := v.arena[len(v.arena) : len(v.arena)+n : len(v.arena)+n]
	v.arena = v.arena[:len(v.arena)+n]
	if err := v.sd.read(b); err != nil {
		return nil, fmt.Errorf("does not decompress: %v", err)
	}
	return b, nil
}

// length reads a value's length.
func (v *valueStream) length() (int, error) {
	if v.sd.remaining() < 4 {
		return 0, fmt.Errorf("a value's length past the page's end")
	}
	b, err := v.take(4)
	if err != nil {
		return 0, err
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(v.sd.remaining()) {
		return 0, fmt.Errorf("a value of %d bytes in the page's last %d", n, v.sd.remaining())
	}
	return int(n), nil
}

// value reads the next value into the arena.
func (v *valueStream) value() ([]byte, error) {
	n, err := v.length()
	if err != nil {
		return nil, err
	}
	return v.take(n)
}

// place writes the next value where pl places it and returns where it
// now is: there, or in the arena when pl's room is not kept.
func (v *valueStream) place(pl placer) ([]byte, error) {
	n, err := v.length()
	if err != nil {
		return nil, err
	}
	start := len(v.arena)
	head, err := v.take(min(n, headLen))
	if err != nil {
		return nil, err
	}
	dst, kept, err := pl.place(int64(n), head)
	if err != nil {
		return nil, err
	}
	if len(dst) != n {
		return nil, fmt.Errorf("a value of %d bytes placed in %d", n, len(dst))
	}
	if !kept {
		// Scratch room is written over by the next value: this one
		// stays in the arena, where copies may refer to it.
		if _, err := v.take(n - len(head)); err != nil {
			return nil, err
		}
		whole := v.arena[start : start+n : start+n] // head, then the rest
		copy(dst, whole)
		return whole, nil
	}
	copy(dst, head)
	if err := v.sd.read(dst[len(head):]); err != nil {
		return nil, fmt.Errorf("does not decompress: %v", err)
	}
	return dst, nil
}

// finish decompresses what is left of the page into the arena and checks
// that the page ends there.
func (v *valueStream) finish() error {
	if _, err := v.take(v.sd.remaining()); err != nil {
		return err
	}
	if !v.sd.done() {
		return fmt.Errorf("does not decompress: %v", errSnappyCorrupt)
	}
	return nil
}

// int returns the next row's integer (sign-extended from 32 bits), ok
// false for a null.
func (c *flatCol) int() (int64, bool, error) {
	v, ok, err := c.next()
	if err != nil || !ok {
		return 0, ok, err
	}
	if c.size == 4 {
		return int64(int32(binary.LittleEndian.Uint32(v))), true, nil
	}
	return int64(binary.LittleEndian.Uint64(v)), true, nil
}
