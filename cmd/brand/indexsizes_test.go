package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/s3backend"
)

// storedSizes reads the sizes stored beside the index in dir, by sample
// key.
func storedSizes(t *testing.T, dir string) map[string]imagesize.Size {
	t.Helper()
	ctx := context.Background()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := stored.ReadIndex(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	f, err := stored.ReadSizes(ctx, st, ix.ID(), ix.NumSamples())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]imagesize.Size{}
	for id := range ix.NumSamples() {
		got[ix.SampleKey(id)], _ = f.Of(id)
	}
	return got
}

// `brand pack --sizes` and `brand index --sizes` of tar shards store each
// sample's image size, EXIF applied, and say how many samples have one
// and how many do not, and why, naming each unreadable image's sample
// and file. An image whose header reads but whose data does not decode
// (a JPEG and a PNG cut short after their headers) is unreadable: found
// here, not at its step (issue 98, item 14: it had its size).
func TestPackAndIndexSizes(t *testing.T) {
	tree := t.TempDir()
	pic := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "transform", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files := map[string][]byte{
		"a/0.jpg": pic("photo.jpg"), "a/0.cls": []byte("1"),
		"a/1.jpg": pic("exif-6.jpg"),
		"b/2.txt": []byte("no image"),
		"b/3.png": pic("photo.png")[:20],
		"b/4.jpg": pic("photo.jpg")[:len(pic("photo.jpg"))/2],
		"b/5.png": pic("photo.png")[:len(pic("photo.png"))-24],
	}
	for name, b := range files {
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]imagesize.Size{"a/0": {W: 48, H: 32}, "a/1": {W: 32, H: 48}, "b/2": {}, "b/3": {}, "b/4": {}, "b/5": {}}
	const line = "wrote the image sizes of 6 samples (2 images, 4 bad: 1 without an image, 3 unreadable) at _brand/image-sizes\n"
	named := func(t *testing.T, errOut string) {
		t.Helper()
		for _, key := range []string{`"b/3"`, `"b/4"`, `"b/5"`} {
			if !strings.Contains(errOut, "sample "+key+" of ") || !strings.Contains(errOut, ".tar: its image does not read: ") {
				t.Errorf("stderr does not name sample %s and its file:\n%s", key, errOut)
			}
		}
		for _, why := range []string{"jpg: the data does not decode: ", "png: the data does not decode: "} {
			if !strings.Contains(errOut, why) {
				t.Errorf("stderr does not say %q:\n%s", why, errOut)
			}
		}
	}
	dst := t.TempDir()
	code, out, errOut := brand(t, "pack", "--src", tree, "--dst", dst, "--sizes")
	if code != 0 || !strings.HasSuffix(out, line) {
		t.Fatalf("pack --sizes: exit %d\n%s%s", code, out, errOut)
	}
	named(t, errOut)
	if got := storedSizes(t, dst); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("packed sizes %v; want %v", got, want)
	}
	code, out, errOut = brand(t, "index", "--src", dst, "--sizes")
	if code != 0 || !strings.HasSuffix(out, line) {
		t.Fatalf("index --sizes: exit %d\n%s%s", code, out, errOut)
	}
	named(t, errOut)
	if got := storedSizes(t, dst); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("indexed sizes %v; want %v", got, want)
	}
}

// writePictures writes dir/name, a Parquet file of rows (image, caption),
// the image of row i a PNG of (i+1)×(i+2) pixels.
func writePictures(t *testing.T, dir, name string, rows int) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "caption", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range rows {
		var p bytes.Buffer
		if err := png.Encode(&p, image.NewGray(image.Rect(0, 0, i+1, i+2))); err != nil {
			t.Fatal(err)
		}
		b.Field(0).(*array.BinaryBuilder).Append(p.Bytes())
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
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
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// `brand index --sizes` of Parquet served in place stores the sizes at
// --dst; an append to it writes the new version's without being asked;
// a dataset without an image column is indexed, and its sizes refused
// naming its columns.
func TestIndexSizesInPlace(t *testing.T) {
	src, idx := t.TempDir(), t.TempDir()
	writePictures(t, src, "data/p-0.parquet", 5)
	code, out, errOut := brand(t, "index", "--src", src, "--dst", idx, "--sizes")
	if code != 0 || !strings.Contains(out, "wrote the image sizes of 5 samples (5 images, 0 bad") {
		t.Fatalf("index --sizes: exit %d\n%s%s", code, out, errOut)
	}
	writePictures(t, src, "data/p-1.parquet", 3)
	code, out, errOut = brand(t, "index", "--src", src, "--dst", idx, "--append")
	if code != 0 || !strings.Contains(out, "wrote the image sizes of 8 samples (8 images, 0 bad") {
		t.Fatalf("--append to a dataset with sizes: exit %d\n%s%s", code, out, errOut)
	}
	got := storedSizes(t, idx)
	for f, rows := range []int{5, 3} {
		for i := range rows {
			key := fmt.Sprintf("data/p-%d/%d", f, i)
			if s, ok := got[key]; !ok || s != (imagesize.Size{W: uint32(i + 1), H: uint32(i + 2)}) {
				t.Errorf("%s: %v (of %v)", key, s, got)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(src, filepath.FromSlash(stored.SizesKey))); !os.IsNotExist(err) {
		t.Errorf("sizes beside the data: %v", err)
	}
	labels := t.TempDir()
	writeLabels(t, labels, "data/train-0.parquet", 4, false)
	code, out, errOut = brand(t, "index", "--src", labels, "--dst", t.TempDir(), "--sizes")
	if code == 0 || !strings.Contains(out, "indexed 4 samples") || !strings.Contains(errOut, "no field holds images (its fields: text, label)") {
		t.Fatalf("--sizes of a dataset without images: exit %d\n%s%s", code, out, errOut)
	}
}
