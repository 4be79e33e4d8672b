package tokenize

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// formats names the tokenizer files Load reads, for a refusal of a file
// that is none of them.
const formats = "a SentencePiece model (tokenizer.model: a binary ModelProto), " +
	"a Hugging Face tokenizer.json (a JSON object with a \"model\") " +
	"or a tiktoken rank file (NAME.tiktoken: lines of a base64 token and its rank)"

// notATokenizer is Load's refusal of data that no kind of tokenizer file
// claims and that does not start as a SentencePiece model either: what
// the file looks like and the formats read, rather than the protobuf
// parser's complaint about a file that was never one (sp, its error,
// said only of binary data this function cannot name).
func notATokenizer(data []byte, sp error) error {
	what, named := lookOf(data)
	if !named {
		return fmt.Errorf("%w: the file is %s; a tokenizer file is %s (read as a SentencePiece model: %v)",
			ErrNotModel, what, formats, unwrapNotModel(sp))
	}
	return fmt.Errorf("%w: the file is %s; a tokenizer file is %s", ErrNotModel, what, formats)
}

// unwrapNotModel is a SentencePiece refusal's own words, without the
// sentinel's (which the refusal that quotes it says once).
func unwrapNotModel(err error) string {
	return strings.TrimPrefix(err.Error(), ErrNotModel.Error()+": ")
}

// startsLikeSentencePiece reports whether data may be a damaged or cut
// SentencePiece model, whose refusal the protobuf parser's words
// describe best: its first byte is the tag of one of ModelProto's
// fields (pieces first, as every writer puts them), and its head is not
// text (a model's first piece, <unk>, follows two length bytes and is
// followed by its score's tag and bytes).
func startsLikeSentencePiece(data []byte) bool {
	switch data[0] {
	case 0x0A, 0x12, 0x1A, 0x22, 0x2A: // fields 1 to 5, length-delimited
		return !isText(data[:min(len(data), 64)])
	}
	return false
}

// magics are files a --tokenizer is given by mistake, by their first
// bytes.
var magics = [...]struct{ prefix, what string }{
	{"\x89PNG\r\n\x1a\n", "a PNG image"},
	{"\xff\xd8\xff", "a JPEG image"},
	{"GIF8", "a GIF image"},
	{"\x1f\x8b", "gzip-compressed (decompress it first)"},
	{"\x28\xb5\x2f\xfd", "zstd-compressed (decompress it first)"},
	{"BZh", "bzip2-compressed (decompress it first)"},
	{"\xfd7zXZ\x00", "xz-compressed (decompress it first)"},
	{"PK\x03\x04", "a ZIP archive (a PyTorch checkpoint or an archive of files: extract the tokenizer file)"},
	{"%PDF", "a PDF document"},
	{"PAR1", "a Parquet file"},
	{"\x93NUMPY", "a NumPy array (.npy)"},
	{"version https://git-lfs.github.com/spec/", "a Git LFS pointer, not the file it points to (git lfs pull, or download the file itself)"},
}

// lookOf says what data looks like, and whether it could name it (a
// kind of file, JSON, text) or only its first bytes.
func lookOf(data []byte) (string, bool) {
	for _, m := range magics {
		if bytes.HasPrefix(data, []byte(m.prefix)) {
			return m.what, true
		}
	}
	if len(data) >= 8 && data[0] == 0x80 && data[1] >= 2 && data[1] <= 5 {
		return "a Python pickle (a PyTorch .bin or a pickled object, not a tokenizer file)", true
	}
	if len(data) > 9 && data[8] == '{' {
		if n := binary.LittleEndian.Uint64(data[:8]); n >= 2 && n <= uint64(len(data)-8) {
			return "a safetensors file (model weights, not a tokenizer file)", true
		}
	}
	if len(data) > 262 && string(data[257:262]) == "ustar" {
		return "a tar archive (extract the tokenizer file)", true
	}
	t := bytes.TrimSpace(data)
	if json.Valid(t) {
		switch t[0] {
		case 'n':
			return "JSON null, not the object a tokenizer.json is", true
		case 't', 'f':
			return fmt.Sprintf("the JSON value %s, not the object a tokenizer.json is", t), true
		case '"':
			return "a JSON string, not the object a tokenizer.json is", true
		default:
			return "a JSON number, not the object a tokenizer.json is", true
		}
	}
	head := data[:min(len(data), 64)]
	if isText(head) {
		if lower := bytes.ToLower(bytes.TrimSpace(head)); bytes.HasPrefix(lower, []byte("<!doctype html")) || bytes.HasPrefix(lower, []byte("<html")) {
			return "an HTML page (a web page's download, not the raw file: on the Hugging Face Hub, the /resolve/ URL)", true
		}
		line, _, _ := bytes.Cut(bytes.TrimLeft(data, " \t\r\n"), []byte("\n"))
		if len(line) > 40 {
			line = append(line[:40:40], "…"...)
		}
		return fmt.Sprintf("text of %d bytes starting %q", len(data), line), true
	}
	return fmt.Sprintf("%d bytes of binary data starting % x", len(data), data[:min(len(data), 8)]), false
}

// isText reports whether b reads as text: UTF-8 (a character cut at
// its end allowed) without control characters but whitespace.
func isText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return !utf8.FullRune(b)
		}
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
		b = b[n:]
	}
	return true
}
