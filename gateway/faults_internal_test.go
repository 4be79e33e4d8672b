package gateway

import (
	"testing"

	"github.com/brandgw/brand/chunkindex"
)

// A batch laid out before a reload resolves its chunks through the version
// it was laid out on; a chunk of neither version does not resolve.
func TestCatalogResolvesReplacedVersion(t *testing.T) {
	version := func(etag string) *loadedDataset {
		ix, err := chunkindex.New([]chunkindex.Chunk{{Key: "c0.tar", Size: 1536, ETag: etag, Samples: 1}},
			[]chunkindex.Sample{{Key: "s", Chunk: 0, Offset: 0, Length: 512, CRC: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return newLoadedDataset("d", "file:///d", nil, ix)
	}
	c := newCatalog([]string{"d"}, "d")
	v1, v2 := version("e1"), version("e2")
	c.add(v1)
	c.markReady()
	c.replace(v2)
	tests := []struct {
		name string
		ds   *loadedDataset
		want *loadedDataset
	}{
		{"new version", v2, v2},
		{"replaced version", v1, v1},
		{"unknown version", version("e3"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := c.chunk(tc.ds.chunkKey(0))
			if got != tc.want || (tc.want == nil) != (err != nil) {
				t.Fatalf("chunk = %p, %v; want %p", got, err, tc.want)
			}
		})
	}
}

func TestEscapeKey(t *testing.T) {
	tests := []struct{ key, want string }{
		{"class1/img_0001", "class1/img_0001"},
		{"a,b", "a%2Cb"},
		{"100%", "100%25"},
		{"with space", "with%20space"},
		{"é", "%C3%A9"},
	}
	for _, tc := range tests {
		if got := escapeKey(tc.key); got != tc.want {
			t.Errorf("escapeKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
