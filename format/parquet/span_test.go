package parquet

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// embedSchema is the Hub's image layout with a column a projected job
// leaves unread between one row group's image and label and the next's.
var embedSchema = arrow.NewSchema(append(imageSchema.Fields(),
	arrow.Field{Name: "embedding", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true}), nil)

// tenGroups is a file of 10 row groups of 20 Hub rows of about 2 KB and
// an embedding of 64 floats each (a row group about 50 KB), snappy.
func tenGroups(t testing.TB) (*memStore, []imageRow, []byte) {
	t.Helper()
	rows := hubRows(200, 2000)
	var recs []arrow.RecordBatch
	for g := range 10 {
		recs = append(recs, hubEmbedRecord(rows[20*g:20*g+20], 20*g, 64))
	}
	props := pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy), pq.WithDictionaryDefault(false))
	b := writeArrow(t, embedSchema, props, recs...)
	st := newStore()
	st.put("data/train-00000-of-00001.parquet", b)
	return st, rows, b
}

// hubEmbedRecord is rows as imageRecord makes them, with row i's
// embedding of n floats i, i+1, ...
func hubEmbedRecord(rows []imageRow, first, n int) arrow.RecordBatch {
	return newRecord(embedSchema, func(b *array.RecordBuilder) {
		eb := b.Field(2).(*array.ListBuilder)
		vb := eb.ValueBuilder().(*array.Float32Builder)
		for i, r := range rows {
			appendImageRow(b, r)
			eb.Append(true)
			for j := range n {
				vb.Append(float32(first + i + j))
			}
		}
	})
}

// A file of 10 row groups indexed with a chunk size of about three of
// them is cut into chunks of whole consecutive row groups: their keys
// are the rows' as before, a chunk is named by its first and last row
// group, every field reads one range a chunk, the projection image,label
// one range a row group (the embedding lies between them), and every row
// decodes to what was written. testdata/spans.golden holds the layout.
func TestChunksOfRowGroups(t *testing.T) {
	st, rows, _ := tenGroups(t)
	ds1 := func(opt format.Options) (*format.Layout, format.Decoder) {
		lay, err := Format{}.Index(context.Background(), st, st.listing(), opt)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := Format{}.Open(lay.Meta)
		if err != nil {
			t.Fatal(err)
		}
		return lay, dec
	}
	one, _ := ds1(format.Options{ChunkBytes: 1})
	groupBytes := st.objs["data/train-00000-of-00001.parquet"]
	per := int64(len(groupBytes)) / 10
	lay, dec := ds1(format.Options{ChunkBytes: 3 * per})

	var g strings.Builder
	fmt.Fprintf(&g, "a row group about %d bytes, chunk size %d: %d chunks (%d with a chunk size of 1)\n", per/1000*1000, 3*per/1000*1000, len(lay.Chunks), len(one.Chunks))
	sel, err := format.Select(dec.Fields(), []string{"image", "label"})
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	groups := ds0(t, lay).chunks
	gi := 0
	for c, ch := range lay.Chunks {
		all, bound := dec.Extent(c, nil)
		some, pbound := dec.Extent(c, sel)
		fmt.Fprintf(&g, "chunk %d %s#%s: %d samples %s..%s, every field %v (resident %d), image,label %v (resident %d)\n",
			c, ch.Object, ch.Name, ch.Samples, lay.Keys[k], lay.Keys[k+ch.Samples-1], all, bound, some, pbound)
		k += ch.Samples
		// The chunk's row groups: every column chunk of them read with
		// every field, the image's and label's alone projected, in at
		// least a range a row group (each one's embedding lies between).
		var whole, projected int64
		n := 0
		for rows := 0; rows < ch.Samples; gi++ {
			rows += int(groups[gi].rows)
			n++
			for l, m := range groups[gi].cols {
				whole += m.length
				if l < 3 {
					projected += m.length
				}
			}
		}
		if format.Concat(all) != whole || format.Concat(some) != projected || len(some) < n || n < 3 {
			t.Errorf("chunk %d of %d row groups: reads %d bytes in %d ranges with every field (want %d), %d in %d projected (want %d in at least %d)",
				c, n, format.Concat(all), len(all), whole, format.Concat(some), len(some), projected, n)
		}
	}
	if len(one.Chunks) != 10 || ds0(t, one).ends != nil || len(lay.Chunks) != 3 {
		t.Errorf("%d chunks with a chunk size of 1 (spans %v), %d of about 3 row groups", len(one.Chunks), ds0(t, one).ends, len(lay.Chunks))
	}
	golden(t, "spans.golden", g.String())

	// Every row, projected and not, reading exactly the extents.
	for _, names := range [][]string{nil, {"image", "label"}} {
		st.Take()
		got, lay, dec := decodeAll(t, st, format.Options{ChunkBytes: 3 * per}, names...)
		want := min(int64(len(groupBytes)), tailRead) // indexing's read of the footer
		for c := range lay.Chunks {
			s, _ := format.Select(dec.Fields(), names)
			r, _ := dec.Extent(c, s)
			want += format.Concat(r)
		}
		if read := st.Take().Sum().Bytes; read != want {
			t.Errorf("%v: read %d bytes, the extents are %d", names, read, want)
		}
		for i, r := range rows {
			k := fmt.Sprintf("data/train-00000-of-00001/%03d", i)
			w := wantImage(r)
			if names == nil {
				w = strings.TrimPrefix(w, "null=\"\"\n") + embeddingJSON(i, 64)
			}
			if g := render(got[k]); g != w {
				t.Fatalf("%v: row %d:\n got %.300s\nwant %.300s", names, i, g, w)
			}
		}
	}
}

func embeddingJSON(i, n int) string {
	var b strings.Builder
	b.WriteString("json=\"[")
	for j := range n {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", i+j)
	}
	b.WriteString("]\"\n")
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -run %s -update rewrites it):\n got %s\nwant %s", p, t.Name(), got, want)
	}
}

// A damaged row group inside a chunk of several is named by its rows and
// column; no other row group is blamed.
func TestSpanDamagedNamesRowGroup(t *testing.T) {
	st, _, b := tenGroups(t)
	per := int64(len(b)) / 10
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{ChunkBytes: 3 * per})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	// Chunk 0 holds row groups 0-2; damage the third's image bytes'
	// first page header.
	if lay.Chunks[0].Name != "0-2" {
		t.Fatalf("chunk 0 is %q", lay.Chunks[0].Name)
	}
	ranges, bound := dec.Extent(0, nil)
	read := ranges[0]
	var src []byte
	for _, r := range ranges {
		src = append(src, b[r.Off:r.End()]...)
	}
	col := ds0(t, lay).chunks[2].cols[0] // image.bytes
	damaged := 0
	for at := col.start; at < col.start+24; at++ {
		bad := bytes.Clone(src)
		bad[at-read.Off] ^= 0x5a
		err := dec.Decode(0, nil, bad, make([]byte, bound), format.WriterOptions{})
		if err == nil {
			continue
		}
		if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), "row group of rows 40–59") || !strings.Contains(err.Error(), `column "image"`) {
			t.Fatalf("byte %d flipped: %v", at, err)
		}
		damaged++
	}
	if damaged == 0 {
		t.Fatal("no flipped byte of the page header was found damaged")
	}
}

// A description written before chunks of several row groups (no spans
// section) still opens: a chunk a row group, as it was indexed. A spans
// section that lies is refused.
func TestSpansMeta(t *testing.T) {
	st, _, _ := tenGroups(t)
	lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds := ds0(t, lay)
	if len(lay.Chunks) != 1 || !equalInts(ds.ends, []int{10}) {
		t.Fatalf("the default chunk size: %d chunks, ends %v", len(lay.Chunks), ds.ends)
	}
	ds.ends = nil
	old := encodeMeta(ds)
	if !bytes.HasPrefix(lay.Meta, old) || len(old) >= len(lay.Meta) {
		t.Fatal("a description without spans is not the one with spans less its section")
	}
	dec, err := Format{}.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 10 {
		r, bound := dec.Extent(c, nil)
		src := make([]byte, format.Concat(r))
		at := 0
		for _, r := range r {
			at += copy(src[at:], st.objs["data/train-00000-of-00001.parquet"][r.Off:r.End()])
		}
		if err := dec.Decode(c, nil, src, make([]byte, bound), format.WriterOptions{}); err != nil {
			t.Fatalf("chunk %d of the old description: %v", c, err)
		}
	}
	lies := map[string][]int{"short": {4, 9}, "empty chunk": {4, 4, 10}, "past": {4, 11}}
	for name, ends := range lies {
		ds.ends = ends
		if _, err := (Format{}).Open(encodeMeta(ds)); err == nil {
			t.Errorf("%s: spans %v opened", name, ends)
		}
	}
}

func equalInts(a, b []int) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
