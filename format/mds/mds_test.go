package mds

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// writer runs testdata/mds_writer.py: make a case into a directory, or
// check a tar of decoded samples against it.
func writer(t *testing.T, py, cmd, c, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "testdata/mds_writer.py", cmd, c, path).CombinedOutput(); err != nil {
		t.Fatalf("mds_writer.py %s %s: %v\n%s", cmd, c, err, out)
	}
}

func indexSource(t testing.TB, s *decodetest.Store, opt format.Options) (*format.Layout, format.Decoder, error) {
	t.Helper()
	lay, err := Format{}.Index(context.Background(), s, s.List(), opt)
	if err != nil {
		return nil, nil, err
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatalf("Open of Index's own meta: %v", err)
	}
	return lay, dec, nil
}

// firstChunk indexes s, failing t if it does not index, and reads its
// first chunk's source: the layout, the decoder, the chunk's bytes and
// its resident bound.
func firstChunk(t testing.TB, s *decodetest.Store) (*format.Layout, format.Decoder, []byte, int64) {
	t.Helper()
	lay, dec, err := indexSource(t, s, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, resident := decodetest.ReadChunk(t, s, lay, dec, 0, nil)
	return lay, dec, src, resident
}

// Datasets the Python writer makes decode to exactly the members it
// wrote, under the documented mapping: every encoding, raw and
// compressed shards, a merged index and unmerged partitions; indexing
// reads only index.json files.
func TestPythonWriter(t *testing.T) {
	py := pythontest.Need(t, "scripts/ensure-numpy.sh", "numpy", "zstd")
	tests := []struct {
		name    string
		members map[string]string
		shards  int // at least
		keys    []string
	}{
		{name: "all", shards: 3, keys: []string{"shard.00000/000000"}},
		{name: "images", shards: 3, keys: []string{"shard.00000/000000", "shard.00000/000001"}},
		{name: "zstd", shards: 2},
		{name: "gz", shards: 2},
		{name: "bz2", shards: 2},
		{name: "pkl", members: map[string]string{"obj": "pkl"}, shards: 1},
		{name: "merged", shards: 2, keys: []string{"part0/shard.00000/000000"}},
		{name: "partitions", shards: 3, keys: []string{"part0/shard.00000/000000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writer(t, py, "make", tt.name, dir)
			s := decodetest.LoadDir(t, dir)
			lay, dec, err := indexSource(t, s, format.Options{Members: tt.members})
			if err != nil {
				t.Fatal(err)
			}
			for k, n := range s.Read {
				if filepath.Base(k) != "index.json" || n != int64(len(s.Objs[k])) {
					t.Errorf("indexing read %d bytes of %s", n, k)
				}
			}
			if len(lay.Chunks) < tt.shards {
				t.Errorf("%d chunks", len(lay.Chunks))
			}
			for i, k := range tt.keys {
				if lay.Keys[i] != k {
					t.Errorf("key %d: %q, want %q", i, lay.Keys[i], k)
				}
			}
			tarPath := filepath.Join(t.TempDir(), "decoded.tar")
			if err := os.WriteFile(tarPath, decodetest.DecodeAll(t, s, lay, dec, nil), 0o644); err != nil {
				t.Fatal(err)
			}
			writer(t, py, "check", tt.name, tarPath)
		})
	}
}

// A projection decodes only its columns, within a smaller bound; the
// shard is still read whole.
func TestPythonSelection(t *testing.T) {
	py := pythontest.Need(t, "scripts/ensure-numpy.sh", "numpy", "zstd")
	dir := t.TempDir()
	writer(t, py, "make", "images", dir)
	s := decodetest.LoadDir(t, dir)
	lay, dec, err := indexSource(t, s, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := dec.Fields()
	if len(fs) != 4 || fs[0] != (format.Field{Name: "caption", Ext: "txt", Type: "str"}) || fs[2].Ext != "jpg" || fs[3].Ext != "cls" {
		t.Fatalf("fields %+v", fs)
	}
	sel, _ := format.Select(fs, []string{"label"})
	for c := range lay.Chunks {
		rsAll, all := dec.Extent(c, nil)
		rs, some := dec.Extent(c, sel)
		if some >= all || len(rs) != 1 || rs[0] != rsAll[0] || rs[0] != (format.Range{Off: 0, Len: lay.Chunks[c].Size}) {
			t.Errorf("chunk %d: %v %d, all %v %d", c, rs, some, rsAll, all)
		}
	}
	b := decodetest.DecodeAll(t, s, lay, dec, sel)
	if strings.Contains(string(b), ".jpg") || !strings.Contains(string(b), "shard.00000/000000.cls") {
		t.Error("the selection's members are not the label's alone")
	}
}

// The bound holds for the largest values each encoding can hold, with
// members whose text is as long as it gets.
func TestScalarText(t *testing.T) {
	for _, enc := range []string{"int8", "int16", "int32", "int64", "int", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"} {
		e, err := parseEncoding(enc)
		if err != nil {
			t.Fatal(err)
		}
		worst := []byte{}
		for _, v := range scalarExtremes(e) {
			dst := make([]byte, 1<<12)
			w, _ := format.NewWriter(dst, 1, format.WriterOptions{})
			w.Begin("k")
			text, err := e.member(w, "x", v, nil)
			if err != nil {
				t.Fatal(enc, err)
			}
			if int64(len(text)) > e.text {
				t.Errorf("%s: %q is longer than the bound %d", enc, text, e.text)
			}
			if len(text) > len(worst) {
				worst = text
			}
		}
		t.Logf("%s: longest %q", enc, worst)
	}
}
