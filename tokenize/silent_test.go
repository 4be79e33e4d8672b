package tokenize

import (
	"os"
	"strconv"
	"testing"
)

// TestSilent: a tokenizer.json of an empty vocabulary (it loads, as the
// reference loads it) encodes every probe to nothing; one of the byte
// alphabet's printable ASCII alone, the probes without an ASCII
// character; the models of testdata, none.
func TestSilent(t *testing.T) {
	const pre = `"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`
	ascii := `{"model": {"type": "BPE", "vocab": {`
	for c := '!'; c <= '~'; c++ {
		if c != '"' && c != '\\' {
			ascii += `"` + string(c) + `": ` + strconv.Itoa(int(c)) + `, `
		}
	}
	ascii += `"Ġ": 1000}, "merges": []}, ` + pre + `}`
	for _, tc := range []struct {
		name   string
		data   []byte
		silent int
	}{
		{"an empty vocabulary", []byte(`{"model": {"type": "BPE", "vocab": {}, "merges": []}, ` + pre + `}`), len(Probes)},
		{"ASCII alone", []byte(ascii), 2}, // the Japanese and the emoji
		{"SentencePiece BPE", goldenBytes(t, "bpe"), 0},
		{"SentencePiece unigram", goldenBytes(t, "unigram"), 0},
		{"tokenizer.json", readTestdata(t, "hf-golden-tokenizer.json"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Silent(); len(got) != tc.silent {
				t.Errorf("Silent() = %q; want %d of the probes", got, tc.silent)
			}
		})
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
