package chunkindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

// goldenDataset is the small dataset encoded in testdata/index-v1.golden and
// shown in docs/format.md.
func goldenDataset() ([]Chunk, []Sample) {
	chunks := []Chunk{
		{Key: "shard-0.tar", Size: 4096, ETag: `"e0"`, Samples: 2},
		{Key: "shard-1.tar", Size: 3072, ETag: "", Samples: 1},
	}
	samples := []Sample{
		{Key: "a/x", Chunk: 0, Offset: 0, Length: 1024, CRC: 0x11223344},
		{Key: "a/y", Chunk: 0, Offset: 1024, Length: 2048, CRC: 0xaabbccdd},
		{Key: "b/z", Chunk: 1, Offset: 0, Length: 2048, CRC: 0x01020304},
	}
	return chunks, samples
}

// synthDataset returns a dataset of n samples spread over chunks of per
// samples each, with keys shaped like ImageNet's.
func synthDataset(n, per int) ([]Chunk, []Sample) {
	var chunks []Chunk
	samples := make([]Sample, 0, n)
	for i := 0; i < n; i++ {
		c := i / per
		if c == len(chunks) {
			chunks = append(chunks, Chunk{Key: fmt.Sprintf("train/shard-%06d.tar", c), ETag: fmt.Sprintf(`"%032x"`, c)})
		}
		ch := &chunks[c]
		length := int64(BlockSize * (2 + i%200))
		samples = append(samples, Sample{
			Key:    fmt.Sprintf("train/n%08d/n%08d_%d", i%1000, i%1000, i),
			Chunk:  c,
			Offset: ch.Size,
			Length: length,
			CRC:    uint32(i) * 2654435761,
		})
		ch.Size += length
		ch.Samples++
	}
	for i := range chunks {
		chunks[i].Size += int64(len(EndOfArchive))
	}
	return chunks, samples
}

func mustNew(t testing.TB, chunks []Chunk, samples []Sample) *Index {
	t.Helper()
	ix, err := New(chunks, samples)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// checkIndex verifies every accessor of ix against the dataset it was built
// from.
// lookup is Lookup for a test: an error fails it.
func lookup(t testing.TB, ix *Index, key string) (int, bool) {
	t.Helper()
	id, ok, err := ix.Lookup(context.Background(), key)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", key, err)
	}
	return id, ok
}

func checkIndex(t testing.TB, ix *Index, chunks []Chunk, samples []Sample) {
	t.Helper()
	if ix.NumChunks() != len(chunks) || ix.NumSamples() != len(samples) {
		t.Fatalf("%d chunks, %d samples; want %d, %d", ix.NumChunks(), ix.NumSamples(), len(chunks), len(samples))
	}
	var total, sampleBytes int64
	counts := ix.SampleCounts()
	id := 0
	for c, ch := range chunks {
		total += ch.Size
		if got := ix.Chunk(c); got != ch {
			t.Errorf("Chunk(%d) = %+v, want %+v", c, got, ch)
		}
		first, n := ix.ChunkRange(c)
		if first != id || n != ch.Samples || counts[c] != ch.Samples {
			t.Errorf("chunk %d: ChunkRange = %d, %d; SampleCounts %d; want %d, %d", c, first, n, counts[c], id, ch.Samples)
		}
		id += ch.Samples
	}
	for i, s := range samples {
		sampleBytes += s.Length
		if got := ix.Sample(i); got != s {
			t.Errorf("Sample(%d) = %+v, want %+v", i, got, s)
		}
		c, off, n, crc := ix.SampleRange(i)
		if c != s.Chunk || off != s.Offset || n != s.Length || crc != s.CRC {
			t.Errorf("SampleRange(%d) = %d, %d, %d, %#x; want %+v", i, c, off, n, crc, s)
		}
		if got, ok := lookup(t, ix, s.Key); !ok || got != i {
			t.Errorf("Lookup(%q) = %d, %v; want %d", s.Key, got, ok, i)
		}
	}
	if ix.TotalBytes() != total || ix.SampleBytes() != sampleBytes {
		t.Errorf("TotalBytes %d, SampleBytes %d; want %d, %d", ix.TotalBytes(), ix.SampleBytes(), total, sampleBytes)
	}
	for _, k := range []string{"", "a", "a/x/", "train/n00000001", "zzz"} {
		if i, ok := lookup(t, ix, k); ok && ix.SampleKey(i) != k {
			t.Errorf("Lookup(%q) = %d, the sample of key %q", k, i, ix.SampleKey(i))
		}
	}
}

func TestNew(t *testing.T) {
	chunks, samples := goldenDataset()
	checkIndex(t, mustNew(t, chunks, samples), chunks, samples)

	chunks, samples = synthDataset(5000, 77)
	checkIndex(t, mustNew(t, chunks, samples), chunks, samples)
}

func TestNewEmptyChunks(t *testing.T) {
	chunks := []Chunk{
		{Key: "e0", Size: 1024},
		{Key: "c1", Size: 2048, Samples: 2},
		{Key: "e2", Size: 1024},
		{Key: "e3"},
		{Key: "c4", Size: 512, Samples: 1},
		{Key: "e5"},
	}
	samples := []Sample{
		{Key: "p", Chunk: 1, Offset: 0, Length: 512},
		{Key: "q", Chunk: 1, Offset: 512, Length: 1024},
		{Key: "r", Chunk: 4, Offset: 0, Length: 512},
	}
	checkIndex(t, mustNew(t, chunks, samples), chunks, samples)

	ix := mustNew(t, nil, nil)
	if ix.NumSamples() != 0 || ix.NumChunks() != 0 || ix.TotalBytes() != 0 {
		t.Errorf("empty index: %d samples, %d chunks, %d bytes", ix.NumSamples(), ix.NumChunks(), ix.TotalBytes())
	}
	if _, ok := lookup(t, ix, "x"); ok {
		t.Error("Lookup in an empty index succeeded")
	}
}

func TestSampleCountsIsACopy(t *testing.T) {
	chunks, samples := goldenDataset()
	ix := mustNew(t, chunks, samples)
	ix.SampleCounts()[0] = 99
	if ix.SampleCounts()[0] != 2 {
		t.Error("modifying SampleCounts' result changed the index")
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c []Chunk, s []Sample) ([]Chunk, []Sample)
		contain string
	}{
		{"chunk counts too few samples", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[1].Samples = 0; return c, s },
			"chunks count 2 samples, 3 given"},
		{"chunk counts too many samples", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[0].Samples = 4; return c, s },
			"chunks count more than the 3 samples given"},
		{"sample count overflow", func(c []Chunk, s []Sample) ([]Chunk, []Sample) {
			c[0].Samples, c[1].Samples = math.MaxInt, math.MaxInt-1
			return c, s
		}, "chunks count more than the 3 samples given"},
		{"negative sample count", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[0].Samples = -1; return c, s }, "negative sample count"},
		{"sample in wrong chunk", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[1].Chunk = 1; return c, s },
			`sample 1 "a/y": chunk 1, but the chunk sample counts place it in chunk 0`},
		{"empty chunk key", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[1].Key = ""; return c, s }, "chunk 1: empty key"},
		{"duplicate chunk key", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[1].Key = c[0].Key; return c, s },
			`chunk key "shard-0.tar" used by chunks 0 and 1`},
		{"long chunk key", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[1].Key = strings.Repeat("k", 70000); return c, s },
			"longer than 65535 bytes"},
		{"long ETag", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[1].ETag = strings.Repeat("k", 70000); return c, s },
			"longer than 65535 bytes"},
		{"chunk under _brand/", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[1].Key = IndexKey; return c, s },
			`chunk 1: key "_brand/index" is under _brand/`},
		{"negative chunk size", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { c[0].Size = -1; return c, s }, "negative size"},
		{"empty sample key", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[2].Key = ""; return c, s }, "keys must be non-empty"},
		{"zero length", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[0].Length = 0; return c, s }, "out of bounds"},
		{"negative offset", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[2].Offset = -512; return c, s }, "out of bounds"},
		{"length over 4 GiB", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[2].Length = 1 << 32; return c, s }, "out of bounds"},
		{"unaligned offset", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[1].Offset = 1100; return c, s }, "512-byte tar blocks"},
		{"unaligned length", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[0].Length = 1000; return c, s }, "512-byte tar blocks"},
		{"overlap", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[1].Offset = 512; return c, s },
			"offset 512 overlaps or precedes the previous sample of chunk 0, which ends at 1024"},
		{"out of order", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[0].Offset, s[1].Offset = 2048, 0; return c, s },
			"overlaps or precedes"},
		{"past chunk end", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[2].Offset = 1536; return c, s },
			`range 1536+2048 exceeds chunk 1 "shard-1.tar" size 3072`},
		{"duplicate key across chunks", func(c []Chunk, s []Sample) ([]Chunk, []Sample) { s[2].Key = "a/x"; return c, s },
			`duplicate sample key "a/x" in sample 0 (chunk 0 "shard-0.tar") and sample 2 (chunk 1 "shard-1.tar")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.edit(goldenDataset()))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("New: %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.contain) {
				t.Errorf("error %q does not contain %q", err, tt.contain)
			}
			if strings.Contains(tt.name, "duplicate key") && !errors.Is(err, ErrDuplicateKey) {
				t.Errorf("error %q does not wrap ErrDuplicateKey", err)
			}
		})
	}
}

func TestNewDoesNotAliasInput(t *testing.T) {
	chunks, samples := goldenDataset()
	ix := mustNew(t, chunks, samples)
	chunks[0].Key = "changed"
	samples[0].Key = "changed"
	if ix.Chunk(0).Key != "shard-0.tar" || ix.SampleKey(0) != "a/x" {
		t.Error("the index changed with its constructor's arguments")
	}
}

func TestSampleRangeDoesNotAllocate(t *testing.T) {
	chunks, samples := synthDataset(1000, 10)
	ix := mustNew(t, chunks, samples)
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		for id := 0; id < ix.NumSamples(); id += 7 {
			_, off, n, _ := ix.SampleRange(id)
			sink += off + n + int64(len(ix.SampleKey(id)))
		}
	})
	if allocs != 0 {
		t.Errorf("SampleRange and SampleKey allocate %v times per run", allocs)
	}
	_ = sink
}

func TestAccessorsPanicOutOfRange(t *testing.T) {
	chunks, samples := goldenDataset()
	ix := mustNew(t, chunks, samples)
	for _, id := range []int{-1, 3} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SampleRange(%d) did not panic", id)
				}
			}()
			ix.SampleRange(id)
		}()
	}
}

func TestIndexConcurrentUse(t *testing.T) {
	chunks, samples := synthDataset(2000, 100)
	ix := mustNew(t, chunks, samples)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for g := range 8 {
		wg.Go(func() {
			ids[g] = ix.ID()
			for i := g; i < len(samples); i += 8 {
				if id, ok, err := ix.Lookup(context.Background(), samples[i].Key); err != nil || !ok || id != i {
					t.Errorf("Lookup(%q) = %d, %v, %v", samples[i].Key, id, ok, err)
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Errorf("ID differs between goroutines: %q", ids)
		}
	}
}
