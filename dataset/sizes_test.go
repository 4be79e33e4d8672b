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
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"github.com/brandgw/brand/s3backend"
)

// imageFixture reads one of transform's test images (written by Pillow).
func imageFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "transform", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noisePNG is a PNG of w×h pixels of noise: its bytes, past a header of
// 33, are pixels a size must not read.
func noisePNG(t testing.TB, w, h int) []byte {
	t.Helper()
	im := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range im.Pix {
		im.Pix[i] = uint8(r.Uint32())
	}
	var b bytes.Buffer
	if err := png.Encode(&b, im); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readsStore counts the bytes read from each object's ranges.
type readsStore struct {
	s3backend.Store
	mu    sync.Mutex
	reads map[string][][2]int64 // key → (offset, length) of each read
}

func (r *readsStore) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	r.mu.Lock()
	if r.reads == nil {
		r.reads = map[string][][2]int64{}
	}
	r.reads[key] = append(r.reads[key], [2]int64{off, int64(len(p))})
	r.mu.Unlock()
	return r.Store.ReadRange(ctx, key, etag, off, p)
}

// within sums the bytes read of key in [off, off+n).
func (r *readsStore) within(key string, off, n int64) int64 {
	var sum int64
	for _, rd := range r.reads[key] {
		if rd[0] >= off && rd[0] < off+n {
			sum += rd[1]
		}
	}
	return sum
}

// TestWriteSizes: the sizes written beside an index of tar shards are,
// sample by sample, what imagesize.DecodedTar makes of the sample's own
// members — JPEG, PNG, EXIF-rotated, no image, a header cut short, a
// pixel bomb, an image behind a large member, a JPEG whose header reads
// but whose data is cut short (bad: found here, not at its step) — read
// back through the catalog as a gateway does; each sample is read once,
// whole.
func TestWriteSizes(t *testing.T) {
	ctx := context.Background()
	photo, pic, rotated := imageFixture(t, "photo.jpg"), imageFixture(t, "photo.png"), imageFixture(t, "exif-6.jpg")
	big := noisePNG(t, 400, 400)
	filler := bytes.Repeat([]byte("{}"), 50<<10) // 100 KiB before an image
	kinds := [][]member{
		{{"jpg", photo}},
		{{"cls", []byte("3")}, {"png", pic}},
		{{"jpg", rotated}, {"txt", []byte("a rotated photo")}},
		{{"txt", []byte("no image")}},
		{{"png", pic[:20]}},
		{{"png", imageFixture(t, "bomb.png")}},
		{{"json", filler}, {"jpeg", rotated}},
		{{"png", big}},
		{{"jpg", photo[:len(photo)/2]}},
	}
	st := &readsStore{Store: newLocal(t)}
	own := map[string][]byte{} // a sample's members as a tar of their own
	for s := range 2 {
		var shard bytes.Buffer
		tw := tar.NewWriter(&shard)
		var ow *tar.Writer
		for i := range 12 {
			key := fmt.Sprintf("s%d/%03d", s, i)
			var ob bytes.Buffer
			ow = tar.NewWriter(&ob)
			for _, m := range kinds[(s*12+i)%len(kinds)] {
				for _, w := range []*tar.Writer{tw, ow} {
					if err := w.WriteHeader(&tar.Header{Name: key + "." + m.ext, Mode: 0o644, Size: int64(len(m.b)), Typeflag: tar.TypeReg}); err != nil {
						t.Fatal(err)
					}
					if _, err := w.Write(m.b); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := ow.Flush(); err != nil {
				t.Fatal(err)
			}
			own[key] = ob.Bytes()
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		putBytes(t, st, fmt.Sprintf("shard-%d.tar", s), shard.Bytes())
	}
	res, err := IndexShards(ctx, st, IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	st.reads = nil
	f, err := WriteSizes(ctx, st, ix, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var images, bad, rotatedSeen int
	for id := range ix.NumSamples() {
		key := ix.SampleKey(id)
		want, why := imagesize.DecodedTar(own[key], 0)
		got, ok := f.Of(id)
		if got != want || ok != (why == "") || f.Bad[id] != why {
			t.Fatalf("sample %s: %v (%v, %q); its members make %v, %q", key, got, ok, f.Bad[id], want, why)
		}
		if ok {
			images++
		} else {
			bad++
		}
		if want == (imagesize.Size{W: 32, H: 48}) {
			rotatedSeen++
		}
		s := ix.Sample(id)
		if n := st.within(ix.Chunk(s.Chunk).Key, s.Offset, s.Length); n != s.Length {
			t.Errorf("sample %s (%d bytes): %d bytes read for its size", key, s.Length, n)
		}
	}
	if images != 13 || bad != 11 || rotatedSeen != 5 {
		t.Fatalf("%d images, %d bad, %d rotated; the test made 13, 11 and 5", images, bad, rotatedSeen)
	}
	back, err := catalog.NewDataset("d", "", st, ix).LoadSizes(ctx)
	if err != nil || !reflect.DeepEqual(back, f) {
		t.Fatalf("read back: %v", err)
	}
	if _, err := WriteSizesInPlace(ctx, st, st, ix, nil, 0, 1); err == nil {
		t.Fatal("WriteSizesInPlace read an index of tar chunks")
	}
}

type member struct {
	ext string
	b   []byte
}

// TestWriteSizesInPlace: the sizes of Parquet written by DuckDB in the
// Hub's image layout — an image struct of bytes and path beside a caption
// column, checksummed — are each row's image's, read with the image
// column alone (the captions' bytes are never read), and stored beside
// the index, not beside the data.
func TestWriteSizesInPlace(t *testing.T) {
	ctx := context.Background()
	node, mods := nodetest.Find(t, nodetest.DuckDB)
	pics := t.TempDir()
	photo := imageFixture(t, "photo.jpg")
	rows := []struct {
		name string
		b    []byte
		want imagesize.Size // zero: bad
	}{
		{"r0.jpg", photo, imagesize.Size{W: 48, H: 32}},
		{"r1.jpg", imageFixture(t, "exif-6.jpg"), imagesize.Size{W: 32, H: 48}},
		{"r2.png", imageFixture(t, "photo.png"), imagesize.Size{W: 48, H: 32}},
		{"r3.png", imageFixture(t, "photo.png")[:20], imagesize.Size{}},
		{"r4.webp", []byte("RIFF\x10\x00\x00\x00WEBPVP8 not one"), imagesize.Size{}},
		{"r5.JPEG", photo, imagesize.Size{W: 48, H: 32}},
		{"r6.jpg", imageFixture(t, "bomb.jpg"), imagesize.Size{}},
		{"r7.png", noisePNG(t, 300, 200), imagesize.Size{W: 300, H: 200}},
	}
	for _, r := range rows {
		if err := os.WriteFile(filepath.Join(pics, r.name), r.b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "pairs.parquet")
	cmd := exec.Command(node, "testdata/sizes_duckdb.cjs", pics, out)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node testdata/sizes_duckdb.cjs: %v\n%s", err, b)
	}
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	data, dst := &readsStore{Store: newLocal(t)}, newLocal(t)
	putBytes(t, data, "data/pairs.parquet", file)
	res, err := IndexInPlace(ctx, data, dst, InPlaceOptions{Formats: []format.Format{parquet.Format{}}, Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	if ix.NumSamples() != len(rows) {
		t.Fatalf("%d samples of %d rows", ix.NumSamples(), len(rows))
	}
	if _, err := WriteSizes(ctx, dst, ix, 0, 1); err == nil {
		t.Fatal("WriteSizes read a dataset served in place")
	}
	data.reads = nil
	f, err := WriteSizesInPlace(ctx, dst, data, ix, res.Decoder, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range rows {
		got, ok := f.Of(id)
		if got != r.want || ok != (r.want != imagesize.Size{}) {
			t.Errorf("row %s (%s): %v, %v (%q); want %v", ix.SampleKey(id), r.name, got, ok, f.Bad[id], r.want)
		}
	}
	if !strings.Contains(f.Bad[4], imagesize.NoImage) || !strings.Contains(f.Bad[6], "60000×60000") {
		t.Errorf("reasons %v", f.Bad)
	}
	var read int64
	for _, rd := range data.reads["data/pairs.parquet"] {
		read += rd[1]
	}
	if captions := int64(len(rows)) * 64000; read >= int64(len(file))-captions/2 {
		t.Errorf("%d bytes of a %d-byte file read for its sizes; its captions are some %d", read, len(file), captions)
	}
	back, err := catalog.NewDataset("d", "", dst, ix).LoadSizes(ctx)
	if err != nil || !reflect.DeepEqual(back, f) {
		t.Fatalf("read back beside the index: %v", err)
	}
	if _, err := data.Stat(ctx, stored.SizesKey); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("sizes beside the data: %v", err)
	}
}

// pairsParquet is a Parquet file of an image bytes column and a caption
// column: n rows, the image of row i a PNG of (base+i+1)×(2i+1) pixels,
// every third cut short.
func pairsParquet(t *testing.T, base, n int) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "caption", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range n {
		im := image.NewNRGBA(image.Rect(0, 0, base+i+1, 2*i+1))
		im.SetNRGBA(0, 0, color.NRGBA{uint8(i), 1, 2, 255})
		var p bytes.Buffer
		if err := png.Encode(&p, im); err != nil {
			t.Fatal(err)
		}
		img := p.Bytes()
		if i%3 == 2 {
			img = img[:20]
		}
		b.Field(0).(*array.BinaryBuilder).Append(img)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("<image> row %d", base+i))
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
	return buf.Bytes()
}

// TestAppendSizes: files appended to a dataset with sizes get the new
// version's sizes — the old samples' copied, the new files' alone read —
// the same as sizes written whole; a dataset without sizes gets none,
// and one whose sizes are of an older version is told so (ErrFile).
func TestAppendSizes(t *testing.T) {
	ctx := context.Background()
	data, dst := &readsStore{Store: newLocal(t)}, newLocal(t)
	fs := []format.Format{parquet.Format{}}
	putBytes(t, data, "data/a.parquet", pairsParquet(t, 100, 5))
	one, err := IndexInPlace(ctx, data, dst, InPlaceOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	first, err := WriteSizesInPlace(ctx, dst, data, one.Index, one.Decoder, 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppendSizes(ctx, dst, data, one.Index, one.Decoder, 1); err == nil {
		t.Fatal("AppendSizes of an index that extends none")
	}
	putBytes(t, data, "data/b.parquet", pairsParquet(t, 200, 4))
	two, err := AppendInPlace(ctx, data, dst, AppendOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	data.reads = nil
	f, err := AppendSizes(ctx, dst, data, two.Index, two.Decoder, 2)
	if err != nil || f == nil {
		t.Fatalf("AppendSizes: %v, %v", f, err)
	}
	if len(data.reads["data/a.parquet"]) != 0 || len(data.reads["data/b.parquet"]) == 0 {
		t.Errorf("reads of an append's sizes: %v; want the new file's alone", data.reads)
	}
	whole, err := WriteSizesInPlace(ctx, newLocal(t), data, two.Index, two.Decoder, 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, whole) || f.MaxPixels != first.MaxPixels || len(f.Bad) != 2 {
		t.Fatalf("appended sizes %+v; written whole %+v", f, whole)
	}
	if back, err := catalog.NewDataset("d", "", dst, two.Index).LoadSizes(ctx); err != nil || !reflect.DeepEqual(back, f) {
		t.Fatalf("read back: %v", err)
	}

	old, err := os.ReadFile(filepath.Join(dst.Dir(), filepath.FromSlash(stored.SizesKey)))
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Delete(ctx, stored.SizesKey); err != nil {
		t.Fatal(err)
	}
	putBytes(t, data, "data/c.parquet", pairsParquet(t, 300, 2))
	three, err := AppendInPlace(ctx, data, dst, AppendOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := AppendSizes(ctx, dst, data, three.Index, three.Decoder, 1); f != nil || err != nil {
		t.Fatalf("a dataset without sizes: %v, %v; want none and no error", f, err)
	}
	putBytes(t, dst, stored.SizesKey, old) // the second version's, two appends ago
	putBytes(t, data, "data/d.parquet", pairsParquet(t, 400, 2))
	four, err := AppendInPlace(ctx, data, dst, AppendOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppendSizes(ctx, dst, data, four.Index, four.Decoder, 1); !errors.Is(err, imagesize.ErrFile) {
		t.Fatalf("sizes of an older version: %v; want ErrFile", err)
	}
}
