package crcjoin

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// TestJoin holds Join to hash/crc32 over every split of short inputs and
// random splits of long ones, empty pieces included.
func TestJoin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 300<<10)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	check := func(a, c []byte) {
		t.Helper()
		want := crc32.Checksum(append(append([]byte{}, a...), c...), castagnoli)
		got := Join(crc32.Checksum(a, castagnoli), crc32.Checksum(c, castagnoli), int64(len(c)))
		if got != want {
			t.Fatalf("Join over %d + %d bytes: %08x, want %08x", len(a), len(c), got, want)
		}
	}
	for n := 0; n <= 40; n++ {
		for i := 0; i <= n; i++ {
			check(b[:i], b[i:n])
		}
	}
	for range 200 {
		n := r.IntN(len(b) + 1)
		i := r.IntN(n + 1)
		check(b[:i], b[i:n])
	}
}

func BenchmarkJoin(b *testing.B) {
	for i := range b.N {
		Join(uint32(i), 0x1234, 75<<10+int64(i&1023))
	}
}
