package tokenize

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/golden.json from the reference (needs python3-sentencepiece)")
	// -retrain changes the committed models; their IDs in golden.json
	// then change too, so it implies -update.
	retrain = flag.Bool("retrain", false, "train testdata's golden models again with the reference, then -update")
)

const goldenPath = "testdata/golden.json"

// goldenFile is testdata/golden.json: committed models and what the
// reference says of them, so that the Go side is checked where Python
// is not. Every value in it is the reference's (reference.py golden).
type goldenFile struct {
	Note   string        `json:"note"`
	Models []goldenModel `json:"models"`
}

type goldenModel struct {
	File        string       `json:"file"`
	Fingerprint string       `json:"fingerprint"`
	Vocab       int          `json:"vocab"`
	Unk         int32        `json:"unk"`
	BOS         int32        `json:"bos"`
	EOS         int32        `json:"eos"`
	Pad         int32        `json:"pad"`
	Cases       []goldenCase `json:"cases"`
}

type goldenCase struct {
	Text string  `json:"text,omitempty"` // for a reader; hex is the text
	Hex  string  `json:"hex"`
	IDs  []int32 `json:"ids"`
}

// goldenModels are the committed models: a BPE one with the default
// normalization (nmt_nfkc, so its character map is the reference's own,
// 240 kB of the file), byte fallback and user-defined and control
// symbols; and a unigram one with a few custom rules (a small map),
// unknown pieces and whitespace as suffix.
func goldenModels(rules string) []referenceModel {
	return []referenceModel{
		{"golden-bpe", map[string]any{"model_type": "bpe", "vocab_size": 1000, "character_coverage": 0.995, "byte_fallback": true,
			"user_defined_symbols": []string{"<|sep|>", "@@"}, "control_symbols": []string{"<ctl>"}, "pad_id": 3}},
		{"golden-unigram", map[string]any{"model_type": "unigram", "vocab_size": 600, "character_coverage": 0.98,
			"normalization_rule_tsv": rules, "treat_whitespace_as_suffix": true, "user_defined_symbols": []string{"<|sep|>"}}},
	}
}

// goldenTexts are the cases: the edge texts and a few generated lines.
func goldenTexts() []string {
	texts := edgeTexts()
	g := textGen{s: 0x676f6c64656e} // "golden"
	for range 40 {
		texts = append(texts, g.line())
	}
	return texts
}

// TestGolden encodes the golden cases with the committed models and
// requires the reference's IDs, fingerprints, sizes and special IDs.
func TestGolden(t *testing.T) {
	if *update || *retrain {
		regenerateGolden(t)
	}
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Models) == 0 {
		t.Fatal("no golden models")
	}
	for _, gm := range g.Models {
		t.Run(gm.File, func(t *testing.T) {
			m := loadFile(t, filepath.Join("testdata", gm.File))
			if m.Fingerprint() != gm.Fingerprint {
				t.Errorf("Fingerprint = %s, want %s", m.Fingerprint(), gm.Fingerprint)
			}
			checkInfo(t, m, referenceOutput{Vocab: gm.Vocab, Unk: gm.Unk, BOS: gm.BOS, EOS: gm.EOS, Pad: gm.Pad})
			texts := make([]string, len(gm.Cases))
			want := make([][]int32, len(gm.Cases))
			for i, c := range gm.Cases {
				b, err := hex.DecodeString(c.Hex)
				if err != nil {
					t.Fatalf("case %d: %v", i, err)
				}
				texts[i], want[i] = string(b), c.IDs
			}
			compareIDs(t, m, texts, want)
		})
	}
}

func loadFile(t testing.TB, path string) *Model {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(data)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return m
}

// regenerateGolden writes golden.json's cases and has the reference fill
// in the rest; with -retrain it trains the models first.
func regenerateGolden(t *testing.T) {
	python := pythontest.Need(t, "scripts/ensure-sentencepiece.sh", "sentencepiece")
	models := goldenModels(filepath.Join(t.TempDir(), "rules.tsv"))
	if *retrain {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "rules.tsv"), normalizationRules)
		models = goldenModels(filepath.Join(dir, "rules.tsv"))
		paths := trainWithReference(t, python, dir, models)
		for _, m := range models {
			data, err := os.ReadFile(paths[m.Name])
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join("testdata", m.Name+".model"), string(data))
		}
	}
	g := goldenFile{Note: "Written by go test -run TestGolden -update (-retrain): every value is the reference's (testdata/reference.py golden)."}
	for _, m := range models {
		gm := goldenModel{File: m.Name + ".model"}
		for _, s := range goldenTexts() {
			c := goldenCase{Hex: hex.EncodeToString([]byte(s))}
			if utf8.ValidString(s) && len(s) <= 200 {
				c.Text = s
			}
			gm.Cases = append(gm.Cases, c)
		}
		g.Models = append(g.Models, gm)
	}
	out, _ := json.MarshalIndent(g, "", " ")
	writeFile(t, goldenPath, string(out)+"\n")
	runReference(t, python, "golden", goldenPath)
}
