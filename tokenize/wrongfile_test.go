package tokenize

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// TestLoadNamesTheFormats: a file that is no tokenizer at all — JSON
// null, another JSON value, an image, an archive, a web page saved in
// its place — is refused naming the formats read (SentencePiece,
// tokenizer.json, tiktoken) and what the file looks like, not with the
// protobuf parser's complaint of a SentencePiece model it never was; a
// SentencePiece model cut short keeps the parser's words.
func TestLoadNamesTheFormats(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(`{"model": {}}`))
	w.Close()
	safetensors := binary.LittleEndian.AppendUint64(nil, 2)
	safetensors = append(safetensors, "{}"...)
	tests := []struct {
		name string
		data string
		says string
	}{
		{"null", "null", "JSON null"},
		{"null and a newline", "null\n", "JSON null"},
		{"a JSON string", `"tokenizer.json"`, "a JSON string"},
		{"a JSON number", "42", "a JSON number"},
		{"a JSON boolean", "true", "the JSON value true"},
		{"a PNG", "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", "a PNG image"},
		{"gzip", gz.String(), "gzip-compressed"},
		{"a Git LFS pointer", "version https://git-lfs.github.com/spec/v1\noid sha256:4a5b\nsize 9085657\n", "Git LFS pointer"},
		{"an HTML page", "<!DOCTYPE html>\n<html><head><title>tokenizer.json · meta-llama</title>", "an HTML page"},
		{"a pickle", "\x80\x02}q\x00(X\x05\x00\x00\x00vocab", "a Python pickle"},
		{"safetensors", string(safetensors), "a safetensors file"},
		{"text", "hello world, this is not a tokenizer\nsecond line", `text of 48 bytes starting "hello world, this is not a tokenizer"`},
		{"binary", "\x38\x01\x40\x02", "4 bytes of binary data starting 38 01 40 02"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load([]byte(tc.data))
			if m != nil || !errors.Is(err, ErrNotModel) {
				t.Fatalf("Load: %v, %v; want ErrNotModel", m, err)
			}
			msg := err.Error()
			for _, want := range []string{tc.says, "SentencePiece model", "tokenizer.json", "tiktoken"} {
				if !strings.Contains(msg, want) {
					t.Errorf("Load: %q; want it to say %q", msg, want)
				}
			}
			if tc.name != "binary" && strings.Contains(msg, "protobuf") {
				t.Errorf("Load: %q; a file named by its look is refused without the protobuf parser's words", msg)
			}
		})
	}
	// A model cut short is a SentencePiece model still: the parser says
	// where it ends.
	bpe := goldenBytes(t, "bpe")
	_, err := Load(bpe[:len(bpe)-1])
	if !errors.Is(err, ErrNotModel) || strings.Contains(err.Error(), "a tokenizer file is") {
		t.Errorf("a model cut short: %v; want the SentencePiece parser's refusal", err)
	}
}
