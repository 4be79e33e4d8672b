package tokenize

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// hfGoldenFile is the committed tokenizer.json (a Llama-3-style file,
// testdata/hf-golden-tokenizer.json).
func hfGoldenFile(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(hfGoldenTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// editHF decodes a tokenizer.json, edits it and encodes it again.
func editHF(t testing.TB, data []byte, edit func(f map[string]any)) []byte {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	edit(f)
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func model(f map[string]any) map[string]any { return f["model"].(map[string]any) }

// TestLoadTokenizerJSONRefuses: tokenizer.json files the reference would
// not load, and those of kinds this package does not encode, each refused
// with its error naming the field.
func TestLoadTokenizerJSONRefuses(t *testing.T) {
	base := hfGoldenFile(t)
	edit := func(f func(f map[string]any)) []byte { return editHF(t, base, f) }
	tooMany := func() []byte {
		var b strings.Builder
		b.WriteString(`{"version": "1.0", "model": {"type": "BPE", "merges": [], "vocab": {`)
		for i := range MaxPieces + 1 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%x":0`, i)
		}
		b.WriteString("}}}")
		return []byte(b.String())
	}
	tooManyMerges := func() []byte {
		var b strings.Builder
		b.WriteString(`{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": [`)
		for i := range MaxPieces + 1 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"a a"`)
		}
		b.WriteString("]}}")
		return []byte(b.String())
	}
	seq := func(steps ...any) map[string]any { return map[string]any{"type": "Sequence", "pretokenizers": steps} }
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	tests := []struct {
		name string
		data []byte
		want error
		says string
	}{
		{"not JSON after the brace", []byte(`{"version": `), ErrNotModel, "tokenizer.json"},
		{"an array", []byte(`[1, 2]`), ErrNotModel, "object"},
		{"no model", []byte(`{"version": "1.0"}`), ErrNotModel, "no model"},
		{"another version", edit(func(f map[string]any) { f["version"] = "2.0" }), ErrNotModel, "version"},
		{"invalid UTF-8", append(slices.Clone(base[:len(base)-1]), "\xff}"...), ErrNotModel, "UTF-8"},
		{"data after the object", append(slices.Clone(base), " {}"...), ErrNotModel, "after"},
		{"a WordPiece model", edit(func(f map[string]any) { model(f)["type"] = "WordPiece" }), ErrUnsupported, `model.type "WordPiece"`},
		{"a Unigram model", []byte(`{"version": "1.0", "model": {"type": "Unigram", "vocab": [["<unk>", 0.0]]}}`), ErrUnsupported, `model.type "Unigram"`},
		{"no merges", edit(func(f map[string]any) { delete(model(f), "merges") }), ErrNotModel, "model.merges"},
		{"a merge of a token not in the vocabulary", edit(func(f map[string]any) {
			model(f)["merges"] = append(model(f)["merges"].([]any), []any{"Ġ", "zzzz"})
		}), ErrNotModel, "model.merges["},
		{"a merge whose result is not in the vocabulary", edit(func(f map[string]any) {
			model(f)["merges"] = append(model(f)["merges"].([]any), []any{"x", "q"})
		}), ErrNotModel, "not in model.vocab"},
		{"a merge of three parts", edit(func(f map[string]any) { model(f)["merges"] = []any{"a b c"} }), ErrNotModel, "two tokens"},
		{"a merge of one part", edit(func(f map[string]any) { model(f)["merges"] = []any{"ab"} }), ErrNotModel, "two tokens"},
		{"merges spelled both ways", edit(func(f map[string]any) { model(f)["merges"] = append(model(f)["merges"].([]any), "Ġ t") }), ErrNotModel, "mixed"},
		{"a merge that is a number", edit(func(f map[string]any) { model(f)["merges"] = []any{7} }), ErrNotModel, "merges[0]"},
		{"a vocabulary ID that is negative", edit(func(f map[string]any) { model(f)["vocab"].(map[string]any)["Ġ"] = -1 }), ErrNotModel, "model.vocab"},
		{"a vocabulary ID past the bound", edit(func(f map[string]any) { model(f)["vocab"].(map[string]any)["Ġ"] = MaxPieces }), ErrNotModel, "model.vocab"},
		{"too many tokens", tooMany(), ErrTooLarge, "model.vocab"},
		{"too many merges", tooManyMerges(), ErrTooLarge, "model.merges"},
		{"byte fallback", edit(func(f map[string]any) { model(f)["byte_fallback"] = true }), ErrUnsupported, "byte_fallback"},
		{"dropout", edit(func(f map[string]any) { model(f)["dropout"] = 0.1 }), ErrUnsupported, "dropout"},
		{"a subword prefix", edit(func(f map[string]any) { model(f)["continuing_subword_prefix"] = "##" }), ErrUnsupported, "continuing_subword_prefix"},
		{"a word suffix", edit(func(f map[string]any) { model(f)["end_of_word_suffix"] = "</w>" }), ErrUnsupported, "end_of_word_suffix"},
		{"an unknown token not in the vocabulary", edit(func(f map[string]any) { model(f)["unk_token"] = "<nope>" }), ErrNotModel, "unk_token"},
		{"a Lowercase normalizer", edit(func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Lowercase"} }), ErrUnsupported, `normalizer.type "Lowercase"`},
		{"a Lowercase normalizer in a sequence", edit(func(f map[string]any) {
			f["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}
		}), ErrUnsupported, `normalizer.normalizers[1].type "Lowercase"`},
		{"no pre-tokenizer", edit(func(f map[string]any) { f["pre_tokenizer"] = nil }), ErrUnsupported, "pre_tokenizer is null"},
		{"a Metaspace pre-tokenizer", edit(func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }), ErrUnsupported, `pre_tokenizer.type "Metaspace"`},
		{"an unknown pre-tokenizer in a sequence", edit(func(f map[string]any) { f["pre_tokenizer"] = seq(map[string]any{"type": "Whitespace"}, bl) }), ErrUnsupported, `pre_tokenizer.pretokenizers[0].type "Whitespace"`},
		{"a regex that matches the empty string", edit(func(f map[string]any) {
			f["pre_tokenizer"] = seq(map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s*`}, "behavior": "Isolated", "invert": false}, bl)
		}), ErrUnsupported, `pattern.Regex "\\s*" matches the empty string`},
		{"a regex regexp2 does not compile", edit(func(f map[string]any) {
			f["pre_tokenizer"] = seq(map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(\p{L}`}, "behavior": "Isolated", "invert": false}, bl)
		}), ErrUnsupported, `pattern.Regex "(\\p{L}"`},
		{"an unknown split behavior", edit(func(f map[string]any) {
			f["pre_tokenizer"] = seq(map[string]any{"type": "Split", "pattern": map[string]any{"String": "x"}, "behavior": "Sideways", "invert": false}, bl)
		}), ErrNotModel, `behavior "Sideways"`},
		{"ByteLevel before another step", edit(func(f map[string]any) { f["pre_tokenizer"] = seq(bl, map[string]any{"type": "Digits"}) }), ErrUnsupported, "ByteLevel followed"},
		{"no ByteLevel", edit(func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Digits", "individual_digits": true}
		}), ErrUnsupported, "no ByteLevel"},
		{"ByteLevel without trim_offsets", edit(func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": false}
		}), ErrNotModel, "trim_offsets"},
		{"Digits without individual_digits", edit(func(f map[string]any) { f["pre_tokenizer"] = seq(map[string]any{"type": "Digits"}, bl) }), ErrNotModel, "individual_digits"},
		{"Split without invert", edit(func(f map[string]any) {
			f["pre_tokenizer"] = seq(map[string]any{"type": "Split", "pattern": map[string]any{"String": "x"}, "behavior": "Isolated"}, bl)
		}), ErrNotModel, "invert"},
		{"an added token without special", edit(func(f map[string]any) { delete(f["added_tokens"].([]any)[0].(map[string]any), "special") }), ErrNotModel, "added_tokens[0]"},
		{"two added tokens the normalizer makes one", edit(func(f map[string]any) {
			f["normalizer"] = map[string]any{"type": "NFC"}
			tok := func(c string) map[string]any {
				return map[string]any{"id": 0, "content": c, "normalized": true, "single_word": false, "lstrip": false, "rstrip": false, "special": false}
			}
			f["added_tokens"] = []any{tok("é"), tok("e\u0301")}
		}), ErrNotModel, "two added tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Load(tt.data)
			if !errors.Is(err, tt.want) || m != nil {
				t.Fatalf("Load = %v, %v; want %v", m, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Load: %v; want it to say %q", err, tt.says)
			}
		})
	}
}

// TestLoadTokenizerJSONAllocation: a hostile tokenizer.json costs what
// its bytes cost: the most tokens and merges a file may have, each as
// short as JSON allows, allocate within loadAllocBound of the file.
func TestLoadTokenizerJSONAllocation(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"version": "1.0", "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false}, "model": {"type": "BPE", "vocab": {`)
	// Two-character tokens of the byte alphabet, and the merges that
	// make them.
	n := 0
	var merges []string
	for x := range 256 {
		for y := range 256 {
			if n == MaxPieces-256 {
				break
			}
			if n > 0 {
				b.WriteByte(',')
			}
			a, c := string(byteAlphabet[x]), string(byteAlphabet[y])
			fmt.Fprintf(&b, "%q:%d", a+c, 256+n)
			merges = append(merges, fmt.Sprintf("%q", a+" "+c))
			n++
		}
	}
	for x := range 256 {
		fmt.Fprintf(&b, ",%q:%d", string(byteAlphabet[x]), x)
	}
	b.WriteString(`}, "merges": [` + strings.Join(merges, ",") + "]}}")
	data := []byte(b.String())
	var m *Model
	var err error
	got := allocated(func() { m, err = Load(data) })
	if err != nil {
		t.Fatal(err)
	}
	if got > loadAllocBound(len(data)) {
		t.Errorf("Load of %d bytes (%d tokens, %d merges) allocated %d bytes, more than %d", len(data), m.VocabSize(), len(merges), got, loadAllocBound(len(data)))
	}
	t.Logf("Load of %d bytes (%d tokens, %d merges) allocated %d bytes (%.1f a byte)", len(data), m.VocabSize(), len(merges), got, float64(got)/float64(len(data)))
	ids, err := m.Encode([]byte("hello"))
	if err != nil || len(ids) != 3 {
		t.Errorf("Encode(hello) = %v, %v; want 3 IDs (he ll o)", ids, err)
	}
}

// TestSmallTokenizerJSON: FuzzLoad's small seed loads and encodes, so
// that the fuzzer starts from a file that reaches every step.
func TestSmallTokenizerJSON(t *testing.T) {
	m, err := Load(smallTokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	// The reference's IDs (node, tokenizers 0.23.2): "ab" the added
	// token of the vocabulary's ID, a single word; <|x|> with the spaces
	// it strips, given the next free ID (7), not the file's 9; a prefix
	// space before each piece; "1" and "-" outside the vocabulary, each
	// an unknown "a", merged with the prefix space.
	ids, err := m.Encode([]byte("ab  <|x|>  c1-b"))
	if want := []int32{3, 7, 2, 6, 4, 4, 2, 1}; err != nil || !slices.Equal(ids, want) {
		t.Errorf("Encode = %v, %v; want %v", ids, err, want)
	}
}

// TestValidUTF8: ill-formed UTF-8 becomes U+FFFD a maximal subpart, the
// rule of the reference's users (Python's errors="replace", Rust's
// from_utf8_lossy, the WHATWG decoder), not Go's one a byte. The table's
// values are Python's; TestValidUTF8Python holds the rule to Python on
// every reference text.
func TestValidUTF8(t *testing.T) {
	const r = "\uFFFD"
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"日本", "日本"},
		{"\xff", r},
		{"\xfe\xff", r + r},
		{"a\x80b", "a" + r + "b"},
		{"\xc0\x80", r + r},                 // overlong: C0 starts nothing
		{"\xe0\x80\x80", r + r + r},         // E0 needs A0..BF next
		{"\xe0\xa0", r},                     // a truncated 3-byte sequence: one
		{"\xed\xa0\x80", r + r + r},         // a surrogate
		{"\xf0\x9f\x98", r},                 // a truncated emoji: one
		{"\xf0\x9f\x98 ok", r + " ok"},      // and what follows kept
		{"\xf4\x90\x80\x80", r + r + r + r}, // past U+10FFFF
		{"\xf5\x80", r + r},
		{"caf\xc3", "caf" + r},
		{"\xe6\x97\xe6\x97\xa5", r + "日"},
		{"\xef\xbf\xbd", r},
	}
	for _, tt := range tests {
		if got := string(appendValidUTF8(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("appendValidUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestValidUTF8Python: appendValidUTF8 of each of TestReference's texts
// (a sixth of them with a stray byte, another sixth cut anywhere, and the
// edge texts' ill-formed sequences of every kind) is what Python's
// bytes.decode("utf-8", errors="replace") makes of it.
func TestValidUTF8Python(t *testing.T) {
	python := pythontest.Need(t, "")
	texts := referenceTexts()
	var in strings.Builder
	for _, s := range texts {
		in.WriteString(hex.EncodeToString([]byte(s)) + "\n")
	}
	const code = `import sys
for line in sys.stdin:
    sys.stdout.write(bytes.fromhex(line.strip()).decode("utf-8", errors="replace").encode("utf-8").hex() + "\n")`
	cmd := exec.Command(python, "-c", code)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("python wrote %d lines for %d texts", len(lines), len(texts))
	}
	for i, s := range texts {
		want, _ := hex.DecodeString(lines[i])
		if got := appendValidUTF8(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("text %d %s: %q, Python %q", i, describe(s), got, want)
		}
	}
}

// TestPatternFails: a pattern matched by regexp2 that matches the empty
// string where the text allows it, or that backtracks past its time
// bound, fails the text with ErrPattern rather than split it otherwise
// than the reference would.
func TestPatternFails(t *testing.T) {
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	for _, tt := range []struct{ pattern, text string }{
		{`(?=a)`, "ba"},
		{`(x+x+)+y`, strings.Repeat("x", 64)},
	} {
		data := editHF(t, hfGoldenFile(t), func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": tt.pattern}, "behavior": "Isolated", "invert": false}, bl}}
		})
		m, err := Load(data)
		if err != nil {
			t.Fatalf("%s: %v", tt.pattern, err)
		}
		ids, err := m.Append([]int32{7}, []byte(tt.text))
		if !errors.Is(err, ErrPattern) || !slices.Equal(ids, []int32{7}) {
			t.Errorf("%s on %q: %v, %v; want ErrPattern and dst unchanged", tt.pattern, tt.text, ids, err)
		}
	}
}
