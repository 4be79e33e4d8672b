package parquet

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/inflate"
)

// Long text values (format.TextBound). A text value's length is stated
// before the value: a column chunk's size statistics (bytesMax) bound
// every value in it, a page's header bounds the values in the page, and
// each PLAIN value, a dictionary's entries too, is prefixed by its
// length. So the values of more than a bound are found reading pages'
// headers, then, in the pages larger than the bound, the values' length
// prefixes, their bytes passed over through a window of the
// decompressed page (inflate.Stream), never held; a dictionary-encoded
// page's indices say which rows use a long entry. Each page holding one
// is then written again without it — the value empty, every other value
// and level as it was, a data page as a data page v1 of PLAIN values —
// and the chunk is decoded from those pages, as if the column chunk had
// been written so: nothing downstream holds the long value.
//
// A page whose codec has no stream here (Hadoop's LZ4), or whose stream
// reaches back past what it holds (a ZSTD frame's window over
// inflate.StreamWindow; a Snappy copy from bytes skipped beyond its
// window, which s2's writers make), is decompressed whole to read its
// lengths, and dropped. A column chunk whose lengths cannot be read
// first at all — a page over the bound in a DELTA encoding, levels in
// the deprecated BIT_PACKED encoding, a page that does not read — is
// decoded as it is: its long value is read, and refused by whoever reads
// it (vision.Facts), as before.

// errNoScan is a column chunk whose long values cannot be found before
// they are read: it is decoded as it is.
var errNoScan = errors.New("parquet: the values' lengths are not read before the values")

// DecodeTexts implements format.TextBound.
func (d *decoder) DecodeTexts(c int, src []byte, most int64, wo format.WriterOptions) ([]byte, []format.LongText, error) {
	if c < 0 || c >= d.ds.numChunks() {
		return nil, nil, fmt.Errorf("parquet: no chunk %d", c)
	}
	gs := d.ds.span(c)
	ranges, _ := d.Extent(c, nil)
	read, err := format.NewRead(ranges, src)
	if err != nil {
		return nil, nil, d.damaged(&gs[0], "", err)
	}
	gs, long := d.columns.withoutLong(d.schema.leaves, gs, nil, read, ranges[len(ranges)-1].End(), most)
	bound := d.spanBound(gs, nil)
	for try := 0; ; try++ {
		dst := make([]byte, bound)
		err := d.decodeSpan(gs, nil, read, dst, wo, nil, nil)
		var ge *format.GrowError
		if errors.As(err, &ge) && try == 0 {
			bound = ge.Need
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return dst, long, nil
	}
}

// LongTexts implements format.TextBound: a text field's leaf of bytes
// whose size statistics (bytesMax) say a value of more than most bytes.
// DecodeUnread takes what Decode does (Working) and, for each such
// column chunk, what its scan and rewrite hold beside (rewriteLong: a
// page's values less the long ones, and the page compressed again, each
// at most the column chunk's uncompressed bytes) and a window of each
// stream (inflate.Streams).
func (d *decoder) LongTexts(c int, sel format.Selection, most int64) (int64, bool) {
	gs := d.ds.span(c)
	var extra int64
	long := false
	for gi := range gs {
		for i, f := range d.fields {
			if !sel.Has(i) || f.ext != "txt" && f.ext != "json" {
				continue
			}
			for _, l := range f.leaves {
				if m := &gs[gi].cols[l]; d.schema.leaves[l].el.phys == tyBytes && m.bytesMax > most {
					long = true
					extra = add(extra, 2*m.unc)
				}
			}
		}
	}
	if !long {
		return 0, false
	}
	return add(d.Working(c, sel), add(extra, 2*inflate.StreamWindow)), true
}

// DecodeUnread implements format.TextBound: the chunk's long values are
// left out as DecodeTexts leaves them, and the samples that held them
// written unread, naming the field and the value's bytes.
func (d *decoder) DecodeUnread(c int, sel format.Selection, src, dst []byte, most int64, wo format.WriterOptions) error {
	if c < 0 || c >= d.ds.numChunks() {
		return fmt.Errorf("parquet: no chunk %d", c)
	}
	gs := d.ds.span(c)
	ranges, _ := d.Extent(c, sel)
	read, err := format.NewRead(ranges, src)
	if err != nil {
		return d.damaged(&gs[0], "", err)
	}
	var end int64 // past every range read: where rewritten column chunks go
	for _, r := range ranges {
		end = max(end, r.End())
	}
	gs, long := d.columns.withoutLong(d.schema.leaves, gs, sel, read, end, most)
	unread := map[int]string{}
	for _, lt := range long {
		if _, ok := unread[lt.Sample]; !ok {
			unread[lt.Sample] = fmt.Sprintf("field %s holds a text of %d bytes, more than the %d a text may be", lt.Field, lt.Bytes, most)
		}
	}
	// A chunk whose load learns the size it needs with its long values
	// unread is asked for with that size from then on: a decode that
	// needs more (it read a value whose length it could not read first)
	// says so rather than being damaged.
	wo.MayGrow = true
	return d.decodeSpan(gs, sel, read, dst, wo, nil, unread)
}

// withoutLong returns row groups gs, whose column chunks' bytes are read,
// with every value of more than most bytes of their text fields (those
// whose members are txt or json) of the fields sel left out, and the
// long values' samples:
// each column chunk holding one is written again without it
// (rewriteLong) and added to read past the object's end (at), where its
// row group's copy names it (the footer's own is left alone).
//
// A method of the decoder's columns, given its schema's leaves: the
// decoder has as many methods as it may.
func (cs columns) withoutLong(leaves []*node, gs []chunk, sel format.Selection, read *format.Read, at int64, most int64) ([]chunk, []format.LongText) {
	var out []chunk                 // gs, copied at the first change
	copied := make([]bool, len(gs)) // out[i].cols copied
	streams := inflate.Streams{Keep: true}
	defer streams.Close()
	var long []format.LongText
	first := 0 // the row group's first sample in the chunk
	for gi := range gs {
		ch := &gs[gi]
		for i, f := range cs.fields {
			if !sel.Has(i) || f.ext != "txt" && f.ext != "json" {
				continue
			}
			rows := map[int64]int64{}
			for _, l := range f.leaves {
				leaf, m := leaves[l], &ch.cols[l]
				if leaf.el.phys != tyBytes || m.bytesMax <= most {
					continue
				}
				b, err := read.Bytes(m.start, m.length)
				if err != nil {
					continue // the decode names the damage
				}
				lv, pages, err := scanLong(&streams, m, leaf, b, most)
				if err != nil || len(lv) == 0 {
					continue
				}
				nb, unc, err := rewriteLong(&streams, m, leaf, b, pages)
				if err != nil || read.Add(format.Range{Off: at, Len: int64(len(nb))}, nb) != nil {
					continue
				}
				if out == nil {
					out = slices.Clone(gs)
				}
				if !copied[gi] {
					out[gi].cols, copied[gi] = slices.Clone(gs[gi].cols), true
				}
				nm := &out[gi].cols[l]
				nm.start, nm.length, nm.unc = at, int64(len(nb)), unc
				var gone int64
				for _, v := range lv {
					gone += v.n
					rows[v.row] = max(rows[v.row], v.n)
				}
				if nm.guess {
					nm.bytesSum = unc
				} else {
					nm.bytesSum = max(nm.bytesSum-gone, 0)
				}
				nm.bytesMax = min(nm.bytesMax, most, nm.bytesSum)
				at += int64(len(nb))
			}
			for r, n := range rows {
				long = append(long, format.LongText{Sample: first + int(r), Field: f.name, Bytes: n})
			}
		}
		first += int(ch.rows)
	}
	if out == nil {
		return gs, nil
	}
	slices.SortFunc(long, func(a, b format.LongText) int {
		return cmp.Or(cmp.Compare(a.Sample, b.Sample), cmp.Compare(a.Field, b.Field))
	})
	return out, long
}

// longValue is a value of more than the bound: its row in the row group
// and its bytes.
type longValue struct{ row, n int64 }

// scanLong finds the values of more than most bytes in column chunk b of
// leaf (a byte array) whose footer entry is m, and which values of which
// pages are to be left out (by the page's index in b: a PLAIN data
// page's values by their index among its values, a dictionary's
// entries by theirs). errNoScan, or the error of a page that does not
// read, where it cannot.
func scanLong(streams *inflate.Streams, m *colMeta, leaf *node, b []byte, most int64) ([]longValue, map[int][]int, error) {
	if err := checkPages(m, leaf, b); err != nil {
		return nil, nil, err
	}
	s := &longScan{streams: streams, leaf: leaf, codec: m.codec, most: most, row: -1, dict: map[uint32]int64{}, pages: map[int][]int{}}
	for pos, i := 0, 0; pos < len(b); i++ {
		h, err := parsePageHeader(b[pos:])
		if err != nil {
			return nil, nil, err
		}
		body := b[pos+h.len : pos+h.len+int(h.comp)]
		pos += h.len + int(h.comp)
		if err := s.page(i, h, body); err != nil {
			return nil, nil, err
		}
	}
	return s.long, s.pages, nil
}

// longScan is scanLong's state over a column chunk's pages.
type longScan struct {
	streams *inflate.Streams
	leaf    *node
	codec   int8
	most    int64
	row     int64            // the row of the last level read; -1 before the first
	dict    map[uint32]int64 // the dictionary's entries of more than most: their bytes
	long    []longValue
	pages   map[int][]int
}

// page scans page i, streamed, or decompressed whole where the stream
// cannot read it.
func (s *longScan) page(i int, h pageHeader, body []byte) error {
	row, n := s.row, len(s.long)
	err := s.scan(i, h, body, false)
	if errors.Is(err, inflate.ErrWindow) || errors.Is(err, errNoStream) {
		s.row, s.long = row, s.long[:n]
		delete(s.pages, i)
		if h.typ == pageDict {
			clear(s.dict)
		}
		err = s.scan(i, h, body, true)
	}
	return err
}

func (s *longScan) scan(i int, h pageHeader, body []byte, whole bool) error {
	switch h.typ {
	case pageDict:
		if int64(h.unc) <= s.most {
			return nil
		}
		if h.encoding != encPlain && h.encoding != encPlainDict {
			return errNoScan
		}
		p, err := openPage(s.streams, s.codec, h, body, whole)
		if err != nil {
			return err
		}
		for k := range int(h.numValues) {
			n, err := p.skipValue()
			if err != nil {
				return err
			}
			if n > s.most {
				s.dict[uint32(k)] = n
				s.pages[i] = append(s.pages[i], k)
			}
		}
		return nil
	case pageData, pageDataV2:
		return s.data(i, h, body, whole)
	}
	return nil
}

// data scans a data page: its levels for the rows it holds, and, where
// one of its values may be long, its values (PLAIN) or its indices (a
// dictionary's).
func (s *longScan) data(i int, h pageHeader, body []byte, whole bool) error {
	dict := h.encoding == encPlainDict || h.encoding == encRLEDict
	values := int64(h.unc) > s.most && !dict || dict && len(s.dict) > 0
	switch {
	case values && !dict && h.encoding != encPlain:
		return errNoScan
	case !values && h.typ == pageDataV2:
		s.row += int64(h.numRows)
		return nil
	case !values && s.leaf.rep == 0:
		s.row += int64(h.numValues)
		return nil
	}
	p, err := openPage(s.streams, s.codec, h, body, whole)
	if err != nil {
		return err
	}
	lc, err := p.levels(s.leaf, &s.row)
	if err != nil {
		return err
	}
	if values {
		var idx *levelReader
		if dict {
			rest, err := p.rest()
			if err != nil {
				return err
			}
			if len(rest) == 0 || rest[0] > 32 {
				return errNoScan
			}
			idx = newLevelReader(rest[1:], 1<<rest[0]-1)
		}
		for k := 0; ; k++ {
			row, ok, err := lc.nextValue()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			var n int64
			if dict {
				v, _, err := idx.next(1)
				if err != nil {
					return err
				}
				n = s.dict[v]
			} else if n, err = p.skipValue(); err != nil {
				return err
			}
			if n > s.most {
				s.long = append(s.long, longValue{row: row, n: n})
				if !dict {
					s.pages[i] = append(s.pages[i], k)
				}
			}
		}
	}
	return lc.drain()
}

// errNoStream is a page whose codec has no stream here (Hadoop's LZ4).
var errNoStream = errors.New("parquet: no stream of the page's codec")

// pageReader reads a page's parts: its levels (a data page's), then its
// values, streamed or decompressed whole.
type pageReader struct {
	h          pageHeader
	levelsV2   []byte    // a data page v2's levels, uncompressed
	r          io.Reader // the values (after a v1 page's levels)
	skip       func(n int64) (int64, error)
	reps, defs []byte
}

// openPage opens page h of body with codec: its compressed part
// streamed (with streams: the page read before is done with), or
// decompressed whole.
func openPage(streams *inflate.Streams, codec int8, h pageHeader, body []byte, whole bool) (*pageReader, error) {
	p := &pageReader{h: h}
	comp, unc := body, int(h.unc)
	if h.typ == pageDataV2 {
		p.levelsV2, comp, unc = body[:h.levelsLen], body[h.levelsLen:], unc-int(h.levelsLen)
	}
	var r io.Reader
	switch {
	case codec == 0 || h.typ == pageDataV2 && !h.compressed:
		r = bytes.NewReader(comp)
	case whole:
		cd, err := compress.GetCodec(compress.Compression(codec))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNoScan, err)
		}
		buf, err := compress.Decode(cd, make([]byte, unc), comp)
		if err != nil || len(buf) != unc {
			return nil, fmt.Errorf("the page does not decompress to its %d bytes", unc)
		}
		r = bytes.NewReader(buf)
	default:
		ic, ok := inflateOf[compress.Compression(codec)]
		if !ok {
			return nil, errNoStream
		}
		st, err := streams.Open(ic, comp)
		if err != nil {
			return nil, err
		}
		if sk, ok := st.(inflate.Skipper); ok {
			// Read a little at a time: what is read is kept (for copies
			// from it), what is skipped is not.
			p.r, p.skip = st, sk.Skip
			return p, nil
		}
		r = io.LimitReader(st, int64(unc))
	}
	br := bufio.NewReaderSize(r, 64<<10)
	p.r = br
	p.skip = func(n int64) (int64, error) {
		k, err := br.Discard(int(n))
		return int64(k), err
	}
	return p, nil
}

// levels reads a data page's levels of leaf and returns their cursor,
// counting rows on from *row.
func (p *pageReader) levels(leaf *node, row *int64) (*levelCursor, error) {
	if p.h.typ == pageDataV2 {
		p.reps, p.defs = p.levelsV2[:p.h.repLen], p.levelsV2[p.h.repLen:]
	} else {
		if leaf.rep > 0 && p.h.repEnc != encRLE || leaf.def > 0 && p.h.defEnc != encRLE {
			return nil, errNoScan // BIT_PACKED levels
		}
		var err error
		if leaf.rep > 0 {
			if p.reps, err = p.prefixed(); err != nil {
				return nil, err
			}
		}
		if leaf.def > 0 {
			if p.defs, err = p.prefixed(); err != nil {
				return nil, err
			}
		}
	}
	return &levelCursor{rl: newLevelReader(p.reps, leaf.rep), dl: newLevelReader(p.defs, leaf.def),
		maxRep: int16(leaf.rep), maxDef: int16(leaf.def), left: int64(p.h.numValues), row: row}, nil
}

// prefixed reads a v1 page's RLE levels: a u32 length, then the runs.
// They are levels of the page's values, a few bytes a value at most.
func (p *pageReader) prefixed() ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(p.r, n[:]); err != nil {
		return nil, fmt.Errorf("the page's levels: %w", err)
	}
	l := binary.LittleEndian.Uint32(n[:])
	if uint64(l) > uint64(p.h.unc) || int64(l) > 10*int64(p.h.numValues)+16 {
		return nil, fmt.Errorf("levels of %d bytes for %d values", l, p.h.numValues)
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(p.r, b); err != nil {
		return nil, fmt.Errorf("the page's levels: %w", err)
	}
	return b, nil
}

// skipValue reads a PLAIN byte array's length and passes over its bytes.
func (p *pageReader) skipValue() (int64, error) {
	var n [4]byte
	if _, err := io.ReadFull(p.r, n[:]); err != nil {
		return 0, fmt.Errorf("a value's length: %w", err)
	}
	l := int64(binary.LittleEndian.Uint32(n[:]))
	if k, err := p.skip(l); err != nil {
		return 0, fmt.Errorf("a value of %d bytes, %d in the page: %w", l, k, err)
	}
	return l, nil
}

// copyValue copies a PLAIN byte array, its length and bytes, to w.
func (p *pageReader) copyValue(w *bytes.Buffer) error {
	var n [4]byte
	if _, err := io.ReadFull(p.r, n[:]); err != nil {
		return fmt.Errorf("a value's length: %w", err)
	}
	w.Write(n[:])
	l := int64(binary.LittleEndian.Uint32(n[:]))
	if k, err := io.CopyN(w, p.r, l); err != nil {
		return fmt.Errorf("a value of %d bytes, %d in the page: %w", l, k, err)
	}
	return nil
}

// rest is the rest of the page (a dictionary-encoded page's indices).
func (p *pageReader) rest() ([]byte, error) { return io.ReadAll(p.r) }

// levelCursor walks a page's levels run by run, counting the rows they
// start (a repetition level of 0, or every level of a column that does
// not repeat) and finding the levels that hold a value.
type levelCursor struct {
	rl, dl         *levelReader
	maxRep, maxDef int16
	repV, defV     int16
	repN, defN     int64
	left           int64
	row            *int64
}

func (c *levelCursor) runs() error {
	var err error
	if c.repN == 0 {
		if c.maxRep == 0 {
			c.repV, c.repN = 0, c.left
		} else if c.repV, c.repN, err = c.rl.take(c.left); err != nil {
			return err
		}
		if c.repV != 0 && *c.row < 0 {
			return fmt.Errorf("the column starts inside a row (repetition level %d)", c.repV)
		}
	}
	if c.defN == 0 {
		if c.maxDef == 0 {
			c.defV, c.defN = 0, c.left
		} else if c.defV, c.defN, err = c.dl.take(c.left); err != nil {
			return err
		}
	}
	return nil
}

func (c *levelCursor) consume(k int64) {
	if c.repV == 0 {
		*c.row += k
	}
	c.repN, c.defN, c.left = c.repN-k, c.defN-k, c.left-k
}

// nextValue moves past the next level that holds a value and returns
// its row; ok is false at the page's end. Levels without one pass a run
// at a time.
func (c *levelCursor) nextValue() (row int64, ok bool, err error) {
	for c.left > 0 {
		if err := c.runs(); err != nil {
			return 0, false, err
		}
		if c.defV < c.maxDef {
			c.consume(min(c.repN, c.defN))
			continue
		}
		c.consume(1)
		return *c.row, true, nil
	}
	return 0, false, nil
}

// drain moves past the page's levels left.
func (c *levelCursor) drain() error {
	for c.left > 0 {
		if err := c.runs(); err != nil {
			return err
		}
		c.consume(min(c.repN, c.defN))
	}
	return nil
}

// rewriteLong writes column chunk b (of leaf, whose footer entry is m)
// again with the values pages names left empty (scanLong), every other
// page as it is: a dictionary of the same entries, a data page as a data
// page v1 of the same levels and PLAIN values, compressed with the
// column chunk's codec, without a CRC. It returns the column chunk and
// its pages' uncompressed bytes.
func rewriteLong(streams *inflate.Streams, m *colMeta, leaf *node, b []byte, pages map[int][]int) ([]byte, int64, error) {
	var cd compress.Codec
	if m.codec != 0 {
		var err error
		if cd, err = compress.GetCodec(compress.Compression(m.codec)); err != nil {
			return nil, 0, err
		}
	}
	var out []byte
	var unc int64
	for pos, i := 0, 0; pos < len(b); i++ {
		h, err := parsePageHeader(b[pos:])
		if err != nil {
			return nil, 0, err
		}
		end := pos + h.len + int(h.comp)
		gone, ok := pages[i]
		if !ok {
			out = append(out, b[pos:end]...)
			if h.typ == pageDict || h.typ == pageData || h.typ == pageDataV2 {
				unc += int64(h.unc)
			}
			pos = end
			continue
		}
		body, err := rewritePage(streams, m.codec, leaf, h, b[pos+h.len:end], gone, false)
		if errors.Is(err, inflate.ErrWindow) || errors.Is(err, errNoStream) {
			body, err = rewritePage(streams, m.codec, leaf, h, b[pos+h.len:end], gone, true)
		}
		if err != nil {
			return nil, 0, err
		}
		comp := body
		if cd != nil {
			comp = cd.Encode(nil, body)
		}
		typ := int32(pageData)
		if h.typ == pageDict {
			typ = pageDict
		}
		out = appendPageHeader(out, typ, int32(len(body)), int32(len(comp)), h.numValues, encPlain)
		out = append(out, comp...)
		unc += int64(len(body))
		pos = end
	}
	return out, unc, nil
}

// rewritePage is a page's uncompressed body without the values gone
// (their indices, ascending): a dictionary's entries, or a data page's
// levels (length-prefixed, as a v1 page holds them) and PLAIN values;
// the page streamed, or decompressed whole.
func rewritePage(streams *inflate.Streams, codec int8, leaf *node, h pageHeader, body []byte, gone []int, whole bool) ([]byte, error) {
	p, err := openPage(streams, codec, h, body, whole)
	if err != nil {
		return nil, err
	}
	var w bytes.Buffer
	values := int(h.numValues)
	if h.typ != pageDict {
		var row int64 = -1
		lc, err := p.levels(leaf, &row)
		if err != nil {
			return nil, err
		}
		prefixed := func(levels []byte) {
			w.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(levels))))
			w.Write(levels)
		}
		if leaf.rep > 0 {
			prefixed(p.reps)
		}
		if leaf.def > 0 {
			prefixed(p.defs)
		}
		for values = 0; ; values++ {
			_, ok, err := lc.nextValue()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
		}
	}
	for k := range values {
		if len(gone) > 0 && gone[0] == k {
			gone = gone[1:]
			if _, err := p.skipValue(); err != nil {
				return nil, err
			}
			w.Write([]byte{0, 0, 0, 0})
			continue
		}
		if err := p.copyValue(&w); err != nil {
			return nil, err
		}
	}
	return w.Bytes(), nil
}

// appendPageHeader appends a PageHeader in Thrift's compact protocol: a
// dictionary page's (typ pageDict) or a data page v1's of RLE levels.
func appendPageHeader(b []byte, typ, unc, comp, numValues, encoding int32) []byte {
	i32 := func(b []byte, delta byte, v int32) []byte {
		b = append(b, delta<<4|tI32)
		return binary.AppendUvarint(b, uint64(uint32(v<<1^v>>31)))
	}
	b = i32(b, 1, typ)
	b = i32(b, 1, unc)
	b = i32(b, 1, comp)
	if typ == pageDict {
		b = append(b, 4<<4|tStruct) // field 7: dictionary_page_header
		b = i32(b, 1, numValues)
		b = i32(b, 1, encoding)
	} else {
		b = append(b, 2<<4|tStruct) // field 5: data_page_header
		b = i32(b, 1, numValues)
		b = i32(b, 1, encoding)
		b = i32(b, 1, encRLE) // definition_level_encoding
		b = i32(b, 1, encRLE) // repetition_level_encoding
	}
	return append(b, tStop, tStop)
}

var _ format.TextBound = (*decoder)(nil)
