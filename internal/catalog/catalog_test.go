package catalog

import (
	"errors"
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
