package parquet

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
)

// A list<float32> column (an embedding, as the Hub stores precomputed
// features) is bounded within a small factor of its values' bytes — its
// JSON text at most — not by charging every float its list's and its
// element's names: a dataset of 256 MiB was indexed as 1.36 GB. The bound
// still holds for the floats whose text is longest.
func TestListBoundTight(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "embedding", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	const rows, dim = 200, 512
	r := rand.New(rand.NewPCG(5, 6))
	// The longest texts a float32 has: 9 digits after "-0.000", and
	// exponents of two digits.
	longest := []float32{-0.00012345679, -1.4012985e-45, -3.4028235e+38, -1.17549435e-38, -0.00098765434}
	rec := newRecord(sc, func(b *array.RecordBuilder) {
		lb := b.Field(1).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Float32Builder)
		for i := range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if i%37 == 3 {
				lb.AppendNull()
				continue
			}
			lb.Append(true)
			for j := range dim {
				switch {
				case i%2 == 0:
					vb.Append(longest[(i+j)%len(longest)])
				case j%50 == 7:
					vb.AppendNull()
				default:
					vb.Append(2*r.Float32() - 1)
				}
			}
		}
	})
	st := newStore()
	st.put("e.parquet", writeArrow(t, sc, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), rec))
	got, lay, dec := decodeAll(t, st, format.Options{}, "embedding")
	if len(got) != rows {
		t.Fatalf("%d rows", len(got))
	}
	if len(lay.Chunks) != 1 {
		t.Fatalf("%d chunks", len(lay.Chunks))
	}
	sel, _ := format.Select(dec.Fields(), []string{"embedding"})
	_, bound := dec.Extent(0, sel)
	values := int64(rows * dim * 4)
	// Per float its text (at most 15 bytes) and a comma, against its 4
	// bytes; per row a member's header and padding.
	if limit := 5*values + rows*2*format.Block; bound > limit {
		t.Fatalf("the embedding's bound is %d bytes for %d bytes of floats: over %d (%.1f×)", bound, values, limit, float64(bound)/float64(values))
	}
	t.Logf("the embedding's bound: %d bytes for %d bytes of floats (%.2f×)", bound, values, float64(bound)/float64(values))
}

// Damage in a Hub row group read by flatCol (images' bytes and paths,
// labels; dictionary and plain pages; snappy and uncompressed) is an
// error wrapping format.ErrDamaged, or values within the bound.
func TestDamagedFlat(t *testing.T) {
	rows := hubRows(30, 1000)
	for _, props := range []*pq.WriterProperties{
		pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy), pq.WithDictionaryPageSizeLimit(40<<10), pq.WithDataPageSize(16<<10)),
		pq.NewWriterProperties(pq.WithDictionaryDefault(false), pq.WithDataPageVersion(pq.DataPageV2), pq.WithDataPageSize(16<<10)),
	} {
		b := writeArrow(t, imageSchema, props, imageRecord(rows))
		st := newStore()
		st.put("t.parquet", b)
		_, _, dec := decodeAll(t, st, format.Options{})
		ranges, bound := dec.Extent(0, nil)
		var src []byte
		for _, r := range ranges {
			src = append(src, b[r.Off:r.End()]...)
		}
		damaged := 0
		for at := 0; at < len(src); at += 7 {
			bad := bytes.Clone(src)
			bad[at] ^= 0x5a
			if err := dec.Decode(0, nil, bad, make([]byte, bound), format.WriterOptions{}); err != nil {
				if !errorsIsDamaged(err) {
					t.Fatalf("byte %d flipped: %v", at, err)
				}
				damaged++
			}
		}
		if damaged == 0 {
			t.Fatal("no flipped byte was found damaged")
		}
		t.Logf("%d of %d flips damaged", damaged, len(src)/7)
	}
}
