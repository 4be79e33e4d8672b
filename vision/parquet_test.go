package vision

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// parquetSamples writes rows to a Parquet file of schema sc (arrow-go's
// writer), indexes and decodes it in place with format/parquet as a
// gateway serves it, and returns each row's sample: its resident tar
// members.
func parquetSamples(t *testing.T, sc *arrow.Schema, fill func(b *array.RecordBuilder)) [][]byte {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	fill(b)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := s3test.Wrap(s3test.NewMemory())
	if _, err := st.Put(ctx, "d/part-0.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	infos, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	objs := []format.Object{{Key: infos[0].Key, Size: infos[0].Size, ETag: infos[0].ETag}}
	lay, err := parquet.Format{}.Index(ctx, st, objs, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := parquet.Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := format.Select(dec.Fields(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for c, ch := range lay.Chunks {
		ranges, bound := dec.Extent(c, sel)
		var src []byte
		for _, r := range ranges {
			p := make([]byte, r.Len)
			if err := st.ReadRange(ctx, ch.Object, ch.ETag, r.Off, p); err != nil {
				t.Fatal(err)
			}
			src = append(src, p...)
		}
		dst := make([]byte, bound)
		err := dec.Decode(c, sel, src, dst, format.WriterOptions{})
		var ge *format.GrowError
		if errors.As(err, &ge) {
			dst = make([]byte, ge.Need)
			err = dec.Decode(c, sel, src, dst, format.WriterOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		tab, err := format.Verify(dst)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tab.Len() {
			off, n, _ := tab.Sample(i)
			out = append(out, dst[off:off+n])
		}
	}
	return out
}

// TestParquetInPlace: a Parquet dataset of an image bytes column and a
// caption column, and one of an image column and a conversation column
// (a list of {from, value} structs, LLaVA's), served in place by
// format/parquet, read as image-text samples: the image and text are
// the row's, the conversation's loss on the assistant's turns.
func TestParquetInPlace(t *testing.T) {
	j := newJob(t, 0, 512, rule)
	r, enc := j.reader.Rule, model(t)
	imgs := [][]byte{pngOf(64, 64, 1), pngOf(100, 50, 2), pngOf(30, 90, 3)}
	captions := []string{"A red square.", "Zwei Katzen 🐈 schlafen.", "山の写真"}

	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "caption", Type: arrow.BinaryTypes.String}}, nil)
	samples := parquetSamples(t, sc, func(b *array.RecordBuilder) {
		for i := range imgs {
			b.Field(0).(*array.BinaryBuilder).Append(imgs[i])
			b.Field(1).(*array.StringBuilder).Append(captions[i])
		}
	})
	if len(samples) != len(imgs) {
		t.Fatalf("%d samples of %d rows", len(samples), len(imgs))
	}
	for i, b := range samples {
		s, err := j.reader.Read("row", b)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if len(s.Images) != 1 || !bytes.Equal(s.Images[0].Data, imgs[i]) {
			t.Fatalf("row %d: %d images, not the row's", i, len(s.Images))
		}
		w, h, _ := r.Size(s.Images[0].W, s.Images[0].H)
		text, _ := enc.Encode([]byte(captions[i]))
		want := append(append(append([]int32{r.Start}, slices.Repeat([]int32{r.Image}, r.Tokens(w, h))...), r.End), text...)
		if !slices.Equal(s.IDs, want) {
			t.Fatalf("row %d: IDs %v; want the image, then the caption %v", i, s.IDs, want)
		}
	}

	turn := arrow.StructOf(arrow.Field{Name: "from", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.String})
	sc = arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "conversations", Type: arrow.ListOf(turn)}}, nil)
	convs := [][][2]string{
		{{"human", "<image>\nWhat is it?"}, {"gpt", "A square."}},
		{{"human", "Describe <image> briefly."}, {"gpt", "Two cats."}, {"human", "Colour?"}, {"gpt", "Grey."}},
	}
	samples = parquetSamples(t, sc, func(b *array.RecordBuilder) {
		lb := b.Field(1).(*array.ListBuilder)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		for i, c := range convs {
			b.Field(0).(*array.BinaryBuilder).Append(imgs[i])
			lb.Append(true)
			for _, m := range c {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append(m[0])
				sb.FieldBuilder(1).(*array.StringBuilder).Append(m[1])
			}
		}
	})
	for i, b := range samples {
		s, err := j.reader.Read("row", b)
		if err != nil {
			t.Fatalf("conversation row %d: %v", i, err)
		}
		var want []uint8
		w, h, _ := r.Size(s.Images[0].W, s.Images[0].H)
		for _, m := range convs[i] {
			loss := uint8(0)
			if m[0] == "gpt" {
				loss = 1
			}
			for k, p := range strings.Split(m[1], Placeholder) {
				ids, _ := enc.Encode([]byte(p))
				want = append(want, slices.Repeat([]uint8{loss}, len(ids))...)
				if k == 0 && strings.Contains(m[1], Placeholder) {
					want = append(want, slices.Repeat([]uint8{0}, r.span(r.Tokens(w, h)))...)
				}
			}
		}
		if !slices.Equal(s.Loss, want) || len(s.Images) != 1 || !bytes.Equal(s.Images[0].Data, imgs[i]) {
			t.Fatalf("conversation row %d: loss %v; want %v", i, s.Loss, want)
		}
	}
}
