package main

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pqa "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	afile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqg "github.com/parquet-go/parquet-go"
	pqgcompress "github.com/parquet-go/parquet-go/compress"
)

// The matrix writes a small file of three columns — a optional int64, s
// optional string, l list<int32> (with nulls and empty lists) — with
// each library, each codec, encoding and data page version it writes, and
// reads every file with both libraries, comparing each leaf's levels and
// values with what was written.

type mrow struct {
	A *int64  `parquet:"a,optional"`
	S *string `parquet:"s,optional"`
	L []int32 `parquet:"l,list"`
}

func mrows() []mrow {
	rows := make([]mrow, 3000)
	for i := range rows {
		if i%7 != 0 {
			a := int64(i * 1000003 % 977)
			rows[i].A = &a
		}
		if i%5 != 0 {
			s := strings.Repeat(string(rune('a'+i%26)), i%40) + fmt.Sprint(i%300)
			rows[i].S = &s
		}
		for j := range i % 9 {
			rows[i].L = append(rows[i].L, int32(i*j%1000))
		}
	}
	return rows
}

// digest is a leaf's levels and values, as text: what both readers must
// agree on with the rows written.
func expected(rows []mrow) [3]string {
	var a, s, l strings.Builder
	for _, r := range rows {
		if r.A != nil {
			fmt.Fprintf(&a, "1:%d ", *r.A)
		} else {
			a.WriteString("0 ")
		}
		if r.S != nil {
			fmt.Fprintf(&s, "1:%s ", *r.S)
		} else {
			s.WriteString("0 ")
		}
		// pqarrow writes a non-null list as optional (def 1 = empty,
		// 3 = value); parquet-go's list tag writes it required (def 0
		// empty, 1 value): compare values and row boundaries only.
		l.WriteString("[")
		for _, v := range r.L {
			fmt.Fprintf(&l, "%d,", v)
		}
		l.WriteString("] ")
	}
	return [3]string{a.String(), s.String(), l.String()}
}

func digestPQG(b []byte) (d [3]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	g := newPQG(b)
	for rg := range g.f.RowGroups() {
		for c := range 3 {
			col, err := g.column(rg, c)
			if err != nil {
				return d, err
			}
			d[c] += digest(col.defs, col.reps, col.i64, col.bytes, col.i32, c, leafMaxDef(g.f.Root().Columns()[c]))
		}
	}
	return d, nil
}

func leafMaxDef(c *pqg.Column) int {
	for !c.Leaf() {
		c = c.Columns()[0]
	}
	return c.MaxDefinitionLevel()
}

func digest(defs, reps []byte, i64 []int64, bs [][]byte, i32 []int32, c, max int) string {
	var b strings.Builder
	vi := 0
	for i := range defs {
		switch c {
		case 0, 1:
			if int(defs[i]) == max {
				if c == 0 {
					fmt.Fprintf(&b, "1:%d ", i64[vi])
				} else {
					fmt.Fprintf(&b, "1:%s ", bs[vi])
				}
				vi++
			} else {
				b.WriteString("0 ")
			}
		case 2:
			if reps[i] == 0 {
				if i > 0 {
					b.WriteString("] ")
				}
				b.WriteString("[")
			}
			if int(defs[i]) == max {
				fmt.Fprintf(&b, "%d,", i32[vi])
				vi++
			}
		}
	}
	if c == 2 && len(defs) > 0 {
		b.WriteString("] ")
	}
	return b.String()
}

func digestArrow(b []byte) (d [3]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	r, err := afile.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return d, err
	}
	for rg := range r.NumRowGroups() {
		g := r.RowGroup(rg)
		for c := range 3 {
			cr, err := g.Column(c)
			if err != nil {
				return d, err
			}
			cm, _ := g.MetaData().ColumnChunk(c)
			nv := cm.NumValues()
			defs, reps := make([]int16, nv), make([]int16, nv)
			var i64 []int64
			var i32 []int32
			var bs []pqa.ByteArray
			var got int64
			vi := 0
			for got < nv {
				var total int64
				var read int
				switch cr := cr.(type) {
				case *afile.Int64ColumnChunkReader:
					i64 = append(i64, make([]int64, nv-got)...)
					total, read, err = cr.ReadBatch(nv-got, i64[vi:], defs[got:], reps[got:])
				case *afile.Int32ColumnChunkReader:
					i32 = append(i32, make([]int32, nv-got)...)
					total, read, err = cr.ReadBatch(nv-got, i32[vi:], defs[got:], reps[got:])
				case *afile.ByteArrayColumnChunkReader:
					bs = append(bs, make([]pqa.ByteArray, nv-got)...)
					total, read, err = cr.ReadBatch(nv-got, bs[vi:], defs[got:], reps[got:])
					for i := vi; i < vi+read; i++ {
						bs[i] = bytes.Clone(bs[i]) // the next page reuses the buffer
					}
				}
				if err != nil {
					return d, err
				}
				if total == 0 {
					return d, fmt.Errorf("column %d: %d of %d levels", c, got, nv)
				}
				got += total
				vi += read
			}
			d8, r8 := make([]byte, nv), make([]byte, nv)
			for i := range defs {
				d8[i], r8[i] = byte(defs[i]), byte(reps[i])
			}
			bb := make([][]byte, len(bs))
			for i := range bs {
				bb[i] = bs[i]
			}
			d[c] += digest(d8, r8, i64, bb, i32, c, int(r.MetaData().Schema.Column(c).MaxDefinitionLevel()))
		}
	}
	return d, nil
}

type variant struct {
	writer, codec, enc string
	v2                 bool
}

func writePQG(rows []mrow, codec pqgcompress.Codec, enc string, v2 bool) []byte {
	var buf bytes.Buffer
	opts := []pqg.WriterOption{pqg.Compression(codec), pqg.PageBufferSize(4 << 10), pqg.MaxRowsPerRowGroup(1000)}
	if v2 {
		opts = append(opts, pqg.DataPageVersion(2))
	} else {
		opts = append(opts, pqg.DataPageVersion(1))
	}
	switch enc {
	case "dictionary":
		opts = append(opts, pqg.DefaultEncoding(&pqg.RLEDictionary))
	case "delta":
		opts = append(opts, pqg.DefaultEncodingFor(pqg.Int64, &pqg.DeltaBinaryPacked), pqg.DefaultEncodingFor(pqg.Int32, &pqg.DeltaBinaryPacked), pqg.DefaultEncodingFor(pqg.ByteArray, &pqg.DeltaLengthByteArray))
	case "delta-byte-array":
		opts = append(opts, pqg.DefaultEncodingFor(pqg.ByteArray, &pqg.DeltaByteArray))
	case "byte-stream-split":
		opts = append(opts, pqg.DefaultEncodingFor(pqg.Int64, &pqg.ByteStreamSplit), pqg.DefaultEncodingFor(pqg.Int32, &pqg.ByteStreamSplit))
	}
	w := pqg.NewGenericWriter[mrow](&buf, opts...)
	_, err := w.Write(rows)
	check(err)
	check(w.Close())
	return buf.Bytes()
}

func writeArrow(rows []mrow, codec compress.Compression, enc string, v2 bool) []byte {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	opts := []pqa.WriterProperty{pqa.WithCompression(codec), pqa.WithDataPageSize(4 << 10), pqa.WithMaxRowGroupLength(1000), pqa.WithDictionaryDefault(enc == "dictionary")}
	if v2 {
		opts = append(opts, pqa.WithDataPageVersion(pqa.DataPageV2))
	}
	switch enc {
	case "delta":
		opts = append(opts, pqa.WithEncodingFor("a", pqa.Encodings.DeltaBinaryPacked), pqa.WithEncodingFor("l.list.element", pqa.Encodings.DeltaBinaryPacked), pqa.WithEncodingFor("s", pqa.Encodings.DeltaLengthByteArray))
	case "delta-byte-array":
		opts = append(opts, pqa.WithEncodingFor("s", pqa.Encodings.DeltaByteArray))
	case "byte-stream-split":
		opts = append(opts, pqa.WithEncodingFor("a", pqa.Encodings.ByteStreamSplit), pqa.WithEncodingFor("l.list.element", pqa.Encodings.ByteStreamSplit))
	}
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pqa.NewWriterProperties(opts...), pqarrow.DefaultWriterProps())
	check(err)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	ab := b.Field(0).(*array.Int64Builder)
	sb := b.Field(1).(*array.StringBuilder)
	lb := b.Field(2).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	for _, r := range rows {
		if r.A != nil {
			ab.Append(*r.A)
		} else {
			ab.AppendNull()
		}
		if r.S != nil {
			sb.Append(*r.S)
		} else {
			sb.AppendNull()
		}
		lb.Append(true)
		for _, v := range r.L {
			vb.Append(v)
		}
	}
	rec := b.NewRecordBatch()
	check(w.Write(rec))
	check(w.Close())
	return buf.Bytes()
}

func runMatrix() {
	rows := mrows()
	want := expected(rows)
	encs := []string{"plain", "dictionary", "delta", "delta-byte-array", "byte-stream-split"}
	pqgCodecs := map[string]pqgcompress.Codec{"none": &pqg.Uncompressed, "snappy": &pqg.Snappy, "gzip": &pqg.Gzip, "brotli": &pqg.Brotli, "zstd": &pqg.Zstd, "lz4_raw": &pqg.Lz4Raw}
	arrowCodecs := map[string]compress.Compression{"none": compress.Codecs.Uncompressed, "snappy": compress.Codecs.Snappy, "gzip": compress.Codecs.Gzip, "brotli": compress.Codecs.Brotli, "zstd": compress.Codecs.Zstd, "lz4_raw": compress.Codecs.Lz4Raw}
	codecs := []string{"none", "snappy", "gzip", "brotli", "zstd", "lz4_raw"}
	fmt.Println("| written by | codec | encoding | page | parquet-go reads | arrow-go reads |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, writer := range []string{"parquet-go", "arrow-go"} {
		for _, codec := range codecs {
			for _, enc := range encs {
				for _, v2 := range []bool{false, true} {
					var b []byte
					if writer == "parquet-go" {
						b = writePQG(rows, pqgCodecs[codec], enc, v2)
					} else {
						b = writeArrow(rows, arrowCodecs[codec], enc, v2)
					}
					res := [2]string{}
					for i, read := range []func([]byte) ([3]string, error){digestPQG, digestArrow} {
						got, err := read(b)
						switch {
						case err != nil:
							res[i] = "error: " + strings.ReplaceAll(err.Error(), "|", "/")
						case got != want:
							res[i] = fmt.Sprintf("WRONG VALUES (%08x)", crc32.ChecksumIEEE([]byte(got[0]+got[1]+got[2])))
						default:
							res[i] = "ok"
						}
					}
					page := "v1"
					if v2 {
						page = "v2"
					}
					fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", writer, codec, enc, page, res[0], res[1])
				}
			}
		}
	}
}
