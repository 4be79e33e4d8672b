package parquet

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
)

var imageSchema = arrow.NewSchema([]arrow.Field{
	{Name: "image", Type: arrow.StructOf(
		arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

type imageRow struct {
	img   []byte // nil: a null image
	path  *string
	label *int64
}

// hubRows are rows in the Hub's image layout: JPEGs named by path, PNGs
// without one (their magic decides), bytes that are no image, nulls.
func hubRows(n int, size int) []imageRow {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	rows := make([]imageRow, n)
	for i := range rows {
		body := make([]byte, size/2+r.IntN(size))
		for j := range body {
			body[j] = byte(r.Uint32())
		}
		var p string
		switch i % 3 {
		case 0:
			copy(body, "\xff\xd8\xff\xe0")
			p = fmt.Sprintf("n0144%04d_%d.jpg", i, i)
			if i%10 == 0 {
				p = fmt.Sprintf("IMG_%d.JPEG", i)
			}
			rows[i].path = &p
		case 1:
			copy(body, "\x89PNG\r\n\x1a\n")
		case 2:
			p = fmt.Sprintf("x_%d.dat", i)
			rows[i].path = &p
			body[0] = 'x'
		}
		if i%17 != 5 {
			rows[i].img = body
		}
		if i%13 != 4 {
			l := int64(i % 1000)
			rows[i].label = &l
		}
	}
	return rows
}

func imageRecord(rows []imageRow) arrow.RecordBatch {
	return newRecord(imageSchema, func(b *array.RecordBuilder) {
		for _, r := range rows {
			appendImageRow(b, r)
		}
	})
}

// wantImage is the members a Hub image row becomes.
func wantImage(r imageRow) string {
	var b strings.Builder
	if r.img != nil {
		ext := "bin"
		switch {
		case r.path != nil && strings.HasSuffix(*r.path, ".jpg"):
			ext = "jpg"
		case r.path != nil && strings.HasSuffix(*r.path, ".JPEG"):
			ext = "jpeg"
		case r.img[0] == 0x89:
			ext = "png"
		}
		fmt.Fprintf(&b, "%s=%q\n", ext, r.img)
	}
	if r.label != nil {
		fmt.Fprintf(&b, "cls=%q\n", strconv.FormatInt(*r.label, 10))
	}
	if b.Len() == 0 {
		return "null=\"\"\n"
	}
	return b.String()
}

// The Hub's image layout (struct{bytes, path} + int64 label), written as
// pyarrow writes it — dictionary encoding on, which for images puts a
// whole row group's bytes in the dictionary page — and with it off:
// every row's members are what was written, the extension from the path
// or the magic bytes.
func TestHubImages(t *testing.T) {
	for _, dict := range []bool{false, true} {
		t.Run(fmt.Sprintf("dictionary=%v", dict), func(t *testing.T) {
			rows := hubRows(250, 3000)
			st := newStore()
			props := pq.NewWriterProperties(pq.WithDictionaryDefault(dict), pq.WithCompression(compress.Codecs.Snappy))
			st.put("data/train-00000-of-00001.parquet", writeArrow(t, imageSchema, props,
				imageRecord(rows[:100]), imageRecord(rows[100:200]), imageRecord(rows[200:])))
			st.put("README.md", []byte("not parquet"))
			got, lay, dec := decodeAll(t, st, format.Options{})
			// Three row groups of 100 small photos: one chunk.
			if len(lay.Chunks) != 1 || lay.Chunks[0].Name != "0-2" || len(lay.Keys) != 250 || lay.Keys[7] != "data/train-00000-of-00001/007" {
				t.Fatalf("%d chunks (%+v), %d keys, key 7 %q", len(lay.Chunks), lay.Chunks, len(lay.Keys), lay.Keys[7])
			}
			fs := dec.Fields()
			if len(fs) != 2 || fs[0].Ext != "" || fs[1].Ext != "cls" || !strings.Contains(fs[0].Type, "(image)") {
				t.Fatalf("fields %+v", fs)
			}
			for i, r := range rows {
				k := fmt.Sprintf("data/train-00000-of-00001/%03d", i)
				if g, w := render(got[k]), wantImage(r); g != w {
					t.Fatalf("row %d:\n got %.300s\nwant %.300s", i, g, w)
				}
			}
		})
	}
}

// appendImageRow appends r's image struct {bytes, path} and label to
// fields 0 and 1 of b, as the Hub's layout has them.
func appendImageRow(b *array.RecordBuilder, r imageRow) {
	sb := b.Field(0).(*array.StructBuilder)
	bb := sb.FieldBuilder(0).(*array.BinaryBuilder)
	pb := sb.FieldBuilder(1).(*array.StringBuilder)
	lb := b.Field(1).(*array.Int64Builder)
	if r.img == nil {
		sb.AppendNull()
	} else {
		sb.Append(true)
		bb.Append(r.img)
		if r.path != nil {
			pb.Append(*r.path)
		} else {
			pb.AppendNull()
		}
	}
	if r.label != nil {
		lb.Append(*r.label)
	} else {
		lb.AppendNull()
	}
}
