package main

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestIndexTokenizerKeepsTheChunking: a Parquet dataset indexed at
// --chunk-size, indexed again with --tokenizer alone to write its
// image-text facts, keeps its chunking and its index version — a job
// pinned to it (index=) would get 409 from a new one — where it was cut
// at the default chunk size unless --chunk-size was given again. A new
// --chunk-size still cuts anew, and is kept in turn.
func TestIndexTokenizerKeepsTheChunking(t *testing.T) {
	dir := t.TempDir()
	writePairGroups(t, filepath.Join(dir, "pairs.parquet"), 8, 2)
	const tok = "../../tokenize/testdata/hf-golden-tokenizer.json"
	indexed := regexp.MustCompile(`indexed 8 samples in (\d+) chunks .* index ([0-9a-f]{16}) at`)
	index := func(args ...string) (chunks, id string) {
		t.Helper()
		code, out, errOut := brand(t, append([]string{"index", "--src", dir}, args...)...)
		m := indexed.FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("index %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return m[1], m[2]
	}
	chunks, id := index("--chunk-size", "100")
	if chunks != "4" {
		t.Fatalf("--chunk-size 100 cut %s chunks of 4 row groups; want 4", chunks)
	}
	time.Sleep(1100 * time.Millisecond) // another second: the index's creation time would differ
	if c, again := index("--tokenizer", tok); c != chunks || again != id {
		t.Fatalf("--tokenizer alone: %s chunks, index %s; want the dataset's %s chunks and index %s kept", c, again, chunks, id)
	}
	if _, err := os.Stat(filepath.Join(dir, "_brand", "vision-facts")); err != nil {
		t.Fatal(err)
	}
	c, other := index("--chunk-size", "16MiB")
	if c != "1" || other == id {
		t.Fatalf("--chunk-size 16MiB: %s chunks, index %s; want 1 chunk, a new version", c, other)
	}
	if c, again := index(); c != "1" || again != other {
		t.Fatalf("indexed again without --chunk-size: %s chunks, index %s; want 1 chunk and index %s kept", c, again, other)
	}
}

// writePairGroups writes a Parquet file at path of n rows of an image (a
// PNG) and a caption, in row groups of per rows.
func writePairGroups(t *testing.T, path string, n, per int) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}, {Name: "caption", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range n {
		var p bytes.Buffer
		if err := png.Encode(&p, image.NewGray(image.Rect(0, 0, 30+i, 40))); err != nil {
			t.Fatal(err)
		}
		b.Field(0).(*array.BinaryBuilder).Append(p.Bytes())
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("picture %d", i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(int64(per))), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
