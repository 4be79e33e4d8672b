package lance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/brandgw/brand/format"
)

// Format is Lance as a format served in place (format.Format): the
// latest version of a dataset, indexed from its manifest, its deletion
// files and its data files' metadata tails. A row that is not deleted is
// a sample, keyed by its row address (fragment id << 32 | offset) in
// decimal; each selected top-level column is a member named by the
// column (Options.Members may rename it), its bytes the value's bytes as
// Values gives them: binary as is, strings as UTF-8, fixed-width numbers
// little-endian (a bool one byte, 0 or 1). A null value is no member; a
// sample all of whose selected values are null has an empty ".null"
// member.
//
// A chunk is a range of rows of one fragment between page boundaries
// every column of its data file shares (the writer's input batches),
// batches joined until their pages reach Options.ChunkBytes; its extent
// is the selected columns' pages' buffers, read as they lie. Refused for
// now (format.ErrUnsupported, naming them): a fragment whose fields are
// in more than one data file or lack one, nested fields (packed structs
// included) and blob columns.
type Format struct{}

// Name is "lance".
func (Format) Name() string { return "lance" }

// Detect reports a listing holding a manifest under _versions/ and a
// data file under data/.
func (Format) Detect(objs []format.Object) bool {
	var man, data bool
	for _, o := range objs {
		switch {
		case strings.HasPrefix(o.Key, "_versions/") && strings.HasSuffix(o.Key, ".manifest"):
			man = true
		case strings.HasPrefix(o.Key, "data/") && strings.HasSuffix(o.Key, ".lance"):
			data = true
		}
	}
	return man && data
}

// nullExt names the empty member of a sample none of whose selected
// values is valid, as format/parquet names it.
const nullExt = "null"

const metaMagic = "brand-lance-1\n"

// meta is the description Index writes and Open reads (JSON:
// deterministic, a struct's fields in order).
type meta struct {
	Version uint64
	Fields  []metaField
	Files   []metaFile
	Chunks  []metaChunk
}

type metaField struct {
	Name, Ext, Type string
	// Width is a fixed-width value's bytes, 0 for variable values.
	Width int64
}

type metaFile struct {
	Key  string
	Size int64
	// Tail is the file's metadata: its last bytes from the column
	// metadata (or the schema, where it is first) on, parsed again by
	// Open.
	Tail []byte
}

type metaChunk struct {
	File     int
	Fragment uint64
	// Cols is each field's column in the file.
	Cols   []int
	Lo, Hi uint64
	// Deleted are the deleted rows' offsets in [Lo, Hi), ascending.
	Deleted []uint32 `json:",omitempty"`
	// Measured is, for each field whose values are stored as zstd per
	// value (their decoded lengths only in the data), the sum of its live
	// values' lengths each padded to a tar block, read once at index;
	// -1 for the others. Nil where no field is.
	Measured []int64 `json:",omitempty"`
}

// Index indexes the dataset's latest version.
func (Format) Index(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*format.Layout, error) {
	lim := opt.Limits.WithDefaults()
	if opt.Tokens != "" || opt.Text != "" {
		return nil, fmt.Errorf("%w: lance: token datasets (Options.Tokens, Options.Text) are not read yet", format.ErrUnsupported)
	}
	ds, err := Open(ctx, st, objs, 0, Options{})
	if err != nil {
		return nil, err
	}
	m := ds.Manifest
	var md meta
	md.Version = m.Version
	var ids []int32
	for _, f := range m.Fields {
		if f.ParentID != -1 {
			continue
		}
		if slices.ContainsFunc(m.Fields, func(g Field) bool { return g.ParentID == f.ID }) {
			return nil, fmt.Errorf("%w: lance: field %q is nested (%s), not indexed yet", format.ErrUnsupported, f.Name, f.LogicalType)
		}
		if isBlob(f) {
			return nil, fmt.Errorf("%w: lance: field %q is a blob column, not indexed yet", format.ErrUnsupported, f.Name)
		}
		ext := f.Name
		if e, ok := opt.Members[f.Name]; ok {
			ext = e
		}
		if !validExt(ext) {
			return nil, fmt.Errorf("%w: lance: column %q makes the member extension %q: name it with Options.Members (letters, digits, '_', '-' and inner dots, not %q)", format.ErrInvalid, f.Name, ext, nullExt)
		}
		md.Fields = append(md.Fields, metaField{Name: f.Name, Ext: ext, Type: f.LogicalType, Width: valueWidth(f.LogicalType)})
		ids = append(ids, f.ID)
	}
	if len(md.Fields) == 0 || len(md.Fields) > lim.Fields {
		return nil, fmt.Errorf("%w: lance: %d top-level fields (1 to %d are indexed)", format.ErrInvalid, len(md.Fields), lim.Fields)
	}
	for n := range opt.Members {
		if !slices.ContainsFunc(md.Fields, func(f metaField) bool { return f.Name == n }) {
			return nil, fmt.Errorf("%w: Options.Members names %q, which is no column of the dataset", format.ErrInvalid, n)
		}
	}
	exts := map[string]string{}
	for _, f := range md.Fields {
		if o, ok := exts[f.Ext]; ok {
			return nil, fmt.Errorf("%w: lance: columns %q and %q are both members %q", format.ErrInvalid, o, f.Name, f.Ext)
		}
		exts[f.Ext] = f.Name
	}
	target := opt.ChunkBytes
	if target <= 0 {
		target = format.DefaultChunkBytes
	}
	out := &format.Layout{}
	for fi := range m.Fragments {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fr := &m.Fragments[fi]
		df, cols, err := fragmentFile(fr, ids, md.Fields)
		if err != nil {
			return nil, err
		}
		key := "data/" + df.Path
		f, err := ds.File(ctx, *df)
		if err != nil {
			return nil, err
		}
		if f.Rows != fr.PhysicalRows {
			return nil, fmt.Errorf("%w: lance file %s: %d rows, its fragment %d", format.ErrInvalid, key, f.Rows, fr.PhysicalRows)
		}
		for _, c := range cols {
			if c >= len(f.Columns) {
				return nil, fmt.Errorf("%w: lance file %s: no column %d (of %d)", format.ErrInvalid, key, c, len(f.Columns))
			}
		}
		o := ds.objs[key]
		tail, err := fileTail(ctx, st, o, f)
		if err != nil {
			return nil, err
		}
		fileIx := len(md.Files)
		md.Files = append(md.Files, metaFile{Key: key, Size: o.Size, Tail: tail})
		var dels []uint32
		if fr.Deletion != nil {
			dk := fr.Deletion.Path(fr.ID)
			do, err := ds.object(dk, 0)
			if err != nil {
				return nil, err
			}
			if dels, err = ReadDeletions(ctx, st, fr, dk, do.ETag, do.Size, DefaultMemoryLimit); err != nil {
				return nil, err
			}
		}
		for _, rg := range cutRows(f, cols, target) {
			mc := metaChunk{File: fileIx, Fragment: fr.ID, Cols: cols, Lo: rg[0], Hi: rg[1]}
			for len(dels) > 0 && uint64(dels[0]) < rg[1] {
				mc.Deleted = append(mc.Deleted, dels[0])
				dels = dels[1:]
			}
			n := int(rg[1]-rg[0]) - len(mc.Deleted)
			if n == 0 {
				continue
			}
			if n > lim.ChunkSamples {
				return nil, fmt.Errorf("%w: lance file %s: rows %d to %d, %d samples in one chunk, over the %d allowed", format.ErrInvalid, key, rg[0], rg[1], n, lim.ChunkSamples)
			}
			if mc.Measured, err = measure(f, cols, md.Fields, mc, func(off, n uint64) ([]byte, error) {
				b := make([]byte, n)
				if err := st.ReadRange(ctx, key, o.ETag, int64(off), b); err != nil {
					return nil, fmt.Errorf("lance file %s: %w", key, err)
				}
				return b, nil
			}); err != nil {
				return nil, err
			}
			md.Chunks = append(md.Chunks, mc)
			del := mc.Deleted
			for r := rg[0]; r < rg[1]; r++ {
				if len(del) > 0 && uint64(del[0]) == r {
					del = del[1:]
					continue
				}
				out.Keys = append(out.Keys, strconv.FormatUint(fr.ID<<32|r, 10))
			}
			out.Chunks = append(out.Chunks, format.Chunk{Object: key, ETag: o.ETag, Size: o.Size, Samples: n, Name: fmt.Sprintf("rows-%d-%d", rg[0], rg[1])})
		}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	out.Meta = append([]byte(metaMagic), b...)
	dec, err := Format{}.Open(out.Meta)
	if err != nil {
		return nil, err
	}
	for c := range out.Chunks {
		if _, res := dec.Extent(c, nil); res > lim.ChunkBytes {
			return nil, fmt.Errorf("%w: lance chunk %s#%s: a resident bound of %d bytes, over the %d a chunk may have", format.ErrInvalid, out.Chunks[c].Object, out.Chunks[c].Name, res, lim.ChunkBytes)
		}
	}
	return out, nil
}

// measure reads, for each variable field of the chunk mc whose pages
// hold values as zstd per value, the chunk's rows once (as the issue's
// "read each such page once at index"): what its resident bound needs,
// the live values' lengths each padded to a tar block. Nil where no
// field is such.
func measure(f *File, cols []int, fs []metaField, mc metaChunk, read RangeReader) ([]int64, error) {
	var out []int64
	for i, fd := range fs {
		if fd.Width > 0 || !zstdPerValue(f, cols[i], mc.Lo, mc.Hi) {
			continue
		}
		if out == nil {
			out = slices.Repeat([]int64{-1}, len(fs))
		}
		vals, err := f.ReadRows(cols[i], mc.Lo, mc.Hi, read, DefaultMemoryLimit)
		if err != nil {
			return nil, fmt.Errorf("lance file %s, column %q, rows %d to %d: %w", f.Name, fd.Name, mc.Lo, mc.Hi, err)
		}
		var n int64
		del := mc.Deleted
		for r := mc.Lo; r < mc.Hi; r++ {
			if len(del) > 0 && uint64(del[0]) == r {
				del = del[1:]
				continue
			}
			if v, ok := vals.Value(int(r - mc.Lo)); ok {
				n += (int64(len(v)) + format.Block - 1) / format.Block * format.Block
			}
		}
		out[i] = n
	}
	return out, nil
}

// zstdPerValue reports whether a page of column c holding rows [lo, hi)
// stores its values as zstd per value (a full-zip page of general
// compression).
func zstdPerValue(f *File, c int, lo, hi uint64) bool {
	var at uint64
	for _, p := range f.Columns[c].Pages {
		end := at + p.Rows
		if end > lo && at < hi {
			if z := p.Layout.FullZip; z != nil && z.Values != nil && z.Values.Kind == "general" {
				return true
			}
		}
		at = end
	}
	return false
}

func isBlob(f Field) bool {
	return strings.EqualFold(f.Metadata["lance-encoding:blob"], "true")
}

// valueWidth is the bytes of a value of Lance's logical type typ where
// every value has the same (a bool's one byte, a fixed-size list's
// items), or 0.
func valueWidth(typ string) int64 {
	if typ == "bool" {
		return 1
	}
	if b := fixedBits(typ); b != 0 {
		return int64(b / 8)
	}
	if rest, ok := strings.CutPrefix(typ, "fixed_size_list:"); ok {
		i := strings.LastIndexByte(rest, ':')
		n, err := strconv.ParseInt(rest[i+1:], 10, 64)
		if i < 0 || err != nil || n <= 0 || n > 1<<20 {
			return 0
		}
		if w := fixedBits(rest[:i]); w != 0 {
			return n * int64(w/8)
		}
	}
	if rest, ok := strings.CutPrefix(typ, "fixed_size_binary:"); ok {
		if n, err := strconv.ParseInt(rest, 10, 64); err == nil && n > 0 && n <= 1<<20 {
			return n
		}
	}
	return 0
}

// fragmentFile is the one data file of fr holding every field of ids,
// and each one's column in it.
func fragmentFile(fr *Fragment, ids []int32, fs []metaField) (*DataFile, []int, error) {
	var df *DataFile
	cols := make([]int, len(ids))
	for i, id := range ids {
		found := false
		for k := range fr.Files {
			j := slices.Index(fr.Files[k].Fields, id)
			if j < 0 {
				continue
			}
			if df != nil && df != &fr.Files[k] {
				return nil, nil, fmt.Errorf("%w: lance fragment %d: its columns are in more than one data file (%s, %s), not indexed yet", format.ErrUnsupported, fr.ID, df.Path, fr.Files[k].Path)
			}
			df = &fr.Files[k]
			if j >= len(df.ColumnIndices) || df.ColumnIndices[j] < 0 {
				return nil, nil, fmt.Errorf("%w: lance: %s holds field %q in no column of its own", format.ErrUnsupported, df.Path, fs[i].Name)
			}
			cols[i] = int(df.ColumnIndices[j])
			found = true
		}
		if !found {
			return nil, nil, fmt.Errorf("%w: lance fragment %d has no data file holding field %q (a column added since), not indexed yet", format.ErrUnsupported, fr.ID, fs[i].Name)
		}
	}
	return df, cols, nil
}

// fileTail reads f's metadata again, exactly its bytes: the footer says
// where the column metadata starts, and the schema may lie before it.
func fileTail(ctx context.Context, st format.Store, o format.Object, f *File) ([]byte, error) {
	ft := make([]byte, footerLen)
	if err := st.ReadRange(ctx, o.Key, o.ETag, o.Size-footerLen, ft); err != nil {
		return nil, fmt.Errorf("lance file %s: %w", o.Key, err)
	}
	start := min(binary.LittleEndian.Uint64(ft), f.GlobalBuffers[0].Off)
	if start > uint64(o.Size) || uint64(o.Size)-start > MaxMetadataBytes {
		return nil, fmt.Errorf("%w: lance file %s: metadata from %d of %d bytes", format.ErrInvalid, o.Key, start, o.Size)
	}
	tail := make([]byte, uint64(o.Size)-start)
	if err := st.ReadRange(ctx, o.Key, o.ETag, int64(start), tail); err != nil {
		return nil, fmt.Errorf("lance file %s: %w", o.Key, err)
	}
	return tail, nil
}

// cutRows cuts f's rows into ranges whose ends are page ends of every
// column of cols, each range of batches joined until its pages' bytes
// reach target.
func cutRows(f *File, cols []int, target int64) [][2]uint64 {
	// ends[r] counts the columns with a page ending at row r.
	ends := map[uint64]int{}
	for _, c := range cols {
		var at uint64
		for _, p := range f.Columns[c].Pages {
			at += p.Rows
			ends[at]++
		}
	}
	var cuts []uint64
	for r, n := range ends {
		if n == len(cols) && r > 0 && r < f.Rows {
			cuts = append(cuts, r)
		}
	}
	slices.Sort(cuts)
	cuts = append(cuts, f.Rows)
	var out [][2]uint64
	var lo uint64
	var acc int64
	prev := uint64(0)
	for _, r := range cuts {
		acc += pageBytes(f, cols, prev, r)
		prev = r
		if acc >= target || r == f.Rows {
			if r > lo {
				out = append(out, [2]uint64{lo, r})
			}
			lo, acc = r, 0
		}
	}
	return out
}

// pageBytes is the bytes of the pages of cols holding rows [lo, hi).
func pageBytes(f *File, cols []int, lo, hi uint64) (n int64) {
	for _, c := range cols {
		for _, r := range pageRanges(f, c, lo, hi) {
			n += r.Len
		}
	}
	return n
}

// pageRanges are the buffers of column c's pages holding rows [lo, hi),
// and the column's own buffers.
func pageRanges(f *File, c int, lo, hi uint64) []format.Range {
	var rs []format.Range
	for _, b := range f.Columns[c].Buffers {
		rs = append(rs, format.Range{Off: int64(b.Off), Len: int64(b.Len)})
	}
	var at uint64
	for _, p := range f.Columns[c].Pages {
		end := at + p.Rows
		if end > lo && at < hi {
			for _, b := range p.Buffers {
				rs = append(rs, format.Range{Off: int64(b.Off), Len: int64(b.Len)})
			}
		}
		at = end
	}
	return rs
}

func validExt(e string) bool {
	if e == "" || e[0] == '.' || e[len(e)-1] == '.' || len(e) > 64 || e == nullExt {
		return false
	}
	for _, c := range e {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Open returns the decoder of a dataset Index described.
func (Format) Open(b []byte) (format.Decoder, error) {
	rest, ok := strings.CutPrefix(string(b), metaMagic)
	if !ok {
		return nil, fmt.Errorf("%w: lance: not a Lance dataset's description", format.ErrInvalid)
	}
	d := &datasetDecoder{}
	if err := json.Unmarshal([]byte(rest), &d.m); err != nil {
		return nil, fmt.Errorf("%w: lance: description: %v", format.ErrInvalid, err)
	}
	for _, mf := range d.m.Files {
		f, need, err := ParseFile(mf.Key, mf.Size, mf.Tail)
		if err != nil {
			return nil, err
		}
		if f == nil {
			return nil, fmt.Errorf("%w: lance file %s: description holds %d bytes of metadata, %d needed", format.ErrInvalid, mf.Key, len(mf.Tail), need)
		}
		d.files = append(d.files, f)
	}
	for _, c := range d.m.Chunks {
		if c.File < 0 || c.File >= len(d.files) || len(c.Cols) != len(d.m.Fields) || (c.Measured != nil && len(c.Measured) != len(d.m.Fields)) || c.Lo > c.Hi || c.Hi > d.files[c.File].Rows {
			return nil, fmt.Errorf("%w: lance: description's chunk of rows %d to %d out of its file", format.ErrInvalid, c.Lo, c.Hi)
		}
		for _, col := range c.Cols {
			if col < 0 || col >= len(d.files[c.File].Columns) {
				return nil, fmt.Errorf("%w: lance: description names column %d of %s", format.ErrInvalid, col, d.m.Files[c.File].Key)
			}
		}
	}
	for _, f := range d.m.Fields {
		d.fields = append(d.fields, format.Field{Name: f.Name, Ext: f.Ext, Type: f.Type})
	}
	return d, nil
}

// datasetDecoder decodes the chunks of one indexed Lance dataset.
type datasetDecoder struct {
	m      meta
	files  []*File
	fields []format.Field
}

func (d *datasetDecoder) Fields() []format.Field { return d.fields }

func (d *datasetDecoder) key(c *metaChunk, r uint64) string {
	return strconv.FormatUint(c.Fragment<<32|r, 10)
}

// Extent is the selected columns' pages holding the chunk's rows, and a
// bound: fixed-width values exactly, values stored as zstd per value by
// what index measured, other variable ones by their pages' bytes (a
// guess where a page compresses them, WriterOptions.MayGrow).
func (d *datasetDecoder) Extent(ci int, sel format.Selection) ([]format.Range, int64) {
	c := &d.m.Chunks[ci]
	f := d.files[c.File]
	var rs []format.Range
	samples := int64(c.Hi-c.Lo) - int64(len(c.Deleted))
	// The longest key, and the empty .null member each sample may have.
	keyLen := len(d.key(c, c.Hi-1))
	res := format.Overhead(int(samples)) + samples*format.MemberLen(keyLen+1+len(nullExt), 0)
	for i, fd := range d.m.Fields {
		if !sel.Has(i) {
			continue
		}
		prs := pageRanges(f, c.Cols[i], c.Lo, c.Hi)
		rs = append(rs, prs...)
		if fd.Width > 0 {
			res += samples * format.MemberLen(keyLen+1+len(fd.Ext), fd.Width)
			continue
		}
		if c.Measured != nil && c.Measured[i] >= 0 {
			res += samples*format.MemberLen(keyLen+1+len(fd.Ext), 0) + c.Measured[i]
			continue
		}
		res += samples*format.MemberLen(keyLen+1+len(fd.Ext), format.Block-1) + format.Concat(prs)
	}
	return format.Merge(rs), res
}

// guessed reports whether chunk c's bound guesses a selected field.
func (d *datasetDecoder) guessed(c int, sel format.Selection) bool {
	m := d.m.Chunks[c].Measured
	for i, fd := range d.m.Fields {
		if sel.Has(i) && fd.Width == 0 && (m == nil || m[i] < 0) {
			return true
		}
	}
	return false
}

// Working bounds what Decode allocates beside src and dst
// (format.Working): each selected column's values of the chunk's rows
// decoded, at most what the resident bound allows them, and each value's
// offset and null flag.
func (d *datasetDecoder) Working(ci int, sel format.Selection) int64 {
	c := &d.m.Chunks[ci]
	_, res := d.Extent(ci, sel)
	var n int64
	for i := range d.m.Fields {
		if sel.Has(i) {
			n++
		}
	}
	return res + n*int64(c.Hi-c.Lo)*valueOverhead
}

// Decode reads the chunk's rows of each selected column from src (the
// extent's bytes) and writes its samples.
func (d *datasetDecoder) Decode(ci int, sel format.Selection, src, dst []byte, w format.WriterOptions) error {
	c := &d.m.Chunks[ci]
	f := d.files[c.File]
	name := fmt.Sprintf("%s#rows-%d-%d", d.m.Files[c.File].Key, c.Lo, c.Hi)
	rs, _ := d.Extent(ci, sel)
	if format.Concat(rs) != int64(len(src)) {
		return fmt.Errorf("lance chunk %s: %d bytes read, its extent is %d", name, len(src), format.Concat(rs))
	}
	read := func(off, n uint64) ([]byte, error) {
		at := int64(0)
		for _, r := range rs {
			if int64(off) >= r.Off && int64(off+n) <= r.End() {
				s := at + int64(off) - r.Off
				return src[s : s+int64(n)], nil
			}
			at += r.Len
		}
		return nil, fmt.Errorf("%w: lance chunk %s: %d bytes at %d outside its extent", format.ErrDamaged, name, n, off)
	}
	vals := make([]*Values, len(d.m.Fields))
	for i := range d.m.Fields {
		if !sel.Has(i) {
			continue
		}
		v, err := f.ReadRows(c.Cols[i], c.Lo, c.Hi, read, int64(len(src))+int64(len(dst))+DefaultMemoryLimit)
		if err != nil {
			return fmt.Errorf("%w: lance chunk %s, column %q: %v", format.ErrDamaged, name, d.m.Fields[i].Name, err)
		}
		if v.Len() != int(c.Hi-c.Lo) {
			return fmt.Errorf("%w: lance chunk %s, column %q: %d values of %d rows", format.ErrDamaged, name, d.m.Fields[i].Name, v.Len(), c.Hi-c.Lo)
		}
		vals[i] = v
	}
	w.MayGrow = w.MayGrow || d.guessed(ci, sel)
	wr, err := format.NewWriter(dst, int(c.Hi-c.Lo)-len(c.Deleted), w)
	if err != nil {
		return fmt.Errorf("lance chunk %s: %w", name, err)
	}
	del := c.Deleted
	for r := c.Lo; r < c.Hi; r++ {
		if len(del) > 0 && uint64(del[0]) == r {
			del = del[1:]
			continue
		}
		if err := wr.Begin(d.key(c, r)); err != nil {
			return fmt.Errorf("lance chunk %s: %w", name, err)
		}
		some := false
		for i, fd := range d.m.Fields {
			if vals[i] == nil {
				continue
			}
			if v, ok := vals[i].Value(int(r - c.Lo)); ok {
				if err := wr.Add(fd.Ext, v); err != nil {
					return fmt.Errorf("lance chunk %s, row %d: %w", name, r, err)
				}
				some = true
			}
		}
		if !some {
			if err := wr.Add(nullExt, nil); err != nil {
				return fmt.Errorf("lance chunk %s, row %d: %w", name, r, err)
			}
		}
	}
	if err := wr.Finish(); err != nil {
		return fmt.Errorf("lance chunk %s: %w", name, err)
	}
	return nil
}
