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

// tokenParquet writes data/train-0.parquet under a new directory: rows of
// a text and its token list (row i has i%5+1 tokens).
func tokenParquet(t *testing.T, rows int) string {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	ib := b.Field(1).(*array.ListBuilder)
	for i := range rows {
		b.Field(0).(*array.StringBuilder).Append(strings.Repeat("hello world, ", i%4) + "done \xff")
		ib.Append(true)
		for j := range i%5 + 1 {
			ib.ValueBuilder().(*array.Int32Builder).Append(int32(i + j))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(7)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "train-0.parquet"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// `brand index --tokens` and `--text --tokenizer` make token datasets of
// a Parquet file and say so, with a SentencePiece model or a
// tokenizer.json; the flags' misuses are usage errors, and a tokenizer
// that is neither is refused naming what is wrong.
func TestIndexTokens(t *testing.T) {
	src := tokenParquet(t, 20)
	code, out, errOut := brand(t, "index", "--src", src, "--dst", t.TempDir(), "--tokens", "input_ids", "--vocabulary", "demo")
	// 20 rows of 1..5 tokens: 4 × (1+2+3+4+5) = 60.
	if code != 0 || !strings.Contains(out, `token dataset: 20 documents, 60 tokens of int32 in field "input_ids", vocabulary demo`) {
		t.Fatalf("--tokens: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = brand(t, "index", "--src", src, "--dst", t.TempDir(), "--text", "text", "--tokenizer", "../../tokenize/testdata/golden-bpe.model")
	if code != 0 || !regexp.MustCompile(`token dataset: 20 documents, [0-9,]+ tokens of int32 in field "tokens", vocabulary [0-9a-f]{16}\n`).MatchString(out) {
		t.Fatalf("--text: exit %d\n%s%s", code, out, errOut)
	}
	// A Hugging Face tokenizer.json (byte-level BPE) takes the same flag.
	code, out, errOut = brand(t, "index", "--src", src, "--dst", t.TempDir(), "--text", "text", "--tokenizer", "../../tokenize/testdata/hf-golden-tokenizer.json")
	if code != 0 || !regexp.MustCompile(`token dataset: 20 documents, [0-9,]+ tokens of int32 in field "tokens", vocabulary [0-9a-f]{16}\n`).MatchString(out) {
		t.Fatalf("--text with a tokenizer.json: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = brand(t, "index", "--src", src, "--dst", t.TempDir())
	if code != 0 || strings.Contains(out, "token dataset") {
		t.Fatalf("no token flags: exit %d\n%s%s", code, out, errOut)
	}
	notModel := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(notModel, []byte(`{"version": "1.0", "model": {"type": "BPE"}}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--text", "text"}, "--text and --tokenizer go together"},
		{[]string{"--tokens", "input_ids", "--text", "text", "--tokenizer", notModel}, "not both"},
		{[]string{"--text", "text", "--tokenizer", notModel}, "not a tokenizer model: tokenizer.json: model.vocab or model.merges missing"},
		{[]string{"--tokens", "text"}, `column "text" is string, not a list of integers`},
		{[]string{"--text", "input_ids", "--tokenizer", "../../tokenize/testdata/golden-bpe.model"}, `column "input_ids" is list<int32>, not a string`},
		{[]string{"--vocabulary", "x"}, "--vocabulary names a --tokens column's vocabulary"},
	} {
		code, out, errOut := brand(t, append([]string{"index", "--src", src, "--dst", t.TempDir()}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want an error saying %q\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
}

// A text dataset's model is in its description, which the index names
// by its SHA-256: a description made with another model, put in its
// place, is refused — no node decodes the dataset with another model.
func TestIndexTextModelPinned(t *testing.T) {
	src := tokenParquet(t, 20)
	a, b := t.TempDir(), t.TempDir()
	for dst, model := range map[string]string{a: "golden-bpe.model", b: "golden-unigram.model"} {
		if code, out, errOut := brand(t, "index", "--src", src, "--dst", dst, "--text", "text", "--tokenizer", "../../tokenize/testdata/"+model); code != 0 {
			t.Fatalf("index: exit %d\n%s%s", code, out, errOut)
		}
	}
	if code, out, errOut := brand(t, "inspect", "--src", a, "--verify"); code != 0 {
		t.Fatalf("inspect --verify: exit %d\n%s%s", code, out, errOut)
	}
	da, _ := filepath.Glob(filepath.Join(a, "_brand", "format", "*"))
	db, _ := filepath.Glob(filepath.Join(b, "_brand", "format", "*"))
	if len(da) != 1 || len(db) != 1 {
		t.Fatalf("descriptions %v %v", da, db)
	}
	other, err := os.ReadFile(db[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(da[0], other, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := brand(t, "inspect", "--src", a, "--verify")
	if code == 0 || !strings.Contains(out+errOut, "is not the description index") {
		t.Fatalf("another model's description: exit %d\n%s%s", code, out, errOut)
	}
}
