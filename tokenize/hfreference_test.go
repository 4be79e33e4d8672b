package tokenize

import (
	"container/heap"
	"context"
	"encoding/hex"
	"encoding/json"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// hfNode returns node and the NODE_PATH that holds Hugging Face's
// tokenizers (scripts/ensure-hf-tokenizers.sh installs it), or skips —
// failing with CI=true, so a CI run cannot pass by skipping.
func hfNode(t testing.TB) (node, modules string) {
	t.Helper()
	node, modules = nodetest.Find(t, nodetest.Tokenizers)
	return node, modules
}

// hfReferenceOutput is hf_reference.cjs's output for one tokenizer.
type hfReferenceOutput struct {
	Vocab int       `json:"vocab"`
	IDs   [][]int32 `json:"ids"`
}

// encodeWithHF has the reference encode texts with each tokenizer.json
// (name → path).
func encodeWithHF(t testing.TB, files map[string]string, texts []string) map[string]hfReferenceOutput {
	t.Helper()
	node, modules := hfNode(t)
	dir := t.TempDir()
	var b strings.Builder
	for _, s := range texts {
		b.WriteString(hex.EncodeToString([]byte(s)))
		b.WriteByte('\n')
	}
	writeFile(t, filepath.Join(dir, "texts.hex"), b.String())
	spec, _ := json.Marshal(map[string]any{"texts": filepath.Join(dir, "texts.hex"), "tokenizers": files})
	writeFile(t, filepath.Join(dir, "spec.json"), string(spec))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "hf_reference.cjs"), filepath.Join(dir, "spec.json"), filepath.Join(dir, "out.json"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node hf_reference.cjs: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]hfReferenceOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// hfTexts are TestReference's texts (14 languages in 10 scripts, emoji,
// whitespace of every kind, invalid UTF-8) and more that byte-level
// tokenizers split on: code, contractions in both cases, numbers, runs
// of whitespace before words and line ends, emoji sequences, and the
// added tokens of every tokenizer built here, alone and inside text.
func hfTexts() []string {
	texts := referenceTexts()
	texts = append(texts,
		"func main() {\n\tfmt.Println(\"hello, world\")\n}\n", "if (a && b) { return x[i] + y->z; } // done",
		"def f(x):\n    return x ** 2  # square\r\n\r\n", "<div class=\"a\">&amp;</div>", "SELECT * FROM t WHERE id=42;",
		"I'm you're he's we've they'll I'd can't", "I'M YOU'RE HE'S WE'VE THEY'LL I'D", "'s 's' 'S 'ſ 'Ll 'rE", "''' '' 'x",
		"1 12 123 1234 12345 123456 3.14159 1,000,000 ½ ² ٣٤٥ १२३ ๑๒๓", "x1y22z333w4444",
		"a  b   c    d", "  leading", "trailing   ", "tab\t\tsep", "\n\n\nx", "x\n\n\n", "a\r\nb\r\n\r\nc", "a \n b \n\n c",
		"\u00a0\u00a0x\u00a0", "\u2003\u2009x\u3000y", "x\u0085y\u2028z\u2029", " \t \n \r \u00a0 \u3000 ",
		"👩‍👩‍👧‍👦 👨🏽‍💻 🏳️‍🌈 🧑‍🤝‍🧑 ❤️‍🔥", "Привет, как дела? Съешь же ещё этих мягких французских булок.",
		"سلام عليكم ١٢٣", "नमस्ते दुनिया १२३", "สวัสดีครับ ๑๒๓", "日本語のテキスト、中文文本。한국어",
		"\ufeffBOM first", "cafe\u0301 café CAFE\u0301", "ﬁ ＡＢＣ ①",
	)
	g := textGen{s: 0x6866746f6b656e73} // "hftokens"
	texts = append(texts, hfAddedContents...)
	for k := range 1400 {
		line := g.line()
		if k%3 != 0 {
			// A line without added tokens, cut anywhere, as in referenceTexts.
			if k%3 == 1 {
				line = line[:g.intn(len(line)+1)]
			}
			texts = append(texts, line)
			continue
		}
		for range 1 + g.intn(3) {
			tok := hfAddedContents[g.intn(len(hfAddedContents))]
			switch g.intn(3) {
			case 0:
				tok = " " + tok
			case 1:
				tok = tok + "  "
			}
			i := g.intn(len(line) + 1)
			for i < len(line) && line[i]&0xC0 == 0x80 {
				i++
			}
			line = line[:i] + tok + line[i:]
		}
		texts = append(texts, line)
	}
	return texts
}

// deepseek3Pattern is DeepSeek V3's third Split.
const deepseek3Pattern = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// hfAddedContents are the added tokens of the tokenizers built here.
var hfAddedContents = []string{"<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|im_start|>", "<|im_end|>",
	"[MASK]", "Brand", "café", "<tool>", "<|end_of_text|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<|end_header_id|>"}

// hfSpec is a tokenizer.json built here: its merges trained on the
// generated corpus by hfTrain, with pre-tokenizer, normalizer and added
// tokens as a model family ships them.
type hfSpec struct {
	name         string
	pattern      string // the split the merges are trained on
	normalizer   any
	preTokenizer any
	added        []map[string]any
	pairs        bool // merges as [a, b] (else "a b")
	ignoreMerges bool
	// extra words put in the vocabulary without a merge that makes them:
	// reached only with ignore_merges.
	extraWords int
	// dupMerge repeats an early merge at the end (the reference ranks it
	// by its last place).
	dupMerge  bool
	dropBytes []byte // bytes whose character is left out of the vocabulary
	unk       bool
}

func special(content string) map[string]any {
	return map[string]any{"content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
}

func hfSpecs() []hfSpec {
	split := func(p, behavior string) map[string]any {
		return map[string]any{"type": "Split", "pattern": map[string]string{"Regex": p}, "behavior": behavior, "invert": false}
	}
	byteLevel := func(prefix, regex bool) map[string]any {
		return map[string]any{"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": true, "use_regex": regex}
	}
	return []hfSpec{
		{name: "gpt2", pattern: gpt2Pattern, preTokenizer: byteLevel(false, true),
			added: []map[string]any{special("<|endoftext|>"),
				{"content": "[MASK]", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": false}}},
		{name: "llama3", pattern: llama3Pattern, pairs: true, ignoreMerges: true, extraWords: 60,
			preTokenizer: map[string]any{"type": "Sequence", "pretokenizers": []any{split(llama3Pattern, "Isolated"), byteLevel(false, false)}},
			added: []map[string]any{special("<|begin_of_text|>"), special("<|end_of_text|>"), special("<|start_header_id|>"), special("<|end_header_id|>"), special("<|eot_id|>"),
				{"content": "Brand", "single_word": true, "lstrip": false, "rstrip": false, "normalized": true, "special": false}}},
		{name: "qwen2", pattern: qwen2Pattern, pairs: true, dupMerge: true, normalizer: map[string]any{"type": "NFC"},
			preTokenizer: map[string]any{"type": "Sequence", "pretokenizers": []any{split(qwen2Pattern, "Isolated"), byteLevel(false, false)}},
			added: []map[string]any{special("<|endoftext|>"), special("<|im_start|>"), special("<|im_end|>"),
				{"content": "café", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false},
				{"content": "<tool>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": false}}},
		// DeepSeek V3's pre-tokenizer: three Splits whose patterns are not
		// matched by hand (regexp2), before ByteLevel.
		{name: "deepseek3", pattern: llama3Pattern, pairs: true,
			preTokenizer: map[string]any{"type": "Sequence", "pretokenizers": []any{
				split(`\p{N}{1,3}`, "Isolated"), split("[一-龥\u3040-ゟ゠-ヿ]+", "Isolated"), split(deepseek3Pattern, "Isolated"), byteLevel(false, false)}},
			added: []map[string]any{special("<｜begin▁of▁sentence｜>"), special("<｜end▁of▁sentence｜>")}},
		// Every other step and option this package reads.
		{name: "misc", pattern: gpt2Pattern, extraWords: 20, unk: true, dropBytes: []byte{1, 2, 3, 0x7f},
			normalizer: map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFKC"}, map[string]any{"type": "NFC"}}},
			preTokenizer: map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Digits", "individual_digits": true},
				map[string]any{"type": "Split", "pattern": map[string]string{"String": "."}, "behavior": "MergedWithNext", "invert": false},
				map[string]any{"type": "Split", "pattern": map[string]string{"String": ","}, "behavior": "MergedWithPrevious", "invert": false},
				map[string]any{"type": "Split", "pattern": map[string]string{"String": "-"}, "behavior": "Removed", "invert": false},
				map[string]any{"type": "Split", "pattern": map[string]string{"String": "e"}, "behavior": "Contiguous", "invert": true},
				map[string]any{"type": "Digits", "individual_digits": false},
				byteLevel(true, true)}},
			added: []map[string]any{special("<|endoftext|>"),
				{"content": "Brand", "single_word": true, "lstrip": true, "rstrip": true, "normalized": false, "special": false}}},
	}
}

// hfTrain learns BPE merges over the byte-level alphabet from lines
// split by pattern: the most frequent adjacent pair merged, ties to the
// smaller pair, n times. It need not be the reference's trainer: the
// same file is given to both sides.
func hfTrain(lines []string, pattern string, n int) (merges [][2]string) {
	match := knownPatterns[pattern]
	counts := map[string]int{}
	for _, l := range lines {
		for i := 0; i < len(l); {
			_, e, _ := match(l, i)
			counts[l[i:e]]++
			i = e
		}
	}
	type word struct {
		syms  []string
		count int
	}
	words := make([]word, 0, len(counts))
	for w, c := range counts {
		syms := make([]string, len(w))
		for i := range len(w) {
			syms[i] = string(byteAlphabet[w[i]])
		}
		words = append(words, word{syms, c})
	}
	// Pair counts kept up to date: a merge recounts only the words that
	// hold its pair; the best pair is found in a heap whose stale
	// entries (a count since changed) are skipped.
	pairs := map[[2]string]int{}
	where := map[[2]string]map[int]bool{}
	h := &pairHeap{}
	changed := map[[2]string]bool{}
	count := func(k int, sign int) {
		w := &words[k]
		for i := 0; i+1 < len(w.syms); i++ {
			p := [2]string{w.syms[i], w.syms[i+1]}
			pairs[p] += sign * w.count
			changed[p] = true
			if sign > 0 {
				if where[p] == nil {
					where[p] = map[int]bool{}
				}
				where[p][k] = true
			}
		}
	}
	flush := func() {
		for p := range changed {
			if c := pairs[p]; c > 0 {
				heap.Push(h, pairCount{p, c})
			} else {
				delete(pairs, p)
			}
		}
		clear(changed)
	}
	for k := range words {
		count(k, 1)
	}
	flush()
	for len(merges) < n && h.Len() > 0 {
		top := heap.Pop(h).(pairCount)
		if pairs[top.p] != top.n {
			continue // stale
		}
		if top.n < 2 {
			break
		}
		best := top.p
		merges = append(merges, best)
		ks := make([]int, 0, len(where[best]))
		for k := range where[best] {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		for _, k := range ks {
			count(k, -1)
			w := &words[k]
			out := make([]string, 0, len(w.syms))
			for i := 0; i < len(w.syms); i++ {
				if i+1 < len(w.syms) && w.syms[i] == best[0] && w.syms[i+1] == best[1] {
					out = append(out, best[0]+best[1])
					i++
					continue
				}
				out = append(out, w.syms[i])
			}
			w.syms = out
			count(k, 1)
		}
		delete(where, best)
		flush()
	}
	return merges
}

type pairCount struct {
	p [2]string
	n int
}

// pairHeap orders pairs by count, then the smaller pair first.
type pairHeap []pairCount

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].n != h[j].n {
		return h[i].n > h[j].n
	}
	return h[i].p[0] < h[j].p[0] || h[i].p[0] == h[j].p[0] && h[i].p[1] < h[j].p[1]
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCount)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// buildHF writes spec's tokenizer.json, its merges trained on lines.
func buildHF(spec hfSpec, lines []string, nMerges int) []byte {
	merges := hfTrain(lines, spec.pattern, nMerges)
	vocab := map[string]int{}
	var order []string
	addTok := func(s string) {
		if _, ok := vocab[s]; !ok {
			vocab[s] = len(order)
			order = append(order, s)
		}
	}
	for b := range 256 {
		if !slices.Contains(spec.dropBytes, byte(b)) {
			addTok(string(byteAlphabet[b]))
		}
	}
	if spec.unk {
		addTok("<unk>")
	}
	for _, m := range merges {
		addTok(m[0] + m[1])
	}
	if spec.dupMerge && len(merges) > 10 {
		merges = append(merges, merges[3])
	}
	if spec.extraWords > 0 {
		// Frequent words the merges do not make whole.
		match := knownPatterns[spec.pattern]
		counts := map[string]int{}
		for _, l := range lines {
			for i := 0; i < len(l); {
				_, e, _ := match(l, i)
				counts[l[i:e]]++
				i = e
			}
		}
		var ws []string
		for w, c := range counts {
			if c > 3 && len(w) > 3 {
				ws = append(ws, w)
			}
		}
		sort.Slice(ws, func(i, j int) bool {
			if counts[ws[i]] != counts[ws[j]] {
				return counts[ws[i]] > counts[ws[j]]
			}
			return ws[i] < ws[j]
		})
		added := 0
		for _, w := range ws {
			var b strings.Builder
			for i := range len(w) {
				b.WriteRune(byteAlphabet[w[i]])
			}
			if _, ok := vocab[b.String()]; !ok {
				addTok(b.String())
				if added++; added == spec.extraWords {
					break
				}
			}
		}
	}
	var ms []any
	for _, m := range merges {
		if spec.pairs {
			ms = append(ms, []string{m[0], m[1]})
		} else {
			ms = append(ms, m[0]+" "+m[1])
		}
	}
	added := []map[string]any{}
	for i, a := range spec.added {
		a = maps(a)
		a["id"] = len(order) + i
		added = append(added, a)
	}
	var unk any
	if spec.unk {
		unk = "<unk>"
	}
	file := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer": spec.normalizer, "pre_tokenizer": spec.preTokenizer,
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": unk, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": spec.unk, "byte_fallback": false, "ignore_merges": spec.ignoreMerges, "vocab": vocab, "merges": ms},
	}
	out, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		panic(err)
	}
	return out
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestHFReference builds a GPT-2-, a Llama-3- and a Qwen-2-style
// tokenizer.json and one with every other option read, their merges
// learned from the generated multilingual corpus, has the reference
// encode hfTexts with each, and requires the same IDs of this package.
func TestHFReference(t *testing.T) {
	hfNode(t)
	dir := t.TempDir()
	lines := trainingCorpus(1500)
	files := map[string]string{}
	specs := hfSpecs()
	for _, s := range specs {
		files[s.name] = filepath.Join(dir, s.name+".json")
		writeFile(t, files[s.name], string(buildHF(s, lines, 1200)))
	}
	texts := hfTexts()
	if len(texts) < 3000 {
		t.Fatalf("%d texts, want at least 3,000", len(texts))
	}
	want := encodeWithHF(t, files, texts)
	for _, s := range specs {
		t.Run(s.name, func(t *testing.T) {
			m := loadFile(t, files[s.name])
			if m.Algorithm() != ByteLevelBPE {
				t.Errorf("Kind = %v", m.Algorithm())
			}
			ref := want[s.name]
			if m.VocabSize() != ref.Vocab {
				t.Errorf("VocabSize = %d, reference %d", m.VocabSize(), ref.Vocab)
			}
			compareIDs(t, m, texts, ref.IDs)
			// Each special token alone is one ID, on both sides.
			for _, a := range s.added {
				content := a["content"].(string)
				if !a["special"].(bool) {
					continue
				}
				ids, _ := m.Encode([]byte(content))
				i := slices.Index(texts, content)
				if i < 0 || len(ids) != 1 || !slices.Equal(ids, ref.IDs[i]) {
					t.Errorf("%s: %v, reference %v", content, ids, ref.IDs[max(i, 0)])
				}
			}
		})
	}
}
