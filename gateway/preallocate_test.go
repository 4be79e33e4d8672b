package gateway

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// A dataset whose chunks differ in size — a Parquet dataset of files of
// five row groups cut into chunks of two, two and one — fits a cache with
// room to spare: the cache gets a buffer for each chunk (so a cold epoch
// faults none in), never more buffers than chunks, and with several
// datasets sharing a cache they are too large for, no more than an
// eighth over each one's share, as before.
func TestPreallocateUnevenChunks(t *testing.T) {
	const kib = 1 << 10
	var sizes []int64
	for range 24 { // files of 5 row groups of ~80 KiB: chunks of 2, 2 and 1
		sizes = append(sizes, 160*kib+1*kib, 160*kib+2*kib, 80*kib+512)
	}
	uneven := dataset(t, "pq", sizes)
	var all int64
	for _, s := range sizes {
		all += s
	}
	uniform := dataset(t, "tar", []int64{160 * kib, 160 * kib, 160 * kib, 160 * kib})
	tests := []struct {
		name     string
		capacity int64
		datasets []*catalog.Dataset
		want     []int // buffers of each dataset's class
	}{
		{"uneven, a cache 4× the dataset", 4 * all, []*catalog.Dataset{uneven}, []int{72}},
		{"uneven, a cache of the dataset's bytes", all, []*catalog.Dataset{uneven}, []int{64}},
		{"uneven, half", all / 2, []*catalog.Dataset{uneven}, []int{32}},
		{"uniform, a cache 4× the dataset", 4 * 640 * kib, []*catalog.Dataset{uniform}, []int{4}},
		{"two, 4× both", 4 * (all + 640*kib), []*catalog.Dataset{uneven, uniform}, []int{72, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache := chunkcache.New(chunkcache.Config{Capacity: tc.capacity, Loader: chunkcache.LoaderFunc(func(context.Context, chunkcache.Key, []byte) error { return nil })})
			defer cache.Close()
			if err := preallocate(context.Background(), cache, tc.capacity, tc.datasets, zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			var want int64
			for i, ds := range tc.datasets {
				want += int64(tc.want[i]) * ds.MaxChunk
			}
			if got := cache.Stats().BufferBytes; got != want {
				t.Errorf("%d bytes of buffers preallocated, want %d (%v of the datasets' classes)", got, want, tc.want)
			}
		})
	}
}

func dataset(t *testing.T, name string, sizes []int64) *catalog.Dataset {
	t.Helper()
	chunks := make([]chunkindex.Chunk, len(sizes))
	samples := make([]chunkindex.Sample, len(sizes))
	for i, n := range sizes {
		chunks[i] = chunkindex.Chunk{Key: fmt.Sprintf("c%d", i), Size: n, ETag: "e", Samples: 1}
		samples[i] = chunkindex.Sample{Key: fmt.Sprintf("s%d", i), Chunk: i, Length: 512, CRC: 1}
	}
	ix, err := chunkindex.New(chunks, samples)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset(name, "file:///"+name, nil, ix)
}
