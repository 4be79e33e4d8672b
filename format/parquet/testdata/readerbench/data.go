package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The two datasets Brand serves most, written as pyarrow writes them
// (arrow-go's writer is a port of Arrow C++'s, which pyarrow and the
// Hugging Face datasets library use): data pages v1, snappy, dictionary
// encoding on unless dict is false (a dictionary that outgrows its 1 MiB
// page falls back to PLAIN, as Arrow C++ does).

// imageFile is the Hub's image layout: image struct{bytes, path} with
// JPEG-like bytes (a JPEG's magic, then incompressible bytes) of about
// 100 KiB, and an int64 label; rows rows per row group.
func imageFile(groups, rows int, dict bool) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	img := arrow.StructOf(
		arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "image", Type: img, Nullable: true},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, props(dict, compress.Codecs.Snappy), pqarrow.DefaultWriterProps())
	check(err)
	for g := range groups {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		sb := b.Field(0).(*array.StructBuilder)
		bb := sb.FieldBuilder(0).(*array.BinaryBuilder)
		pb := sb.FieldBuilder(1).(*array.StringBuilder)
		lb := b.Field(1).(*array.Int64Builder)
		for i := range rows {
			n := 90<<10 + r.IntN(20<<10)
			v := make([]byte, n)
			for j := range v {
				v[j] = byte(r.Uint32())
			}
			copy(v, "\xff\xd8\xff\xe0")
			sb.Append(true)
			bb.Append(v)
			pb.Append(fmt.Sprintf("n%08d_%d.JPEG", r.IntN(1e8), g*rows+i))
			lb.Append(int64(r.IntN(1000)))
		}
		rec := b.NewRecordBatch()
		check(w.Write(rec))
		rec.Release()
		b.Release()
	}
	check(w.Close())
	return buf.Bytes()
}

// tokenFile is a tokenized corpus: input_ids list<int32> of 1–4k tokens
// a row below a 50,257-token vocabulary; rows rows per row group.
func tokenFile(groups, rows int, dict bool, codec compress.Compression) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, props(dict, codec), pqarrow.DefaultWriterProps())
	check(err)
	for range groups {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		lb := b.Field(0).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for range rows {
			lb.Append(true)
			n := 1024 + r.IntN(3072)
			for range n {
				// Zipf-like: small ids far more often, as real text has.
				vb.Append(int32(float64(50257) * r.Float64() * r.Float64() * r.Float64()))
			}
		}
		rec := b.NewRecordBatch()
		check(w.Write(rec))
		rec.Release()
		b.Release()
	}
	check(w.Close())
	return buf.Bytes()
}

func props(dict bool, codec compress.Compression) *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithDictionaryDefault(dict),
		parquet.WithCompression(codec),
		parquet.WithMaxRowGroupLength(1<<30),
		parquet.WithStats(true),
	)
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
