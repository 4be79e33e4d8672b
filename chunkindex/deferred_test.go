package chunkindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"slices"
	"testing"
)

func deferredIndex(t *testing.T) *Index {
	t.Helper()
	chunks := []Chunk{
		{Key: "data/a.parquet#0", Size: 1 << 20, ETag: "e1", Samples: 3},
		{Key: "data/a.parquet#1", Size: 2 << 20, ETag: "e1", Samples: 0},
		{Key: "data/b.parquet#0", Size: 3 << 20, ETag: "e2", Samples: 2},
	}
	keys := []string{"data/a/0", "data/a/1", "data/a/2", "data/b/0", "data/b/1"}
	ix, err := NewDeferred(chunks, keys, InPlace{Format: "parquet", Meta: [32]byte{1, 2, 3}, Created: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// A deferred index says so, keeps its keys and chunks, and answers each
// sample's ordinal in its chunk with no range — through New, Decode and
// Open alike.
func TestDeferredRoundTrip(t *testing.T) {
	ix := deferredIndex(t)
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	part, err := Open(context.Background(), &memObject{b: b}, int64(len(b)), OpenOptions{ReadSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := part.Samples(context.Background(), []int{0, 1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*Index{"new": ix, "decode": dec, "open": part} {
		if x.InPlace() != (InPlace{Format: "parquet", Meta: [32]byte{1, 2, 3}, Created: 1700000000}) {
			t.Errorf("%s: %+v", name, x.InPlace())
		}
		if !x.Deferred() || x.NumSamples() != 5 || x.NumChunks() != 3 || x.ID() != ix.ID() {
			t.Fatalf("%s: deferred %v, %d samples, %d chunks", name, x.Deferred(), x.NumSamples(), x.NumChunks())
		}
		for id, want := range []struct {
			c   int
			ord int64
		}{{0, 0}, {0, 1}, {0, 2}, {2, 0}, {2, 1}} {
			c, off, n, crc := x.SampleRange(id)
			if c != want.c || off != want.ord || n != 0 || crc != 0 {
				t.Errorf("%s: sample %d: %d %d+%d %08x", name, id, c, off, n, crc)
			}
		}
		if id, ok := lookup(t, x, "data/b/1"); !ok || id != 4 {
			t.Errorf("%s: lookup %d %v", name, id, ok)
		}
	}
	tar, _ := New([]Chunk{{Key: "c", Size: 1024, Samples: 1}}, []Sample{{Key: "k", Length: 512}})
	if tar.Deferred() || tar.ID() == ix.ID() {
		t.Fatal("a tar index is not deferred")
	}
}

// A deferred index whose records carry ranges, a flag this build does
// not know, or keys that do not match the chunks' counts are refused.
func TestDeferredRejects(t *testing.T) {
	b, _ := deferredIndex(t).MarshalBinary()
	flip := func(at int, v byte) []byte {
		c := append([]byte(nil), b...)
		c[at] = v
		le.PutUint32(c[len(c)-4:], crc32.Checksum(c[:len(c)-4], castagnoli))
		return c
	}
	recs := headerSize + int(le.Uint32(b[24:]))
	for name, c := range map[string][]byte{
		"length":  flip(recs+8, 1),
		"ordinal": flip(recs+sampleRecordLen, 7),
		"crc":     flip(recs+12, 1),
	} {
		_, err := Decode(c)
		_, oerr := Open(context.Background(), &memObject{b: c}, int64(len(c)), OpenOptions{})
		if !errors.Is(err, ErrCorrupt) || !errors.Is(oerr, ErrCorrupt) {
			t.Errorf("%s: decode %v, open %v", name, err, oerr)
		}
	}
	other, _ := NewDeferred([]Chunk{{Key: "c", Samples: 1}}, []string{"a"}, InPlace{Format: "parquet"})
	again, _ := NewDeferred([]Chunk{{Key: "c", Samples: 1}}, []string{"a"}, InPlace{Format: "parquet", Meta: [32]byte{9}})
	if other.ID() == again.ID() {
		t.Error("the description of the chunks is not in the index's ID")
	}
	nameAt := len(b) - 4 - 8 - 32 - len("parquet")
	for name, c := range map[string][]byte{"name": flip(nameAt-2, 0), "name length": flip(nameAt-2, 200)} {
		_, err := Decode(c)
		_, oerr := Open(context.Background(), &memObject{b: c}, int64(len(c)), OpenOptions{})
		if err == nil || oerr == nil {
			t.Errorf("%s: decode %v, open %v", name, err, oerr)
		}
	}
	c := flip(12, FlagDeferred|8) // 2 is FlagChecksums, 4 FlagLineage
	if _, err := Decode(c); !errors.Is(err, ErrVersion) {
		t.Errorf("unknown flag: %v", err)
	}
	src := InPlace{Format: "f"}
	if _, err := NewDeferred([]Chunk{{Key: "c", Samples: 1}}, []string{"a"}, InPlace{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no format: %v", err)
	}
	if _, err := NewDeferred([]Chunk{{Key: "c", Samples: 1}}, []string{"a", "b"}, src); !errors.Is(err, ErrInvalid) {
		t.Errorf("more keys than samples: %v", err)
	}
	if _, err := NewDeferred([]Chunk{{Key: "c", Samples: 2}}, []string{"a", "a"}, src); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("duplicate keys: %v", err)
	}
}

// checkedIndex is deferredIndex with checksums: chunk 1 has nothing to
// read.
func checkedIndex(t *testing.T) (*Index, [][]Span) {
	t.Helper()
	d := deferredIndex(t)
	chunks := make([]Chunk, d.NumChunks())
	for c := range chunks {
		chunks[c] = d.Chunk(c)
	}
	keys := make([]string, d.NumSamples())
	for i := range keys {
		keys[i] = d.SampleKey(i)
	}
	spans := [][]Span{{{Off: 4, Len: 100, CRC: 0xdeadbeef}, {Off: 104, Len: 7, CRC: 1}}, nil, {{Off: 1 << 40, Len: 1 << 31, CRC: 2}}}
	ix, err := NewDeferredChecked(chunks, keys, d.InPlace(), spans)
	if err != nil {
		t.Fatal(err)
	}
	return ix, spans
}

// testdata/index-v1-checksums.golden pins the encoding of a deferred index
// with checksums (flags 3); regenerate with -update.
const goldenChecked = "testdata/index-v1-checksums.golden"

// An index with checksums says so in its flags, keeps every chunk's spans
// through New, Decode and Open, and its ID names them; an index without
// has none and its encoding is what it was.
func TestChecksummedRoundTrip(t *testing.T) {
	ix, spans := checkedIndex(t)
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenChecked, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenChecked)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding differs from %s:\n got %x\nwant %x", goldenChecked, b, want)
	}
	if le.Uint32(b[12:]) != FlagDeferred|FlagChecksums {
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
	plain := deferredIndex(t)
	if plain.Checksummed() || plain.Spans(0) != nil || plain.ID() == ix.ID() {
		t.Fatalf("an index without checksums: checksummed %t, spans %v, ID %s (with: %s)", plain.Checksummed(), plain.Spans(0), plain.ID(), ix.ID())
	}
	for name, x := range map[string]*Index{"new": ix, "decode": dec, "open": part} {
		if !x.Checksummed() || x.ID() != ix.ID() || x.InPlace() != plain.InPlace() {
			t.Fatalf("%s: checksummed %t, ID %s (want %s), %+v", name, x.Checksummed(), x.ID(), ix.ID(), x.InPlace())
		}
		for c := range x.NumChunks() {
			if got := x.Spans(c); got == nil || !slices.Equal(got, spans[c]) {
				t.Errorf("%s: chunk %d spans %v, want %v", name, c, got, spans[c])
			}
		}
	}
}

// Checksums that overlap, go backwards, are empty or overflow, do not
// fill their section, or come without the deferred flag are refused; a
// build that knows no checksums refuses the flag (ErrVersion), which is
// checkFlags' first case.
func TestChecksummedRejects(t *testing.T) {
	d := deferredIndex(t)
	chunks := []Chunk{d.Chunk(0), d.Chunk(1), d.Chunk(2)}
	keys := []string{"data/a/0", "data/a/1", "data/a/2", "data/b/0", "data/b/1"}
	for name, spans := range map[string][][]Span{
		"overlapping": {{{Off: 0, Len: 10}, {Off: 9, Len: 1}}, nil, nil},
		"backwards":   {{{Off: 10, Len: 10}, {Off: 0, Len: 1}}, nil, nil},
		"empty":       {{{Off: 0, Len: 0}}, nil, nil},
		"overflowing": {{{Off: math.MaxInt64 - 1, Len: 2}}, nil, nil},
		"too few":     {nil, nil},
	} {
		if _, err := NewDeferredChecked(chunks, keys, d.InPlace(), spans); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ix, _ := checkedIndex(t)
	b, _ := ix.MarshalBinary()
	resum := func(c []byte) []byte {
		le.PutUint32(c[len(c)-4:], crc32.Checksum(c[:len(c)-4], castagnoli))
		return c
	}
	// The last chunk's one span: offset, length, CRC, then the trailer.
	last := len(b) - 4 - spanRecordLen
	for name, c := range map[string][]byte{
		"span past int64": resum(func() []byte {
			c := bytes.Clone(b)
			le.PutUint64(c[last:], math.MaxInt64)
			return c
		}()),
		"count past the section": resum(func() []byte {
			c := bytes.Clone(b)
			le.PutUint32(c[last-4:], 2)
			return c
		}()),
		"bytes left over": resum(append(bytes.Clone(b[:len(b)-4]), 0, 0, 0, 0, 0)),
		"no deferred flag": resum(func() []byte {
			c := bytes.Clone(b)
			le.PutUint32(c[12:], FlagChecksums)
			return c
		}()),
		"no checksums flag": resum(func() []byte {
			c := bytes.Clone(b)
			le.PutUint32(c[12:], FlagDeferred)
			return c
		}()),
	} {
		_, err := Decode(c)
		_, oerr := Open(context.Background(), &memObject{b: c}, int64(len(c)), OpenOptions{})
		if !errors.Is(err, ErrCorrupt) || !errors.Is(oerr, ErrCorrupt) {
			t.Errorf("%s: decode %v, open %v", name, err, oerr)
		}
	}
	c := resum(bytes.Clone(b))
	le.PutUint32(c[12:], FlagDeferred|FlagChecksums|8)
	if _, err := Decode(resum(c)); !errors.Is(err, ErrVersion) {
		t.Errorf("an unknown flag beside checksums: %v", err)
	}
}

// TestDeferredLookupOfKeysInNoOrder: a partial index of a dataset served
// in place whose keys are in no order (a file's lines numbered 0, 1, …,
// 10 sort as 0, 1, 10, 2) finds a key through its key directory, built on
// the first lookup from the object streamed again: the in-place section
// between the keys and the trailer is read past, not taken for bytes
// after the trailer. (A cluster node's exclusion of such keys, and every
// lookup by key there, answered 502.)
func TestDeferredLookupOfKeysInNoOrder(t *testing.T) {
	var keys []string
	for l := range 12 {
		keys = append(keys, fmt.Sprintf("data/f0/%d", l))
	}
	chunks := []Chunk{{Key: "data/f0.lines#0", Size: 1 << 10, ETag: "e", Samples: 6}, {Key: "data/f0.lines#1", Size: 1 << 10, ETag: "e", Samples: 6}}
	whole, err := NewDeferred(chunks, keys, InPlace{Format: "lines", Meta: [32]byte{7}, Created: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	ix := open(t, encode(t, whole), OpenOptions{})
	for id, key := range keys {
		if got, ok, err := ix.Lookup(context.Background(), key); err != nil || !ok || got != id {
			t.Fatalf("lookup %q: %d %v %v, want %d", key, got, ok, err, id)
		}
	}
}
