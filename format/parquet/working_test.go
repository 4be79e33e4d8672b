package parquet

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
)

// TestWorking: decoder.Working bounds what decoding a row group
// allocates — arrow-go's copies of the column chunks, their pages, the
// values — for images (plain and dictionary-encoded, as pyarrow writes
// them) and token lists, whole and one field of two.
func TestWorking(t *testing.T) {
	tokens := arrow.NewSchema([]arrow.Field{{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil)
	r := rand.New(rand.NewPCG(3, 4))
	tokRec := newRecord(tokens, func(rb *array.RecordBuilder) {
		lb := rb.Field(0).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for range 300 {
			lb.Append(true)
			for range 1024 + r.IntN(3072) {
				vb.Append(int32(50257 * r.Float64() * r.Float64() * r.Float64()))
			}
		}
	})
	cases := []struct {
		name string
		file []byte
		sel  format.Selection
	}{
		{"images-plain", writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithDictionaryDefault(false), pq.WithCompression(compress.Codecs.Snappy)), imageRecord(hubRows(60, 100<<10))), nil},
		{"images-dictionary", writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), imageRecord(hubRows(60, 100<<10))), nil},
		{"images-zstd-labels", writeArrow(t, imageSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Zstd)), imageRecord(hubRows(60, 100<<10))), format.Selection{1}},
		{"tokens", writeArrow(t, tokens, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy), pq.WithMaxRowGroupLength(1000)), tokRec), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore()
			st.put("d.parquet", tc.file)
			lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dec, _ := Format{}.Open(lay.Meta)
			ranges, bound := dec.Extent(0, tc.sel)
			var src []byte
			for _, rg := range ranges {
				src = append(src, tc.file[rg.Off:rg.End()]...)
			}
			dst := make([]byte, bound)
			work := dec.(format.Working).Working(0, tc.sel)
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			if err := dec.Decode(0, tc.sel, src, dst, format.WriterOptions{}); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&m1)
			got := int64(m1.TotalAlloc - m0.TotalAlloc)
			t.Logf("read %.1f MB: allocated %.1f MB, Working %.1f MB", float64(len(src))/1e6, float64(got)/1e6, float64(work)/1e6)
			if got > work || work > 2*got+2<<20 {
				t.Errorf("a decode allocated %d bytes, Working says %d", got, work)
			}
			// Decoded as the bytes arrive, the values placed on trust
			// (hubRows' nulls make the decode move them all).
			src2 := make([]byte, len(src))
			var opens atomic.Int64
			open := opener(tc.file, &opens)
			runtime.GC()
			runtime.ReadMemStats(&m0)
			if err := dec.(format.Streamer).DecodeStream(0, tc.sel, open, src2, dst, format.WriterOptions{}); err != nil && !errors.Is(err, format.ErrNotStreamed) {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&m1)
			got = int64(m1.TotalAlloc - m0.TotalAlloc)
			t.Logf("streamed: allocated %.1f MB", float64(got)/1e6)
			if got > work {
				t.Errorf("a streamed decode allocated %d bytes, Working says %d", got, work)
			}
		})
	}
}
