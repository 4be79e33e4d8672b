package chunkindex

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"testing"
)

// testdata/index-v1-lineage.golden pins the encoding of a deferred index
// that extends another (flags 5); regenerate with -update.
const goldenLineage = "testdata/index-v1-lineage.golden"

// grownIndex is deferredIndex with one more file's chunk after its own.
func grownIndex(t *testing.T, parent *Index, more ...string) *Index {
	t.Helper()
	chunks := make([]Chunk, parent.NumChunks())
	for c := range chunks {
		chunks[c] = parent.Chunk(c)
	}
	keys := make([]string, parent.NumSamples())
	for i := range keys {
		keys[i] = parent.SampleKey(i)
	}
	for _, m := range more {
		chunks = append(chunks, Chunk{Key: m + ".parquet#0", Size: 1 << 20, ETag: "e" + m, Samples: 2})
		keys = append(keys, m+"/0", m+"/1")
	}
	ix, err := NewDeferred(chunks, keys, InPlace{Format: "parquet", Meta: [32]byte{byte(len(chunks))}, Created: 1700000100})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// An index that extends another records it, through MarshalBinary,
// Decode and Open alike; its ancestor, made from it, is the parent's
// chunks and samples under the parent's ID, and finds none of the new
// keys.
func TestLineageRoundTrip(t *testing.T) {
	parent := deferredIndex(t)
	ext, err := parent.Lineage().Extend(grownIndex(t, parent, "data/c"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ext.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenLineage, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenLineage)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding differs from %s:\n got %x\nwant %x", goldenLineage, b, want)
	}
	if le.Uint32(b[12:]) != FlagDeferred|FlagLineage {
		t.Fatalf("flags %#x", le.Uint32(b[12:]))
	}
	dec, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	part, err := Open(context.Background(), &memObject{b: b}, int64(len(b)), OpenOptions{ReadSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	line := []Ancestor{{ID: parent.ID(), Chunks: 3}}
	for name, x := range map[string]*Index{"new": ext, "decode": dec, "open": part} {
		if got := x.Lineage().Ancestors(); len(got) != 1 || got[0] != line[0] || x.ID() != ext.ID() {
			t.Errorf("%s: extends %v, ID %s (want %v, %s)", name, got, x.ID(), line, ext.ID())
		}
	}
	if parent.Lineage().Ancestors() != nil || ext.ID() == grownIndex(t, parent, "data/c").ID() {
		t.Fatal("the lineage is not in the index's ID")
	}

	anc, ok := dec.Lineage().AncestorIndex(parent.ID())
	if !ok {
		t.Fatal("no ancestor")
	}
	if anc.ID() != parent.ID() || anc.NumChunks() != 3 || anc.NumSamples() != 5 || anc.TotalBytes() != parent.TotalBytes() || anc.Lineage().Ancestors() != nil {
		t.Fatalf("ancestor: %s, %d chunks, %d samples, %d bytes, extends %v", anc.ID(), anc.NumChunks(), anc.NumSamples(), anc.TotalBytes(), anc.Lineage().Ancestors())
	}
	for id := range anc.NumSamples() {
		if anc.SampleKey(id) != parent.SampleKey(id) || anc.ChunkOf(id) != parent.ChunkOf(id) {
			t.Errorf("sample %d: %q in %d, the parent's %q in %d", id, anc.SampleKey(id), anc.ChunkOf(id), parent.SampleKey(id), parent.ChunkOf(id))
		}
	}
	if id, ok := lookup(t, anc, "data/b/1"); !ok || id != 4 {
		t.Errorf("the ancestor's own key: %d %v", id, ok)
	}
	if _, ok := lookup(t, anc, "data/c/0"); ok {
		t.Error("the ancestor finds a key added after it")
	}
	if _, err := anc.MarshalBinary(); err == nil {
		t.Error("an ancestor made from its descendant encoded itself")
	}
	if _, ok := dec.Lineage().AncestorIndex(dec.ID()); ok {
		t.Error("an index is its own ancestor")
	}
}

// TestPartialAncestorReadsItsDescendant: a cluster node holds a dataset's
// index partially (Open); once an append has replaced the stored object,
// a job pinned to the version before it is read through the new index's
// view of it, whose tables are the new object's (an index opened from the
// old object would read its tables from bytes no longer there). The view
// is the parent's chunks and samples under the parent's ID, prepares its
// tables from the descendant's object with a table cache too small to
// keep them, and finds its own keys by the key directory (the appended
// keys sort before the parent's: in no order) but none of the new ones.
func TestPartialAncestorReadsItsDescendant(t *testing.T) {
	ctx := context.Background()
	parent := deferredIndex(t)
	ext, err := parent.Lineage().Extend(grownIndex(t, parent, "data/0"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ext.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	obj := &memObject{b: b}
	part, err := Open(ctx, obj, int64(len(b)), OpenOptions{ReadSize: 7, CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	anc, ok := part.Lineage().AncestorIndex(parent.ID())
	if !ok {
		t.Fatal("no ancestor of a partial index")
	}
	if anc.ID() != parent.ID() || anc.NumChunks() != parent.NumChunks() || anc.NumSamples() != parent.NumSamples() ||
		anc.TotalBytes() != parent.TotalBytes() || anc.Lineage().Ancestors() != nil || !anc.Tables().Partial() {
		t.Fatalf("ancestor: %s, %d chunks, %d samples, %d bytes, extends %v", anc.ID(), anc.NumChunks(), anc.NumSamples(), anc.TotalBytes(), anc.Lineage().Ancestors())
	}
	ids := make([]int, anc.NumSamples())
	for i := range ids {
		ids[i] = i
	}
	reads := obj.reads.Load()
	got, err := anc.Samples(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if obj.reads.Load() == reads {
		t.Fatal("the ancestor's tables were not read from the descendant's object")
	}
	for id, s := range got {
		if want := parent.Sample(id); s != want {
			t.Errorf("sample %d: %+v, the parent's %+v", id, s, want)
		}
	}
	for id := range anc.NumSamples() {
		if got, ok := lookup(t, anc, parent.SampleKey(id)); !ok || got != id {
			t.Errorf("the ancestor's own key %q: %d %v", parent.SampleKey(id), got, ok)
		}
	}
	for _, key := range []string{"data/0/0", "data/0/1"} {
		if _, ok := lookup(t, anc, key); ok {
			t.Errorf("the ancestor finds %q, added after it", key)
		}
		if _, ok := lookup(t, part, key); !ok {
			t.Errorf("the descendant does not find its own %q", key)
		}
	}
	if _, err := anc.MarshalBinary(); err == nil {
		t.Error("an ancestor made from a partial index encoded itself")
	}
}

// A chain of extensions records each ancestor, nearest first, and at
// most MaxAncestors of them; each ancestor found from the last is its
// own prefix.
func TestLineageChain(t *testing.T) {
	ix := deferredIndex(t)
	if ix.Lineage().Root() != ix.ID() {
		t.Fatalf("an index that extends none: root %s, want its own ID %s", ix.Lineage().Root(), ix.ID())
	}
	var ids []string
	for i := range MaxAncestors + 2 {
		ids = append(ids, ix.ID())
		next, err := ix.Lineage().Extend(grownIndex(t, ix, "data/x"+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		ix = next
		if ix.Lineage().Root() != ids[0] {
			t.Fatalf("after %d appends the root is %s, want the first version %s", i+1, ix.Lineage().Root(), ids[0])
		}
	}
	// The chain keeps the nearest MaxAncestors-1 and the root: the two
	// versions after the root are dropped.
	line := ix.Lineage().Ancestors()
	if len(line) != MaxAncestors {
		t.Fatalf("%d ancestors", len(line))
	}
	kept := append(slices.Clone(ids[len(ids)-MaxAncestors+1:]), ids[0])
	slices.Reverse(kept[:MaxAncestors-1])
	for i, a := range line {
		want := kept[i]
		chunks := 3 + slices.Index(ids, want)
		if a.ID != want || a.Chunks != chunks {
			t.Errorf("ancestor %d: %+v, want %s of %d chunks", i, a, want, chunks)
		}
		anc, ok := ix.Lineage().AncestorIndex(a.ID)
		if !ok || anc.NumChunks() != a.Chunks || len(anc.Lineage().Ancestors()) != len(line)-1-i || anc.Lineage().Root() != ids[0] {
			t.Fatalf("ancestor %d: %v, %d chunks, %d ancestors, root %s", i, ok, anc.NumChunks(), len(anc.Lineage().Ancestors()), anc.Lineage().Root())
		}
	}
	for _, id := range ids[1:3] {
		if _, ok := ix.Lineage().AncestorIndex(id); ok {
			t.Errorf("ancestor %s, past the bound, is still found", id)
		}
	}
}

// An index extends only one whose chunks and samples are its first
// ones, of its format, with checksums where the parent has them.
func TestExtendRefuses(t *testing.T) {
	parent := deferredIndex(t)
	checked, _ := checkedIndex(t)
	tar, _ := New([]Chunk{{Key: "c", Size: 1024, Samples: 1}}, []Sample{{Key: "k", Length: 512}})
	reordered, _ := NewDeferred([]Chunk{parent.Chunk(2), parent.Chunk(1), parent.Chunk(0)},
		[]string{"data/b/0", "data/b/1", "data/a/0", "data/a/1", "data/a/2"}, parent.InPlace())
	mds, _ := NewDeferred([]Chunk{parent.Chunk(0), parent.Chunk(1), parent.Chunk(2)},
		[]string{"data/a/0", "data/a/1", "data/a/2", "data/b/0", "data/b/1"}, InPlace{Format: "mds"})
	for name, c := range map[string]struct{ ix, parent *Index }{
		"smaller":          {parent, grownIndex(t, parent, "data/c")},
		"reordered":        {reordered, parent},
		"another format":   {mds, parent},
		"tar":              {tar, tar},
		"checksums lost":   {grownIndex(t, checked, "data/c"), checked},
		"checksums gained": {checked, parent},
	} {
		if _, err := c.parent.Lineage().Extend(c.ix); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A lineage without the deferred flag, one that claims more chunks than
// the index or than a nearer ancestor, an empty one or bytes left after
// it are refused by Decode and Open alike.
func TestLineageRejects(t *testing.T) {
	parent := deferredIndex(t)
	mid, _ := parent.Lineage().Extend(grownIndex(t, parent, "data/c"))
	ext, _ := mid.Lineage().Extend(grownIndex(t, mid, "data/d"))
	b, _ := ext.MarshalBinary()
	resum := func(c []byte) []byte {
		le.PutUint32(c[len(c)-4:], crc32.Checksum(c[:len(c)-4], castagnoli))
		return c
	}
	// The lineage ends the in-place section: count, then two records.
	at := len(b) - 4 - 4 - 2*lineageRecordLen
	edit := func(f func(c []byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return resum(c)
	}
	for name, c := range map[string][]byte{
		"no deferred flag": edit(func(c []byte) { le.PutUint32(c[12:], FlagLineage) }),
		"no lineage flag":  edit(func(c []byte) { le.PutUint32(c[12:], FlagDeferred) }),
		"empty":            edit(func(c []byte) { le.PutUint32(c[at:], 0) }),
		"too long":         edit(func(c []byte) { le.PutUint32(c[at:], MaxAncestors+1) }),
		"past the section": edit(func(c []byte) { le.PutUint32(c[at:], 3) }),
		"more chunks":      edit(func(c []byte) { le.PutUint32(c[at+4+8:], 9) }),
		"older is larger":  edit(func(c []byte) { le.PutUint32(c[at+4+lineageRecordLen+8:], 5) }),
		"bytes left over":  resum(append(bytes.Clone(b[:len(b)-4]), 0, 0, 0, 0, 0)),
	} {
		_, err := Decode(c)
		_, oerr := Open(context.Background(), &memObject{b: c}, int64(len(c)), OpenOptions{})
		if !errors.Is(err, ErrCorrupt) || !errors.Is(oerr, ErrCorrupt) {
			t.Errorf("%s: decode %v, open %v", name, err, oerr)
		}
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
}
