package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/format"
)

// tailRead is the optimistic read of the first file's tail: most footers
// fit, so most files cost one range read.
const tailRead = 64 << 10

// minTail is the least a tail read after the first file's reads.
const minTail = 4 << 10

// tailFor is the tail read of a dataset's files after its first, whose
// footer (with its length and magic) was last bytes long: twice that,
// rounded up to 4 KiB, at most tailRead. The files of a dataset share a
// schema, so their footers differ by little more than their row groups'
// count; a file whose footer is longer takes one read more (indexFile).
// Reading 64 KiB of every file made the tail 37 % of the bytes of a
// dataset of 173 KiB files; the footers of the Hub's layout are 1–3 KiB.
func tailFor(last int64) int64 {
	n := (2*last + minTail - 1) / minTail * minTail
	return min(max(n, minTail), tailRead)
}

// Format is Parquet, as a format.Format.
type Format struct{}

func (Format) Name() string { return "parquet" }

// Detect reports whether the listing holds Parquet files: objects whose
// keys end ".parquet" (whose magic Index checks).
func (Format) Detect(objs []format.Object) bool {
	return slices.ContainsFunc(objs, func(o format.Object) bool { return strings.HasSuffix(o.Key, ".parquet") })
}

// indexed is one file as its footer describes it.
type indexed struct {
	obj    format.Object
	f      *footer
	schema *schema
	groups []chunk // file and first row set; cols as colMeta
	last   int64   // the bytes of the footer, its length and its magic
}

// Index reads every .parquet object's footer (and, where a byte-array
// column's bound needs it, its dictionary page: package doc, "Bounds")
// and describes the dataset: a chunk per row group with rows, a sample
// per row.
func (Format) Index(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*format.Layout, error) {
	files := parquetFiles(objs)
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no .parquet objects", format.ErrInvalid)
	}
	_, lay, err := index(ctx, st, files, opt, nil)
	return lay, err
}

// parquetFiles are the .parquet objects of a listing.
func parquetFiles(objs []format.Object) []format.Object {
	var files []format.Object
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".parquet") {
			files = append(files, o)
		}
	}
	return files
}

// index describes files (at least one), their chunks and keys. With like
// set (an append), the files' schema must be like's and their fields
// take like's member extensions.
func index(ctx context.Context, st format.Store, files []format.Object, opt format.Options, like *dataset) (*decoder, *format.Layout, error) {
	lim := opt.Limits.WithDefaults()
	par := opt.Parallel
	if par <= 0 {
		par = 16
	}
	out := make([]*indexed, len(files))
	// The first file alone, with the optimistic read; the others in
	// parallel, with a read its footer sizes. The bytes a file costs are
	// the same whatever order the reads end in.
	first, err := indexFile(ctx, st, files[0], lim, tailRead)
	if err != nil {
		return nil, nil, err
	}
	out[0] = first
	tail := tailFor(first.last)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for i := 1; i < len(files); i++ {
		o := files[i]
		g.Go(func() error {
			x, err := indexFile(gctx, st, o, lim, tail)
			if err != nil {
				return err
			}
			out[i] = x
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	// One schema for the dataset.
	ref := out[0]
	if like != nil {
		for _, x := range out {
			if d := schemaDiff(like.elems, x.f.schema); d != "" {
				return nil, nil, fmt.Errorf("%w: %s does not have the dataset's schema: %s", format.ErrInvalid, x.obj.Key, d)
			}
		}
	}
	for _, x := range out[1:] {
		if d := schemaDiff(ref.f.schema, x.f.schema); d != "" {
			return nil, nil, fmt.Errorf("%w: %s and %s have different schemas: %s", format.ErrInvalid, ref.obj.Key, x.obj.Key, d)
		}
	}
	ds := &dataset{elems: ref.f.schema}
	if like != nil {
		ds.exts = like.exts
	} else {
		fields := make([]*field, len(ref.schema.root.children))
		for i, c := range ref.schema.root.children {
			fields[i] = classify(c)
		}
		if err := assignExts(fields, opt.Members); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", format.ErrInvalid, err)
		}
		for _, f := range fields {
			ds.exts = append(ds.exts, fieldExt{ext: f.ext, forced: f.forced})
		}
	}
	lay := &format.Layout{}
	for fi, x := range out {
		var rows int64
		for _, g := range x.f.groups {
			rows += g.rows
		}
		ds.files = append(ds.files, fileMeta{prefix: strings.TrimSuffix(x.obj.Key, ".parquet"), rows: rows, width: len(strconv.FormatInt(rows, 10))})
		for _, c := range x.groups {
			c.file = fi
			ds.chunks = append(ds.chunks, c)
		}
	}
	d, err := newDecoder(ds)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", format.ErrInvalid, err)
	}
	if err := d.checkBounds(lim); err != nil {
		return nil, nil, err
	}
	if opt.Tokens != "" || opt.Text != "" {
		// A token dataset: the one time indexing reads data.
		objs := make([]format.Object, len(out))
		for i, x := range out {
			objs[i] = x.obj
		}
		if d, err = indexTokens(ctx, st, ds, d, objs, opt, lim, par); err != nil {
			return nil, nil, err
		}
		if err := d.checkBounds(lim); err != nil {
			return nil, nil, err
		}
	}
	target := opt.ChunkBytes
	if target <= 0 {
		target = DefaultChunkBytes
	}
	if err := d.ds.setSpans(d.cut(target, lim)); err != nil {
		return nil, nil, err
	}
	lay.Chunks = d.layoutChunks(out)
	var key []byte
	for i := range ds.chunks {
		c := &ds.chunks[i]
		for r := range c.rows {
			key = d.ds.key(key[:0], c, r)
			lay.Keys = append(lay.Keys, string(key))
		}
	}
	lay.Meta = encodeMeta(ds)
	return d, lay, nil
}

func (Format) Open(meta []byte) (format.Decoder, error) {
	ds, err := decodeMeta(meta)
	if err != nil {
		return nil, err
	}
	d, err := newDecoder(ds)
	if err != nil || ds.tokens == nil {
		return d, err
	}
	return tokenDecoder{d}, nil
}

// layoutChunks is the layout's chunks: a chunk of several row groups is
// named by the first and last of them (their ordinals in the file,
// "3-4"), so that its key (dataset.BuildInPlace) names other bytes than a
// chunk of other row groups of the file in another index of it; a chunk
// of one row group is named by its ordinal, as every chunk was when a
// chunk was a row group.
func (d *decoder) layoutChunks(files []*indexed) []format.Chunk {
	out := make([]format.Chunk, d.ds.numChunks())
	firstOf := make([]int, len(files)) // a file's first row group in ds.chunks
	for i := len(d.ds.chunks) - 1; i >= 0; i-- {
		firstOf[d.ds.chunks[i].file] = i
	}
	for c := range out {
		gs := d.ds.span(c)
		x := files[gs[0].file].obj
		var rows int64
		for _, g := range gs {
			rows += g.rows
		}
		out[c] = format.Chunk{Object: x.Key, ETag: x.ETag, Size: x.Size, Samples: int(rows)}
		if d.ds.ends != nil {
			lo, hi := gs[0].at-firstOf[gs[0].file], gs[len(gs)-1].at-firstOf[gs[0].file]
			out[c].Name = strconv.Itoa(lo)
			if hi > lo {
				out[c].Name += "-" + strconv.Itoa(hi)
			}
		}
	}
	return out
}

// checkBounds refuses a row group that cannot be a chunk with every field
// read.
func (d *decoder) checkBounds(lim format.Limits) error {
	for i := range d.ds.chunks {
		c := &d.ds.chunks[i]
		if b := d.bound(c, nil); b > lim.ChunkBytes {
			worst, wb := "", int64(0)
			for _, f := range d.fields {
				if fb := d.fieldBound(c, f); fb > wb {
					worst, wb = f.name, fb
				}
			}
			return fmt.Errorf("%w: %s: the row group of rows %d–%d would take %d bytes resident (column %q alone %d), more than the %d a chunk may (Limits.ChunkBytes)",
				format.ErrInvalid, d.object(c), c.first, c.first+c.rows-1, b, worst, wb, lim.ChunkBytes)
		}
	}
	return nil
}

// invalid names the object in an index-time refusal.
func invalid(o format.Object, err error) error {
	if errors.Is(err, errUnsupported) {
		return fmt.Errorf("%w: %s: %v", format.ErrUnsupported, o.Key, err)
	}
	return fmt.Errorf("%w: %s: %v", format.ErrInvalid, o.Key, err)
}

// indexFile reads one file's footer, with an optimistic read of its last
// guess bytes and, for a footer longer than that, one more read of the
// rest.
func indexFile(ctx context.Context, st format.Store, o format.Object, lim format.Limits, guess int64) (*indexed, error) {
	if o.Size < 12 {
		return nil, invalid(o, fmt.Errorf("%d bytes cannot hold a Parquet file", o.Size))
	}
	n := min(o.Size, max(guess, 12))
	tail := make([]byte, n)
	if err := st.ReadRange(ctx, o.Key, o.ETag, o.Size-n, tail); err != nil {
		return nil, fmt.Errorf("parquet: reading %s: %w", o.Key, err)
	}
	switch string(tail[n-4:]) {
	case "PAR1":
	case "PARE":
		return nil, invalid(o, fmt.Errorf("%w: its footer is encrypted", errUnsupported))
	default:
		return nil, invalid(o, fmt.Errorf("not a Parquet file: it does not end with the magic PAR1"))
	}
	if n == o.Size && string(tail[:4]) != "PAR1" {
		return nil, invalid(o, fmt.Errorf("not a Parquet file: it does not start with the magic PAR1"))
	}
	flen := int64(binary.LittleEndian.Uint32(tail[n-8:]))
	if 4+flen+8 > o.Size {
		return nil, invalid(o, fmt.Errorf("its footer length %d is larger than the file of %d bytes", flen, o.Size))
	}
	if flen > lim.MetaBytes {
		return nil, invalid(o, fmt.Errorf("its footer of %d bytes is larger than the %d allowed (Limits.MetaBytes)", flen, lim.MetaBytes))
	}
	var fb []byte
	if flen+8 <= n {
		fb = tail[n-8-flen : n-8]
	} else {
		fb = make([]byte, flen)
		rest := flen + 8 - n
		if err := st.ReadRange(ctx, o.Key, o.ETag, o.Size-8-flen, fb[:rest]); err != nil {
			return nil, fmt.Errorf("parquet: reading %s: %w", o.Key, err)
		}
		copy(fb[rest:], tail[:n-8])
	}
	f, err := parseFooter(fb, footerLimits{elements: 4 * lim.Fields, leaves: lim.Fields})
	if err != nil {
		return nil, invalid(o, fmt.Errorf("its footer: %w", err))
	}
	s, err := buildSchema(f.schema, lim.Depth, lim.Fields, lim.Fields)
	if err != nil {
		return nil, invalid(o, err)
	}
	x := &indexed{obj: o, f: f, schema: s, last: flen + 8}
	footerAt := o.Size - 8 - flen
	type span struct {
		r        format.Range
		rg, leaf int
	}
	var spans []span
	var first int64
	leafHashes := make([]uint64, len(s.leaves))
	for i, l := range s.leaves {
		leafHashes[i] = pathHash(bytesOf(l.path()))
	}
	for gi, g := range f.groups {
		where := fmt.Sprintf("row group %d", gi)
		if g.rows < 0 || g.rows > int64(lim.ChunkSamples) {
			return nil, invalid(o, fmt.Errorf("%s has %d rows; a chunk may hold %d (Limits.ChunkSamples)", where, g.rows, lim.ChunkSamples))
		}
		if len(g.cols) != len(s.leaves) {
			return nil, invalid(o, fmt.Errorf("%s has %d column chunks, the schema %d columns", where, len(g.cols), len(s.leaves)))
		}
		c := chunk{first: first, rows: g.rows, cols: make([]colMeta, len(g.cols))}
		for li, cm := range g.cols {
			l := s.leaves[li]
			col := fmt.Sprintf("%s, column %q", where, strings.Join(l.path(), "."))
			switch {
			case cm.pathHash != leafHashes[li]:
				return nil, invalid(o, fmt.Errorf("%s: its column chunk names another column", col))
			case cm.phys != l.el.phys:
				return nil, invalid(o, fmt.Errorf("%s: its column chunk has physical type %d, the schema %d", col, cm.phys, l.el.phys))
			case int(cm.codec) == codecLZO || int(cm.codec) > codecLZ4Raw:
				return nil, invalid(o, fmt.Errorf("%w: %s is compressed with %s", errUnsupported, col, codecName(int(cm.codec))))
			case cm.numValues < 0 || (l.rep == 0 && cm.numValues != g.rows) || (l.rep > 0 && cm.numValues < g.rows):
				return nil, invalid(o, fmt.Errorf("%s: %d values in a row group of %d rows", col, cm.numValues, g.rows))
			case cm.comp <= 0 || cm.unc < 0:
				return nil, invalid(o, fmt.Errorf("%s: sizes %d (compressed) and %d", col, cm.comp, cm.unc))
			case cm.start() < 4 || cm.comp > footerAt-cm.start():
				return nil, invalid(o, fmt.Errorf("%s: its bytes %d+%d are not between the file's magic and its footer at %d", col, cm.start(), cm.comp, footerAt))
			case cm.dictOff > 0 && cm.dictOff != cm.start() && cm.dictOff < footerAt:
				return nil, invalid(o, fmt.Errorf("%s: its dictionary at %d is after its data at %d", col, cm.dictOff, cm.dataOff))
			}
			m := colMeta{start: cm.start(), length: cm.comp, codec: cm.codec, numValues: cm.numValues, unc: cm.unc,
				dict: cm.hasDict(), front: cm.encodings&(1<<encDeltaByteArray) != 0}
			if l.el.phys == tyBytes {
				byteBounds(&cm, &m)
			}
			c.cols[li] = m
			spans = append(spans, span{format.Range{Off: m.start, Len: m.length}, gi, li})
		}
		first += g.rows
		if g.rows > 0 {
			x.groups = append(x.groups, c)
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return int(min(max(a.r.Off-b.r.Off, -1), 1)) })
	for i := 1; i < len(spans); i++ {
		if a, b := spans[i-1], spans[i]; b.r.Off < a.r.End() {
			return nil, invalid(o, fmt.Errorf("the column chunks of row group %d, column %q and row group %d, column %q overlap (%d+%d and %d+%d)",
				a.rg, strings.Join(s.leaves[a.leaf].path(), "."), b.rg, strings.Join(s.leaves[b.leaf].path(), "."), a.r.Off, a.r.Len, b.r.Off, b.r.Len))
		}
	}
	return x, nil
}

func bytesOf(p []string) [][]byte {
	b := make([][]byte, len(p))
	for i, s := range p {
		b[i] = []byte(s)
	}
	return b
}

// byteBounds sets a byte-array column chunk's bound (package doc,
// "Bounds") from the footer alone: its uncompressed pages when its values
// are each read once from them; the writer's size statistics where a
// dictionary or front coding could repeat them; else the uncompressed
// pages again, as a guess that a chunk repeating long values outgrows
// when decoded, and then learns its size (colMeta.guess).
func byteBounds(cm *chunkMeta, m *colMeta) {
	switch {
	case !m.dict && !m.front:
		m.bytesSum, m.bytesMax = m.unc, m.unc
	case cm.hasSize:
		m.bytesSum, m.bytesMax = cm.sizeStat, cm.sizeStat
	default:
		m.bytesSum, m.bytesMax, m.guess = m.unc, m.unc, true
	}
}

// schemaDiff says how two schemas differ, or "" when they do not.
func schemaDiff(a, b []element) string {
	if slices.Equal(a, b) {
		return ""
	}
	sa, errA := buildSchema(a, len(a)+1, len(a), len(a))
	sb, errB := buildSchema(b, len(b)+1, len(b), len(b))
	if errA != nil || errB != nil {
		return "their structure differs"
	}
	cols := func(s *schema) map[string]string {
		m := map[string]string{}
		for _, l := range s.leaves {
			m[strings.Join(l.path(), ".")] = typeName(l) + []string{"", " (optional)", " (repeated)"}[l.el.rep]
		}
		return m
	}
	ca, cb := cols(sa), cols(sb)
	for _, l := range sa.leaves {
		p := strings.Join(l.path(), ".")
		if t, ok := cb[p]; !ok {
			return fmt.Sprintf("column %q is only in the first", p)
		} else if t != ca[p] {
			return fmt.Sprintf("column %q is %s in the first, %s in the second", p, ca[p], t)
		}
	}
	for _, l := range sb.leaves {
		if p := strings.Join(l.path(), "."); ca[p] == "" {
			return fmt.Sprintf("column %q is only in the second", p)
		}
	}
	return "their columns' order or annotations differ"
}
