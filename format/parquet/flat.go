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
// dictionary pages itself,
// rather than through arrow-go's column reader: each page is decompressed
// once into one buffer of the node's pools (format.WriterOptions.Buffers)
// reused for every page of the column chunk, its dictionary into
// another, and each value is a slice of them, copied once, into the
// resident form. arrow-go's reader copies the column chunk, decompresses
// each page into fresh (zeroed) memory and hands out values through its
// own buffers: for photos of 30 KiB that is most of a decode's time
// (BenchmarkDecodeHub). Pages of other encodings, or levels in the
// deprecated BIT_PACKED encoding, are left to arrow-go (flatPages).
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
	dict [][]byte // the dictionary's values
	held [][]byte // what goes back to bufs

	// the current page
	left  int64 // its levels not yet read
	defs  levelReader
	defV  int16
	defN  int64
	vals  []byte // PLAIN: the values not yet read
	idx   *levelReader
	idxV  uint32
	idxN  int64
	plain bool
}

// flatPage is a page's header and body in the column chunk.
type flatPage struct {
	h    pageHeader
	body []byte
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
func newFlatCol(pages []flatPage, codec int8, maxDef int, size int, numValues int64, bufs format.Buffers) (*flatCol, error) {
	c := &flatCol{pages: pages, bufs: bufs, maxDef: int16(maxDef), size: size, remaining: numValues}
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
		if p.h.typ != pageDict && c.codec != nil {
			most = max(most, int(p.h.unc))
		}
	}
	if most > 0 {
		c.buf = c.bufs.Get(int64(most))
		c.held = append(c.held, c.buf)
	}
	if len(pages) > 0 && pages[0].h.typ == pageDict {
		p := pages[0]
		c.pages = pages[1:]
		b, err := c.decompress(p, 0, &c.dbuf)
		if err != nil {
			c.release()
			return nil, fmt.Errorf("the dictionary: %v", err)
		}
		c.dict = make([][]byte, 0, min(int(p.h.numValues), len(b)/4))
		for range p.h.numValues {
			v, rest, err := c.plainValue(b)
			if err != nil {
				c.release()
				return nil, fmt.Errorf("the dictionary: %v", err)
			}
			c.dict, b = append(c.dict, v), rest
		}
	}
	return c, nil
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
	var out []byte
	var err error
	if de, ok := c.codec.(interface {
		DecodeWithError(dst, src []byte) ([]byte, error)
	}); ok {
		out, err = de.DecodeWithError((*buf)[:n], src)
	} else {
		out = c.codec.Decode((*buf)[:n], src) // a panic is damage (decoder.Decode)
	}
	if err != nil {
		return nil, fmt.Errorf("does not decompress: %v", err)
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
		c.left = int64(p.h.numValues)
		c.defs = *newLevelReader(defs, int(c.maxDef))
		c.defN = 0
		c.plain = p.h.encoding == encPlain
		c.vals, c.idx, c.idxN = nil, nil, 0
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
	if c.left == 0 {
		if c.remaining <= 0 {
			return nil, false, fmt.Errorf("fewer values than rows")
		}
		if err := c.page(); err != nil {
			return nil, false, err
		}
	}
	c.left--
	c.remaining--
	if c.maxDef > 0 {
		if c.defN == 0 {
			var err error
			if c.defV, c.defN, err = c.defs.take(c.left + 1); err != nil {
				return nil, false, err
			}
		}
		c.defN--
		if c.defV != c.maxDef {
			return nil, false, nil
		}
	}
	if c.plain {
		v, rest, err := c.plainValue(c.vals)
		if err != nil {
			return nil, false, err
		}
		c.vals = rest
		return v, true, nil
	}
	if c.idxN == 0 {
		v, n, err := c.idx.next(c.left + 1)
		if err != nil {
			return nil, false, fmt.Errorf("a dictionary index: %v", err)
		}
		c.idxV, c.idxN = v, n
	}
	c.idxN--
	if uint64(c.idxV) >= uint64(len(c.dict)) {
		return nil, false, fmt.Errorf("a dictionary index of %d in a dictionary of %d values", c.idxV, len(c.dict))
	}
	return c.dict[c.idxV], true, nil
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
