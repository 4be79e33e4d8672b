package lance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/nodetest"
)

// lanceDB is Lance's own writer and reader for Node.js, pinned by
// scripts/ensure-lancedb.sh.
var lanceDB = nodetest.Reference{What: "LanceDB", Script: "ensure-lancedb.sh", Package: "@lancedb/lancedb"}

// The committed canonical JSON is what Lance's own reader (the pinned
// @lancedb/lancedb) reads from the committed fixtures today: the values
// the other tests hold this package to are Lance's, not a stale copy.
// Without node and the package it skips; with CI=true it fails.
func TestCanonicalIsLances(t *testing.T) {
	node, modules := nodetest.Find(t, lanceDB)
	// Lance's reader is given a copy: opening a table may write beside it.
	dir := t.TempDir()
	for _, name := range fixtures {
		if err := os.CopyFS(filepath.Join(dir, name+".lance"), os.DirFS(filepath.Join("testdata", name+".lance"))); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "gen", "lance.cjs"), "canonical", dir, out)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("lance.cjs canonical: %v\n%s", err, b)
	}
	for _, name := range fixtures {
		committed := loadCanonical(t, name)
		fresh := loadCanonicalFrom(t, out, name)
		a, _ := json.Marshal(committed)
		b, _ := json.Marshal(fresh)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the committed canonical JSON is not what Lance reads today (run testdata/gen/regenerate.sh)", name)
		}
	}
}
