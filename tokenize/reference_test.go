package tokenize

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// runReference runs testdata/reference.py with args.
func runReference(t testing.TB, python string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "reference.py")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reference.py %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// referenceModel is a model the reference trains: its name and the
// trainer's options.
type referenceModel struct {
	Name    string         `json:"name"`
	Options map[string]any `json:"options"`
}

// referenceModels cover both kinds with every option that changes
// encoding: the default normalization (nmt_nfkc) and others (identity,
// case folding, custom rules), with and without a dummy prefix, extra
// whitespace removal, escaping and whitespace as suffix, byte fallback or
// unknown pieces, user-defined and control symbols, digits split, pieces
// of whitespace only, and special IDs moved or absent.
func referenceModels(rules string) []referenceModel {
	base := func(kind string, extra map[string]any) map[string]any {
		o := map[string]any{"model_type": kind, "vocab_size": 1000, "character_coverage": 0.995, "hard_vocab_limit": false}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	return []referenceModel{
		{"bpe_nfkc_bf", base("bpe", map[string]any{"byte_fallback": true, "user_defined_symbols": []string{"<|sep|>", "@@"}, "control_symbols": []string{"<ctl>"}, "pad_id": 3})},
		{"bpe_gemma", base("bpe", map[string]any{"byte_fallback": true, "normalization_rule_name": "identity", "add_dummy_prefix": false, "remove_extra_whitespaces": false, "allow_whitespace_only_pieces": true, "split_by_whitespace": false})},
		{"bpe_llama", base("bpe", map[string]any{"byte_fallback": true, "normalization_rule_name": "identity", "remove_extra_whitespaces": false, "split_digits": true})},
		{"bpe_unk", base("bpe", map[string]any{"character_coverage": 0.98, "user_defined_symbols": []string{"<|sep|>"}, "unk_id": 3, "bos_id": -1, "eos_id": 0, "pad_id": 1})},
		{"bpe_suffix_cf", base("bpe", map[string]any{"treat_whitespace_as_suffix": true, "normalization_rule_name": "nmt_nfkc_cf", "byte_fallback": true})},
		{"uni_nfkc", base("unigram", map[string]any{"character_coverage": 0.98})},
		{"uni_bf", base("unigram", map[string]any{"byte_fallback": true, "user_defined_symbols": []string{"<|sep|>", "@@"}, "normalization_rule_name": "identity", "bos_id": -1})},
		{"uni_rules_suffix", base("unigram", map[string]any{"normalization_rule_tsv": rules, "treat_whitespace_as_suffix": true, "remove_extra_whitespaces": false})},
		{"uni_gemma", base("unigram", map[string]any{"normalization_rule_name": "identity", "add_dummy_prefix": false, "remove_extra_whitespaces": false, "allow_whitespace_only_pieces": true, "split_by_whitespace": false, "user_defined_symbols": []string{"<|sep|>"}})},
	}
}

// normalizationRules is a normalization_rule_tsv of a few rules, so that
// a model's character map is small (the committed golden unigram model
// uses it): full-width letters, a ligature, the ideographic space, a
// composed accent, a circled digit, and a character removed.
const normalizationRules = "FF21\t41\nFF22\t42\nFF48\t68\nFF45\t65\nFB01\t66 69\n3000\t20\n65 301\tE9\n2460\t31\n200B\t\n"

// referenceOutput is reference.py encode's output for one model.
type referenceOutput struct {
	Vocab int       `json:"vocab"`
	Unk   int32     `json:"unk"`
	BOS   int32     `json:"bos"`
	EOS   int32     `json:"eos"`
	Pad   int32     `json:"pad"`
	IDs   [][]int32 `json:"ids"`
}

// encodeWithReference has the reference encode texts with each model
// (name → path).
func encodeWithReference(t testing.TB, python string, models map[string]string, texts []string) map[string]referenceOutput {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for _, s := range texts {
		b.WriteString(hex.EncodeToString([]byte(s)))
		b.WriteByte('\n')
	}
	writeFile(t, filepath.Join(dir, "texts.hex"), b.String())
	spec, _ := json.Marshal(map[string]any{"texts": filepath.Join(dir, "texts.hex"), "models": models})
	writeFile(t, filepath.Join(dir, "encode.json"), string(spec))
	runReference(t, python, "encode", filepath.Join(dir, "encode.json"), filepath.Join(dir, "out.json"))
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]referenceOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// trainWithReference trains models on the generated corpus into dir and
// returns their paths by name.
func trainWithReference(t testing.TB, python, dir string, models []referenceModel) map[string]string {
	t.Helper()
	writeFile(t, filepath.Join(dir, "corpus.txt"), strings.Join(trainingCorpus(4000), "\n")+"\n")
	spec, _ := json.Marshal(map[string]any{"corpus": filepath.Join(dir, "corpus.txt"), "out": dir, "models": models})
	writeFile(t, filepath.Join(dir, "train.json"), string(spec))
	runReference(t, python, "train", filepath.Join(dir, "train.json"))
	paths := make(map[string]string, len(models))
	for _, m := range models {
		paths[m.Name] = filepath.Join(dir, m.Name+".model")
	}
	return paths
}

// TestReference trains models of both kinds with the reference on a
// multilingual corpus, encodes texts of every language, whitespace, rare
// characters and invalid UTF-8 with the reference and with this package,
// and requires the same IDs for every text.
func TestReference(t *testing.T) {
	python := pythontest.Need(t, "scripts/ensure-sentencepiece.sh", "sentencepiece")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.tsv"), normalizationRules)
	models := referenceModels(filepath.Join(dir, "rules.tsv"))
	paths := trainWithReference(t, python, dir, models)
	names := make([]string, 0, len(models)+len(editedModels))
	for _, rm := range models {
		names = append(names, rm.Name)
	}
	for _, e := range editedModels {
		data, err := os.ReadFile(paths[e.base])
		if err != nil {
			t.Fatal(err)
		}
		paths[e.name] = filepath.Join(dir, e.name+".model")
		writeFile(t, paths[e.name], string(editModel(data, e.edit)))
		names = append(names, e.name)
	}
	texts := referenceTexts()
	want := encodeWithReference(t, python, paths, texts)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(paths[name])
			if err != nil {
				t.Fatal(err)
			}
			m, err := Load(data)
			if refused := refusedEdits[name]; refused != nil {
				// The reference encodes with it; this package says no.
				if !errors.Is(err, refused) {
					t.Fatalf("Load = %v, want %v", err, refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			ref := want[name]
			checkInfo(t, m, ref)
			compareIDs(t, m, texts, ref.IDs)
		})
	}
}

// editedModels are trained models changed the way a file could be: the
// options the trainer refuses or never writes, and an enum value the
// schema does not name.
var editedModels = []struct {
	name, base string
	edit       func(mp *modelProto)
}{
	{"uni_unused", "uni_bf", func(mp *modelProto) { // the lattice skips unused pieces
		for i := range mp.pieces {
			if p := &mp.pieces[i]; p.typ == pieceNormal && i%7 == 0 && len(p.s) > 1 {
				p.typ = pieceUnused
			}
		}
	}},
	{"uni_noescape", "uni_bf", func(mp *modelProto) { mp.norm.esc = false }},
	{"uni_noescape_suffix", "uni_nfkc", func(mp *modelProto) { mp.norm.esc, mp.trainer.suffix = false, true }},
	{"uni_nfkc_raw", "uni_nfkc", func(mp *modelProto) { mp.norm.addDummyPrefix, mp.norm.removeExtraWS = false, false }},
	{"bpe_nfkc_raw", "bpe_nfkc_bf", func(mp *modelProto) { mp.norm.addDummyPrefix, mp.norm.removeExtraWS = false, false }},
	{"bpe_enum99", "bpe_nfkc_bf", func(mp *modelProto) { setType(mp, "<ctl>", 0) }},
	{"uni_enum99", "uni_nfkc", func(mp *modelProto) { setType(mp, "</s>", 0) }},
	{"bpe_noescape", "bpe_nfkc_bf", func(mp *modelProto) { mp.norm.esc = false }},
	{"bpe_unused", "bpe_nfkc_bf", func(mp *modelProto) { mp.pieces[len(mp.pieces)/2].typ = pieceUnused }},
}

// refusedEdits are the edited models this package refuses, though the
// reference encodes with them (see the package doc).
var refusedEdits = map[string]error{"bpe_noescape": ErrUnsupported, "bpe_unused": ErrUnsupported}

// setType changes the type of the piece s (0: written as an unnamed
// enum value).
func setType(mp *modelProto, s string, typ int8) {
	for i := range mp.pieces {
		if mp.pieces[i].s == s {
			mp.pieces[i].typ = typ
			return
		}
	}
	panic("no piece " + s)
}

// checkInfo compares a model's vocabulary size and special IDs with the
// reference's.
func checkInfo(t *testing.T, m *Model, ref referenceOutput) {
	t.Helper()
	if m.VocabSize() != ref.Vocab {
		t.Errorf("VocabSize = %d, reference %d", m.VocabSize(), ref.Vocab)
	}
	if got, want := m.Special(), (Special{Unk: ref.Unk, BOS: ref.BOS, EOS: ref.EOS, Pad: ref.Pad}); got != want {
		t.Errorf("Special = %+v, reference %+v", got, want)
	}
}

// compareIDs encodes every text and compares with want, reporting the
// first few differences in full.
func compareIDs(t *testing.T, m *Model, texts []string, want [][]int32) {
	t.Helper()
	if len(want) != len(texts) {
		t.Fatalf("the reference encoded %d texts, want %d", len(want), len(texts))
	}
	bad := 0
	for i, text := range texts {
		got, err := m.Encode([]byte(text))
		if err != nil {
			t.Errorf("text %d: %v", i, err)
			continue
		}
		if w := want[i]; !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
			if bad++; bad <= 5 {
				t.Errorf("text %d %s:\n got %v\nwant %v", i, describe(text), got, w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts encode differently from the reference", bad, len(texts))
	}
}

// describe shows a text for a failure message: quoted, cut if long.
func describe(s string) string {
	if len(s) > 200 {
		return fmt.Sprintf("(%d bytes) %q…", len(s), s[:200])
	}
	return fmt.Sprintf("%q", s)
}
