package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `brand inspect --verify` of a dataset served in place, indexed to
// another directory than its data, decodes every chunk from where the
// manifest says the data is; a shard damaged after indexing (same size,
// bytes flipped in its samples) is a problem named by chunk, and exit 1.
func TestInspectVerifyInPlace(t *testing.T) {
	data := mdsDataset(t)
	idx := t.TempDir()
	if code, _, stderr := brand(t, "index", "--src", data, "--dst", idx); code != 0 {
		t.Fatalf("brand index: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := brand(t, "inspect", "--src", idx, "--verify")
	if code != 0 || !strings.Contains(stdout, "OK: 7 chunks") {
		t.Fatalf("inspect --verify: exit %d\n%s\n%s", code, stdout, stderr)
	}
	shards, _ := filepath.Glob(filepath.Join(data, "shard.*.mds"))
	if len(shards) == 0 {
		t.Fatal("no raw shards in the fixture")
	}
	b, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	// Past the shard's header (sample count and offsets): its samples.
	for i := len(b) / 2; i < len(b)/2+64 && i < len(b); i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(shards[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged %s", shards[0])
	code, stdout, stderr = brand(t, "inspect", "--src", idx, "--verify", "--json")
	if code != 1 || !strings.Contains(stdout+stderr, "undecodable") && !strings.Contains(stdout+stderr, "etag-changed") {
		t.Fatalf("a damaged shard: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
