package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// `brand index --checksums` of a dataset served in place reads its files
// once and says how many ranges it recorded; `brand inspect` says the
// index has checksums, and --verify finds a byte changed in the middle of
// a file, which the file's content ETag (its ends) does not see, by them.
// Tar shards refuse the flag: their index holds every sample's CRC32C.
func TestIndexChecksums(t *testing.T) {
	dir := t.TempDir()
	bin, idx := megatrontest.Files("uint16", megatrontest.Corpus(800, 2000, 50000, 9))
	for name, b := range map[string][]byte{"data/p_text_document.bin": bin, "data/p_text_document.idx": idx} {
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := brand(t, "index", "--src", dir, "--checksums", "--chunk-size", "64KiB")
	if code != 0 || !strings.Contains(stdout, "checksums: the CRC32C of") {
		t.Fatalf("brand index --checksums: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr = brand(t, "inspect", "--src", dir); code != 0 || !strings.Contains(stdout, "checksums     every range") {
		t.Fatalf("brand inspect: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr = brand(t, "inspect", "--src", dir, "--verify"); code != 0 || !strings.Contains(stdout, "OK:") {
		t.Fatalf("brand inspect --verify: exit %d\n%s\n%s", code, stdout, stderr)
	}
	name := filepath.Join(dir, "data/p_text_document.bin")
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{bin[len(bin)/2] ^ 1}, int64(len(bin)/2)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, stdout, stderr = brand(t, "inspect", "--src", dir, "--verify")
	if code != 1 || !strings.Contains(stdout, "checksum-mismatch") || !strings.Contains(stdout, "p_text_document.bin") {
		t.Fatalf("brand inspect --verify of a file edited in the middle: exit %d\n%s\n%s", code, stdout, stderr)
	}

	code, _, stderr = brand(t, "index", "--src", t.TempDir(), "--format", "tar", "--checksums")
	if code != 2 || !strings.Contains(stderr, "--checksums is for datasets served in place") {
		t.Fatalf("brand index --format tar --checksums: exit %d: %s", code, stderr)
	}
}

// A tree of videos is indexed with a CRC32C per GOP by default, as with
// --checksums; --checksums=false refuses them (the metadata alone, what
// `brand inspect` then says). With them, --verify finds a bit flipped at
// rest in the middle of a file, its time kept, which the file's
// identity does not see, naming the file.
func TestIndexVideoChecksums(t *testing.T) {
	dir := t.TempDir()
	made := videotest.Make(t, t.TempDir(), "h264-gop10s.mp4")
	b, err := os.ReadFile(made["h264-gop10s.mp4"])
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "a", "x.mp4")
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args      []string
		checksums bool
		inspect   string
	}{
		{[]string{"--checksums=false"}, false, "checksums     none"},
		{[]string{"--checksums"}, true, "checksums     every range"},
		{nil, true, "checksums     every range"},
	} {
		code, stdout, stderr := brand(t, append([]string{"index", "--src", dir, "--chunk-size", "64KiB"}, tt.args...)...)
		if code != 0 || strings.Contains(stdout, "checksums: the CRC32C of") != tt.checksums {
			t.Fatalf("brand index %v: exit %d\n%s\n%s", tt.args, code, stdout, stderr)
		}
		if code, stdout, stderr = brand(t, "inspect", "--src", dir); code != 0 || !strings.Contains(stdout, tt.inspect) {
			t.Fatalf("brand index %v, then brand inspect: exit %d\n%s\n%s", tt.args, code, stdout, stderr)
		}
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := brand(t, "inspect", "--src", dir, "--verify")
	if code != 1 || !strings.Contains(stdout, "checksum-mismatch") || !strings.Contains(stdout, "a/x.mp4") {
		t.Fatalf("brand inspect --verify of a bit flipped at rest: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
