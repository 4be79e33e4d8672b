package parquet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
)

// BenchmarkIndex indexes 1,000 files of the Hub's image layout (4 row
// groups each) from their footers: per op, all 1,000.
func BenchmarkIndex(b *testing.B) {
	rows := hubRows(40, 200)
	file := writeArrow(b, imageSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)),
		imageRecord(rows[:10]), imageRecord(rows[10:20]), imageRecord(rows[20:30]), imageRecord(rows[30:]))
	st := newStore()
	for i := range 1000 {
		st.put(fmt.Sprintf("data/train-%05d-of-01000.parquet", i), file)
	}
	objs := st.listing()
	b.ReportAllocs()
	for b.Loop() {
		st.Take()
		if _, err := (Format{}).Index(context.Background(), st, objs, format.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Take().Sum().Bytes)/1000, "B-read/file")
}

// BenchmarkDecode decodes one row group: 100 Hub images of ~100 KiB with
// their labels (dictionary-encoded as pyarrow writes them, and plain), and
// 1,000 rows of 1–4k int32 tokens.
func BenchmarkDecode(b *testing.B) {
	tokens := arrow.NewSchema([]arrow.Field{{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil)
	r := rand.New(rand.NewPCG(3, 4))
	tokRec := newRecord(tokens, func(rb *array.RecordBuilder) {
		lb := rb.Field(0).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for range 1000 {
			lb.Append(true)
			for range 1024 + r.IntN(3072) {
				vb.Append(int32(50257 * r.Float64() * r.Float64() * r.Float64()))
			}
		}
	})
	cases := []struct {
		name string
		file []byte
	}{
		{"images-plain", writeArrow(b, imageSchema, pq.NewWriterProperties(pq.WithDictionaryDefault(false), pq.WithCompression(compress.Codecs.Snappy)), imageRecord(hubRows(100, 100<<10)))},
		{"images-dictionary", writeArrow(b, imageSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), imageRecord(hubRows(100, 100<<10)))},
		{"tokens-snappy-dictionary", writeArrow(b, tokens, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy), pq.WithMaxRowGroupLength(1000)), tokRec)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			st := newStore()
			st.put("d.parquet", tc.file)
			lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{})
			if err != nil {
				b.Fatal(err)
			}
			dec, _ := Format{}.Open(lay.Meta)
			ranges, bound := dec.Extent(0, nil)
			var src []byte
			for _, rg := range ranges {
				src = append(src, tc.file[rg.Off:rg.End()]...)
			}
			dst := make([]byte, bound)
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if err := dec.Decode(0, nil, src, dst, format.WriterOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(bound)/float64(len(src)), "bound/read")
		})
	}
}

// BenchmarkIndexTokens indexes one file of 4 row groups of 1,000 rows of
// 1–4k int32 tokens (about 10 M tokens, snappy) with Options.Tokens
// (levels counted, data page v1 and v2) and with Options.Text (the rows'
// text tokenized by package tokenize's golden BPE model): per op, the
// whole file; tokens/s is the documents' tokens counted a second.
func BenchmarkIndexTokens(b *testing.B) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "text", Type: arrow.BinaryTypes.String},
	}, nil)
	r := rand.New(rand.NewPCG(3, 4))
	words := []string{"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "lazy ", "dog, ", "Größe ", "東京 ", "données. "}
	rec := newRecord(sc, func(rb *array.RecordBuilder) {
		lb := rb.Field(0).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for range 4000 {
			lb.Append(true)
			n := 1024 + r.IntN(3072)
			var text []byte
			for range n {
				vb.Append(int32(50257 * r.Float64() * r.Float64() * r.Float64()))
				if len(text) < 4*n {
					text = append(text, words[r.IntN(len(words))]...)
				}
			}
			rb.Field(1).(*array.StringBuilder).Append(string(text))
		}
	})
	model := goldenModel(b)
	for _, tc := range []struct {
		name  string
		props []pq.WriterProperty
		opt   format.Options
	}{
		{"list-v1", nil, format.Options{Tokens: "input_ids"}},
		{"list-v2", []pq.WriterProperty{pq.WithDataPageVersion(pq.DataPageV2)}, format.Options{Tokens: "input_ids"}},
		{"text-bpe", nil, format.Options{Text: "text", Tokenizer: model}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			props := append([]pq.WriterProperty{pq.WithCompression(compress.Codecs.Snappy), pq.WithMaxRowGroupLength(1000)}, tc.props...)
			st := newStore()
			st.put("d.parquet", writeArrow(b, sc, pq.NewWriterProperties(props...), rec))
			var tokens int64
			b.ReportAllocs()
			for b.Loop() {
				st.Take()
				lay, err := Format{}.Index(context.Background(), st, st.listing(), tc.opt)
				if err != nil {
					b.Fatal(err)
				}
				if tokens == 0 {
					dec, _ := Format{}.Open(lay.Meta)
					for c := range lay.Chunks {
						for _, n := range dec.(format.Tokens).DocTokens(c) {
							tokens += int64(n)
						}
					}
				}
			}
			b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(st.Take().Sum().Bytes)/float64(len(st.objs["d.parquet"])), "read/file")
		})
	}
}
