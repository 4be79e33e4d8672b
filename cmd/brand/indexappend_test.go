package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// writeLabels writes dir/name, a Parquet file of rows (text, label) or,
// with other, of another schema (a text column alone).
func writeLabels(t *testing.T, dir, name string, rows int, other bool) {
	t.Helper()
	fields := []arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}
	if other {
		fields = fields[:1]
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.StringBuilder).Append(name + strings.Repeat("x", i))
		if !other {
			b.Field(1).(*array.Int64Builder).Append(int64(i))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(4)), pqarrow.DefaultWriterProps())
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

// `brand index --append` adds the Parquet files written since to the
// dataset as a version extending the last, says what it added, says
// "nothing new" (exit 0, nothing stored) when there is nothing, and
// refuses a file of another schema, naming it, and flags that would
// change the dataset's settings.
func TestIndexAppend(t *testing.T) {
	src, idx := t.TempDir(), t.TempDir()
	writeLabels(t, src, "data/train-0.parquet", 10, false)
	code, out, errOut := brand(t, "index", "--src", src, "--dst", idx)
	if code != 0 {
		t.Fatalf("index: exit %d\n%s%s", code, out, errOut)
	}
	first := regexp.MustCompile(`index ([0-9a-f]{16})`).FindStringSubmatch(out)
	writeLabels(t, src, "data/train-1.parquet", 6, false)
	code, out, errOut = brand(t, "index", "--src", src, "--dst", idx, "--append")
	want := regexp.MustCompile(`^appended 6 samples in \d+ chunks to .* index [0-9a-f]{16} extends ` + first[1] + ` \(16 samples in \d+ chunks in all\)`)
	if code != 0 || first == nil || !want.MatchString(out) {
		t.Fatalf("--append: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = brand(t, "index", "--src", src, "--dst", idx, "--append")
	if code != 0 || !strings.HasPrefix(out, "nothing new: ") || !strings.Contains(out, "no index stored") {
		t.Fatalf("nothing new: exit %d\n%s%s", code, out, errOut)
	}
	writeLabels(t, src, "data/train-2.parquet", 3, true)
	code, out, errOut = brand(t, "index", "--src", src, "--dst", idx, "--append")
	if code == 0 || !strings.Contains(errOut, "data/train-2.parquet does not have the dataset's schema") {
		t.Fatalf("another schema: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = brand(t, "index", "--src", src, "--dst", idx, "--append", "--checksums")
	if code != 2 || !strings.Contains(errOut, "--append keeps the dataset's") {
		t.Fatalf("--append --checksums: exit %d\n%s", code, errOut)
	}
}
