package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// byteLevelJSON is a tokenizer.json of byte-level BPE over vocab (no
// merges, no unk_token).
func byteLevelJSON(vocab string) string {
	return `{"version": "1.0", "model": {"type": "BPE", "vocab": {` + vocab + `}, "merges": []}, ` +
		`"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}}`
}

// TestIndexRefusesASilentTokenizer: `brand index --tokenizer` with a
// tokenizer that maps text to nothing (a tokenizer.json of an empty
// vocabulary, which its reference loads) is refused naming the fault,
// before a row is read, where it indexed every document as 0 tokens
// without a word; one that drops only some scripts (a vocabulary of
// ASCII and no unk_token) indexes with a warning naming what it drops.
func TestIndexRefusesASilentTokenizer(t *testing.T) {
	src := tokenParquet(t, 20)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(byteLevelJSON("")), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	code, out, errOut := brand(t, "index", "--src", src, "--dst", dst, "--text", "text", "--tokenizer", empty)
	if code == 0 || !strings.Contains(errOut, "maps text to nothing") || !strings.Contains(errOut, "0 tokens") || !strings.Contains(errOut, empty) {
		t.Fatalf("an empty vocabulary: exit %d, want a refusal saying it maps text to nothing\n%s%s", code, out, errOut)
	}
	if left, _ := os.ReadDir(dst); len(left) != 0 {
		t.Errorf("a refused tokenizer left %d entries at --dst", len(left))
	}
	var vocab []string
	for c := '!'; c <= '~'; c++ {
		if c != '"' && c != '\\' {
			vocab = append(vocab, strconv.Quote(string(c))+": "+strconv.Itoa(int(c)))
		}
	}
	vocab = append(vocab, `"Ġ": 1000`)
	ascii := filepath.Join(dir, "ascii.json")
	if err := os.WriteFile(ascii, []byte(byteLevelJSON(strings.Join(vocab, ", "))), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = brand(t, "index", "--src", src, "--dst", t.TempDir(), "--text", "text", "--tokenizer", ascii)
	if code != 0 || !strings.Contains(out, "token dataset: 20 documents") || !strings.Contains(errOut, "warning") || !strings.Contains(errOut, "dropped") {
		t.Fatalf("an ASCII vocabulary: exit %d, want the dataset indexed with a warning of what it drops\n%s%s", code, out, errOut)
	}
}
