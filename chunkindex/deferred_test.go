package chunkindex

import (
	"context"
	"errors"
	"hash/crc32"
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
	c := flip(12, 3)
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
