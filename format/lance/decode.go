package lance

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/brandgw/brand/format"
)

// What decodes, exactly as Lance's reader reads it (every other layout
// or compression is refused, naming it):
//
//   - mini-block pages without repetition, with or without a dictionary
//     (flat, or variable as a block, its indices any value kind below
//     of whole bytes): definition
//     levels flat of 16 bits or bit-packed (inline, or out of line to a
//     flat width); values flat of 8, 16, 32 or 64 bits a value or of 1
//     (bools), bit-packed inline (FastLanes, 1024 values a chunk, the
//     width first), variable with flat offsets of 32 or 64 bits,
//     fixed-size lists of flat values without validity, RLE (flat
//     values, u8 run lengths), or FSST over variable values, none with
//     general compression;
//   - full-zip pages without repetition: control words of definition
//     levels (1, 2 or 4 bytes), variable values with 32- or 64-bit sizes
//     found through the repetition index of 1-, 2-, 4- or 8-byte
//     offsets, uncompressed, zstd per value (a u64 decoded length
//     first) or FSST per value, and fixed-width values of whole bytes,
//     flat or fixed-size lists of flat values (embeddings);
//   - all-null pages without repetition;
//   - blob pages (blob v1: a LargeBinary field with the metadata
//     lance-encoding:blob): a mini-block of (position, size)
//     descriptions packed as two u64s, each value its own range of the
//     file, read alone.

// Values are the values of a range of rows, each as bytes: a fixed-width
// value as its little-endian bytes, a bool as one byte (0 or 1), a
// variable-width value as itself. Value i is Data[Offsets[i]:Offsets[i+1]];
// Null[i] says it is null (Null is nil where none is).
type Values struct {
	Data    []byte
	Offsets []int
	Null    []bool
}

// Len is the number of values.
func (v *Values) Len() int { return len(v.Offsets) - 1 }

// Value is value i and whether it is valid (not null).
func (v *Values) Value(i int) ([]byte, bool) {
	if v.Null != nil && v.Null[i] {
		return nil, false
	}
	return v.Data[v.Offsets[i]:v.Offsets[i+1]], true
}

func newValues(n int) *Values { return &Values{Offsets: make([]int, 1, n+1)} }

func (v *Values) add(b []byte, valid bool) {
	if !valid {
		b = nil
		if v.Null == nil {
			v.Null = make([]bool, v.Len(), cap(v.Offsets))
		}
	}
	if v.Null != nil {
		v.Null = append(v.Null, !valid)
	}
	v.Data = append(v.Data, b...)
	v.Offsets = append(v.Offsets, len(v.Data))
}

// A RangeReader reads n bytes at off of a data file.
type RangeReader func(off, n uint64) ([]byte, error)

// ReadRows reads rows [lo, hi) of column col of f: for each page the
// rows overlap, the page's small table (a mini-block page's chunk
// table, a full-zip page's repetition index) and then only the bytes of
// the rows asked. limit bounds what the read allocates: the bytes it
// reads (tables, chunks, rows) and the values they decode to, each
// value's offset and null flag with them; a buffer or a value declaring
// more than is left is refused (ErrOverLimit) before it is read or
// decoded.
func (f *File) ReadRows(col int, lo, hi uint64, read RangeReader, limit int64) (*Values, error) {
	if col < 0 || col >= len(f.Columns) {
		return nil, fmt.Errorf("%w: lance file %s: no column %d (of %d)", format.ErrInvalid, f.Name, col, len(f.Columns))
	}
	if lo > hi || hi > f.Rows {
		return nil, fmt.Errorf("%w: lance file %s: rows %d to %d of %d", format.ErrInvalid, f.Name, lo, hi, f.Rows)
	}
	// Each value costs an offset and a null flag beside its bytes: a
	// range of rows is bounded before anything is allocated for it.
	if hi-lo > uint64(max(limit, 0))/valueOverhead {
		return nil, overLimit(fmt.Sprintf("lance file %s, column %d: rows %d to %d", f.Name, col, lo, hi), (hi-lo)*valueOverhead, limit)
	}
	d := &decoder{name: f.Name, col: col, read: read, left: limit - int64((hi-lo)*valueOverhead), end: uint64(f.Size) - footerLen}
	defer d.close()
	out := newValues(int(min(hi-lo, 1<<16)))
	var at uint64 // the first row of page pi
	for pi := range f.Columns[col].Pages {
		p := &f.Columns[col].Pages[pi]
		if p.Rows > f.Rows-at {
			return nil, d.bad(pi, p, "pages of more rows than the file's %d", f.Rows)
		}
		end := at + p.Rows
		if end > lo && at < hi {
			d.page, d.p = pi, p
			if err := d.decodePage(max(lo, at)-at, min(hi, end)-at, out); err != nil {
				return nil, err
			}
		}
		at = end
	}
	if at != f.Rows {
		return nil, fmt.Errorf("%w: lance file %s, column %d: pages of %d rows, the file's %d", format.ErrInvalid, f.Name, col, at, f.Rows)
	}
	return out, nil
}

// valueOverhead is what a value costs beside its bytes: its offset and
// its null flag.
const valueOverhead = 9

// A decoder decodes one column's pages.
type decoder struct {
	name string
	col  int
	read RangeReader
	end  uint64 // the file's data ends before its footer
	left int64  // bytes the values may still decode to
	page int
	p    *Page
	zstd *zstd.Decoder
}

func (d *decoder) close() {
	if d.zstd != nil {
		d.zstd.Close()
	}
}

func (d *decoder) bad(pi int, p *Page, format_ string, a ...any) error {
	return fmt.Errorf("%w: lance file %s, column %d, page %d (%v): %s", format.ErrInvalid, d.name, d.col, pi, p.Layout, fmt.Sprintf(format_, a...))
}

func (d *decoder) corrupt(format_ string, a ...any) error { return d.bad(d.page, d.p, format_, a...) }

// over is the error of a read or a value more than the limit has left.
func (d *decoder) over(format_ string, a ...any) error {
	return fmt.Errorf("%w: lance file %s, column %d, page %d: %s, %d bytes left of the limit", ErrOverLimit, d.name, d.col, d.page, fmt.Sprintf(format_, a...), d.left)
}

func (d *decoder) refuse(what string) error {
	return fmt.Errorf("%w: lance file %s, column %d, page %d: %s (%v)", format.ErrUnsupported, d.name, d.col, d.page, what, d.p.Layout)
}

// buffer reads n bytes at off of page buffer i.
func (d *decoder) buffer(i int, off, n uint64) ([]byte, error) {
	if i >= len(d.p.Buffers) {
		return nil, d.corrupt("no buffer %d (of %d)", i, len(d.p.Buffers))
	}
	b := d.p.Buffers[i]
	if off > b.Len || n > b.Len-off {
		return nil, d.corrupt("%d bytes at %d of buffer %d, which has %d", n, off, i, b.Len)
	}
	if n > uint64(max(d.left, 0)) {
		return nil, d.over("%d bytes of buffer %d", n, i)
	}
	d.left -= int64(n)
	got, err := d.read(b.Off+off, n)
	if err != nil {
		return nil, fmt.Errorf("lance file %s, column %d, page %d: %w", d.name, d.col, d.page, err)
	}
	if uint64(len(got)) != n {
		return nil, d.corrupt("read %d bytes of %d", len(got), n)
	}
	return got, nil
}

// spend takes n decoded bytes from the limit.
func (d *decoder) spend(n uint64) error {
	if n > uint64(d.left) {
		return d.over("values of %d bytes", n)
	}
	d.left -= int64(n)
	return nil
}

func (d *decoder) decodePage(lo, hi uint64, out *Values) error {
	l := d.p.Layout
	switch {
	case l.MiniBlock != nil:
		return d.miniBlock(l.MiniBlock, lo, hi, out)
	case l.FullZip != nil:
		return d.fullZip(l.FullZip, lo, hi, out)
	case l.AllNull != nil:
		if err := plainLayers(l.AllNull.Layers); err != nil {
			return d.refuse(err.Error())
		}
		for range hi - lo {
			out.add(nil, false)
		}
		return nil
	case l.Blob != nil:
		return d.blob(l.Blob, lo, hi, out)
	}
	return d.corrupt("no layout")
}

// plainLayers accepts the repetition/definition layers of a column
// without lists: one layer, of items all valid or nullable.
func plainLayers(ls []int) error {
	if len(ls) > 1 || (len(ls) == 1 && ls[0] != LayerAllValidItem && ls[0] != LayerNullableItem) {
		return fmt.Errorf("repetition/definition layers %v (lists and structs are not read)", ls)
	}
	return nil
}

// A chunk is one mini-block of a page: its bytes in buffer 1 and the
// items it holds.
type chunk struct {
	off, size uint64
	first     uint64 // the page's index of its first item
	items     uint64
}

const miniBlockAlign = 8

func (d *decoder) miniBlock(m *MiniBlockLayout, lo, hi uint64, out *Values) error {
	switch {
	case m.Rep != nil || m.RepIndexDepth != 0:
		return d.refuse("a mini-block page with repetition")
	}
	if err := plainLayers(m.Layers); err != nil {
		return d.refuse(err.Error())
	}
	if m.Def != nil && !levelsRead(m.Def) {
		return d.refuse("definition levels compressed as " + m.Def.String())
	}
	if m.Def != nil && len(m.Layers) == 0 {
		return d.corrupt("definition levels without their layer")
	}
	if m.Items != d.p.Rows {
		return d.corrupt("%d items in %d rows of a page without lists", m.Items, d.p.Rows)
	}
	if err := d.checkMiniBlockValues(m.Values, m.Buffers); err != nil {
		return err
	}
	var dict *chunkValues
	if m.Dictionary != nil {
		var err error
		if dict, err = d.dictionary(m); err != nil {
			return err
		}
	}
	// The chunk table: a u16 a chunk, its size in 8-byte words less one
	// (12 bits) and the log2 of its items (4 bits; the last chunk's items
	// are what is left).
	if len(d.p.Buffers) < 2 {
		return d.corrupt("%d buffers", len(d.p.Buffers))
	}
	tb := d.p.Buffers[0]
	if tb.Len%2 != 0 || tb.Len == 0 {
		return d.corrupt("a chunk table of %d bytes", tb.Len)
	}
	table, err := d.buffer(0, 0, tb.Len)
	if err != nil {
		return err
	}
	n := len(table) / 2
	chunks := make([]chunk, 0, n)
	var off, items uint64
	for i := range n {
		w := binary.LittleEndian.Uint16(table[2*i:])
		c := chunk{off: off, size: (uint64(w>>4) + 1) * miniBlockAlign, first: items}
		if i < n-1 {
			if w&0xf == 0 {
				return d.corrupt("chunk %d of no items", i)
			}
			c.items = 1 << (w & 0xf)
		} else {
			if items >= m.Items {
				return d.corrupt("chunks of %d items before the last, in a page of %d", items, m.Items)
			}
			c.items = m.Items - items
		}
		if c.items > m.Items-items {
			return d.corrupt("chunks of more items than the page's %d", m.Items)
		}
		items += c.items
		off += c.size
		chunks = append(chunks, c)
	}
	if off > d.p.Buffers[1].Len {
		return d.corrupt("chunks of %d bytes in a buffer of %d", off, d.p.Buffers[1].Len)
	}
	for _, c := range chunks {
		if c.first+c.items <= lo || c.first >= hi {
			continue
		}
		b, err := d.buffer(1, c.off, c.size)
		if err != nil {
			return err
		}
		if err := d.chunk(m, dict, c, b, max(lo, c.first)-c.first, min(hi, c.first+c.items)-c.first, out); err != nil {
			return err
		}
	}
	return nil
}

// flatWidth is the bytes a value of c, a flat compression of whole bytes
// (1 to 8) without general compression, or 0.
func flatWidth(c *Compression) uint64 {
	if c == nil || c.Kind != "flat" || c.Buffer != nil {
		return 0
	}
	switch c.Bits {
	case 8, 16, 32, 64:
		return c.Bits / 8
	}
	return 0
}

// itemWidth is the bytes of a mini-block value or dictionary item of c
// stored flat: flatWidth's, or 16 for 128 bits (a fixed_size_binary:16,
// a UUID, which Lance stores flat and dictionary-encodes as 128-bit
// items), or 0.
func itemWidth(c *Compression) uint64 {
	if c != nil && c.Kind == "flat" && c.Buffer == nil && c.Bits == 128 {
		return 16
	}
	return flatWidth(c)
}

// checkMiniBlockValues refuses the value compressions of a mini-block
// that are not read, and a chunk's buffers other than they make.
func (d *decoder) checkMiniBlockValues(v *Compression, buffers uint64) error {
	want := uint64(1)
	switch {
	case v.Kind == "flat" && v.Buffer == nil && (v.Bits == 1 || itemWidth(v) != 0):
	case v.Kind == "variable" && v.Buffer == nil && (flatWidth(v.Offsets) == 4 || flatWidth(v.Offsets) == 8):
	case v.Kind == "fixed-size-list" && !v.HasValidity && v.Bits != 0 && flatWidth(v.Values) != 0:
	case v.Kind == "rle" && flatWidth(v.Values) != 0 && flatWidth(v.RunLengths) == 1:
		want = 2
	case v.Kind == "inline-bitpacking" && v.Buffer == nil && (v.Bits == 8 || v.Bits == 16 || v.Bits == 32 || v.Bits == 64):
	case packedWidth(v) != 0:
	case v.Kind == "fsst" && v.Values != nil && v.Values.Kind == "variable" && v.Values.Buffer == nil && (flatWidth(v.Values.Offsets) == 4 || flatWidth(v.Values.Offsets) == 8):
	default:
		return d.refuse("mini-block values compressed as " + v.String())
	}
	if buffers != want {
		return d.refuse(fmt.Sprintf("mini-blocks of %d value buffers (%v makes %d)", buffers, v, want))
	}
	return nil
}

// A chunkValues is a chunk's values decoded: fixed-width values of width
// bytes each in data, or (width 0) variable ones, value i at offs[i] to
// offs[i+1] of data.
type chunkValues struct {
	data  []byte
	width uint64
	offs  func(i uint64) (uint64, uint64)
}

// chunk decodes items [lo, hi) of the mini-block b: with a dictionary,
// the chunk's values are indices into it.
func (d *decoder) chunk(m *MiniBlockLayout, dict *chunkValues, c chunk, b []byte, lo, hi uint64, out *Values) error {
	// The header: the number of levels, the definition levels' size if
	// any, each value buffer's size (u16 each), padded to 8 bytes.
	hdr := 2 + 2*m.Buffers
	if m.Def != nil {
		hdr += 2
	}
	if uint64(len(b)) < hdr {
		return d.corrupt("a chunk of %d bytes", len(b))
	}
	levels := uint64(binary.LittleEndian.Uint16(b))
	at := uint64(2)
	var defSize uint64
	if m.Def != nil {
		defSize = uint64(binary.LittleEndian.Uint16(b[at:]))
		at += 2
	}
	sizes := make([]uint64, m.Buffers)
	for i := range sizes {
		sizes[i] = uint64(binary.LittleEndian.Uint16(b[at:]))
		at += 2
	}
	at = pad(hdr)
	var def []uint16
	if m.Def != nil {
		if levels != c.items {
			return d.corrupt("a chunk of %d items with %d levels", c.items, levels)
		}
		if at+defSize > uint64(len(b)) {
			return d.corrupt("definition levels past the chunk's end")
		}
		var err error
		if def, err = d.levels(m.Def, b[at:at+defSize], levels); err != nil {
			return err
		}
		at = pad(at + defSize)
	}
	bufs := make([][]byte, len(sizes))
	for i, n := range sizes {
		if at+n > uint64(len(b)) {
			return d.corrupt("value buffer %d of %d bytes past the chunk's end", i, n)
		}
		bufs[i] = b[at : at+n]
		at = pad(at + n)
	}
	vals, err := d.chunkValues(m.Values, bufs, c)
	if err != nil {
		return err
	}
	for i := lo; i < hi; i++ {
		valid := true
		if def != nil {
			switch l := def[i]; {
			case l == 1 && m.Layers[0] == LayerNullableItem:
				valid = false
			case l != 0:
				return d.corrupt("definition level %d of item %d", l, c.first+i)
			}
		}
		v := vals.value(i)
		if dict != nil && valid {
			if vals.width == 0 || vals.width > 8 {
				return d.corrupt("dictionary indices of %d bytes", vals.width)
			}
			var k uint64
			for j, x := range v {
				k |= uint64(x) << (8 * j)
			}
			if k >= m.DictionaryItems {
				return d.corrupt("item %d: index %d into a dictionary of %d", c.first+i, k, m.DictionaryItems)
			}
			v = dict.value(k)
		}
		if valid {
			if err := d.spend(uint64(len(v))); err != nil {
				return err
			}
		}
		out.add(v, valid)
	}
	return nil
}

// value is value i.
func (v *chunkValues) value(i uint64) []byte {
	if v.width != 0 {
		return v.data[i*v.width : (i+1)*v.width]
	}
	s, e := v.offs(i)
	return v.data[s:e]
}

// dictionary reads and decodes a mini-block page's dictionary, buffer 2:
// flat values, or variable ones as a block (the offsets' width and the
// values' start, u32 each for 32-bit offsets and u64 for 64-bit ones,
// then the items+1 offsets, then the values).
func (d *decoder) dictionary(m *MiniBlockLayout) (*chunkValues, error) {
	if len(d.p.Buffers) < 3 {
		return nil, d.corrupt("a dictionary page of %d buffers", len(d.p.Buffers))
	}
	n := m.DictionaryItems
	db := d.p.Buffers[2]
	c := m.Dictionary
	if w := itemWidth(c); w != 0 {
		if n > db.Len/w {
			return nil, d.corrupt("a dictionary of %d items of %d bytes in %d bytes", n, w, db.Len)
		}
		b, err := d.buffer(2, 0, n*w)
		return &chunkValues{data: b, width: w}, err
	}
	if c.Kind != "variable" || c.Buffer != nil || c.Offsets == nil || (flatWidth(c.Offsets) != 4 && flatWidth(c.Offsets) != 8) {
		return nil, d.refuse("a dictionary compressed as " + c.String())
	}
	ob := flatWidth(c.Offsets)
	if db.Len < 2*ob || n >= (db.Len-2*ob)/ob {
		return nil, d.corrupt("a dictionary of %d items in %d bytes", n, db.Len)
	}
	b, err := d.buffer(2, 0, db.Len)
	if err != nil {
		return nil, err
	}
	word := func(at uint64) uint64 {
		if ob == 4 {
			return uint64(binary.LittleEndian.Uint32(b[at:]))
		}
		return binary.LittleEndian.Uint64(b[at:])
	}
	if bits := uint64(binary.LittleEndian.Uint32(b)); bits != 8*ob || (ob == 4 && b[1]|b[2]|b[3] != 0) {
		return nil, d.refuse(fmt.Sprintf("a dictionary block of %d-bit offsets (the older layout)", b[0]))
	}
	start := word(ob)
	if start != 2*ob+(n+1)*ob {
		return nil, d.corrupt("a dictionary's values at %d, after %d offsets", start, n+1)
	}
	data := b[start:]
	offs := b[2*ob : start]
	offset := func(i uint64) uint64 {
		if ob == 4 {
			return uint64(binary.LittleEndian.Uint32(offs[4*i:]))
		}
		return binary.LittleEndian.Uint64(offs[8*i:])
	}
	for i := range n + 1 {
		if o := offset(i); o > uint64(len(data)) || (i > 0 && o < offset(i-1)) {
			return nil, d.corrupt("dictionary item %d's offset %d in %d bytes", i, o, len(data))
		}
	}
	return &chunkValues{data: data, offs: func(i uint64) (uint64, uint64) { return offset(i), offset(i + 1) }}, nil
}

// chunkValues decodes the values of the chunk c from its buffers, as v
// (checked by checkMiniBlockValues) says.
func (d *decoder) chunkValues(v *Compression, bufs [][]byte, c chunk) (chunkValues, error) {
	switch v.Kind {
	case "flat":
		if v.Bits == 1 {
			if c.items > uint64(len(bufs[0]))*8 {
				return chunkValues{}, d.corrupt("%d bools in %d bytes", c.items, len(bufs[0]))
			}
			// A chunk's items are at most 2^15 but for the last, which is
			// no more than its bytes' bits: one byte each.
			out := make([]byte, c.items)
			for i := range out {
				out[i] = bufs[0][i/8] >> (i % 8) & 1
			}
			return chunkValues{data: out, width: 1}, nil
		}
		w := itemWidth(v)
		if c.items > uint64(len(bufs[0]))/w {
			return chunkValues{}, d.corrupt("%d values of %d bytes in %d bytes", c.items, w, len(bufs[0]))
		}
		return chunkValues{data: bufs[0], width: w}, nil
	case "packed-struct":
		w := packedWidth(v)
		if c.items > uint64(len(bufs[0]))/w {
			return chunkValues{}, d.corrupt("%d packed rows of %d bytes in %d bytes", c.items, w, len(bufs[0]))
		}
		return chunkValues{data: bufs[0], width: w}, nil
	case "fixed-size-list":
		w := flatWidth(v.Values)
		if v.Bits > uint64(len(bufs[0]))/w {
			return chunkValues{}, d.corrupt("lists of %d values of %d bytes in %d bytes", v.Bits, w, len(bufs[0]))
		}
		w *= v.Bits
		if c.items > uint64(len(bufs[0]))/w {
			return chunkValues{}, d.corrupt("%d lists of %d bytes in %d bytes", c.items, w, len(bufs[0]))
		}
		return chunkValues{data: bufs[0], width: w}, nil
	case "rle":
		w := flatWidth(v.Values)
		runs := bufs[1]
		if uint64(len(runs)) > uint64(len(bufs[0]))/w {
			return chunkValues{}, d.corrupt("%d runs of %d values", len(runs), uint64(len(bufs[0]))/w)
		}
		// Every run is at most 255 items: the items are bounded by the
		// runs' bytes before they are expanded.
		if c.items > 255*uint64(len(runs)) {
			return chunkValues{}, d.corrupt("%d items in %d runs", c.items, len(runs))
		}
		if c.items*w > uint64(d.left) {
			return chunkValues{}, d.over("runs of %d bytes", c.items*w)
		}
		out := make([]byte, 0, c.items*w)
		for r, n := range runs {
			if uint64(len(out))+uint64(n)*w > c.items*w {
				return chunkValues{}, d.corrupt("runs of more than the chunk's %d items", c.items)
			}
			for range n {
				out = append(out, bufs[0][uint64(r)*w:uint64(r+1)*w]...)
			}
		}
		if uint64(len(out)) != c.items*w {
			return chunkValues{}, d.corrupt("runs of %d items, the chunk's %d", uint64(len(out))/w, c.items)
		}
		return chunkValues{data: out, width: w}, nil
	case "fsst":
		t, err := parseFSST(v.SymbolTable)
		if err != nil {
			return chunkValues{}, d.corrupt("%v", err)
		}
		in, err := d.chunkValues(v.Values, bufs, c)
		if err != nil {
			return chunkValues{}, err
		}
		// A code is at most 8 bytes: the chunk's values decode to at
		// most 8 times the chunk.
		data := make([]byte, 0, 2*len(bufs[0]))
		offs := make([]uint64, 1, c.items+1)
		for i := range c.items {
			if data, err = t.decode(data, in.value(i)); err != nil {
				return chunkValues{}, d.corrupt("item %d: %v", c.first+i, err)
			}
			offs = append(offs, uint64(len(data)))
		}
		return chunkValues{data: data, offs: func(i uint64) (uint64, uint64) { return offs[i], offs[i+1] }}, nil
	case "inline-bitpacking":
		out, err := d.inlineBitpacked(v.Bits, bufs[0], c.items)
		return chunkValues{data: out, width: v.Bits / 8}, err
	case "variable":
		// items+1 offsets into the buffer itself, the first the values'
		// start (after the offsets).
		ob := flatWidth(v.Offsets)
		vals := bufs[0]
		if c.items >= uint64(len(vals))/ob {
			return chunkValues{}, d.corrupt("%d offsets in %d bytes", c.items+1, len(vals))
		}
		offset := func(i uint64) uint64 {
			if ob == 4 {
				return uint64(binary.LittleEndian.Uint32(vals[i*4:]))
			}
			return binary.LittleEndian.Uint64(vals[i*8:])
		}
		for i := range c.items + 1 {
			o := offset(i)
			if o < (c.items+1)*ob || o > uint64(len(vals)) || (i > 0 && o < offset(i-1)) {
				return chunkValues{}, d.corrupt("value %d's offset %d in a buffer of %d", c.first+i, o, len(vals))
			}
		}
		return chunkValues{data: vals, offs: func(i uint64) (uint64, uint64) { return offset(i), offset(i + 1) }}, nil
	}
	return chunkValues{}, d.refuse("mini-block values compressed as " + v.String())
}

// inlineBitpacked unpacks the n (at most 1024) values of a chunk
// bit-packed with its width inline: a word of t bits holding the packed
// width w, then the 1024 values packed (the last chunk's padded), as
// t/8-byte little-endian values.
func (d *decoder) inlineBitpacked(t uint64, b []byte, n uint64) ([]byte, error) {
	tb := t / 8
	if n > 1024 || uint64(len(b)) < tb {
		return nil, d.corrupt("a bit-packed chunk of %d values in %d bytes", n, len(b))
	}
	var w uint64
	for j := range tb {
		w |= uint64(b[j]) << (8 * j)
	}
	if w > t || uint64(len(b)) < tb+uint64(packedWords(int(t), int(w)))*tb {
		return nil, d.corrupt("values bit-packed to %d of %d bits in %d bytes", w, t, len(b))
	}
	var vals [1024]uint64
	unpackFL(int(t), int(w), b[tb:], &vals)
	out := make([]byte, n*tb)
	for i := range n {
		putLE(out[i*tb:(i+1)*tb], vals[i])
	}
	return out, nil
}

func putLE(b []byte, v uint64) {
	for j := range b {
		b[j] = byte(v >> (8 * j))
	}
}

// levelsRead says whether the definition levels' compression c is read:
// flat of 16 bits, bit-packed inline, or bit-packed out of line (16 bits
// cut to a flat width).
func levelsRead(c *Compression) bool {
	switch {
	case c.Kind == "flat" && c.Bits == 16 && c.Buffer == nil:
	case c.Kind == "inline-bitpacking" && c.Bits == 16 && c.Buffer == nil:
	case c.Kind == "out-of-line-bitpacking" && c.Bits == 16 && c.Values != nil && c.Values.Kind == "flat" && c.Values.Buffer == nil && c.Values.Bits <= 16:
	default:
		return false
	}
	return true
}

// levels decodes a chunk's n definition levels from b as c says.
func (d *decoder) levels(c *Compression, b []byte, n uint64) ([]uint16, error) {
	out := make([]uint16, n)
	switch c.Kind {
	case "flat":
		if uint64(len(b)) != 2*n {
			return nil, d.corrupt("%d levels in %d bytes", n, len(b))
		}
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	case "inline-bitpacking":
		vals, err := d.inlineBitpacked(16, b, n)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(vals[2*i:])
		}
	case "out-of-line-bitpacking":
		// Whole blocks of 1024 levels packed to w bits in 16-bit words;
		// the last block packed and padded, or its levels raw.
		w := int(c.Values.Bits)
		per := uint64(packedWords(16, w)) // words a whole block
		whole, tail := n/1024, n%1024
		words := uint64(len(b)) / 2
		need := whole * per
		raw := tail > 0 && words == need+tail
		switch {
		case raw:
			need += tail
		case tail > 0:
			need += per
		}
		if words < need {
			return nil, d.corrupt("%d levels bit-packed to %d bits in %d bytes", n, w, len(b))
		}
		var vals [1024]uint64
		for k := range whole + min(tail, 1) {
			if k == whole && raw {
				for i := range tail {
					out[k*1024+i] = binary.LittleEndian.Uint16(b[2*(whole*per+i):])
				}
				break
			}
			unpackFL(16, w, b[2*k*per:], &vals)
			for i := uint64(0); i < 1024 && k*1024+i < n; i++ {
				out[k*1024+i] = uint16(vals[i])
			}
		}
	}
	return out, nil
}

// packedWidth is the bytes a row of c takes, a packed struct of fields
// of whole bytes stored flat, or 0. Such a row is its fields' values one
// after another, each as flat stores it: a struct column with the field
// metadata lance-encoding:packed (or packed) of fixed-width children, the
// only packed struct Lance 8.0 writes in file format 2.1 (a null row or
// child makes it a variable packed struct, which needs 2.2), and a blob
// page's (position, size) descriptions.
func packedWidth(c *Compression) uint64 {
	if c.Kind != "packed-struct" || c.Values == nil || c.Values.Kind != "flat" || c.Values.Buffer != nil || len(c.PackedBits) == 0 {
		return 0
	}
	var bits uint64
	for _, b := range c.PackedBits {
		if b == 0 || b%8 != 0 || b > 64 {
			return 0
		}
		bits += b
	}
	if bits != c.Values.Bits {
		return 0
	}
	return bits / 8
}

// blob decodes rows [lo, hi) of a blob page: its inner layout holds each
// row's description, (position, size) as two u64s, and the value is the
// size bytes at that absolute position of the file, read on its own. A
// size of 0 is an empty value at position 0, and otherwise a null whose
// position holds its levels (the repetition level in the low 16 bits,
// the definition level, 1, in the next 16).
func (d *decoder) blob(b *BlobLayout, lo, hi uint64, out *Values) error {
	if err := plainLayers(b.Layers); err != nil {
		return d.refuse(err.Error())
	}
	if b.Inner.MiniBlock == nil {
		return d.refuse(fmt.Sprintf("a blob layout over %v", b.Inner))
	}
	inner := b.Inner.MiniBlock
	if packedWidth(inner.Values) != 16 || len(inner.Values.PackedBits) != 2 {
		return d.refuse("blob descriptions compressed as " + inner.Values.String())
	}
	descs := newValues(int(hi - lo))
	if err := d.miniBlock(inner, lo, hi, descs); err != nil {
		return err
	}
	nullable := len(b.Layers) == 1 && b.Layers[0] == LayerNullableItem
	for i := range descs.Len() {
		desc, ok := descs.Value(i)
		if !ok || len(desc) != 16 {
			return d.corrupt("row %d: a blob description of %d bytes", lo+uint64(i), len(desc))
		}
		pos, size := binary.LittleEndian.Uint64(desc), binary.LittleEndian.Uint64(desc[8:])
		switch {
		case size == 0 && pos == 0:
			out.add(nil, true)
			continue
		case size == 0 && pos == 1<<16 && nullable:
			// The repetition level in the low 16 bits (0: no lists), the
			// definition level in the next 16 (1: null).
			out.add(nil, false)
			continue
		case size == 0:
			return d.corrupt("row %d: a blob of no bytes with repetition/definition levels %#x", lo+uint64(i), pos)
		}
		if pos > d.end || size > d.end-pos {
			return d.corrupt("row %d: a blob of %d bytes at %d, past the data's end (%d)", lo+uint64(i), size, pos, d.end)
		}
		if err := d.spend(size); err != nil {
			return err
		}
		v, err := d.read(pos, size)
		if err != nil {
			return fmt.Errorf("lance file %s, column %d, page %d: %w", d.name, d.col, d.page, err)
		}
		if uint64(len(v)) != size {
			return d.corrupt("read %d bytes of %d", len(v), size)
		}
		out.add(v, true)
	}
	return nil
}

func pad(n uint64) uint64 { return (n + miniBlockAlign - 1) &^ (miniBlockAlign - 1) }

func (d *decoder) fullZip(z *FullZipLayout, lo, hi uint64, out *Values) error {
	if z.BitsRep != 0 {
		return d.refuse("a full-zip page with repetition")
	}
	if err := plainLayers(z.Layers); err != nil {
		return d.refuse(err.Error())
	}
	var cw uint64 // control word bytes
	switch {
	case z.BitsDef == 0:
	case z.BitsDef <= 8:
		cw = 1
	case z.BitsDef <= 16:
		cw = 2
	case z.BitsDef <= 32:
		cw = 4
	default:
		return d.corrupt("control words of %d bits", z.BitsDef)
	}
	if z.BitsDef != 0 && (len(z.Layers) != 1 || z.Layers[0] != LayerNullableItem) {
		return d.corrupt("definition bits without a nullable layer")
	}
	valid := func(w []byte) (bool, error) {
		var def uint32
		for i := range w {
			def |= uint32(w[i]) << (8 * i)
		}
		switch def & (1<<z.BitsDef - 1) {
		case 0:
			return true, nil
		case 1:
			return false, nil
		}
		return false, d.corrupt("definition level %d", def)
	}
	v := z.Values
	if z.BitsPerValue != 0 {
		if z.BitsPerOffset != 0 {
			return d.corrupt("bits per value and per offset both")
		}
		// Flat values, or fixed-size lists of them (embeddings), of whole
		// bytes.
		bits := uint64(0)
		switch {
		case v.Kind == "flat" && v.Buffer == nil:
			bits = v.Bits
		case v.Kind == "fixed-size-list" && !v.HasValidity && flatWidth(v.Values) != 0 && v.Bits <= 1<<20:
			bits = v.Bits * v.Values.Bits
		}
		if bits == 0 || bits != uint64(z.BitsPerValue) || z.BitsPerValue%8 != 0 {
			return d.refuse("full-zip fixed-width values compressed as " + v.String())
		}
		width := uint64(z.BitsPerValue / 8)
		row := cw + width
		if d.p.Rows > d.p.Buffers[0].Len/max(row, 1) {
			return d.corrupt("%d rows of %d bytes in %d", d.p.Rows, row, d.p.Buffers[0].Len)
		}
		if err := d.spend((hi - lo) * width); err != nil {
			return err
		}
		b, err := d.buffer(0, lo*row, (hi-lo)*row)
		if err != nil {
			return err
		}
		for i := range hi - lo {
			r := b[i*row : (i+1)*row]
			ok, err := valid(r[:cw])
			if err != nil {
				return err
			}
			out.add(r[cw:], ok)
		}
		return nil
	}
	zstdValues := false
	var fsst *fsstTable
	switch {
	case v.Kind == "general" && v.Buffer != nil && v.Values != nil:
		if v.Buffer.Scheme != 2 {
			return d.refuse("full-zip values compressed with " + v.Buffer.String())
		}
		zstdValues = true
		v = v.Values
	case v.Kind == "fsst" && v.Values != nil:
		var err error
		if fsst, err = parseFSST(v.SymbolTable); err != nil {
			return d.corrupt("%v", err)
		}
		v = v.Values
	}
	if v.Kind != "variable" || v.Buffer != nil || v.Offsets == nil || v.Offsets.Kind != "flat" || v.Offsets.Buffer != nil || v.Offsets.Bits != uint64(z.BitsPerOffset) {
		return d.refuse("full-zip values compressed as " + z.Values.String())
	}
	var lb uint64 // bytes of a value's size
	switch z.BitsPerOffset {
	case 32, 64:
		lb = uint64(z.BitsPerOffset / 8)
	default:
		return d.corrupt("%d bits per offset", z.BitsPerOffset)
	}
	// The repetition index: rows+1 offsets into buffer 0, each of the
	// width that divides the buffer.
	if len(d.p.Buffers) < 2 {
		return d.corrupt("a variable-width full-zip page without its repetition index")
	}
	ri := d.p.Buffers[1]
	if d.p.Rows >= ri.Len {
		return d.corrupt("a repetition index of %d bytes for %d rows", ri.Len, d.p.Rows)
	}
	w := ri.Len / (d.p.Rows + 1)
	if ri.Len%(d.p.Rows+1) != 0 || (w != 1 && w != 2 && w != 4 && w != 8) {
		return d.corrupt("a repetition index of %d bytes for %d rows", ri.Len, d.p.Rows)
	}
	idx, err := d.buffer(1, lo*w, (hi-lo+1)*w)
	if err != nil {
		return err
	}
	entry := func(i uint64) uint64 {
		b := idx[i*w : (i+1)*w]
		var v uint64
		for j := range b {
			v |= uint64(b[j]) << (8 * j)
		}
		return v
	}
	start, end := entry(0), entry(hi-lo)
	if start > end || end > d.p.Buffers[0].Len {
		return d.corrupt("rows %d to %d at %d to %d of a buffer of %d", lo, hi, start, end, d.p.Buffers[0].Len)
	}
	if !zstdValues && fsst == nil {
		// The values are no more than the bytes that hold them.
		if err := d.spend(end - start); err != nil {
			return err
		}
	}
	data, err := d.buffer(0, start, end-start)
	if err != nil {
		return err
	}
	for i := range hi - lo {
		s, e := entry(i)-start, entry(i+1)-start
		if s > e || e > uint64(len(data)) {
			return d.corrupt("row %d at %d to %d", lo+i, s, e)
		}
		r := data[s:e]
		if uint64(len(r)) < cw {
			return d.corrupt("row %d of %d bytes", lo+i, len(r))
		}
		ok, err := valid(r[:cw])
		if err != nil {
			return err
		}
		r = r[cw:]
		if !ok {
			if len(r) != 0 {
				return d.corrupt("null row %d of %d bytes", lo+i, len(r))
			}
			out.add(nil, false)
			continue
		}
		if uint64(len(r)) < lb {
			return d.corrupt("row %d of %d bytes", lo+i, len(r))
		}
		var n uint64
		if lb == 4 {
			n = uint64(binary.LittleEndian.Uint32(r))
		} else {
			n = binary.LittleEndian.Uint64(r)
		}
		r = r[lb:]
		if n != uint64(len(r)) {
			return d.corrupt("row %d: a value of %d bytes in %d", lo+i, n, len(r))
		}
		switch {
		case zstdValues:
			if r, err = d.unzstd(lo+i, r); err != nil {
				return err
			}
		case fsst != nil:
			// A code is at most 8 bytes: bounded before it is decoded, and
			// what the value did not take given back.
			most := 8 * uint64(len(r))
			if err := d.spend(most); err != nil {
				return err
			}
			if r, err = fsst.decode(make([]byte, 0, 3*len(r)), r); err != nil {
				return d.corrupt("row %d: %v", lo+i, err)
			}
			d.left += int64(most) - int64(len(r))
		}
		out.add(r, true)
	}
	return nil
}

// unzstd decodes a value compressed with zstd by Lance: its decoded
// length (u64), then a zstd frame. The length is taken from the limit
// before anything is decoded, and the frame must decode to exactly it.
func (d *decoder) unzstd(row uint64, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 8 {
		return nil, d.corrupt("row %d: a zstd value of %d bytes", row, len(b))
	}
	if binary.LittleEndian.Uint32(b) == 0xFD2FB528 && b[4]&0x10 == 0 {
		return nil, d.refuse(fmt.Sprintf("row %d: a zstd value without its decoded length (the raw stream form of older writers)", row))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(d.left) {
		return nil, d.over("row %d: a zstd value declaring %d bytes", row, n)
	}
	d.left -= int64(n)
	if d.zstd == nil {
		z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(d.left)+n+1))
		if err != nil {
			return nil, err
		}
		d.zstd = z
	}
	out, err := d.zstd.DecodeAll(b[8:], make([]byte, 0, n))
	if err != nil {
		return nil, d.corrupt("row %d: zstd: %v", row, err)
	}
	if uint64(len(out)) != n {
		return nil, d.corrupt("row %d: a zstd value of %d bytes declared %d", row, len(out), n)
	}
	return out, nil
}
