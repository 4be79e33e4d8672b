package chunkindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const goldenIndex = "testdata/index-v1.golden"

// TestGolden pins the encoding: if this fails, the format changed. A
// deliberate change needs a new FormatVersion, docs/format.md updated and
// the golden regenerated with go test -run TestGolden -update.
func TestGolden(t *testing.T) {
	chunks, samples := goldenDataset()
	b, err := mustNew(t, chunks, samples).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenIndex, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenIndex)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding differs from %s:\n got %x\nwant %x", goldenIndex, b, want)
	}
	ix, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, ix, chunks, samples)
	sum := sha256.Sum256(want)
	if id := ix.ID(); id != hex.EncodeToString(sum[:])[:16] || id != "3a6958a385d5afc5" {
		t.Errorf("ID() = %q; SHA-256 of the golden starts %x", id, sum[:8])
	}
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 5000} {
		chunks, samples := synthDataset(n, 64)
		ix := mustNew(t, chunks, samples)
		b, err := ix.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != (encoding{ix}).encodedLen() {
			t.Errorf("%d samples: encoding is %d bytes, encodedLen says %d", n, len(b), encoding{ix}.encodedLen())
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%d samples: %v", n, err)
		}
		checkIndex(t, got, chunks, samples)
		again, _ := got.MarshalBinary()
		if !bytes.Equal(again, b) {
			t.Errorf("%d samples: re-encoding a decoded index changed it", n)
		}
		if got.ID() != ix.ID() {
			t.Errorf("%d samples: ID %s after decoding, %s before", n, got.ID(), ix.ID())
		}
	}
}

func TestIDDependsOnContent(t *testing.T) {
	chunks, samples := goldenDataset()
	base := mustNew(t, chunks, samples).ID()
	edits := []func([]Chunk, []Sample){
		func(c []Chunk, s []Sample) { c[0].ETag = `"e1"` },
		func(c []Chunk, s []Sample) { s[1].CRC++ },
		func(c []Chunk, s []Sample) { s[2].Key = "b/w" },
		func(c []Chunk, s []Sample) { c[1].Size += 512 },
	}
	for i, edit := range edits {
		c, s := goldenDataset()
		edit(c, s)
		if id := mustNew(t, c, s).ID(); id == base {
			t.Errorf("edit %d kept ID %s", i, id)
		}
	}
}

func golden(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(goldenIndex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeTruncated(t *testing.T) {
	b := golden(t)
	for n := range len(b) {
		_, err := Decode(b[:n])
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("prefix of %d bytes: %v, want ErrTruncated", n, err)
		}
	}
}

func TestDecodeBitFlips(t *testing.T) {
	b := golden(t)
	for i := range 8 * len(b) {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := Decode(c); err == nil {
			t.Errorf("flipping bit %d of byte %d went unnoticed", i%8, i/8)
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrVersion) {
			t.Errorf("bit flip at byte %d: error %q wraps no sentinel", i/8, err)
		}
	}
}

// reseal recomputes the trailer so that a test edit reaches validation
// instead of failing the checksum.
func reseal(b []byte) []byte {
	body := b[:len(b)-trailerSize]
	le.PutUint32(b[len(body):], crc32.Checksum(body, castagnoli))
	return b
}

// rejectCase is an edit of the golden index that a reader must reject.
type rejectCase struct {
	name    string
	edit    func([]byte) []byte
	is      error
	contain string
}

// goldenLen is the golden index's length, which rejectCases' offsets
// assume.
const goldenLen = headerSize + 16 + 11 + 4 + 16 + 11 + 3*sampleRecordLen + 9 + trailerSize

// rejectCases are the edits of the golden index TestDecodeRejects and
// TestOpenRejects apply.
func rejectCases() []rejectCase {
	// Offsets in the golden index: header 0..32, chunk table 32..90 (chunk 0
	// at 32: size, samples 40, key len 44, key 46, ETag len 57, ETag 59;
	// chunk 1 at 63), samples from 90 (20 bytes each), keys at 150.
	const (
		chunk0  = headerSize
		chunk1  = chunk0 + 16 + 11 + 4
		samples = chunk1 + 16 + 11
		keyBlob = samples + 3*sampleRecordLen
		sample1 = samples + sampleRecordLen
		sample2 = samples + 2*sampleRecordLen
	)
	set32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint32(b[off:], v); return reseal(b) }
	}
	set64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint64(b[off:], v); return reseal(b) }
	}
	return []rejectCase{
		{"empty", func(b []byte) []byte { return nil }, ErrTruncated, "header needs 32 bytes, 0 remain"},
		{"wrong magic", func(b []byte) []byte { copy(b, "PK\x03\x04"); return b }, ErrCorrupt, `bad magic "PK\x03\x04`},
		{"short wrong magic", func(b []byte) []byte { return []byte("BRX") }, ErrCorrupt, "bad magic"},
		{"future version", set32(8, 2), ErrVersion, "index format version 2, this build reads version 1"},
		{"version 0", set32(8, 0), ErrCorrupt, "format version 0"},
		{"feature flags", set32(12, 8), ErrVersion, "needs features 0x8"},
		{"checksum", func(b []byte) []byte { b[keyBlob] ^= 0x20; return b }, ErrCorrupt, "checksum mismatch"},
		{"trailing bytes", func(b []byte) []byte { return append(b, 0) }, ErrCorrupt, "1 bytes after the trailer"},
		{"huge sample count", set32(20, math.MaxUint32), ErrTruncated, "sample table needs 85899345900 bytes, 73 remain"},
		{"huge chunk table", set32(24, math.MaxUint32), ErrTruncated, "chunk table needs 4294967295 bytes"},
		{"huge key blob", set32(28, 1<<31), ErrTruncated, "key blob needs 2147483648 bytes"},
		{"chunk count vs table", set32(16, 4), ErrCorrupt, "4 chunks cannot fit a 58-byte chunk table"},
		{"fewer chunks", set32(16, 1), ErrCorrupt, "bytes left over in the chunk table"},
		{"chunk key overruns", func(b []byte) []byte { b[chunk1+12] = 200; return reseal(b) }, ErrCorrupt, "chunk 1: string of 200 bytes overruns"},
		{"chunk sample counts", set32(chunk0+8, 3), ErrCorrupt, "chunks count more than the header's 3 samples"},
		{"chunk sample counts short", set32(chunk1+8, 0), ErrCorrupt, "chunks count 2 samples, header says 3"},
		{"chunk size", set64(chunk0, 1<<63), ErrCorrupt, "chunk 0: size 9223372036854775808 out of range"},
		{"empty chunk key", func(b []byte) []byte {
			// Chunk 1 becomes key "" with ETag "shard-1.tar".
			copy(b[chunk1+12:], "\x00\x00\x0b\x00shard-1.tar")
			return reseal(b)
		}, ErrCorrupt, "chunk 1: empty key"},
		{"sample offset", set64(sample2, 1<<63), ErrCorrupt, "sample 2: offset 9223372036854775808 out of range"},
		{"sample past chunk", set64(sample2, 2048), ErrCorrupt, `range 2048+2048 exceeds chunk 1 "shard-1.tar" size 3072`},
		{"sample overlap", set64(sample1, 512), ErrCorrupt, "overlaps"},
		{"sample length 0", set32(sample1+8, 0), ErrCorrupt, "not a non-empty run of 512-byte tar blocks"},
		{"sample unaligned", set32(sample1+8, 1000), ErrCorrupt, "512-byte tar blocks"},
		{"key end decreasing", set32(sample1+16, 2), ErrCorrupt, "sample 1: key end 2 does not follow 3"},
		{"empty key", set32(sample1+16, 3), ErrCorrupt, "keys must be non-empty"},
		{"first key empty", set32(samples+16, 0), ErrCorrupt, "sample 0: key end 0"},
		{"key end short", set32(sample2+16, 8), ErrCorrupt, "key ends reach 8, key bytes are 9"},
		{"key end past blob", set32(sample2+16, 10), ErrCorrupt, "key ends reach 10, key bytes are 9"},
		{"duplicate key", func(b []byte) []byte { copy(b[keyBlob+6:], "a/x"); return reseal(b) }, ErrDuplicateKey,
			`duplicate sample key "a/x" in sample 0 (chunk 0 "shard-0.tar") and sample 2 (chunk 1 "shard-1.tar")`},
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := rejectCases()
	if n := len(golden(t)); n != goldenLen {
		t.Fatalf("golden index is %d bytes; the offsets in this test assume %d", n, goldenLen)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.edit(golden(t)))
			if !errors.Is(err, tt.is) {
				t.Fatalf("Decode: %v, want %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contain) {
				t.Errorf("error %q does not contain %q", err, tt.contain)
			}
		})
	}
}

// FuzzDecode checks that Decode never panics, and that whatever it accepts
// is a well-formed index that encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	b := golden(f)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(reseal(append(bytes.Clone(b[:20]), b[20:]...)))
	checked, err := os.ReadFile(goldenChecked) // a deferred index with checksums
	if err != nil {
		f.Fatal(err)
	}
	f.Add(checked)
	for _, n := range []int{0, 1, 3, 40} {
		chunks, samples := synthDataset(n, 2)
		enc, err := mustNew(f, chunks, samples).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %q wraps no sentinel", err)
			}
			return
		}
		again, err := ix.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded index re-encodes differently (%v)", err)
		}
		for c := range ix.NumChunks() {
			first, n := ix.ChunkRange(c)
			for id := first; id < first+n; id++ {
				cc, off, length, _ := ix.SampleRange(id)
				if cc != c || off < 0 || off+length > ix.Chunk(c).Size {
					t.Fatalf("sample %d: chunk %d range %d+%d outside chunk %d of size %d", id, cc, off, length, c, ix.Chunk(c).Size)
				}
				if got, ok := lookup(t, ix, ix.SampleKey(id)); !ok || got != id {
					t.Fatalf("Lookup(SampleKey(%d)) = %d, %v", id, got, ok)
				}
			}
		}
	})
}

// TestFuzzCorpusIsChecked makes sure the committed corpus is still there:
// go test runs every file under testdata/fuzz/FuzzDecode as a test case.
func TestFuzzCorpusIsChecked(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecode/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed corpus in testdata/fuzz/FuzzDecode (%v)", err)
	}
}
