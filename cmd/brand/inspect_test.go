package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
)

func TestInspectVerifyReportsProblems(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "store")
	if code, _, errOut := brand(t, "pack", "--src", synthTree(t, 250), "--dst", dst, "--chunk-size", "160KiB"); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}

	// Flip a byte in the middle of the second chunk, past the 64 KiB at
	// either end its ETag hashes, without changing its size or
	// modification time: only the CRCs can notice.
	chunk := filepath.Join(dst, "chunks", "000001.tar")
	fi, err := os.Stat(chunk)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(chunk)
	if err != nil {
		t.Fatal(err)
	}
	mid := len(b) / 2
	b[mid] ^= 1
	f, err := os.OpenFile(chunk, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b[mid:mid+1], int64(mid)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(chunk, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dst, "chunks", "000003.tar")); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := brand(t, "inspect", "--src", dst, "--verify")
	if code != 1 {
		t.Fatalf("inspect --verify of a damaged dataset exited %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"verify        2 problems:\n",
		"  crc-mismatch: chunk 1 (chunks/000001.tar) sample ",
		"  chunk-missing: chunk 3 (chunks/000003.tar): not in the store\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "verification found 2 problems") {
		t.Errorf("stderr: %q", errOut)
	}

	// The same as JSON.
	code, out, _ = brand(t, "inspect", "--src", dst, "--verify", "--json")
	if code != 1 {
		t.Fatalf("inspect --verify --json exited %d", code)
	}
	var got struct {
		Manifest *chunkindex.Manifest `json:"manifest"`
		Index    struct {
			Chunks, Samples int
			MinChunkBytes   int64 `json:"min_chunk_bytes"`
			MaxChunkBytes   int64 `json:"max_chunk_bytes"`
		} `json:"index"`
		Verify struct {
			Problems []struct {
				Kind      string `json:"kind"`
				ChunkKey  string `json:"chunk_key"`
				SampleKey string `json:"sample_key"`
				Sample    int    `json:"sample"`
			} `json:"problems"`
		} `json:"verify"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if got.Manifest == nil || got.Index.Samples != 250 || got.Index.MinChunkBytes <= 0 || got.Index.MaxChunkBytes < got.Index.MinChunkBytes {
		t.Fatalf("JSON summary %+v", got)
	}
	if p := got.Verify.Problems; len(p) != 2 || p[0].Kind != "crc-mismatch" || p[0].SampleKey == "" || p[0].ChunkKey != "chunks/000001.tar" || p[1].Kind != "chunk-missing" || p[1].Sample != -1 {
		t.Fatalf("JSON problems %+v", p)
	}
}

func TestInspectManifestProblems(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "store")
	if code, _, errOut := brand(t, "pack", "--src", synthTree(t, 20), "--dst", dst); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	manifest := filepath.Join(dst, filepath.FromSlash(chunkindex.ManifestKey))
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}

	// A manifest naming another index: a warning, and a failure with --verify.
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["index_id"] = "0123456789abcdef"
	b2, _ := json.Marshal(m)
	if err := os.WriteFile(manifest, b2, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := brand(t, "inspect", "--src", dst)
	if code != 0 || !strings.Contains(out, "warning       the manifest does not describe the index") {
		t.Fatalf("inspect with a stale manifest exited %d:\n%s", code, out)
	}
	code, _, errOut := brand(t, "inspect", "--src", dst, "--verify")
	if code != 1 || !strings.Contains(errOut, "does not describe the index") {
		t.Fatalf("inspect --verify with a stale manifest exited %d: %s", code, errOut)
	}

	// No manifest at all: the index is enough.
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	code, out, _ = brand(t, "inspect", "--src", dst, "--verify")
	if code != 0 || !strings.Contains(out, "warning       no manifest") || !strings.Contains(out, "verify        OK") {
		t.Fatalf("inspect without a manifest exited %d:\n%s", code, out)
	}
}

func TestInspectFlags(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"inspect"}, 1, "no --src given"},
		{[]string{"inspect", "--verify=maybe"}, 2, "invalid boolean value"},
		{[]string{"inspect", "--src", empty, "--parallel", "-1"}, 2, "--parallel must be at least 1"},
		{[]string{"inspect", "--src", empty}, 1, "brand pack` or `brand index"},
		{[]string{"index"}, 1, "no --src given"},
		{[]string{"index", "--src", empty, "stray"}, 2, `unexpected argument "stray"`},
		{[]string{"index", "--src", empty}, 1, "no .tar objects"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := brand(t, tt.args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.out) {
				t.Fatalf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tt.code, out, errOut, tt.out)
			}
		})
	}
}

// TestInspectMembers: inspect shows the member table's files by
// extension, and says when a dataset has none.
func TestInspectMembers(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "store")
	if code, _, errOut := brand(t, "pack", "--src", synthTree(t, 20), "--dst", dst); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	code, out, _ := brand(t, "inspect", "--src", dst)
	if code != 0 || !strings.Contains(out, "files         40 (cls 20, jpg 20)") {
		t.Fatalf("inspect exited %d:\n%s", code, out)
	}
	if err := os.Remove(filepath.Join(dst, filepath.FromSlash(chunkindex.MembersKey))); err != nil {
		t.Fatal(err)
	}
	code, out, _ = brand(t, "inspect", "--src", dst)
	if code != 0 || !strings.Contains(out, "warning       no member table") {
		t.Fatalf("inspect without a member table exited %d:\n%s", code, out)
	}
}
