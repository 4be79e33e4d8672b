//go:build ignore

// memorylimit.go writes the data scripts/memory-limit.sh measures issue
// 80, case 3 on (go run scripts/memorylimit.go -dir DIR):
//
//	DIR/bombs/shard-00N.tar  16 WebDataset samples in 4 shards, each an
//	                         8000×8000 PNG of one colour (200 KB stored,
//	                         440 MiB to decode and resize) and a caption
//	DIR/conv/conv.parquet    4 rows of a 32×32 PNG and a conversation,
//	                         one of whose turns is 100 MB (5 MB stored,
//	                         snappy, a dictionary as arrow-go writes it)
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/png"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

func main() {
	dir := flag.String("dir", "", "where to write bombs/ and conv/")
	flag.Parse()
	if *dir == "" {
		log.Fatal("give -dir")
	}
	if err := bombs(filepath.Join(*dir, "bombs")); err != nil {
		log.Fatal(err)
	}
	if err := conversation(filepath.Join(*dir, "conv")); err != nil {
		log.Fatal(err)
	}
}

// pngOf is a side×side opaque black PNG.
func pngOf(side int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&b, img); err != nil {
		log.Fatal(err)
	}
	return b.Bytes()
}

func bombs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	img := pngOf(8000)
	const n, shards = 16, 4
	for s := range shards {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("shard-%03d.tar", s)))
		if err != nil {
			return err
		}
		tw := tar.NewWriter(f)
		for i := s; i < n; i += shards {
			key := fmt.Sprintf("s%05d", i)
			for _, m := range []struct {
				name string
				b    []byte
			}{{key + ".png", img}, {key + ".txt", []byte(fmt.Sprintf("<image> sample %d, a large black square.", i))}} {
				if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.b))}); err != nil {
					return err
				}
				if _, err := tw.Write(m.b); err != nil {
					return err
				}
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func conversation(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	turn := arrow.StructOf(arrow.Field{Name: "from", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "value", Type: arrow.BinaryTypes.String, Nullable: true})
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary},
		{Name: "conversations", Type: arrow.ListOf(turn), Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	img := pngOf(32)
	for i := range 4 {
		b.Field(0).(*array.BinaryBuilder).Append(img)
		v := "<image>\nWhat is this?"
		if i == 1 {
			v = "<image>\n" + strings.Repeat("the quick brown fox jumps over the lazy dog ", (100<<20)/44)
		}
		lb := b.Field(1).(*array.ListBuilder)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		lb.Append(true)
		for _, m := range [][2]string{{"human", v}, {"gpt", "A black square."}} {
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append(m[0])
			sb.FieldBuilder(1).(*array.StringBuilder).Append(m[1])
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(filepath.Join(dir, "conv.parquet"))
	if err != nil {
		return err
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	if err := w.Write(rec); err != nil {
		return err
	}
	return w.Close()
}
