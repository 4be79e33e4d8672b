package inflate

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/brandgw/brand/format/hostiletest"
)

// codecOf is the codec of each of hostiletest's names this package reads
// (Hadoop's LZ4 framing is format/parquet's, around LZ4 blocks).
var codecOf = map[string]Codec{
	hostiletest.ZSTD: ZSTD, hostiletest.ZSTDNoSize: ZSTD, hostiletest.Gzip: Gzip, hostiletest.Snappy: Snappy,
	hostiletest.LZ4Raw: LZ4Block, hostiletest.LZ4Frame: LZ4Frame, hostiletest.Brotli: Brotli, hostiletest.BZ2: BZ2,
}

// Every codec reads what its writers write, exactly, into a buffer of its
// size (or larger: the part written is returned); data that inflates one
// byte or more past the buffer fails with ErrOver or, where the codec
// cannot tell (an LZ4 block), ErrCorrupt; damaged data with ErrCorrupt.
func TestInto(t *testing.T) {
	data := make([]byte, 300_000)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	for name, c := range codecOf {
		t.Run(name, func(t *testing.T) {
			want := data
			if c == BZ2 {
				want = make([]byte, 8<<20) // hostiletest compresses zeros alone with bzip2
			}
			src := hostiletest.Compress(name, want)
			for _, extra := range []int{0, 1, 1000} {
				got, err := Into(c, make([]byte, len(want)+extra), src)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("into %d bytes more than its size: %v (equal: %v)", extra, err, bytes.Equal(got, want))
				}
			}
			for _, short := range []int{1, 1000} {
				_, err := Into(c, make([]byte, len(want)-short), src)
				// An LZ4 block that does not fit, and a ZSTD block past
				// the buffer's end, are told apart from damage by neither
				// library.
				if !errors.Is(err, ErrOver) && !((c == LZ4Block || c == ZSTD) && errors.Is(err, ErrCorrupt)) {
					t.Fatalf("%d bytes short: %v, want ErrOver", short, err)
				}
			}
			if c == BZ2 {
				return
			}
			bad := bytes.Clone(src)
			for i := len(bad) / 3; i < len(bad)/3+64 && i < len(bad); i++ {
				bad[i] ^= 0xa5
			}
			if got, err := Into(c, make([]byte, len(want)), bad); err == nil && bytes.Equal(got, want) {
				t.Fatal("damaged data decompressed to the data")
			}
		})
	}
}

// TestWorking: a bomb of every codec — stating 1.6 MB (the page of the
// issue's 66 KB Parquet file), inflating to 2 GiB (ZSTD, with and without
// a content size; a Snappy header's claim of 4 GiB − 1) or 64 MiB (the
// others, whose writers take seconds a GiB) — fails with ErrOver or
// ErrCorrupt, having allocated no more than Working says beside the
// buffer of its stated size.
func TestWorking(t *testing.T) {
	const states = 1_600_000
	for _, tc := range []struct {
		name     string
		inflates int64
	}{
		{hostiletest.ZSTDNoSize, 2 << 30}, {hostiletest.ZSTD, 2 << 30}, {hostiletest.Snappy, 1<<32 - 1},
		{hostiletest.Gzip, 64 << 20}, {hostiletest.LZ4Raw, 64 << 20}, {hostiletest.LZ4Frame, 64 << 20},
		{hostiletest.Brotli, 64 << 20}, {hostiletest.BZ2, 64 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := codecOf[tc.name]
			src := hostiletest.Bomb(tc.name, tc.inflates)
			dst := make([]byte, states)
			warm := make([]byte, 1000)
			if c == BZ2 {
				warm = make([]byte, 4<<20) // hostiletest's bzip2 is 4 MiB of zeros at a time
			}
			Into(c, make([]byte, len(warm)), hostiletest.Compress(tc.name, warm)) // the decoder's first use
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Into(c, dst, src)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrOver) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a bomb of %d bytes inflating to %d: %v", len(src), tc.inflates, err)
			}
			got := int64(after.TotalAlloc - before.TotalAlloc)
			if got > Working(c, states) {
				t.Errorf("%d bytes of %s stating %d, inflating to %d: allocated %d, Working says %d",
					len(src), tc.name, states, tc.inflates, got, Working(c, states))
			}
			t.Logf("%s: %d bytes inflating to %d into %d: allocated %d (Working %d)", tc.name, len(src), tc.inflates, states, got, Working(c, states))
		})
	}
}
