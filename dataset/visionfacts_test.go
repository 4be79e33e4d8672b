package dataset

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
)

// imageTextShard is a WebDataset shard of n image-text samples (a txt
// with 0 to 2 placeholders and as many PNGs, every fifth a sample whose
// placeholders are not its images, every seventh an image that is no
// PNG), and each sample's members as a tar of their own.
func imageTextShard(t *testing.T, base, n int) (shard []byte, samples map[string][]byte) {
	t.Helper()
	var sb bytes.Buffer
	tw := tar.NewWriter(&sb)
	samples = make(map[string][]byte)
	for i := range n {
		key := fmt.Sprintf("s%05d", base+i)
		var own bytes.Buffer
		otw := tar.NewWriter(&own)
		put := func(name string, b []byte) {
			for _, w := range []*tar.Writer{tw, otw} {
				if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(b); err != nil {
					t.Fatal(err)
				}
			}
		}
		k := i % 3
		text := fmt.Sprintf("Sample %d, a picture of %d things.", i, i*7)
		for j := range k {
			text = "<image> " + text
			im := image.NewNRGBA(image.Rect(0, 0, 30+i+j, 40+2*i))
			im.SetNRGBA(0, 0, color.NRGBA{uint8(i), 1, 2, 255})
			var b bytes.Buffer
			if err := png.Encode(&b, im); err != nil {
				t.Fatal(err)
			}
			if i%7 == 6 {
				b.Reset()
				b.WriteString("GIF89a not a png")
			}
			put(fmt.Sprintf("%s.%d.png", key, j), b.Bytes())
		}
		if i%5 == 4 {
			text += " <image> one too many"
		}
		put(key+".txt", []byte(text))
		if err := otw.Close(); err != nil {
			t.Fatal(err)
		}
		samples[key] = own.Bytes()
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return sb.Bytes(), samples
}

// TestVisionFacts: the facts written beside an index of image-text
// shards are, sample by sample, what vision.Reader.Facts makes of the
// sample's own members, with the tokenizer file and the pixel bound;
// read back they are the same; after a re-index of more samples they
// are refused as of another index.
func TestVisionFacts(t *testing.T) {
	ctx := context.Background()
	tok, err := os.ReadFile("../tokenize/testdata/hf-golden-tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	model, err := tokenize.Load(tok)
	if err != nil {
		t.Fatal(err)
	}
	st := newLocal(t)
	all := make(map[string][]byte)
	for s := range 3 {
		shard, samples := imageTextShard(t, 100*s, 23)
		putBytes(t, st, fmt.Sprintf("shard-%d.tar", s), shard)
		for k, v := range samples {
			all[k] = v
		}
	}
	res, err := IndexShards(ctx, st, IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	f, err := WriteVisionFacts(ctx, st, ix, tok, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := &vision.Reader{Encoder: model, MaxPixels: 1 << 20}
	faults := 0
	for id := range ix.NumSamples() {
		key := ix.SampleKey(id)
		want, err := r.Facts(key, all[key])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Samples[id], want) {
			t.Fatalf("sample %s: %+v; its members make %+v", key, f.Samples[id], want)
		}
		if want.Refused() {
			faults++
		}
	}
	if faults == 0 || faults == ix.NumSamples() {
		t.Fatalf("%d of %d samples at fault: the test wants both kinds", faults, ix.NumSamples())
	}
	back, err := servedFacts(ctx, st, ix)
	if err != nil || !reflect.DeepEqual(back, f) {
		t.Fatalf("read back: %v", err)
	}
	shard, _ := imageTextShard(t, 900, 4)
	putBytes(t, st, "shard-9.tar", shard)
	if err := st.Delete(ctx, "_brand/index"); err != nil {
		t.Fatal(err)
	}
	res2, err := IndexShards(ctx, st, IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := servedFacts(ctx, st, res2.Index); !errors.Is(err, vision.ErrFactsFile) {
		t.Fatalf("facts of the old index read for the new one: %v; want ErrFactsFile", err)
	}
}

// TestVisionFactsInPlace: the facts of a Parquet dataset served in place
// (an image bytes column and a caption column, some images not
// decodable) indexed with checksums into another store are, row by
// row, what vision.Reader.Facts makes of the row's members (KEY.png,
// KEY.txt), stored beside the index and not beside the data. Each
// writer refuses the other's kind of index; a file changed since it
// was indexed fails the facts, naming the chunk.
func TestVisionFactsInPlace(t *testing.T) {
	ctx := context.Background()
	tok, err := os.ReadFile("../tokenize/testdata/hf-golden-tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	model, err := tokenize.Load(tok)
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "caption", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	var rows [][2][]byte
	for i := range 9 {
		im := image.NewNRGBA(image.Rect(0, 0, 30+i, 40+2*i))
		im.SetNRGBA(0, 0, color.NRGBA{uint8(i), 1, 2, 255})
		var p bytes.Buffer
		if err := png.Encode(&p, im); err != nil {
			t.Fatal(err)
		}
		img := p.Bytes()
		if i%4 == 3 {
			img = img[:20] // a PNG cut short: its header does not read
		}
		text := fmt.Sprintf("<image> Row %d, a picture of %d things.", i, 7*i)
		b.Field(0).(*array.BinaryBuilder).Append(img)
		b.Field(1).(*array.StringBuilder).Append(text)
		rows = append(rows, [2][]byte{img, []byte(text)})
	}
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
	data, dst := newLocal(t), newLocal(t)
	putBytes(t, data, "pairs.parquet", buf.Bytes())
	res, err := IndexInPlace(ctx, data, dst, InPlaceOptions{Formats: []format.Format{parquet.Format{}}, Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	if _, err := WriteVisionFacts(ctx, dst, ix, tok, 0, 1); err == nil {
		t.Fatal("WriteVisionFacts read a dataset served in place")
	}
	f, err := WriteVisionFactsInPlace(ctx, dst, data, ix, res.Manifest.InPlace.Format, res.Decoder, tok, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := &vision.Reader{Encoder: model}
	bad := 0
	for id := range ix.NumSamples() {
		key := ix.SampleKey(id)
		var own bytes.Buffer
		tw := tar.NewWriter(&own)
		for _, m := range []struct {
			name string
			b    []byte
		}{{key + ".png", rows[id][0]}, {key + ".txt", rows[id][1]}} {
			_ = tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.b)), Typeflag: tar.TypeReg})
			_, _ = tw.Write(m.b)
		}
		_ = tw.Close()
		want, err := r.Facts(key, own.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Samples[id], want) {
			t.Fatalf("row %s: %+v; its values make %+v", key, f.Samples[id], want)
		}
		if want.Refused() {
			bad++
		}
	}
	if bad != 2 {
		t.Fatalf("%d rows at fault; the test cut 2 images short", bad)
	}
	if back, err := servedFacts(ctx, dst, ix); err != nil || !reflect.DeepEqual(back, f) {
		t.Fatalf("read back beside the index: %v", err)
	}
	if _, err := data.Stat(ctx, stored.VisionFactsKey); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("facts beside the data: %v", err)
	}
	tars, err := IndexShards(ctx, newLocalWith(t, "s.tar", imageTextShardOnly(t)), IndexOptions{Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteVisionFactsInPlace(ctx, dst, data, tars.Index, "parquet", res.Decoder, tok, 0, 1); err == nil {
		t.Fatal("WriteVisionFactsInPlace read an index of tar chunks")
	}
	editMiddle(t, data, "pairs.parquet")
	if _, err := WriteVisionFactsInPlace(ctx, dst, data, ix, res.Manifest.InPlace.Format, res.Decoder, tok, 0, 2); err == nil || !strings.Contains(err.Error(), "chunk 0") {
		t.Fatalf("facts of a file changed since it was indexed: %v; want an error naming the chunk", err)
	}
}

// imageTextShardOnly is a shard of imageTextShard's, for an index of tar
// chunks.
func imageTextShardOnly(t *testing.T) []byte {
	shard, _ := imageTextShard(t, 0, 3)
	return shard
}

// newLocalWith is a store holding key.
// servedFacts reads the facts stored beside ix as the server does
// (catalog.Dataset.LoadVision, a version of a dataset in st): what
// `brand index --tokenizer` writes is what a vision job is laid out from.
func servedFacts(ctx context.Context, st s3backend.Store, ix *chunkindex.Index) (*vision.FactsFile, error) {
	v, err := catalog.NewDataset("d", "", st, ix).LoadVision(ctx)
	if err != nil {
		return nil, err
	}
	return v.Facts, nil
}

func newLocalWith(t *testing.T, key string, b []byte) *s3backend.Local {
	st := newLocal(t)
	putBytes(t, st, key, b)
	return st
}
