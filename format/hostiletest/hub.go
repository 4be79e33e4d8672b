package hostiletest

import (
	"bytes"
	"math/rand/v2"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// HubSchema is the Hugging Face Hub's layout of an image dataset: a
// struct of the image's bytes and its path, and an int64 label.
var HubSchema = arrow.NewSchema([]arrow.Field{
	{Name: "image", Type: arrow.StructOf(
		arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

var arrowCodec = map[string]compress.Compression{
	"": compress.Codecs.Uncompressed, ZSTD: compress.Codecs.Zstd, Gzip: compress.Codecs.Gzip, Snappy: compress.Codecs.Snappy,
	Brotli: compress.Codecs.Brotli, LZ4Raw: compress.Codecs.Lz4Raw,
}

// HubImage is row i's image in Hub files: a JPEG's first bytes and about
// 2 KB of noise of 4 bits a byte, which compresses about twofold.
func HubImage(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	b := []byte{0xff, 0xd8, 0xff, 0xe0}
	for range 1800 + i%400 {
		b = append(b, byte(r.IntN(16)))
	}
	return b
}

// Hub is a Parquet file in the Hub's layout of rows rows (HubImage's
// images, named img_N.jpg, labelled N % 10) in one row group, its pages
// of codec ("", ZSTD, Gzip, Snappy, Brotli or LZ4Raw), as arrow-go
// writes it (pyarrow's algorithm: the images in a dictionary page).
func Hub(codec string, rows int) []byte {
	b := array.NewRecordBuilder(memory.DefaultAllocator, HubSchema)
	defer b.Release()
	sb := b.Field(0).(*array.StructBuilder)
	bb := sb.FieldBuilder(0).(*array.BinaryBuilder)
	pb := sb.FieldBuilder(1).(*array.StringBuilder)
	lb := b.Field(1).(*array.Int64Builder)
	for i := range rows {
		sb.Append(true)
		bb.Append(HubImage(i))
		pb.Append("img_" + strconv.Itoa(i) + ".jpg")
		lb.Append(int64(i % 10))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var out bytes.Buffer
	c, ok := arrowCodec[codec]
	if !ok {
		panic("hostiletest: arrow-go writes no " + codec)
	}
	w, err := pqarrow.NewFileWriter(HubSchema, &out, pq.NewWriterProperties(pq.WithCompression(c)), pqarrow.DefaultWriterProps())
	if err != nil {
		panic(err)
	}
	if err := w.Write(rec); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// Overwrite returns a copy of b with n bytes in its middle overwritten by
// bytes of a fixed seed: bit rot, a bad copy, the same size.
func Overwrite(b []byte, n int) []byte {
	out := bytes.Clone(b)
	r := rand.New(rand.NewPCG(53, 1000))
	at := (len(out) - n) / 2
	for i := at; i < at+n; i++ {
		out[i] = byte(r.Uint32())
	}
	return out
}
