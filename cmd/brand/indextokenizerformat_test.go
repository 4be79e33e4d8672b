package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIndexNamesTheTokenizerFormats: a --tokenizer file that is no
// tokenizer (JSON null, an image) is refused naming the formats read and
// what the file looks like, not with the SentencePiece parser's protobuf
// error.
func TestIndexNamesTheTokenizerFormats(t *testing.T) {
	src := tokenParquet(t, 4)
	dir := t.TempDir()
	for _, tc := range []struct{ name, data, says string }{
		{"null.json", "null", "JSON null"},
		{"tokenizer.model", "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", "a PNG image"},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := brand(t, "index", "--src", src, "--dst", t.TempDir(), "--text", "text", "--tokenizer", path)
		if code == 0 || strings.Contains(errOut, "protobuf") {
			t.Errorf("%s: exit %d, want a refusal without the protobuf parser's words\n%s%s", tc.name, code, out, errOut)
		}
		for _, want := range []string{tc.says, "SentencePiece model (tokenizer.model", "tokenizer.json", "tiktoken rank file"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: %q; want it to say %q", tc.name, errOut, want)
			}
		}
	}
}
