package parquet

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// referenceIDs has the reference library (package tokenize's
// testdata/reference.py) encode texts with each model (name → path).
func referenceIDs(t testing.TB, models map[string]string, texts [][]byte) map[string][][]int32 {
	t.Helper()
	py := pythontest.Need(t, "scripts/ensure-sentencepiece.sh", "sentencepiece")
	dir := t.TempDir()
	var b strings.Builder
	for _, s := range texts {
		b.WriteString(hex.EncodeToString(s))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "texts.hex"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	abs := map[string]string{}
	for n, p := range models {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		abs[n] = a
	}
	spec, _ := json.Marshal(map[string]any{"texts": filepath.Join(dir, "texts.hex"), "models": abs})
	if err := os.WriteFile(filepath.Join(dir, "encode.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "../../tokenize/testdata/reference.py", "encode", filepath.Join(dir, "encode.json"), filepath.Join(dir, "out.json"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reference.py encode: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]struct {
		IDs [][]int32 `json:"ids"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	ids := map[string][][]int32{}
	for n, o := range out {
		if len(o.IDs) != len(texts) {
			t.Fatalf("%s: %d encodings of %d texts", n, len(o.IDs), len(texts))
		}
		ids[n] = o.IDs
	}
	return ids
}

// multilingualSample is a few hundred documents: sentences in 12
// languages and 9 scripts, emoji and combining marks, mixed and repeated
// into documents of 0 to a few thousand bytes, a tenth of them with
// invalid UTF-8 (stray continuation bytes, truncated sequences, overlong
// forms, surrogates, bytes past U+10FFFF, a lone 0xFF).
func multilingualSample() [][]byte {
	parts := []string{
		"The quick brown fox jumps over the lazy dog. ",
		"Größenordnung: über 3 000 km² — naïve café. ",
		"Съешь же ещё этих мягких французских булок. ",
		"東京は日本の首都です。人口は約1400万人。",
		"北京是中华人民共和国的首都。",
		"서울은 대한민국의 수도이다. ",
		"مرحبا بالعالم، هذا نص عربي. ",
		"שלום עולם, זה טקסט בעברית. ",
		"नमस्ते दुनिया, यह हिंदी है। ",
		"Γειά σου Κόσμε, αυτό είναι ελληνικά. ",
		"สวัสดีชาวโลก นี่คือภาษาไทย ",
		"Ça va? Él está aquí. Ñandú. ",
		"🙂 emoji 👩‍💻 and combining e\u0301 a\u0308 ",
		"tabs\tand\nnewlines\r\n  spaces   ",
		"1234567890 3.14159 -42 ",
	}
	bad := []string{"\x80", "\xe6\x97", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\xc3"}
	var out [][]byte
	for i := range 300 {
		var b []byte
		n := (i * 7) % 23
		if i%50 == 49 {
			n = 400
		}
		for j := range n {
			b = append(b, parts[(i*5+j*3)%len(parts)]...)
			if i%10 == 3 && j%4 == 1 {
				b = append(b, bad[(i+j)%len(bad)]...)
			}
		}
		out = append(out, b)
	}
	return out
}

// A multilingual sample with invalid UTF-8, written by arrow-go as a
// string column and indexed with --text by each kind of model: every
// count the index holds, and every decoded document's tokens, are the
// reference library's (python3-sentencepiece's SentencePieceProcessor.encode).
func TestTokensTextReference(t *testing.T) {
	texts := multilingualSample()
	models := map[string]string{
		"bpe":     "../../tokenize/testdata/golden-bpe.model",
		"unigram": "../../tokenize/testdata/golden-unigram.model",
	}
	ref := referenceIDs(t, models, texts)
	rows := make([]*string, len(texts))
	for i, b := range texts {
		s := string(b)
		rows[i] = &s
	}
	st := newStore()
	st.put("corpus.parquet", textFile(t, rows, pq.WithMaxRowGroupLength(37)))
	for name, path := range models {
		t.Run(name, func(t *testing.T) {
			model, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			checkReference(t, st, format.Options{Text: "text", Tokenizer: model}, ref[name])
		})
	}
}

// checkReference indexes st with opt, and checks every count and every
// decoded document's tokens against want, row by row.
func checkReference(t *testing.T, st *memStore, opt format.Options, want [][]int32) {
	t.Helper()
	got, lay, dec := decodeAll(t, st, opt, format.TextTokensField)
	tok := dec.(format.Tokens)
	k := 0
	for c := range lay.Chunks {
		for _, n := range tok.DocTokens(c) {
			if int(n) != len(want[k]) {
				t.Fatalf("row %d: counted %d tokens, the reference %d", k, n, len(want[k]))
			}
			ms := got[lay.Keys[k]]
			if len(ms) != 1 || !strings.HasSuffix(ms[0].name, ".npy") {
				t.Fatalf("row %d: members %v", k, ms)
			}
			data := []byte(ms[0].data)[npyHeaderMax:]
			if n == 0 {
				data = []byte(ms[0].data)[npy.HeaderLen("<i4", []int64{0}):]
			}
			if len(data) != 4*len(want[k]) {
				t.Fatalf("row %d: %d bytes of tokens for %d", k, len(data), len(want[k]))
			}
			for j, id := range want[k] {
				if g := int32(binary.LittleEndian.Uint32(data[4*j:])); g != id {
					t.Fatalf("row %d token %d: %d, the reference %d", k, j, g, id)
				}
			}
			k++
		}
	}
	if k != len(want) {
		t.Fatalf("%d rows of %d", k, len(want))
	}
}

// The same for DuckDB's Parquet: multilingual documents (valid UTF-8:
// DuckDB's VARCHAR holds no other) read back from the file, tokenized by
// the reference, equal the index's counts and the decoded tokens.
func TestDuckDBTextReference(t *testing.T) {
	dir := duckdbFixtures(t)
	st := storeOf(t, dir, "texts.parquet")
	stored, lay, _ := decodeAll(t, st, format.Options{}, "text")
	texts := make([][]byte, len(lay.Keys))
	for i, k := range lay.Keys {
		if ms := stored[k]; len(ms) == 1 && strings.HasSuffix(ms[0].name, ".txt") {
			texts[i] = []byte(ms[0].data)
		}
	}
	if len(texts) != 300 || len(texts[49]) < 10000 {
		t.Fatalf("%d texts, the 50th of %d bytes", len(texts), len(texts[49]))
	}
	models := map[string]string{
		"bpe":     "../../tokenize/testdata/golden-bpe.model",
		"unigram": "../../tokenize/testdata/golden-unigram.model",
	}
	ref := referenceIDs(t, models, texts)
	for name, path := range models {
		t.Run(name, func(t *testing.T) {
			model, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			checkReference(t, st, format.Options{Text: "text", Tokenizer: model}, ref[name])
		})
	}
}

// hfReferenceIDs is nodetest.EncodeHF: Hugging Face's tokenizers' IDs.
func hfReferenceIDs(t testing.TB, tokenizer string, texts [][]byte) [][]int32 {
	return nodetest.EncodeHF(t, tokenizer, texts)
}

// The byte-level twin of TestTokensTextReference: the multilingual
// sample indexed with --text and a Hugging Face tokenizer.json (package
// tokenize's committed Llama-3-style file): every count and every decoded
// document's tokens are the reference's (tokenizers' encode, its rule
// for invalid UTF-8 applied to the bytes first).
func TestTokensTextReferenceByteLevel(t *testing.T) {
	const path = "../../tokenize/testdata/hf-golden-tokenizer.json"
	texts := multilingualSample()
	// Special tokens in the text, matched before the model.
	texts = append(texts, []byte("<|begin_of_text|>Hello<|eot_id|> world"), []byte(" <|end_of_text|>\xff<|eot_id|>"))
	ref := hfReferenceIDs(t, path, texts)
	rows := make([]*string, len(texts))
	for i, b := range texts {
		s := string(b)
		rows[i] = &s
	}
	model, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore()
	st.put("corpus.parquet", textFile(t, rows, pq.WithMaxRowGroupLength(37)))
	checkReference(t, st, format.Options{Text: "text", Tokenizer: model}, ref)
}
