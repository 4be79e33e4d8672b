package parquet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/codec/npy"
)

// mixedSchema has a column of every kind: an integer label, a string, a
// token list, a float, a nested struct with a list, and a map.
var mixedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "label", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
		arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	), Nullable: true},
	{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

func npyOf(descr string, size int, vals []int64) string {
	h, _ := npy.AppendHeader(nil, descr, []int64{int64(len(vals))})
	for _, v := range vals {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, uint64(v))
		h = append(h, b[:size]...)
	}
	return string(h)
}

// mixedRows writes n rows and returns the members each must become.
func mixedRows(n int) (arrow.RecordBatch, []string) {
	want := make([]string, n)
	rec := newRecord(mixedSchema, func(b *array.RecordBuilder) {
		lb := b.Field(0).(*array.Int32Builder)
		tb := b.Field(1).(*array.StringBuilder)
		ib := b.Field(2).(*array.ListBuilder)
		ivb := ib.ValueBuilder().(*array.Int32Builder)
		sb := b.Field(3).(*array.Float64Builder)
		mb := b.Field(4).(*array.StructBuilder)
		idb := mb.FieldBuilder(0).(*array.Int64Builder)
		tgb := mb.FieldBuilder(1).(*array.ListBuilder)
		tgvb := tgb.ValueBuilder().(*array.StringBuilder)
		ab := b.Field(5).(*array.MapBuilder)
		akb := ab.KeyBuilder().(*array.StringBuilder)
		avb := ab.ItemBuilder().(*array.Int32Builder)
		for i := range n {
			var w strings.Builder
			if i%11 == 3 {
				lb.AppendNull()
			} else {
				lb.Append(int32(i%7 - 3))
				fmt.Fprintf(&w, "cls=%q\n", fmt.Sprint(i%7-3))
			}
			if i%9 == 2 {
				tb.AppendNull()
			} else {
				s := strings.Repeat("é\"x\n", i%5) + fmt.Sprint(i)
				tb.Append(s)
				fmt.Fprintf(&w, "txt=%q\n", s)
			}
			switch i % 6 {
			case 1:
				ib.AppendNull()
			case 2:
				ib.Append(true)
				fmt.Fprintf(&w, "npy=%q\n", npyOf("<i4", 4, nil))
			default:
				ib.Append(true)
				var vals []int64
				for j := range i%40 + 1 {
					v := int64((i*31+j*7)%50000 - 100)
					ivb.Append(int32(v))
					vals = append(vals, v)
				}
				fmt.Fprintf(&w, "npy=%q\n", npyOf("<i4", 4, vals))
			}
			var js []string
			if i%8 == 0 {
				sb.AppendNull()
			} else {
				sb.Append(float64(i) / 4)
				js = append(js, fmt.Sprintf("score.json=%q", fmt.Sprint(float64(i)/4)))
			}
			if i%10 == 7 {
				mb.AppendNull()
			} else {
				mb.Append(true)
				idb.Append(int64(i) << 33)
				var tags string
				switch i % 3 {
				case 0:
					tgb.AppendNull()
					tags = "null"
				case 1:
					tgb.Append(true)
					tags = "[]"
				default:
					tgb.Append(true)
					tgvb.Append("a")
					tgvb.AppendNull()
					tgvb.Append(fmt.Sprint(i))
					tags = fmt.Sprintf(`["a",null,"%d"]`, i)
				}
				js = append(js, fmt.Sprintf("meta.json=%q", fmt.Sprintf(`{"id":%d,"tags":%s}`, int64(i)<<33, tags)))
			}
			if i%4 == 1 {
				ab.AppendNull()
			} else {
				ab.Append(true)
				var kv []string
				for j := range i % 3 {
					k := fmt.Sprintf("k%d", j)
					akb.Append(k)
					avb.Append(int32(i * j))
					kv = append(kv, fmt.Sprintf(`"%s":%d`, k, i*j))
				}
				js = append(js, fmt.Sprintf("attrs.json=%q", "{"+strings.Join(kv, ",")+"}"))
			}
			for _, j := range js {
				w.WriteString(j + "\n")
			}
			want[i] = w.String()
		}
	})
	return rec, want
}

// Every codec real writers use (LZ4 as Hadoop frames it), both data page
// versions and the encodings arrow-go writes, on a column of every kind:
// each row's members are what was written.
func TestCodecsPagesEncodings(t *testing.T) {
	codecs := []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Gzip,
		compress.Codecs.Zstd, compress.Codecs.Lz4Raw, compress.Codecs.Lz4, compress.Codecs.Brotli}
	encs := []string{"plain", "dictionary", "delta"}
	rec, want := mixedRows(300)
	for _, codec := range codecs {
		for _, v2 := range []bool{false, true} {
			for _, enc := range encs {
				name := fmt.Sprintf("%s/v2=%v/%s", codec, v2, enc)
				t.Run(name, func(t *testing.T) {
					opts := []pq.WriterProperty{pq.WithCompression(codec), pq.WithDictionaryDefault(enc == "dictionary"),
						pq.WithDataPageSize(2 << 10), pq.WithMaxRowGroupLength(128)}
					if v2 {
						opts = append(opts, pq.WithDataPageVersion(pq.DataPageV2))
					}
					if enc == "delta" {
						opts = append(opts, pq.WithEncodingFor("label", pq.Encodings.DeltaBinaryPacked),
							pq.WithEncodingFor("input_ids.list.element", pq.Encodings.DeltaBinaryPacked),
							pq.WithEncodingFor("text", pq.Encodings.DeltaByteArray),
							pq.WithEncodingFor("meta.tags.list.element", pq.Encodings.DeltaLengthByteArray))
					}
					st := newStore()
					st.put("t.parquet", writeArrow(t, mixedSchema, pq.NewWriterProperties(opts...), rec))
					got, lay, _ := decodeAll(t, st, format.Options{})
					// Three small row groups: one chunk of them.
					if g := len(ds0(t, lay).chunks); g != 3 || len(lay.Chunks) != 1 {
						t.Fatalf("%d row groups in %d chunks", g, len(lay.Chunks))
					}
					for i, w := range want {
						if g := render(got[fmt.Sprintf("t/%03d", i)]); g != w {
							t.Fatalf("row %d:\n got %s\nwant %s", i, g, w)
						}
					}
				})
			}
		}
	}
}

// A job reading 2 of the columns reads only their column chunks from
// the store, and its samples have only their members.
func TestProjection(t *testing.T) {
	rec, _ := mixedRows(300)
	st := newStore()
	st.put("t.parquet", writeArrow(t, mixedSchema, pq.NewWriterProperties(pq.WithMaxRowGroupLength(300)), rec))
	_, lay, dec := decodeAll(t, st, format.Options{})
	all, _ := dec.Extent(0, nil)
	sel, _ := format.Select(dec.Fields(), []string{"label", "score"})
	some, bound := dec.Extent(0, sel)
	if format.Concat(some)*3 > format.Concat(all) {
		t.Fatalf("2 of 6 columns read %d of %d bytes", format.Concat(some), format.Concat(all))
	}
	st.Take()
	got, err := decodeChunk(st, dec, lay.Chunks[0], 0, sel)
	if err != nil {
		t.Fatal(err)
	}
	if read := st.Take().Sum().Bytes; read != format.Concat(some) {
		t.Fatalf("read %d bytes for ranges of %d", read, format.Concat(some))
	}
	for _, s := range got {
		for _, m := range s.members {
			if e := extOf(m.name); e != "cls" && e != "score.json" && e != "null" {
				t.Fatalf("member %s in a projection of label and score", m.name)
			}
		}
	}
	if _, allBound := dec.Extent(0, nil); bound >= allBound {
		t.Fatalf("the projection's bound %d is not below the whole's %d", bound, allBound)
	}
}

// A dictionary can repeat its longest value on every row, which the footer
// alone cannot bound: the bound assumes each value once, and the row group
// says what it needs when decoded (format.GrowError), then decodes whole
// into that.
func TestDictionaryRepeatsBound(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String, Nullable: false}}, nil)
	long := strings.Repeat("z", 9000)
	rec := newRecord(sc, func(b *array.RecordBuilder) {
		for i := range 500 {
			if i%50 == 0 {
				b.Field(0).(*array.StringBuilder).Append("short")
			} else {
				b.Field(0).(*array.StringBuilder).Append(long)
			}
		}
	})
	st := newStore()
	st.put("d.parquet", writeArrow(t, sc, pq.NewWriterProperties(pq.WithDictionaryDefault(true), pq.WithCompression(compress.Codecs.Zstd)), rec))
	before := grown
	got, _, dec := decodeAll(t, st, format.Options{})
	if g := got["d/499"]; len(g) != 1 || g[0].data != long {
		t.Fatalf("%.100v", g)
	}
	if grown != before+1 {
		t.Fatalf("the row group was decoded again %d times, want once", grown-before)
	}
	if _, bound := dec.Extent(0, nil); bound >= 500*(512+9216) {
		t.Fatalf("a bound of %d: the footer cannot say the values repeat", bound)
	}
}

// Damage in a row group's bytes is an error wrapping format.ErrDamaged
// that names the column, never members served as good.
func TestDamaged(t *testing.T) {
	rec, _ := mixedRows(200)
	st := newStore()
	b := writeArrow(t, mixedSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy), pq.WithMaxRowGroupLength(200)), rec)
	st.put("t.parquet", b)
	_, lay, dec := decodeAll(t, st, format.Options{})
	ranges, bound := dec.Extent(0, nil)
	var src []byte
	for _, r := range ranges {
		src = append(src, b[r.Off:r.End()]...)
	}
	damaged := 0
	for at := 0; at < len(src); at += 97 {
		bad := bytes.Clone(src)
		bad[at] ^= 0x5a
		err := dec.Decode(0, nil, bad, make([]byte, bound), format.WriterOptions{})
		if err == nil {
			// A flip inside a value's bytes decodes (Parquet has no
			// checksum unless the writer wrote page CRCs), and must
			// then still be within the bound.
			continue
		}
		if !errorsIsDamaged(err) {
			t.Fatalf("byte %d flipped: %v", at, err)
		}
		damaged++
	}
	if damaged == 0 {
		t.Fatal("no flipped byte was found damaged")
	}
	if err := dec.Decode(0, nil, src[:len(src)-1], make([]byte, bound), format.WriterOptions{}); !errorsIsDamaged(err) {
		t.Fatalf("truncated: %v", err)
	}
	_ = lay
}

func errorsIsDamaged(err error) bool { return errors.Is(err, format.ErrDamaged) }
