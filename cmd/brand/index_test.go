package main

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

func TestIndexGNUTarShards(t *testing.T) {
	src := synthTree(t, 80)
	store := filepath.Join(t.TempDir(), "laion")
	shards := filepath.Join(store, "shards")
	if err := os.MkdirAll(shards, 0o755); err != nil {
		t.Fatal(err)
	}
	classes, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range classes {
		cmd := exec.Command("tar", "--sort=name", "-C", src, "-cf", filepath.Join(shards, fmt.Sprintf("%05d.tar", i)), c.Name())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, b)
		}
	}
	code, out, errOut := brand(t, "index", "--src", store, "--prefix", "shards/", "--parallel", "2")
	if code != 0 {
		t.Fatalf("index exited %d:\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(fmt.Sprintf(`^indexed 80 samples in %d shards \(.*\) at .*, index [0-9a-f]{16}\n$`, len(classes))).MatchString(out) {
		t.Fatalf("index printed %q", out)
	}
	code, out, errOut = brand(t, "inspect", "--src", store, "--verify")
	if code != 0 {
		t.Fatalf("inspect exited %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"dataset       shards\n", "samples       80\n", "shuffled      no\n", "verify        OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "chunk target") {
		t.Errorf("an indexed dataset shows a chunk target:\n%s", out)
	}
}

// TestIndexImageTextFacts: `brand index --tokenizer` on tar shards
// writes their image-text facts beside the index and says how many
// samples every rule refuses (here all: synth's samples are a jpg and a
// cls, no text); --text and --tokens stay refused on tar shards.
func TestIndexImageTextFacts(t *testing.T) {
	src := synthTree(t, 12)
	store := filepath.Join(t.TempDir(), "pairs")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tar", "--sort=name", "-C", src, "-cf", filepath.Join(store, "00000.tar"), ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, b)
	}
	code, out, errOut := brand(t, "index", "--src", store, "--tokenizer", "../../tokenize/testdata/hf-golden-tokenizer.json")
	if code != 0 || !strings.Contains(out, "wrote the image-text facts of 12 samples (12 at fault") {
		t.Fatalf("index exited %d:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(store, "_brand", "vision-facts")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--text", "txt", "--tokenizer", "../../tokenize/testdata/hf-golden-tokenizer.json"}, {"--tokens", "x"}} {
		code, out, errOut := brand(t, append([]string{"index", "--src", store}, args...)...)
		if code == 0 || !strings.Contains(errOut, "tar shards are not token datasets") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// TestIndexImageTextFactsParquet: `brand index --tokenizer` alone on
// Parquet served in place (an image bytes column and a caption column)
// writes the rows' image-text facts beside the index, and with --append
// the facts of the version the new file extends it to; on a Parquet
// dataset of no image column it fails naming the columns, before any
// index is stored.
func TestIndexImageTextFactsParquet(t *testing.T) {
	dir := t.TempDir()
	writePairs(t, filepath.Join(dir, "pairs-0.parquet"), 3)
	const tok = "../../tokenize/testdata/hf-golden-tokenizer.json"
	code, out, errOut := brand(t, "index", "--src", dir, "--tokenizer", tok)
	if code != 0 || !strings.Contains(out, "wrote the image-text facts of 3 samples (0 at fault") {
		t.Fatalf("index exited %d:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "_brand", "vision-facts")); err != nil {
		t.Fatal(err)
	}
	writePairs(t, filepath.Join(dir, "pairs-1.parquet"), 2)
	code, out, errOut = brand(t, "index", "--src", dir, "--append", "--tokenizer", tok)
	if code != 0 || !strings.Contains(out, "appended 2 samples") || !strings.Contains(out, "wrote the image-text facts of 5 samples (0 at fault") {
		t.Fatalf("index --append exited %d:\n%s%s", code, out, errOut)
	}

	labels := t.TempDir()
	writeLabels(t, labels, "data/train-0.parquet", 4, false)
	code, out, errOut = brand(t, "index", "--src", labels, "--tokenizer", tok)
	if code == 0 || !strings.Contains(errOut, "no image column") || !strings.Contains(errOut, "text (string") || !strings.Contains(errOut, "label (int64") {
		t.Fatalf("a Parquet dataset of no image column: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(labels, "_brand")); !os.IsNotExist(err) {
		t.Fatalf("a Parquet dataset of no image column was indexed before it was refused (%v)", err)
	}
}

// writePairs writes a Parquet file at path of n rows of an image (a
// PNG) and a caption.
func writePairs(t *testing.T, path string, n int) {
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
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
