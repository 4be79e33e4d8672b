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

// A table of 200 random images of 80 to 120 KiB, written by Lance in 8
// batches (4 image pages of about 5 MB, zstd per value; the int column's
// 2 pages fall elsewhere), reads as Lance's reader reads it, and a row
// range costs its own bytes: 1 row, 64 rows across a page boundary, a
// whole page, against the page's size. Written at test time (20 MB,
// never committed); skipped without the reference, failed with CI=true.
func TestLargePagesAgainstLance(t *testing.T) {
	dir := writeLarge(t)
	st := &dirStore{root: filepath.Join(dir, "large.lance")}
	objs := listing(t, st.root)
	d, err := Open(context.Background(), st, objs, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := loadCanonicalFrom(t, dir, "large")
	rows := ref.Versions[len(ref.Versions)-1].Rows
	for _, fd := range d.Manifest.Fields {
		vals, _, err := d.Column(context.Background(), fd.Name)
		if err != nil {
			t.Fatal(err)
		}
		if vals.Len() != len(rows) {
			t.Fatalf("%s: %d values of %d rows", fd.Name, vals.Len(), len(rows))
		}
		for i, row := range rows {
			b, ok := vals.Value(i)
			got, err := render(fd.LogicalType, b, ok)
			if err != nil {
				t.Fatal(err)
			}
			if want := wantJSON(row[fd.Name]); got != string(want) {
				t.Fatalf("%s row %d: got %.100s, Lance read %.100s", fd.Name, i, got, want)
			}
		}
	}
	df := d.Manifest.Fragments[0].Files[0]
	f, err := d.File(context.Background(), df)
	if err != nil {
		t.Fatal(err)
	}
	pages := f.Columns[1].Pages
	if len(pages) < 2 {
		t.Fatalf("%d image pages: the table should span several", len(pages))
	}
	page := pages[0].Buffers[0].Len + pages[0].Buffers[1].Len
	for _, r := range []struct {
		what   string
		lo, hi uint64
	}{{"1 row", 3, 4}, {"64 rows across a page boundary", pages[0].Rows - 20, pages[0].Rows + 44}, {"a whole page", 0, pages[0].Rows}} {
		before := st.read
		vals, err := f.ReadRows(1, r.lo, r.hi, fileReader(st, "data/"+df.Path), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		read := st.read - before
		var decoded int
		for i := range vals.Len() {
			v, _ := vals.Value(i)
			decoded += len(v)
		}
		t.Logf("%s: %d bytes read (%d decoded), a page being %d", r.what, read, decoded, page)
		// The rows' own bytes and their index entries: random images
		// do not shrink, so what is read is about what is decoded.
		if read > int64(decoded)+int64(decoded)/50+4096 {
			t.Fatalf("%s: %d bytes read for %d decoded", r.what, read, decoded)
		}
	}
}

// writeLarge has Lance write the large table (lance.cjs large) into a
// temporary directory and returns it: large.lance and large.json.
func writeLarge(t testing.TB) string {
	t.Helper()
	node, modules := nodetest.Find(t, lanceDB)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "gen", "lance.cjs"), "large", dir)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("lance.cjs large: %v\n%s", err, b)
	}
	return dir
}
