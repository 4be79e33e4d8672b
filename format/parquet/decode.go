package parquet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/tokenize"
)

// decoder decodes the row groups of one indexed dataset. It is safe for
// concurrent use: every Decode makes its own readers.
type decoder struct {
	ds     *dataset
	schema *schema
	columns
	cols  []*pqschema.Column // arrow-go's descriptor of each leaf
	mem   memory.Allocator
	props *pq.ReaderProperties
	pool  *sync.Pool
	model *tokenize.Model // a text token dataset's
}

func newDecoder(ds *dataset) (*decoder, error) {
	n := len(ds.elems)
	s, err := buildSchema(ds.elems, n+1, n, n)
	if err != nil {
		return nil, err
	}
	d := &decoder{ds: ds, schema: s, mem: memory.DefaultAllocator}
	if len(ds.exts) != len(s.root.children) {
		return nil, fmt.Errorf("%w: %d extensions for %d columns", errMeta, len(ds.exts), len(s.root.children))
	}
	for i, c := range s.root.children {
		f := classify(c)
		f.ext, f.forced = ds.exts[i].ext, ds.exts[i].forced
		d.fields = append(d.fields, f)
		pf := format.Field{Name: f.name, Ext: f.ext, Type: typeName(c)}
		if f.kind == kindImage {
			pf.Type += " (image)"
			if !f.forced {
				pf.Ext = ""
			}
		}
		d.pub = append(d.pub, pf)
	}
	if err := d.addTokens(); err != nil {
		return nil, err
	}
	for i := range ds.chunks {
		c := &ds.chunks[i]
		if len(c.cols) != len(s.leaves) || c.file >= len(ds.files) {
			return nil, fmt.Errorf("%w: a row group of %d columns in a schema of %d", errMeta, len(c.cols), len(s.leaves))
		}
		c.at = i
	}
	if err := d.ds.setSpans(ds.ends); err != nil {
		return nil, err
	}
	root, err := arrowGroup(s.root)
	if err != nil {
		return nil, err
	}
	as := pqschema.NewSchema(root)
	if as.NumColumns() != len(s.leaves) {
		return nil, fmt.Errorf("parquet: arrow-go's schema has %d columns, ours %d", as.NumColumns(), len(s.leaves))
	}
	for i, l := range s.leaves {
		c := as.Column(i)
		if int(c.MaxDefinitionLevel()) != l.def || int(c.MaxRepetitionLevel()) != l.rep {
			return nil, fmt.Errorf("parquet: column %q has levels %d/%d, arrow-go's %d/%d", strings.Join(l.path(), "."), l.def, l.rep, c.MaxDefinitionLevel(), c.MaxRepetitionLevel())
		}
		d.cols = append(d.cols, c)
	}
	d.props = pq.NewReaderProperties(d.mem)
	d.props.BufferedStreamEnabled = true
	d.props.BufferSize = 64 << 10
	d.pool = &sync.Pool{New: func() any { return memory.NewResizableBuffer(d.mem) }}
	return d, nil
}

var repetitions = [...]pq.Repetition{pq.Repetitions.Required, pq.Repetitions.Optional, pq.Repetitions.Repeated}

func arrowNode(n *node) (pqschema.Node, error) {
	if n.isLeaf() {
		return pqschema.NewPrimitiveNode(n.el.name, repetitions[n.el.rep], pq.Type(n.el.phys), -1, n.el.typeLen)
	}
	return arrowGroup(n)
}

func arrowGroup(n *node) (*pqschema.GroupNode, error) {
	fs := make(pqschema.FieldList, 0, len(n.children))
	for _, c := range n.children {
		an, err := arrowNode(c)
		if err != nil {
			return nil, err
		}
		fs = append(fs, an)
	}
	rep := repetitions[n.el.rep]
	if n.parent == nil {
		rep = pq.Repetitions.Repeated
	}
	return pqschema.NewGroupNode(n.el.name, rep, fs, -1)
}

// columns are a dataset's columns as the decoder reads them (fields)
// and as it names them (pub, format.Decoder's Fields): what the rows'
// members are, apart from how a chunk is decoded.
type columns struct {
	fields []*field
	pub    []format.Field
}

func (c *columns) Fields() []format.Field { return c.pub }

func (ds *dataset) keyLen(c *chunk) int {
	f := &ds.files[c.file]
	return len(f.prefix) + 1 + f.width
}

// key is the key of row i of chunk c: the object's key without
// ".parquet", "/", the row's index in the file zero-padded to the width
// of the file's row count.
func (ds *dataset) key(b []byte, c *chunk, i int64) []byte {
	f := &ds.files[c.file]
	b = append(b, f.prefix...)
	b = append(b, '/')
	n := strconv.AppendInt(nil, c.first+i, 10)
	for range f.width - len(n) {
		b = append(b, '0')
	}
	return append(b, n...)
}

// needed returns the leaves field f reads: an image's path only when it
// decides the extension.
func (f *field) needed() []int {
	if f.kind == kindImage && f.forced && f.pathLeaf >= 0 {
		return []int{f.bytesLeaf}
	}
	return f.leaves
}

// Extent is the column chunks of the fields sel of chunk c's row groups,
// adjacent ones merged.
func (d *decoder) Extent(c int, sel format.Selection) ([]format.Range, int64) {
	gs := d.ds.span(c)
	var rs []format.Range
	for gi := range gs {
		ch := &gs[gi]
		for i, f := range d.fields {
			if sel.Has(i) {
				for _, l := range f.needed() {
					rs = append(rs, format.Range{Off: ch.cols[l].start, Len: ch.cols[l].length})
				}
			}
		}
	}
	return format.Merge(rs), d.spanBound(gs, sel)
}

// Working implements format.Working: flatCol decompresses a byte-array
// column's dictionary and its largest data page (together at most the
// column chunk's uncompressed size); arrow-go copies each other column
// chunk it reads and decompresses its pages (about a column chunk's
// uncompressed size each, and as much again for the values decoded from
// them); a page's codec takes what package inflate says beside the page
// (one page decompresses at a time, and the first that inflates past its
// stated size ends the decode: the largest of them); and each member's
// header writer; TestWorking measures it.
func (d *decoder) Working(c int, sel format.Selection) int64 {
	// The row groups of a chunk are decoded one after the other, each
	// giving back flatCol's buffers before the next: the largest of them
	// at once; arrow-go's allocations are the garbage collector's to
	// return, so all of them count.
	gs := d.ds.span(c)
	var most, n, fields, rows, imgSum, imgMost, inflating int64
	for gi := range gs {
		ch := &gs[gi]
		if pl := d.plan(gs[gi:gi+1], sel, nil, format.WriterOptions{}); pl != nil {
			// DecodeStream may move every value it placed out of the
			// writer's way, a row group's at most its column chunk's
			// uncompressed bytes, and keeps them to the chunk's end.
			u := ch.cols[pl.leaf[ch.at]].unc
			imgSum, imgMost = imgSum+u, max(imgMost, u)
		}
		var flat int64
		fields = 0
		for i, f := range d.fields {
			if sel.Has(i) {
				fields++
				for _, l := range f.needed() {
					m := &ch.cols[l]
					if d.flat(ch, l) {
						flat += m.unc
					} else {
						n += m.length + 2*m.unc
					}
					inflating = max(inflating, inflateWorking(m.codec, m.unc))
				}
			}
		}
		most = max(most, flat)
		rows += ch.rows
	}
	return most + imgSum - imgMost + n + inflating + rows*(fields*format.MemberWorking+int64(d.ds.keyLen(&gs[0]))) + 1<<20
}

func (d *decoder) object(c *chunk) string { return d.ds.files[c.file].prefix + ".parquet" }

// damaged is a decode error: the bytes of row group ch are at fault.
func (d *decoder) damaged(ch *chunk, col string, err error) error {
	where := fmt.Sprintf("%s, row group of rows %d–%d", d.object(ch), ch.first, ch.first+ch.rows-1)
	if col != "" {
		where += fmt.Sprintf(", column %q", col)
	}
	if errors.Is(err, format.ErrDamaged) {
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%w: %s: %v", format.ErrDamaged, where, err)
}

// rowWriter writes one field's members of the next row.
type rowWriter interface {
	row(w *format.Writer) (wrote bool, err error)
	name() string
}

func (d *decoder) Decode(c int, sel format.Selection, src, dst []byte, wo format.WriterOptions) error {
	return d.decode(c, sel, src, dst, wo, nil)
}

// decode is Decode, with the values DecodeStream placed (pl, nil for
// none).
func (d *decoder) decode(c int, sel format.Selection, src, dst []byte, wo format.WriterOptions, pl *placement) error {
	if c < 0 || c >= d.ds.numChunks() {
		return fmt.Errorf("parquet: no chunk %d", c)
	}
	gs := d.ds.span(c)
	ranges, bound := d.Extent(c, sel)
	if int64(len(dst)) < bound {
		return fmt.Errorf("parquet: a buffer of %d bytes for a resident bound of %d", len(dst), bound)
	}
	read, err := format.NewRead(ranges, src)
	if err != nil {
		return d.damaged(&gs[0], "", err)
	}
	return d.decodeSpan(gs, sel, read, dst, wo, pl, nil)
}

// decodeSpan writes row groups gs (a chunk's), their column chunks in
// read, with the fields sel, into dst.
func (d *decoder) decodeSpan(gs []chunk, sel format.Selection, read *format.Read, dst []byte, wo format.WriterOptions, pl *placement, unread map[int]string) (err error) {
	ch := &gs[0]
	col := ""
	defer func() {
		// A reader that panics on bytes it cannot make sense of is a
		// damaged chunk, not a dead server.
		if p := recover(); p != nil {
			err = d.damaged(ch, col, fmt.Errorf("the reader failed: %v", p))
		}
	}()
	// Where the footer could only guess the bound, the chunk may need
	// more: it says how much (format.GrowError) and is decoded again into
	// that much (a dst longer than the bound).
	var rows int64
	for gi := range gs {
		rows += gs[gi].rows
		for i, f := range d.fields {
			if sel.Has(i) && gs[gi].guessed(f) {
				wo.MayGrow = true
			}
		}
	}
	w, err := format.NewWriter(dst, int(rows), wo)
	if err != nil {
		return d.damaged(ch, "", err)
	}
	if pl != nil {
		pl.w = w
		w.Watch(pl.watch)
	}
	first := 0 // the row group's first sample in the chunk
	for gi := range gs {
		ch = &gs[gi]
		if err := d.decodeGroup(ch, sel, read, w, wo.Buffers, &col, pl, unread, first); err != nil {
			return err
		}
		first += int(ch.rows)
	}
	if err := w.Finish(); err != nil {
		var ge *format.GrowError
		if errors.As(err, &ge) {
			return err // not damage: the chunk needs more room
		}
		return d.damaged(ch, "", err)
	}
	return nil
}

// decodeGroup writes row group ch's rows, with the fields sel, to w,
// naming in col the column it is reading (for a panic's message), and
// gives back the buffers it took before it returns. A row whose sample
// (first, the row group's first sample in the chunk, and on) unread
// names is written unread, why as it says (DecodeUnread).
func (d *decoder) decodeGroup(ch *chunk, sel format.Selection, read *format.Read, w *format.Writer, bufs format.Buffers, col *string, pl *placement,
	unread map[int]string, first int) error {
	var ws []rowWriter
	var cleanup []func()
	defer func() {
		for _, f := range cleanup {
			f()
		}
	}()
	for i, f := range d.fields {
		if !sel.Has(i) {
			continue
		}
		*col = f.name
		fw, err := d.fieldWriter(ch, f, read, bufs, &cleanup, pl)
		if errors.Is(err, errWhole) {
			return err
		}
		if err != nil {
			return d.damaged(ch, f.name, err)
		}
		ws = append(ws, fw)
	}
	key := make([]byte, 0, d.ds.keyLen(ch))
	for r := range ch.rows {
		key = d.ds.key(key[:0], ch, r)
		if err := w.Begin(string(key)); err != nil {
			return d.damaged(ch, "", err)
		}
		any := false
		for _, fw := range ws {
			*col = fw.name()
			wrote, err := fw.row(w)
			if err != nil {
				return d.damaged(ch, *col, err)
			}
			any = any || wrote
		}
		*col = ""
		if why, ok := unread[first+int(r)]; ok {
			if err := format.WriteUnread(w, string(key), why); err != nil {
				return d.damaged(ch, "", err)
			}
			continue
		}
		if !any {
			if err := w.Add(nullExt, nil); err != nil {
				return d.damaged(ch, "", err)
			}
		}
	}
	return nil
}

// reader checks leaf l's pages and returns arrow-go's reader of them.
func (d *decoder) reader(ch *chunk, l int, read *format.Read) (file.ColumnChunkReader, error) {
	m := &ch.cols[l]
	b, err := read.Bytes(m.start, m.length)
	if err != nil {
		return nil, err
	}
	if err := checkPages(m, d.schema.leaves[l], b); err != nil {
		return nil, err
	}
	stream, err := d.props.GetStream(read, m.start, m.length)
	if err != nil {
		return nil, err
	}
	pr, err := file.NewPageReader(stream, m.numValues, compress.Compression(m.codec), d.mem, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", format.ErrUnsupported, err)
	}
	return file.NewColumnReader(d.cols[l], pr, d.mem, d.pool), nil
}

// valuesCol is a byte-array column that is not repeated, read a value a
// row: flatCol, or arrow-go's reader (bytesCol).
type valuesCol interface {
	next() ([]byte, bool, error)
}

// flat reports whether leaf l of chunk ch may be read by flatCol, from
// the footer: a byte array, not repeated, with no DELTA_BYTE_ARRAY pages
// (a writer's other encodings, which arrow-go reads, are not in the
// index).
func (d *decoder) flat(ch *chunk, l int) bool {
	n := d.schema.leaves[l]
	return n.rep == 0 && (n.el.phys == tyBytes || n.el.phys == tyInt32 || n.el.phys == tyInt64) && !ch.cols[l].front
}

// flatOf returns flatCol's reader of leaf l of chunk ch (released by
// cleanup), or nil where arrow-go is to read it.
func (d *decoder) flatOf(ch *chunk, l int, read *format.Read, bufs format.Buffers, cleanup *[]func(), pl *placement) (*flatCol, error) {
	streamed := pl != nil && pl.leaf[ch.at] == l && pl.leaf[ch.at] >= 0
	if !d.flat(ch, l) {
		if streamed {
			return nil, errWhole
		}
		return nil, nil
	}
	m, n := &ch.cols[l], d.schema.leaves[l]
	b, err := read.Bytes(m.start, m.length)
	if err != nil {
		return nil, err
	}
	if err := checkPages(m, n, b); err != nil {
		return nil, err
	}
	pages, ok := flatPages(b, m.codec)
	if streamed {
		// The pages DecodeStream streamed have no body in src: flatCol
		// reads their placed values, and arrow-go could not read them.
		if !ok {
			return nil, errWhole
		}
		for i := range pages {
			at := int64(cap(b)-cap(pages[i].body)) - int64(pages[i].h.len)
			pages[i].st = pl.pages[pageKey{ch.at, l, m.start + at}]
		}
	} else {
		pl = nil
	}
	if !ok {
		return nil, nil
	}
	size := map[int8]int{tyBytes: 0, tyInt32: 4, tyInt64: 8}[n.el.phys]
	fc, err := newFlatCol(pages, m.codec, n.def, size, m.numValues, bufs, pl)
	if err != nil {
		return nil, err
	}
	*cleanup = append(*cleanup, fc.release)
	return fc, nil
}

// valuesOf returns the reader of byte-array leaf l: flatCol where it
// reads the column chunk's pages (released by cleanup), else arrow-go's.
func (d *decoder) valuesOf(ch *chunk, l int, read *format.Read, bufs format.Buffers, cleanup *[]func(), pl *placement) (valuesCol, error) {
	if d.schema.leaves[l].el.phys == tyBytes {
		fc, err := d.flatOf(ch, l, read, bufs, cleanup, pl)
		if err != nil || fc != nil {
			return fc, err
		}
	}
	r, err := d.reader(ch, l, read)
	if err != nil {
		return nil, err
	}
	return newBytesCol(r, ch.cols[l].numValues)
}

func (d *decoder) fieldWriter(ch *chunk, f *field, read *format.Read, bufs format.Buffers, cleanup *[]func(), pl *placement) (rowWriter, error) {
	open := func(l int) (file.ColumnChunkReader, error) {
		if l < 0 {
			return nil, nil
		}
		return d.reader(ch, l, read)
	}
	switch f.kind {
	case kindTxt, kindImage:
		bc, err := d.valuesOf(ch, f.bytesLeaf, read, bufs, cleanup, pl)
		if err != nil {
			return nil, err
		}
		if f.kind == kindTxt {
			return &txtWriter{f: f, col: bc}, nil
		}
		iw := &imageWriter{f: f, bytes: bc}
		if f.pathLeaf >= 0 && !f.forced {
			if iw.path, err = d.valuesOf(ch, f.pathLeaf, read, bufs, cleanup, nil); err != nil {
				return nil, err
			}
		}
		return iw, nil
	case kindCls:
		if fc, err := d.flatOf(ch, f.leaves[0], read, bufs, cleanup, nil); err != nil || fc != nil {
			if err != nil {
				return nil, err
			}
			return &clsWriter{f: f, flat: fc}, nil
		}
		r, err := open(f.leaves[0])
		if err != nil {
			return nil, err
		}
		ic, err := newIntCol(r, ch.cols[f.leaves[0]].numValues)
		if err != nil {
			return nil, err
		}
		return &clsWriter{f: f, col: ic}, nil
	case kindNpy:
		r, err := open(f.leaves[0])
		if err != nil {
			return nil, err
		}
		ic, err := newIntCol(r, ch.cols[f.leaves[0]].numValues)
		if err != nil {
			return nil, err
		}
		listDef, nonEmpty := listLevels(f)
		nw := &npyWriter{f: f, col: ic, listDef: listDef, nonEmpty: nonEmpty, elemDef: int16(f.element.def)}
		nw.lo, nw.hi = valueRange(f)
		if t := d.ds.tokens; t != nil && !t.text && d.fields[t.field] == f {
			nw.counts = t.counts[ch.at]
		}
		return nw, nil
	case kindTokens:
		tt, err := d.textReader(ch, f, f.bytesLeaf, read, d.model)
		if err != nil {
			return nil, err
		}
		return &tokensWriter{f: f, t: tt, counts: d.ds.tokens.counts[ch.at]}, nil
	}
	jw := &jsonWriter{d: d, f: f, leaves: map[int]*leafData{}}
	for _, l := range f.leaves {
		r, err := open(l)
		if err != nil {
			return nil, err
		}
		ld, err := readLeaf(r, d.schema.leaves[l], ch.cols[l].numValues, ch.rows)
		if err != nil {
			return nil, err
		}
		jw.leaves[l] = ld
	}
	return jw, nil
}

// batch is how many levels a reader reads at a time.
const batch = 4096

// bytesCol reads a byte-array column that is not repeated, a value a row,
// in batches from one page at a time: a batch's values point into the
// page (or its dictionary), valid until the reader's next batch, by which
// time their rows are written.
type bytesCol struct {
	r         *file.ByteArrayColumnChunkReader
	maxDef    int16
	vals      []pq.ByteArray
	defs      []int16
	n, i, vi  int
	remaining int64
}

func newBytesCol(r file.ColumnChunkReader, numValues int64) (*bytesCol, error) {
	br, ok := r.(*file.ByteArrayColumnChunkReader)
	if !ok {
		return nil, fmt.Errorf("not a byte-array column")
	}
	return &bytesCol{r: br, maxDef: br.Descriptor().MaxDefinitionLevel(), vals: make([]pq.ByteArray, batch), defs: make([]int16, batch), remaining: numValues}, nil
}

func (b *bytesCol) next() ([]byte, bool, error) {
	if b.i == b.n {
		if b.remaining <= 0 {
			return nil, false, fmt.Errorf("fewer values than rows")
		}
		total, _, err := b.r.ReadBatchInPage(min(batch, b.remaining), b.vals, b.defs, nil)
		if err != nil {
			return nil, false, err
		}
		if total == 0 {
			if err := b.r.Err(); err != nil {
				return nil, false, err
			}
			return nil, false, fmt.Errorf("the pages end before the rows")
		}
		b.n, b.i, b.vi = int(total), 0, 0
		b.remaining -= total
	}
	i := b.i
	b.i++
	if b.maxDef == 0 || b.defs[i] == b.maxDef {
		v := b.vals[b.vi]
		b.vi++
		return v, true, nil
	}
	return nil, false, nil
}

type txtWriter struct {
	f   *field
	col valuesCol
}

func (t *txtWriter) name() string { return t.f.name }

func (t *txtWriter) row(w *format.Writer) (bool, error) {
	v, ok, err := t.col.next()
	if err != nil || !ok {
		return false, err
	}
	return true, w.Add(t.f.ext, v)
}

type imageWriter struct {
	f           *field
	bytes, path valuesCol
	ext         []byte

	// the row being written, for place
	w *format.Writer
	p []byte
}

func (im *imageWriter) name() string { return im.f.name }

func (im *imageWriter) row(w *format.Writer) (bool, error) {
	im.w, im.p = w, nil
	if im.path != nil {
		var err error
		if im.p, _, err = im.path.next(); err != nil {
			return false, err
		}
	}
	if fc, ok := im.bytes.(*flatCol); ok {
		// Decompressed straight into the member where the page allows.
		return fc.into(im)
	}
	v, ok, err := im.bytes.next()
	if err != nil || !ok {
		return false, err
	}
	dst, _, err := im.place(int64(len(v)), v)
	if err != nil {
		return false, err
	}
	copy(dst, v)
	return true, nil
}

// place is the image's member: named by its path's extension or, where
// that is not an image's, its magic bytes (head).
func (im *imageWriter) place(n int64, head []byte) ([]byte, bool, error) {
	ext := im.f.ext
	if !im.f.forced {
		im.ext = append(append(im.ext[:0], im.f.ext...), imageExt(im.p, head)...)
		ext = string(im.ext)
	}
	dst, err := im.w.Member(ext, n)
	return dst, !im.w.Counting(), err
}

// intCol reads an integer column in batches of levels.
type intCol struct {
	r          file.ColumnChunkReader
	maxDef     int16
	maxRep     int16
	defs, reps []int16
	vals       []int64
	i32        []int32
	n, i, vi   int
	remaining  int64
}

func newIntCol(r file.ColumnChunkReader, numValues int64) (*intCol, error) {
	c := &intCol{r: r, maxDef: r.Descriptor().MaxDefinitionLevel(), maxRep: r.Descriptor().MaxRepetitionLevel(),
		defs: make([]int16, batch), reps: make([]int16, batch), vals: make([]int64, batch), remaining: numValues}
	switch r.(type) {
	case *file.Int32ColumnChunkReader:
		c.i32 = make([]int32, batch)
	case *file.Int64ColumnChunkReader:
	default:
		return nil, fmt.Errorf("not an integer column")
	}
	return c, nil
}

// peek returns the next level's definition and repetition levels, reading
// a batch when the last is used up; ok is false at the column's end.
func (c *intCol) peek() (def, rep int16, ok bool, err error) {
	if c.i == c.n {
		if c.remaining <= 0 {
			return 0, 0, false, nil
		}
		var total int64
		var read int
		reps := c.reps
		if c.maxRep == 0 {
			reps = nil
		}
		switch r := c.r.(type) {
		case *file.Int32ColumnChunkReader:
			total, read, err = r.ReadBatch(min(batch, c.remaining), c.i32, c.defs, reps)
			for i := range read {
				c.vals[i] = int64(c.i32[i])
			}
		case *file.Int64ColumnChunkReader:
			total, _, err = r.ReadBatch(min(batch, c.remaining), c.vals, c.defs, reps)
		}
		if err != nil {
			return 0, 0, false, err
		}
		if total == 0 {
			if err := c.r.Err(); err != nil {
				return 0, 0, false, err
			}
			return 0, 0, false, fmt.Errorf("the pages end before the values the footer counts")
		}
		c.n, c.i, c.vi = int(total), 0, 0
		c.remaining -= total
	}
	if c.maxDef > 0 {
		def = c.defs[c.i]
	}
	if c.maxRep > 0 {
		rep = c.reps[c.i]
	}
	return def, rep, true, nil
}

// take consumes the level peek returned, and its value if it has one.
func (c *intCol) take(def int16) (int64, bool) {
	c.i++
	if def == c.maxDef {
		v := c.vals[c.vi]
		c.vi++
		return v, true
	}
	return 0, false
}

type clsWriter struct {
	f    *field
	col  *intCol
	flat *flatCol // instead of col, where it reads the pages
	buf  [24]byte
}

func (cw *clsWriter) name() string { return cw.f.name }

func (cw *clsWriter) row(w *format.Writer) (bool, error) {
	var v int64
	if cw.flat != nil {
		var ok bool
		var err error
		if v, ok, err = cw.flat.int(); err != nil || !ok {
			return false, err
		}
	} else {
		def, _, ok, err := cw.col.peek()
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("fewer values than rows")
		}
		if v, ok = cw.col.take(def); !ok {
			return false, nil
		}
	}
	var b []byte
	if cw.f.descr[1] == 'u' {
		u := uint64(v)
		if cw.f.size < 8 {
			u &= 1<<(8*cw.f.size) - 1
		}
		b = strconv.AppendUint(cw.buf[:0], u, 10)
	} else {
		b = strconv.AppendInt(cw.buf[:0], v, 10)
	}
	return true, w.Add(cw.f.ext, b)
}

// npyWriter writes each row's list as a 1-D .npy array; a null element
// is 0 (NumPy's integer arrays have no null).
type npyWriter struct {
	f                          *field
	col                        *intCol
	listDef, nonEmpty, elemDef int16
	row_                       []byte
	// lo and hi are the values the column's integer type holds where
	// its physical type holds more (an INT(16) stored as INT32): a value
	// outside them is damage, never truncated into another token.
	lo, hi int64
	// counts are a token dataset's rows' counts (nil otherwise): a row
	// of another length is damage.
	counts []uint32
	rows   int
}

func (nw *npyWriter) name() string { return nw.f.name }

func (nw *npyWriter) row(w *format.Writer) (bool, error) {
	def, _, ok, err := nw.col.peek()
	if err != nil {
		return false, err
	}
	if !ok {
		return false, fmt.Errorf("fewer lists than rows")
	}
	if def < nw.listDef {
		nw.col.take(def)
		if nw.counts != nil {
			if nw.rows >= len(nw.counts) || nw.counts[nw.rows] != 0 {
				return false, fmt.Errorf("%w: a null list where the index counted tokens", format.ErrDamaged)
			}
			nw.rows++
		}
		return false, nil
	}
	size := nw.f.size
	data := nw.row_[:0]
	var n int64
	if def < nw.nonEmpty {
		nw.col.take(def)
	} else {
		for first := true; ; first = false {
			def, rep, ok, err := nw.col.peek()
			if err != nil {
				return false, err
			}
			if !ok || (!first && rep == 0) {
				break
			}
			if first && rep != 0 {
				return false, fmt.Errorf("a row starts with repetition level %d", rep)
			}
			v, _ := nw.col.take(def)
			if v < nw.lo || v > nw.hi {
				return false, fmt.Errorf("%w: the value %d is outside the column's type %s", format.ErrDamaged, v, numpyName(nw.f.descr))
			}
			data = append(data, make([]byte, size)...)
			putInt(data[len(data)-size:], v, size)
			n++
		}
	}
	nw.row_ = data
	if nw.counts != nil {
		r := nw.rows
		nw.rows++
		if r >= len(nw.counts) || int64(nw.counts[r]) != n {
			return false, fmt.Errorf("%w: a list of %d tokens where the index counted another number", format.ErrDamaged, n)
		}
	}
	var hdr [npyHeaderMax]byte
	h, err := npy.AppendHeader(hdr[:0], nw.f.descr, []int64{n})
	if err != nil {
		return false, err
	}
	m, err := w.Member(nw.f.ext, int64(len(h)+len(data)))
	if err != nil {
		return false, err
	}
	copy(m[copy(m, h):], data)
	return true, nil
}
