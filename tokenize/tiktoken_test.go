package tokenize

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/nodetest"
)

// tiktokenNames are the encodings the reference tests run.
var tiktokenNames = []string{"r50k_base", "p50k_base", "cl100k_base", "o200k_base"}

// encodeWithTiktoken has the reference write the named encodings' rank
// files into dir and encode texts with each (nodetest.EncodeTiktoken).
func encodeWithTiktoken(t testing.TB, dir string, names, texts []string) map[string][][]int32 {
	t.Helper()
	b := make([][]byte, len(texts))
	for i, s := range texts {
		b[i] = []byte(s)
	}
	return nodetest.EncodeTiktoken(t, dir, names, b)
}

// TestTiktokenReference loads the rank files of r50k_base, p50k_base,
// cl100k_base and o200k_base, taken from the reference's package and
// written as the .tiktoken files tiktoken publishes (their SHA-256 the
// ones tiktoken checks), and requires the reference's IDs
// (encode_ordinary) on hfTexts with each; loading stays within the
// allocation bound.
func TestTiktokenReference(t *testing.T) {
	dir := t.TempDir()
	texts := hfTexts()
	if len(texts) < 3000 {
		t.Fatalf("%d texts, want at least 3,000", len(texts))
	}
	want := encodeWithTiktoken(t, dir, tiktokenNames, texts)
	// n_vocab and <|endoftext|>, as tiktoken reports them.
	vocab := map[string]int{"r50k_base": 50257, "p50k_base": 50281, "cl100k_base": 100277, "o200k_base": 200019}
	eot := map[string]int32{"r50k_base": 50256, "p50k_base": 50256, "cl100k_base": 100257, "o200k_base": 199999}
	for _, name := range tiktokenNames {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name+".tiktoken"))
			if err != nil {
				t.Fatal(err)
			}
			var m *Model
			if got := allocated(func() { m, err = Load(data) }); got > loadAllocBound(len(data)) {
				t.Errorf("Load of %d bytes allocated %d bytes", len(data), got)
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Algorithm() != TiktokenBPE || m.File() != name+".tiktoken" {
				t.Errorf("Kind, File = %v, %q", m.Algorithm(), m.File())
			}
			if m.VocabSize() != vocab[name] || m.Special() != (Special{Unk: -1, BOS: -1, EOS: eot[name], Pad: -1}) {
				t.Errorf("VocabSize = %d (want %d), Special = %+v", m.VocabSize(), vocab[name], m.Special())
			}
			compareIDs(t, m, texts, want[name])
		})
	}
}

// tiktokenMergeReference is tiktoken's _byte_pair_merge, written out as
// its Rust source has it: the parts are byte positions; the adjacent
// pair whose joined bytes have the lowest rank (leftmost on a tie) is
// merged until no joined pair is a token.
func tiktokenMergeReference(ranks map[string]int32, w string) []int32 {
	if r, ok := ranks[w]; ok {
		return []int32{r}
	}
	const none = int32(1<<31 - 1)
	cuts := make([]int, len(w)+1)
	for i := range cuts {
		cuts[i] = i
	}
	rank := func(i int) int32 { // of parts i and i+1 joined
		if i+2 >= len(cuts) {
			return none
		}
		if r, ok := ranks[w[cuts[i]:cuts[i+2]]]; ok {
			return r
		}
		return none
	}
	for {
		best, at := none, -1
		for i := 0; i+2 < len(cuts); i++ {
			if r := rank(i); r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		cuts = slices.Delete(cuts, at+1, at+2)
	}
	var out []int32
	for i := 0; i+1 < len(cuts); i++ {
		out = append(out, ranks[w[cuts[i]:cuts[i+1]]])
	}
	return out
}

// TestTiktokenMergeByRank: the merges derived from ranks, run by
// byteBPE's queue, give tiktoken's merging on random rank tables (tokens
// made by merges in random order, and tokens no merge made, reached in
// several ways or none), word by word, where node is not needed.
func TestTiktokenMergeByRank(t *testing.T) {
	g := textGen{s: 0x74696b746f6b}
	const alphabet = "abcde xy"
	for table := range 40 {
		ranks := map[string]int32{}
		var toks []string
		add := func(s string) {
			if _, ok := ranks[s]; !ok {
				ranks[s] = int32(len(ranks))
				toks = append(toks, s)
			}
		}
		// The bytes, in a shuffled order of ranks for some tables.
		order := make([]int, 256)
		for i := range order {
			order[i] = i
		}
		if table%2 == 1 {
			for i := range order {
				j := g.intn(i + 1)
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, b := range order {
			add(string([]byte{byte(b)}))
		}
		for range 60 + g.intn(200) {
			if g.intn(4) == 0 {
				// A token no merge need make: any short string.
				n := 2 + g.intn(5)
				var s []byte
				for range n {
					s = append(s, alphabet[g.intn(len(alphabet))])
				}
				add(string(s))
				continue
			}
			a := toks[255+g.intn(len(toks)-255)]
			if g.intn(3) == 0 {
				a = string(alphabet[g.intn(len(alphabet))])
			}
			b := toks[255+g.intn(len(toks)-255)]
			if g.intn(3) == 0 {
				b = string(alphabet[g.intn(len(alphabet))])
			}
			if len(a)+len(b) <= 12 {
				add(a + b)
			}
		}
		e, err := newTiktokenBPE(ranks, gpt2Pattern)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			n := 1 + g.intn(16)
			var w []byte
			for range n {
				w = append(w, alphabet[g.intn(len(alphabet)-2)])
			}
			want := tiktokenMergeReference(ranks, string(w))
			var sc bpeScratch
			e.word(string(w), &sc)
			if !slices.Equal(sc.out, want) {
				t.Fatalf("table %d: %q: %v, tiktoken's merging %v", table, w, sc.out, want)
			}
		}
	}
}

// tiktokenFile writes ranks as a rank file, a line a token in order.
func tiktokenFile(tokens []string) []byte {
	var b strings.Builder
	for i, tok := range tokens {
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(tok)), i)
	}
	return []byte(b.String())
}

func byteTokens() []string {
	out := make([]string, 256)
	for b := range out {
		out[b] = string([]byte{byte(b)})
	}
	return out
}

// TestLoadTiktokenRefuses: damaged rank files, ones past the bounds, and
// a well-formed file of no named encoding, each with its error; a
// hostile file costs at most loadAllocBound.
func TestLoadTiktokenRefuses(t *testing.T) {
	valid := tiktokenFile(append(byteTokens(), "ab", "abc"))
	long := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", maxTiktokenToken+1)))
	tests := []struct {
		name string
		data string
		want error
		msg  string
	}{
		{"no named encoding", string(valid), ErrUnsupported, "no named encoding"},
		{"bad base64", "IQ== 0\nI!Q= 1\n", ErrNotModel, "not base64"},
		{"base64 without padding", "IQ== 0\nIQ 1\n", ErrNotModel, "not base64"},
		{"base64 with stray bits", "IQ== 0\nIR== 1\n", ErrNotModel, "not base64"},
		{"rank twice", "IQ== 0\nIg== 0\n", ErrNotModel, "rank 0 twice"},
		{"token twice", "IQ== 0\nIQ== 1\n", ErrNotModel, "twice (ranks 0 and 1)"},
		{"rank not a number", "IQ== 0\nIg== x1\n", ErrNotModel, "not a decimal"},
		{"signed rank", "IQ== 0\nIg== +1\n", ErrNotModel, "not a decimal"},
		{"leading zero", "IQ== 0\nIg== 01\n", ErrNotModel, "not a decimal"},
		{"rank past MaxPieces", fmt.Sprintf("IQ== 0\nIg== %d\n", MaxPieces), ErrNotModel, "not a decimal"},
		{"no rank", "IQ== 0\nIg==\n", ErrNotModel, "not \"TOKEN RANK\""},
		{"empty line", "IQ== 0\n\nIg== 1\n", ErrNotModel, "line 2"},
		{"CRLF", "IQ== 0\r\nIg== 1\r\n", ErrNotModel, "line 1"},
		{"token too long", "IQ== 0\n" + long + " 1\n", ErrTooLarge, "token of more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Load([]byte(tt.data))
			if m != nil || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), "tiktoken") {
				t.Errorf("Load = %v, %v; want %v with %q", m, err, tt.want, tt.msg)
			}
		})
	}
	// More token bytes than MaxPieceBytes, each token within its bound.
	var big []string
	for i := 0; len(big)*maxTiktokenToken <= MaxPieceBytes; i++ {
		big = append(big, fmt.Sprintf("%0*d", maxTiktokenToken, i))
	}
	data := tiktokenFile(big)
	var err error
	if got := allocated(func() { _, err = Load(data) }); got > loadAllocBound(len(data)) {
		t.Errorf("Load of %d bytes allocated %d bytes", len(data), got)
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d bytes of tokens: %v", MaxPieceBytes+maxTiktokenToken, err)
	}
	// A file of many short tokens, refused after it is read, within the
	// bound too.
	var many []string
	for i := range 1 << 17 {
		many = append(many, fmt.Sprintf("<%x>", i))
	}
	data = tiktokenFile(append(byteTokens(), many...))
	if got := allocated(func() { _, err = Load(data) }); got > loadAllocBound(len(data)) {
		t.Errorf("Load of %d bytes allocated %d bytes", len(data), got)
	}
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("a well-formed file of no named encoding: %v", err)
	}
	// A byte that is no token: tiktoken could not encode it alone.
	ranks := map[string]int32{}
	for i, tok := range byteTokens()[1:] {
		ranks[tok] = int32(i)
	}
	if _, err := newTiktokenBPE(ranks, gpt2Pattern); !errors.Is(err, ErrNotModel) || !strings.Contains(err.Error(), "0x00") {
		t.Errorf("without the byte 0x00: %v", err)
	}
}

// TestLooksLikeTiktoken: a rank file's first line is told from a
// SentencePiece model's first bytes and a tokenizer.json's.
func TestLooksLikeTiktoken(t *testing.T) {
	for _, tt := range []struct {
		data string
		want bool
	}{
		{"IQ== 0\n", true},
		{"IQ== 0", true},
		{"ISE= 12345\nIg== 1\n", true},
		{"IQ==\n", false},
		{" 0\n", false},
		{"IQ== \n", false},
		{"IQ== 0x1\n", false},
		{"IQ== 0\r\n", true},
		{strings.Repeat("QUFB", 20), true},
		{strings.Repeat("QUFB", 15) + " 12", true},
		{strings.Repeat("QUFB", 15) + "\n", false},
		{`{"model": {}}`, false},
		{"\n\x05hello", false},
		{string(goldenBytes(t, "bpe")[:64]), false},
	} {
		if got := looksLikeTiktoken([]byte(tt.data)); got != tt.want {
			t.Errorf("looksLikeTiktoken(%q) = %v", tt.data, got)
		}
	}
}

// TestO200KPattern: o200k_base's pattern matched by hand splits as
// regexp2 (a backtracking engine, which TestTiktokenReference holds to
// the reference) splits on random strings of the characters its
// classes tell apart: upper, title, lower, modifier and other letters,
// marks, numbers, whitespace with and without newlines, apostrophes and
// the letters of contractions, slashes and other punctuation.
func TestO200KPattern(t *testing.T) {
	re, err := compileFallback(o200kPattern, "o200k")
	if err != nil {
		t.Fatal(err)
	}
	pool := []string{"A", "Z", "a", "z", "ǅ", "ʰ", "日", "ก", "\u0301", "\u0e31", "É", "é", "Σ", "σ",
		"1", "٣", "½", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "'", "'", "s", "S", "ſ", "t", "r", "e", "v", "m", "l", "L", "d",
		"/", "!", ".", "😀", "-"}
	g := textGen{s: 0x6f3230306b}
	split := func(m matcher, s string) []string {
		var out []string
		(&regexSplit{match: m, behavior: "Removed", invert: true}).split(s, func(p string) { out = append(out, p) })
		return out
	}
	texts := append(hfTexts()[:400], "a'ſ", "X'LL", "ab'Ve", "'s", " 's", "A\u0301b", "\u0301\u0301a", " \u0301", "AB'sC", "ǅa'd")
	for range 20000 {
		var b strings.Builder
		for range 1 + g.intn(12) {
			b.WriteString(pool[g.intn(len(pool))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		s = string(appendValidUTF8(nil, []byte(s)))
		fm, err := fallbackMatcher(re, s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := split(knownPatterns[o200kPattern], s), split(fm, s); !slices.Equal(got, want) {
			t.Fatalf("%q: split %q, regexp2 %q", s, got, want)
		}
	}
}
