package catalog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
)

func version(t *testing.T, etag string) *Dataset {
	t.Helper()
	ix, err := chunkindex.New([]chunkindex.Chunk{{Key: "c0.tar", Size: 1536, ETag: etag, Samples: 1}},
		[]chunkindex.Sample{{Key: "s" + etag, Chunk: 0, Offset: 0, Length: 512, CRC: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return NewDataset("d", "file:///d", nil, ix)
}

// A batch laid out before a reload resolves its chunks through the version
// it was laid out on; a chunk of neither version does not resolve. A
// client that pinned the replaced version still finds it; a version
// replaced twice is gone.
func TestCatalogHoldsTheReplacedVersion(t *testing.T) {
	c := New([]string{"d"}, "d", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	v1, v2, v3 := version(t, "e1"), version(t, "e2"), version(t, "e3")
	c.Add(v1)
	c.MarkReady()
	c.replace(v2)
	tests := []struct {
		name string
		ds   *Dataset
		want *Dataset
	}{
		{"new version", v2, v2},
		{"replaced version", v1, v1},
		{"unknown version", v3, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := c.Chunk(tc.ds.ChunkKey(0))
			if got != tc.want || (tc.want == nil) != (err != nil) {
				t.Fatalf("Chunk = %p, %v; want %p", got, err, tc.want)
			}
			got, err = c.Version("d", tc.ds.ID())
			if got != tc.want || (tc.want == nil) != errors.Is(err, ErrVersion) {
				t.Fatalf("Version = %p, %v; want %p", got, err, tc.want)
			}
		})
	}
	c.replace(v3)
	if _, err := c.Version("d", v1.ID()); !errors.Is(err, ErrVersion) {
		t.Errorf("a version replaced twice: %v, want ErrVersion", err)
	}
	if held, _ := c.Held("d"); len(held) != 2 || held[0] != v3 || held[1] != v2 {
		t.Errorf("Held = %v, want the current version and the one it replaced", held)
	}
}

func TestBufferClass(t *testing.T) {
	for _, tc := range []struct{ in, want int64 }{
		{0, 0}, {1, 4096}, {4096, 4096}, {4097, 8192}, {64 << 10, 64 << 10},
		{4372480, 4456448}, {4429312, 4456448}, // two packs' largest 4 MiB chunks: one class
		{64 << 20, 64 << 20}, {64<<20 + 1, 68 << 20},
	} {
		got := BufferClass(tc.in)
		if got != tc.want || got < tc.in || float64(got) > float64(tc.in)*1.0625+4096 {
			t.Errorf("BufferClass(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// packed returns a dataset of chunks of the given sizes, one sample each.
func packed(t *testing.T, sizes ...int64) *Dataset {
	t.Helper()
	chunks := make([]chunkindex.Chunk, len(sizes))
	samples := make([]chunkindex.Sample, len(sizes))
	for i, n := range sizes {
		chunks[i] = chunkindex.Chunk{Key: fmt.Sprintf("c%d.tar", i), Size: n, ETag: "e", Samples: 1}
		samples[i] = chunkindex.Sample{Key: fmt.Sprintf("s%d", i), Chunk: i, Length: 512, CRC: 1}
	}
	ix, err := chunkindex.New(chunks, samples)
	if err != nil {
		t.Fatal(err)
	}
	return NewDataset("d", "file:///d", nil, ix)
}

// A cache share full of a dataset's chunks holds as many buffers as
// chunks fit in it by their sizes, not as many of the largest chunk's
// buffer class: packs close a chunk once it reaches the target, so the
// largest is just above it and its class up to 1/16 larger than the mean.
// The buffers take at most an eighth more memory than the share.
func TestBuffers(t *testing.T) {
	const mib = 1 << 20
	sizes := make([]int64, 72) // the small benchmark's shape: 16 MiB chunks, a few KiB over
	var total int64
	for i := range sizes {
		sizes[i] = 16*mib + int64(i%7)*8192
		total += sizes[i]
	}
	bench := packed(t, sizes...)
	if bench.MaxChunk != 17*mib {
		t.Fatalf("MaxChunk = %d, want the 17 MiB class", bench.MaxChunk)
	}
	uneven := packed(t, 4*mib, 4*mib, 8*mib, 16*mib) // mean 8 MiB, largest 16
	tests := []struct {
		name  string
		ds    *Dataset
		share int64
		want  int
	}{
		{"the whole dataset", bench, total, 72},
		{"more than the dataset", bench, 2 * total, 72},
		{"a quarter", bench, total / 4, 18},
		{"a half", bench, total / 2, 36},
		{"just under a quarter", bench, total/4 - 1, 17},
		{"less than a chunk", bench, 8 * mib, 0},
		{"none", bench, 0, 0},
		// Two chunks of the mean size fit in 16 MiB, but two buffers of
		// the largest's class are twice that.
		{"uneven chunks, at most an eighth over the share", uneven, 16 * mib, 1},
		{"uneven chunks, the whole dataset", uneven, 32 * mib, 2},
		{"uneven chunks, twice the dataset", uneven, 64 * mib, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ds.Buffers(tc.share); got != tc.want {
				t.Errorf("Buffers(%d) = %d, want %d (share ÷ MaxChunk would be %d)", tc.share, got, tc.want, tc.share/tc.ds.MaxChunk)
			}
		})
	}
}
