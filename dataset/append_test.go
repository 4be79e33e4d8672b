package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/s3backend"
)

// decodeChunks decodes every chunk of ix (its description read from st,
// its data from src) and returns each chunk's resident bytes.
func decodeChunks(t *testing.T, src, st s3backend.Store, ix *chunkindex.Index) [][]byte {
	t.Helper()
	ctx := context.Background()
	meta, err := stored.ReadFormat(ctx, st, ix)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := formattest.Lines{}.Open(meta)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, ix.NumChunks())
	for c := range out {
		ch := ix.Chunk(c)
		rs, bound := dec.Extent(c, nil)
		var data []byte
		for _, r := range rs {
			b := make([]byte, r.Len)
			if err := src.ReadRange(ctx, stored.ChunkObject(ch.Key), ch.ETag, r.Off, b); err != nil {
				t.Fatal(err)
			}
			data = append(data, b...)
		}
		out[c] = make([]byte, bound)
		if err := dec.Decode(c, nil, data, out[c], format.WriterOptions{ModTime: ix.InPlace().Created}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Files added beside a dataset's are appended as a version that extends
// the stored one: the old chunks first, decoding to the same bytes, the
// old samples under their IDs, the new files' after them in key order
// (b.lines, which sorts between the old files, comes last), the parent
// recorded; only the new files are read.
func TestAppendInPlace(t *testing.T) {
	ctx := context.Background()
	src, dst := newLocal(t), newLocal(t)
	putAll(t, src, formattest.Write(map[string][]string{
		"data/a.lines": {"alpha", "beta", "gamma"},
		"data/c.lines": {"one", "two"},
	}))
	fs := []format.Format{formattest.Lines{}}
	opt := format.Options{ChunkBytes: 12}
	one, err := IndexInPlace(ctx, src, dst, InPlaceOptions{Formats: fs, Prefix: "data/", Data: "file:///data", Options: opt})
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, src, formattest.Write(map[string][]string{
		"data/b.lines": {"new", "newer", "newest"},
		"data/d.lines": {"last"},
	}))
	two, err := AppendInPlace(ctx, src, dst, AppendOptions{Formats: fs, Prefix: "data/", Options: opt})
	if err != nil {
		t.Fatal(err)
	}
	old, ix := one.Index, two.Index
	if got, err := stored.ReadIndex(ctx, dst); err != nil || got.ID() != ix.ID() {
		t.Fatalf("stored index %v, %v", got, err)
	}
	if line := ix.Lineage().Ancestors(); len(line) != 1 || line[0] != (chunkindex.Ancestor{ID: old.ID(), Chunks: old.NumChunks()}) {
		t.Fatalf("lineage %v", line)
	}
	var keys []string
	for id := range ix.NumSamples() {
		keys = append(keys, ix.SampleKey(id))
	}
	if got := strings.Join(keys, " "); got != "data/a/0 data/a/1 data/a/2 data/c/0 data/c/1 data/b/0 data/b/1 data/b/2 data/d/0" {
		t.Fatalf("keys %s", got)
	}
	if ix.InPlace().Created != old.InPlace().Created {
		t.Errorf("created %d, the parent's %d: old chunks would decode to other bytes", ix.InPlace().Created, old.InPlace().Created)
	}
	before, after := decodeChunks(t, src, dst, old), decodeChunks(t, src, dst, ix)
	for c := range before {
		if !bytes.Equal(before[c], after[c]) {
			t.Errorf("chunk %d decodes to other bytes", c)
		}
	}
	m, err := stored.ReadManifest(ctx, dst)
	if err != nil || m.IndexID != ix.ID() || m.InPlace == nil || m.InPlace.Data != "file:///data" || m.Name != one.Manifest.Name {
		t.Fatalf("manifest %+v, %v", m, err)
	}
	anc, ok := ix.Lineage().AncestorIndex(old.ID())
	if !ok || anc.NumSamples() != old.NumSamples() || anc.ID() != old.ID() {
		t.Fatalf("ancestor %v", ok)
	}

	// Nothing new: refused, nothing stored.
	if _, err := AppendInPlace(ctx, src, dst, AppendOptions{Formats: fs, Prefix: "data/", Options: opt}); !errors.Is(err, ErrNothingNew) {
		t.Fatalf("nothing new: %v", err)
	}
	if got, _ := stored.ReadIndex(ctx, dst); got.ID() != ix.ID() {
		t.Fatal("an append of nothing stored an index")
	}
	// A third version extends the second and, through it, the first.
	putAll(t, src, formattest.Write(map[string][]string{"data/e.lines": {"e"}}))
	three, err := AppendInPlace(ctx, src, dst, AppendOptions{Formats: fs, Prefix: "data/", Options: opt})
	if err != nil {
		t.Fatal(err)
	}
	if line := three.Index.Lineage().Ancestors(); len(line) != 2 || line[0].ID != ix.ID() || line[1].ID != old.ID() {
		t.Fatalf("lineage %v", line)
	}
}

// An append is refused, with nothing stored, where an indexed file
// changed or went, and on a packed dataset.
func TestAppendInPlaceRefuses(t *testing.T) {
	ctx := context.Background()
	fs := []format.Format{formattest.Lines{}}
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, st *s3backend.Local)
		want string
	}{
		{"changed", func(t *testing.T, st *s3backend.Local) {
			putAll(t, st, formattest.Write(map[string][]string{"a.lines": {"x", "y", "z"}}))
		}, "a.lines changed since it was indexed"},
		{"removed", func(t *testing.T, st *s3backend.Local) {
			if err := st.Delete(ctx, "a.lines"); err != nil {
				t.Fatal(err)
			}
		}, "a.lines, which the index holds, is not listed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newLocal(t)
			putAll(t, st, formattest.Write(map[string][]string{"a.lines": {"x"}, "c.lines": {"c"}}))
			one, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs})
			if err != nil {
				t.Fatal(err)
			}
			putAll(t, st, formattest.Write(map[string][]string{"b.lines": {"b"}}))
			tc.edit(t, st)
			_, err = AppendInPlace(ctx, st, st, AppendOptions{Formats: fs})
			if !errors.Is(err, ErrCannotAppend) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if got, _ := stored.ReadIndex(ctx, st); got.ID() != one.Index.ID() {
				t.Fatal("a refused append stored an index")
			}
		})
	}
	t.Run("packed", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		st := newLocal(t)
		if _, err := Pack(ctx, dir, st, PackOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendInPlace(ctx, st, st, AppendOptions{Formats: fs}); !errors.Is(err, ErrCannotAppend) || !strings.Contains(err.Error(), "packed dataset") {
			t.Fatalf("packed: %v", err)
		}
	})
}

// An index with checksums is extended with the new files' checksums,
// the old ones kept.
func TestAppendInPlaceChecksums(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	fs := []format.Format{formattest.Lines{}}
	putAll(t, st, formattest.Write(map[string][]string{"a.lines": {"x", "yy"}}))
	one, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs, Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, st, formattest.Write(map[string][]string{"b.lines": {"zzz"}}))
	two, err := AppendInPlace(ctx, st, st, AppendOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	ix := two.Index
	if !ix.Checksummed() || ix.NumChunks() != 2 || len(ix.Spans(1)) == 0 || len(ix.Spans(0)) != len(one.Index.Spans(0)) {
		t.Fatalf("checksummed %v, %d chunks, spans %v", ix.Checksummed(), ix.NumChunks(), ix.Spans(1))
	}
}
