package parquet

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
)

// textRow is a row of an image-text table: a caption (nil: null) and a
// conversation's turns' values.
type textRow struct {
	caption *string
	turns   []string
}

var textSchema = arrow.NewSchema([]arrow.Field{
	{Name: "image", Type: arrow.BinaryTypes.Binary},
	{Name: "caption", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "conversations", Type: arrow.ListOf(arrow.StructOf(
		arrow.Field{Name: "from", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "value", Type: arrow.BinaryTypes.String, Nullable: true})), Nullable: true},
}, nil)

// textRecord is rows as a record batch (a row group).
func textRecord(rows []textRow) arrow.RecordBatch {
	return newRecord(textSchema, func(b *array.RecordBuilder) {
		for i, r := range rows {
			b.Field(0).(*array.BinaryBuilder).Append([]byte(fmt.Sprintf("\x89PNG image %d", i)))
			if r.caption == nil {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(*r.caption)
			}
			lb := b.Field(2).(*array.ListBuilder)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			lb.Append(true)
			for k, v := range r.turns {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append([]string{"human", "gpt"}[k%2])
				sb.FieldBuilder(1).(*array.StringBuilder).Append(v)
			}
		}
	})
}

// shorten is rows with every value of more than most bytes empty.
func shorten(rows []textRow, most int) []textRow {
	out := make([]textRow, len(rows))
	for i, r := range rows {
		out[i] = textRow{caption: r.caption, turns: append([]string(nil), r.turns...)}
		if r.caption != nil && len(*r.caption) > most {
			out[i].caption = str("")
		}
		for k, v := range r.turns {
			if len(v) > most {
				out[i].turns[k] = ""
			}
		}
	}
	return out
}

// textStore is a store of one file of row groups groups, written with
// props.
func textStore(t *testing.T, props *pq.WriterProperties, groups ...[]textRow) *memStore {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, g := range groups {
		r := textRecord(g)
		defer r.Release()
		recs = append(recs, r)
	}
	st := newStore()
	st.put("d/part-0.parquet", writeArrow(t, textSchema, props, recs...))
	return st
}

// readChunk is chunk c's bytes, every field.
func readChunk(t *testing.T, st *memStore, dec format.Decoder, ch format.Chunk, c int) []byte {
	t.Helper()
	ranges, _ := dec.Extent(c, nil)
	var src []byte
	for _, r := range ranges {
		p := make([]byte, r.Len)
		if err := st.ReadRange(context.Background(), ch.Object, ch.ETag, r.Off, p); err != nil {
			t.Fatal(err)
		}
		src = append(src, p...)
	}
	return src
}

// residentSamples reads a resident chunk's samples back.
func residentSamples(t *testing.T, dst []byte) []string {
	t.Helper()
	tab, err := format.Verify(dst)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range tab.Len() {
		off, n, _ := tab.Sample(i)
		tr := tar.NewReader(bytes.NewReader(dst[off : off+n]))
		var ms []member
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			ms = append(ms, member{h.Name, string(b)})
		}
		out = append(out, render(ms))
	}
	return out
}

// TestDecodeTexts is issue 80, case 3's index half: a text value past
// the bound (a caption, a conversation's turn) is found from the
// footer, the pages' headers and the values' length prefixes and left
// unread: the chunk decodes as the same file written with that value
// empty does, its sample named with the field and the value's bytes,
// its bound less the value — over every codec, with and without a
// dictionary, in data pages v1 and v2, in a chunk of two row groups.
func TestDecodeTexts(t *testing.T) {
	const most = 2000
	groups := [][]textRow{
		{
			{caption: str("a cat"), turns: []string{"<image> what is it?", "a cat"}},
			{caption: str("a dog"), turns: []string{"<image> and this?", "a dog"}},
			{caption: str(longText(most + 100)), turns: []string{"<image> x", "y"}},
			{caption: str(longText(most)), turns: []string{"<image> at the bound", "kept"}}, // not past it
			{caption: str("a bird"), turns: []string{"<image> " + longText(most+1), "a bird"}},
			{caption: nil, turns: []string{"<image> no caption", "none"}},
			{caption: str("a cow"), turns: []string{"<image> two", "cows"}},
		},
		{
			{caption: str("a hen"), turns: []string{"<image> " + longText(most+10), longText(most + 300)}},
			{caption: str("a pig"), turns: []string{"<image> pink", "a pig"}},
		},
	}
	want := []format.LongText{{Sample: 2, Field: "caption", Bytes: most + 100}, {Sample: 4, Field: "conversations", Bytes: most + 9},
		{Sample: 7, Field: "conversations", Bytes: most + 300}}
	for _, codec := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Gzip,
		compress.Codecs.Zstd, compress.Codecs.Lz4Raw, compress.Codecs.Brotli, compress.Codecs.Lz4} {
		for _, dict := range []bool{true, false} {
			for _, v2 := range []bool{false, true} {
				name := fmt.Sprintf("%s/dict=%v/v2=%v", codec, dict, v2)
				t.Run(name, func(t *testing.T) {
					opts := []pq.WriterProperty{pq.WithCompression(codec), pq.WithDictionaryDefault(dict), pq.WithDataPageSize(1 << 10)}
					if v2 {
						opts = append(opts, pq.WithDataPageVersion(pq.DataPageV2))
					}
					props := pq.NewWriterProperties(opts...)
					st := textStore(t, props, groups...)
					short := textStore(t, props, shorten(groups[0], most), shorten(groups[1], most))
					_, lay, dec := decodeAll(t, st, format.Options{})
					wantSamples, _, _ := decodeAll(t, short, format.Options{})
					if len(lay.Chunks) != 1 {
						t.Fatalf("%d chunks; the test wants its two row groups in one", len(lay.Chunks))
					}
					_, bound := dec.Extent(0, nil)
					dst, long, err := dec.(format.TextBound).DecodeTexts(0, readChunk(t, st, dec, lay.Chunks[0], 0), most, format.WriterOptions{ModTime: 1700000000})
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(long, want) {
						t.Errorf("long values %+v, want %+v", long, want)
					}
					got := residentSamples(t, dst)
					for i, k := range lay.Keys {
						if w := render(wantSamples[k]); got[i] != w {
							t.Errorf("sample %s:\n%s\nwant (the file with its long values empty):\n%s", k, got[i], w)
						}
					}
					if int64(len(dst)) > bound-3*most {
						t.Errorf("decoded into %d bytes; the chunk's bound with its long values is %d", len(dst), bound)
					}
				})
			}
		}
	}
}

// TestDecodeTextsMemory: a 24 MiB text in a 70 KB page (a compressed
// column chunk) is left unread reading less than its size — its page's
// header, its length prefix, its bytes through a window — where Decode
// holds it several times over.
func TestDecodeTextsMemory(t *testing.T) {
	const big, most = 24 << 20, 64 << 10
	rows := []textRow{
		{caption: str("a cat"), turns: []string{"<image> what is it?", "a cat"}},
		{caption: str("a dog"), turns: []string{"<image> " + longText(big), "a dog"}},
		{caption: str("a cow"), turns: []string{"<image> two", "cows"}},
	}
	for _, codec := range []compress.Compression{compress.Codecs.Zstd, compress.Codecs.Gzip, compress.Codecs.Uncompressed} {
		t.Run(codec.String(), func(t *testing.T) {
			st := textStore(t, pq.NewWriterProperties(pq.WithCompression(codec)), rows)
			_, lay, dec := decodeAll(t, st, format.Options{}, "image")
			src := readChunk(t, st, dec, lay.Chunks[0], 0)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			dst, long, err := dec.(format.TextBound).DecodeTexts(0, src, most, format.WriterOptions{})
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if len(long) != 1 || long[0].Sample != 1 || long[0].Bytes != int64(len("<image> ")+big) {
				t.Errorf("long values %+v", long)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > big/2 {
				t.Errorf("leaving a text of %d MiB unread allocated %d MiB (src %d KiB, dst %d KiB)", big>>20, got>>20, len(src)>>10, len(dst)>>10)
			}
		})
	}
}

// TestPageHeaderWritten: a page header appendPageHeader writes reads
// back as written.
func TestPageHeaderWritten(t *testing.T) {
	for _, h := range []pageHeader{
		{typ: pageDict, unc: 100, comp: 70, numValues: 3, encoding: encPlain},
		{typ: pageData, unc: 1 << 30, comp: 0, numValues: 1<<31 - 1, encoding: encPlain},
	} {
		b := appendPageHeader(nil, h.typ, h.unc, h.comp, h.numValues, h.encoding)
		got, err := parsePageHeader(append(b, "body"...))
		if err != nil {
			t.Fatal(err)
		}
		if got.typ != h.typ || got.unc != h.unc || got.comp != h.comp || got.numValues != h.numValues || got.encoding != h.encoding ||
			got.defEnc != encRLE || got.repEnc != encRLE || got.hasCRC || got.len != len(b) {
			t.Errorf("%+v reads back as %+v", h, got)
		}
	}
}
