package chunkindex

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"testing"
)

// verifyFixture is a chunk (the second of an index of two) of random
// samples, each a whole number of tar blocks, laid end to end after a
// two-block gap, with an end-of-archive after them.
func verifyFixture(t *testing.T, r *rand.Rand) (*Index, []byte) {
	t.Helper()
	n := 1 + r.IntN(60)
	buf := make([]byte, 1024)
	samples := []Sample{{Key: "other/0", Chunk: 0, Offset: 0, Length: 512, CRC: 1}}
	for i := range n {
		b := make([]byte, 512*(1+r.IntN(10)))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		samples = append(samples, Sample{Key: fmt.Sprintf("s/%04d", i), Chunk: 1, Offset: int64(len(buf)),
			Length: int64(len(b)), CRC: crc32.Checksum(b, castagnoli)})
		buf = append(buf, b...)
	}
	buf = append(buf, make([]byte, 1024)...)
	ix, err := New([]Chunk{
		{Key: "a.tar", Size: 1536, ETag: "x", Samples: 1},
		{Key: "b.tar", Size: int64(len(buf)), ETag: "y", Samples: n},
	}, samples)
	if err != nil {
		t.Fatal(err)
	}
	return ix, buf
}

// TestVerifier feeds random chunks to the verifier as a store would:
// in 1 to 4 parts filled concurrently, each in ranges of random length,
// sometimes with a sample damaged. Finish must name the first damaged
// sample, or none, and a sample wholly inside one part must have been
// checked as it arrived.
func TestVerifier(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		ix, buf := verifyFixture(t, r)
		first, n := ix.ChunkRange(1)
		damaged := -1
		if trial%3 == 0 {
			damaged = first + r.IntN(n)
			_, off, length, _ := ix.SampleRange(damaged)
			buf[off+r.Int64N(length)] ^= 0x40
		}
		v := NewVerifier(ix, 1, buf)
		parts := 1 + r.IntN(4)
		size := (len(buf) + parts - 1) / parts
		var wg sync.WaitGroup
		for p := range parts {
			lo, hi := p*size, min((p+1)*size, len(buf))
			seed := r.Uint64()
			wg.Go(func() {
				rr := rand.New(rand.NewPCG(seed, 1))
				for at := lo; at < hi; {
					end := min(hi, at+1+rr.IntN(3000))
					v.Progress(at, end)
					at = end
				}
			})
		}
		wg.Wait()
		id, got := v.Finish()
		if id != damaged {
			t.Fatalf("trial %d: Finish names sample %d, want %d", trial, id, damaged)
		}
		if damaged >= 0 {
			_, off, length, want := ix.SampleRange(damaged)
			if c := crc32.Checksum(buf[off:off+length], castagnoli); got != c || got == want {
				t.Fatalf("trial %d: reported CRC %08x, sample's is %08x, index %08x", trial, got, c, want)
			}
			continue
		}
		for i := range n {
			_, off, length, _ := ix.SampleRange(first + i)
			if int(off)/size == int(off+length-1)/size && !v.checked[i] {
				t.Fatalf("trial %d: sample %d lies in one part but was not checked as it arrived", trial, i)
			}
		}
	}
}

// With no progress reported, Finish checks everything.
func TestVerifierWithoutProgress(t *testing.T) {
	ix, buf := verifyFixture(t, rand.New(rand.NewPCG(5, 6)))
	if id, _ := NewVerifier(ix, 1, buf).Finish(); id != -1 {
		t.Fatalf("an intact chunk fails at sample %d", id)
	}
	first, n := ix.ChunkRange(1)
	_, off, _, _ := ix.SampleRange(first + n - 1)
	buf[off] ^= 1
	if id, _ := NewVerifier(ix, 1, buf).Finish(); id != first+n-1 {
		t.Fatalf("damage in the last sample found at %d, want %d", id, first+n-1)
	}
}
