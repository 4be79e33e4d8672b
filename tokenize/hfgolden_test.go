package tokenize

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"testing"
	"unicode/utf8"
)

var updateHF = flag.Bool("update-hf", false, "rebuild testdata/hf-golden-tokenizer.json and have the reference (node, tokenizers) rewrite testdata/hf-golden.json")

const (
	hfGoldenTokenizer = "testdata/hf-golden-tokenizer.json"
	hfGoldenPath      = "testdata/hf-golden.json"
)

// hfGolden is testdata/hf-golden.json: the committed tokenizer.json's
// fingerprint and size and the reference's IDs for texts, so that the
// byte-level path is held to the reference where node is not.
type hfGolden struct {
	Note        string       `json:"note"`
	Fingerprint string       `json:"fingerprint"`
	Vocab       int          `json:"vocab"`
	Cases       []goldenCase `json:"cases"`
}

// hfGoldenTexts are the golden cases: the edge texts, lines with added
// tokens, and a few generated lines.
func hfGoldenTexts() []string {
	texts := append(edgeTexts(), hfAddedContents...)
	texts = append(texts, "<|begin_of_text|>Hello<|eot_id|>", " <|eot_id|> x", "I'M here. It's 12345 o'clock\r\n\tok", "Brand Brands xBrand Brand!")
	g := textGen{s: 0x6866676f6c64} // "hfgold"
	for range 40 {
		texts = append(texts, g.line())
	}
	return texts
}

// TestHFGolden encodes the golden cases with the committed Llama-3-style
// tokenizer.json and requires the reference's IDs.
func TestHFGolden(t *testing.T) {
	if *updateHF {
		spec := hfSpecs()[1] // llama3
		spec.extraWords = 20
		writeFile(t, hfGoldenTokenizer, string(buildHF(spec, trainingCorpus(800), 400)))
		texts := hfGoldenTexts()
		ref := encodeWithHF(t, map[string]string{"golden": hfGoldenTokenizer}, texts)["golden"]
		m := loadFile(t, hfGoldenTokenizer)
		g := hfGolden{Note: "Written by go test -run TestHFGolden -update-hf: the IDs are the reference's (testdata/hf_reference.cjs).",
			Fingerprint: m.Fingerprint(), Vocab: ref.Vocab}
		for i, s := range texts {
			c := goldenCase{Hex: hex.EncodeToString([]byte(s)), IDs: ref.IDs[i]}
			if utf8.ValidString(s) && len(s) <= 200 {
				c.Text = s
			}
			g.Cases = append(g.Cases, c)
		}
		out, _ := json.MarshalIndent(g, "", " ")
		writeFile(t, hfGoldenPath, string(out)+"\n")
	}
	raw, err := os.ReadFile(hfGoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g hfGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	m := loadFile(t, hfGoldenTokenizer)
	if m.Fingerprint() != g.Fingerprint {
		t.Errorf("Fingerprint = %s, want %s", m.Fingerprint(), g.Fingerprint)
	}
	if m.VocabSize() != g.Vocab {
		t.Errorf("VocabSize = %d, reference %d", m.VocabSize(), g.Vocab)
	}
	if len(g.Cases) < 100 {
		t.Fatalf("%d golden cases", len(g.Cases))
	}
	texts := make([]string, len(g.Cases))
	want := make([][]int32, len(g.Cases))
	for i, c := range g.Cases {
		b, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		texts[i], want[i] = string(b), c.IDs
	}
	compareIDs(t, m, texts, want)
}
