package dataset

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
)

// TestVisionFactsLongText is issue 80, case 3's index half: `brand index
// --tokenizer` of Parquet rows, one of whose conversations holds a turn
// past the tokenizer's bound (a 100 MB conversation took 1,219 MB and
// 9 s to be refused, read whole, rendered as JSON, parsed), refuses that
// row naming it from the page's header and the value's length prefix,
// allocating a fraction of the text; its facts are what the same sample
// as a tar's members gives, and every other row's are as read.
func TestVisionFactsLongText(t *testing.T) {
	ctx := context.Background()
	tok, err := os.ReadFile("../tokenize/testdata/hf-golden-tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	model, err := tokenize.Load(tok)
	if err != nil {
		t.Fatal(err)
	}
	long := "<image>\n" + strings.Repeat("Describe the picture again, in more words than before. ", (tokenize.MaxTextBytes+2<<20)/56)
	type msg struct {
		From  string `json:"from"`
		Value string `json:"value"`
	}
	convs := [][]msg{
		{{"human", "<image>\nWhat is it?"}, {"gpt", "A red square."}},
		{{"human", long}, {"gpt", "Still a red square."}},
		{{"human", "<image>\nAnd this?"}, {"gpt", "Another."}},
	}
	turn := arrow.StructOf(arrow.Field{Name: "from", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.String})
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "conversations", Type: arrow.ListOf(turn)}}, nil)
	var p bytes.Buffer
	if err := png.Encode(&p, image.NewNRGBA(image.Rect(0, 0, 28, 28))); err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for _, c := range convs {
		b.Field(0).(*array.BinaryBuilder).Append(p.Bytes())
		lb := b.Field(1).(*array.ListBuilder)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		lb.Append(true)
		for _, m := range c {
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append(m.From)
			sb.FieldBuilder(1).(*array.StringBuilder).Append(m.Value)
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	var file bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &file, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	data, dst := newLocal(t), newLocal(t)
	putBytes(t, data, "pairs.parquet", file.Bytes())
	res, err := IndexInPlace(ctx, data, dst, InPlaceOptions{Formats: []format.Format{parquet.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := WriteVisionFactsInPlace(ctx, dst, data, ix, res.Manifest.InPlace.Format, res.Decoder, tok, 0, 1)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(long))/2 {
		t.Errorf("the facts of a %d KB file holding a %d MiB text allocated %d MiB: the text was read", file.Len()>>10, len(long)>>20, got>>20)
	}
	r := &vision.Reader{Encoder: model}
	for id, c := range convs {
		key := ix.SampleKey(id)
		js, _ := json.Marshal(c)
		var own bytes.Buffer
		tw := tar.NewWriter(&own)
		for _, m := range []struct {
			name string
			b    []byte
		}{{key + ".png", p.Bytes()}, {key + ".json", js}} {
			_ = tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.b)), Typeflag: tar.TypeReg})
			_, _ = tw.Write(m.b)
		}
		_ = tw.Close()
		want, err := r.Facts(key, own.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Samples[id], want) {
			t.Errorf("row %s: %+v; its values make %+v", key, f.Samples[id], want)
		}
	}
	if got := f.Samples[1]; got.Fault != vision.FaultText || !strings.Contains(got.Why, ix.SampleKey(1)+".json") || !strings.Contains(got.Why, fmt.Sprint(len(long))) {
		t.Errorf("the long row's facts: %+v; want its text refused, naming its member and bytes", got)
	}
	if _, err := (vision.Rule{Patch: 14, Merge: 2, MinPixels: 3136, MaxPixels: 1 << 20, Image: 5}).Item(f.Samples[1], 4096); err == nil {
		t.Error("the long row lays out")
	}
}

// TestVisionFactsLongTextBeside: a long text is the sample's fault only
// where vision reads it as the sample's text: a conversation beside a
// caption is metadata (left unread all the same), so that row's facts
// are its caption's; without the caption the conversation is its text,
// refused; a long caption is refused. Each is what the same members as
// a tar give.
func TestVisionFactsLongTextBeside(t *testing.T) {
	ctx := context.Background()
	tok, err := os.ReadFile("../tokenize/testdata/hf-golden-tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	model, err := tokenize.Load(tok)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("A caption far longer than a tokenizer reads. ", (tokenize.MaxTextBytes+1<<20)/45)
	short := "<image> A black square."
	rows := []struct {
		caption *string
		turn    string
	}{{&short, "<image>\n" + long}, {nil, "<image>\n" + long}, {&long, "<image>\nWhat is it?"}, {&short, "<image>\nWhat is it?"}}
	turn := arrow.StructOf(arrow.Field{Name: "from", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.String})
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "caption", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "conversations", Type: arrow.ListOf(turn)}}, nil)
	var p bytes.Buffer
	if err := png.Encode(&p, image.NewNRGBA(image.Rect(0, 0, 28, 28))); err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for _, r := range rows {
		b.Field(0).(*array.BinaryBuilder).Append(p.Bytes())
		if r.caption == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*r.caption)
		}
		lb := b.Field(2).(*array.ListBuilder)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		lb.Append(true)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append("human")
		sb.FieldBuilder(1).(*array.StringBuilder).Append(r.turn)
	}
	rec := b.NewRecordBatch()
	b.Release()
	var file bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &file, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Zstd)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	data, dst := newLocal(t), newLocal(t)
	putBytes(t, data, "pairs.parquet", file.Bytes())
	res, err := IndexInPlace(ctx, data, dst, InPlaceOptions{Formats: []format.Format{parquet.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	f, err := WriteVisionFactsInPlace(ctx, dst, data, ix, res.Manifest.InPlace.Format, res.Decoder, tok, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := &vision.Reader{Encoder: model}
	faults := []vision.Fault{vision.FaultNone, vision.FaultText, vision.FaultText, vision.FaultNone}
	for id, row := range rows {
		key := ix.SampleKey(id)
		js, _ := json.Marshal([]map[string]string{{"from": "human", "value": row.turn}})
		var own bytes.Buffer
		tw := tar.NewWriter(&own)
		members := []struct {
			name string
			b    []byte
		}{{key + ".png", p.Bytes()}, {key + ".json", js}}
		if row.caption != nil {
			members = append(members, struct {
				name string
				b    []byte
			}{key + ".txt", []byte(*row.caption)})
		}
		for _, m := range members {
			_ = tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.b)), Typeflag: tar.TypeReg})
			_, _ = tw.Write(m.b)
		}
		_ = tw.Close()
		want, err := r.Facts(key, own.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Samples[id], want) || want.Fault != faults[id] {
			t.Errorf("row %d: %+v; its values make %+v (fault %d expected)", id, f.Samples[id], want, faults[id])
		}
	}
}
