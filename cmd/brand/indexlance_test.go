package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIndexLance: `brand index --src DIR` of a Lance dataset on local
// disk (format/lance's basic fixture: 3 fragments, versions, deletion
// files, nulls) detects Lance and indexes its latest version's 122 live
// rows in place, writing its index beside the dataset; what it serves
// is gateway's TestLanceInPlace.
func TestIndexLance(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "basic.lance")
	if err := os.CopyFS(dir, os.DirFS("../../format/lance/testdata/basic.lance")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := brand(t, "index", "--src", dir)
	if code != 0 || !strings.Contains(out+errOut, "lance") || !strings.Contains(out+errOut, "122 samples") {
		t.Fatalf("index exited %d:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "_brand")); err != nil {
		t.Fatal(err)
	}
}
