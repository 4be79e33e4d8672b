package tokenize

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// The benchmarks encode two corpora, one document a call:
//   - english: Newton's Opticks from Go's own source tree
//     ($GOROOT/src/testdata/Isaac.Newton-Opticks.txt, 567 kB of
//     real prose), a document a paragraph;
//   - multilingual: the generator's lines in 15 scripts, 20 lines a
//     document.
//
// with the committed golden models (vocabularies of 1,000 and 600),
// Llama-3-style byte-level BPE tokenizer.json files of 1,000 and 16,000
// tokens and a DeepSeek-V3-style one of 1,000 (its patterns matched by
// regexp2) whose merges the tests' trainer (hfTrain) learns from both
// corpora first, tiktoken's cl100k_base and o200k_base (vocabularies of
// 100,256 and 199,998; where node and tiktoken are), and, where
// python3-sentencepiece is, BPE and unigram
// models of 16,000 pieces the reference trains on both corpora first (closer to the
// models in use: a larger vocabulary means more merges a word in BPE and
// more candidates a position in unigram). The benchmarks run one
// goroutine, so tokens/s is per core on an idle machine; tokens/cpu-s
// divides by the process's CPU time instead, which holds on a loaded one.
//
//	go test -run '^$' -bench Encode -benchtime 3x ./tokenize

// benchCorpora returns the documents of each corpus.
func benchCorpora(b *testing.B) map[string][]string {
	b.Helper()
	out := map[string][]string{}
	if raw, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt")); err == nil {
		for _, p := range strings.Split(string(raw), "\n\n") {
			if p = strings.TrimSpace(p); p != "" {
				out["english"] = append(out["english"], p)
			}
		}
	}
	g := textGen{s: 0x62656e6368} // "bench"
	for range 2000 {
		lines := make([]string, 20)
		for i := range lines {
			lines[i] = g.line()
		}
		out["multilingual"] = append(out["multilingual"], strings.Join(lines, "\n"))
	}
	return out
}

// benchModels returns the models to measure, by name.
func benchModels(b *testing.B, corpora map[string][]string) map[string]*Model {
	b.Helper()
	models := map[string]*Model{}
	for _, kind := range []string{"bpe", "unigram"} {
		models["golden-"+kind] = loadFile(b, filepath.Join("testdata", "golden-"+kind+".model"))
	}
	var lines []string
	for _, docs := range corpora {
		for _, d := range docs {
			lines = append(lines, strings.Split(d, "\n")...)
		}
	}
	specs := hfSpecs()
	for name, f := range map[string]struct {
		spec   hfSpec
		merges int
	}{"bytelevel-1k": {specs[1], 1000 - 256}, "bytelevel-16k": {specs[1], 16000 - 256}, "deepseek-1k": {specs[3], 1000 - 256}} {
		m, err := Load(buildHF(f.spec, lines, f.merges))
		if err != nil {
			b.Fatal(err)
		}
		models[name] = m
	}
	// tiktoken's cl100k_base and o200k_base, where its package is
	// installed (scripts/ensure-tiktoken.sh), which holds their rank files.
	if _, _, err := nodetest.Locate(nodetest.Tiktoken); err == nil {
		dir := b.TempDir()
		names := []string{"cl100k_base", "o200k_base"}
		encodeWithTiktoken(b, dir, names, nil)
		for _, name := range names {
			models[name] = loadFile(b, filepath.Join(dir, name+".tiktoken"))
		}
	}
	if models["cl100k_base"] == nil {
		b.Log("no tiktoken (node): its encodings are not measured")
	}
	python, err := pythontest.Find(b.Context(), nil, "sentencepiece")
	if err != nil {
		b.Log("no python3-sentencepiece: only the golden models are measured")
		return models
	}
	dir := b.TempDir()
	var train []string
	for _, docs := range corpora {
		for _, d := range docs {
			train = append(train, strings.Split(d, "\n")...)
		}
	}
	writeFile(b, filepath.Join(dir, "corpus.txt"), strings.Join(train, "\n")+"\n")
	spec := `{"corpus": "` + filepath.Join(dir, "corpus.txt") + `", "out": "` + dir + `", "models": [
		{"name": "bpe-16k", "options": {"model_type": "bpe", "vocab_size": 16000, "byte_fallback": true, "hard_vocab_limit": false, "num_threads": 2}},
		{"name": "unigram-16k", "options": {"model_type": "unigram", "vocab_size": 16000, "hard_vocab_limit": false, "num_threads": 2}}]}`
	writeFile(b, filepath.Join(dir, "train.json"), spec)
	runReference(b, python, "train", filepath.Join(dir, "train.json"))
	for _, name := range []string{"bpe-16k", "unigram-16k"} {
		models[name] = loadFile(b, filepath.Join(dir, name+".model"))
	}
	return models
}

func BenchmarkEncode(b *testing.B) {
	corpora := benchCorpora(b)
	models := benchModels(b, corpora)
	for _, mname := range []string{"golden-bpe", "golden-unigram", "bytelevel-1k", "deepseek-1k", "bpe-16k", "unigram-16k", "bytelevel-16k", "cl100k_base", "o200k_base"} {
		m := models[mname]
		if m == nil {
			continue
		}
		for _, cname := range []string{"english", "multilingual"} {
			docs := corpora[cname]
			if len(docs) == 0 {
				continue
			}
			var size int64
			for _, d := range docs {
				size += int64(len(d))
			}
			b.Run(mname+"/"+cname, func(b *testing.B) {
				b.SetBytes(size)
				var ids []int32
				tokens, rounds := 0, 0
				cpu0 := cpuTime()
				for b.Loop() {
					rounds++
					for _, d := range docs {
						var err error
						if ids, err = m.Append(ids[:0], []byte(d)); err != nil {
							b.Fatal(err)
						}
						tokens += len(ids)
					}
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
				if cpu := cpuTime() - cpu0; cpu > 0 {
					// The process's CPU (the GC's included): the figure
					// for one core, however loaded the machine is.
					b.ReportMetric(float64(tokens)/cpu.Seconds(), "tokens/cpu-s")
				}
				b.ReportMetric(float64(size)*float64(rounds)/float64(tokens), "bytes/token")
			})
		}
	}
}

// BenchmarkEncodeParallel shares one model among GOMAXPROCS goroutines,
// as the transform stage's worker pool does; tokens/cpu-s against
// BenchmarkEncode's shows what sharing costs (the BPE word cache's locks).
func BenchmarkEncodeParallel(b *testing.B) {
	corpora := benchCorpora(b)
	for _, kind := range []string{"bpe", "unigram", "hf"} {
		var m *Model
		if kind == "hf" {
			m = loadFile(b, hfGoldenTokenizer)
		} else {
			m = loadFile(b, filepath.Join("testdata", "golden-"+kind+".model"))
		}
		docs := corpora["english"]
		if len(docs) == 0 {
			b.Skip("no $GOROOT/src/testdata/Isaac.Newton-Opticks.txt")
		}
		b.Run("golden-"+kind+"/english", func(b *testing.B) {
			var tokens atomic.Int64
			cpu0 := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				var ids []int32
				n, i := 0, 0
				for pb.Next() {
					var err error
					if ids, err = m.Append(ids[:0], []byte(docs[i%len(docs)])); err != nil {
						b.Error(err)
						return
					}
					n += len(ids)
					i++
				}
				tokens.Add(int64(n))
			})
			b.ReportMetric(float64(tokens.Load())/b.Elapsed().Seconds(), "tokens/s")
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(tokens.Load())/cpu.Seconds(), "tokens/cpu-s")
			}
		})
	}
}
