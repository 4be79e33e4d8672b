package reader_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// TestSmallCacheEpochs is the reproduction of jobs dying for lack of
// cache: with a window of 8 chunks and a cache of one chunk (and of half a
// chunk, smaller than any chunk), every batch used to be refused. Every
// batch of two whole epochs is read, each sample with its bytes and
// exactly once an epoch; a cache smaller than a window assembles batches
// a group of chunks at a time (brand_batches_assembled_in_parts_total);
// the bytes loaded count as the disk tier's when it gave them, a chunk
// read through a cache smaller than it too, else as the store's.
func TestSmallCacheEpochs(t *testing.T) {
	ds := catalogtest.Dataset(t, "a", 19, 16) // 304 samples, chunks of 8 KiB
	chunk := ds.Index.Chunk(0).Size
	for _, tc := range []struct {
		name  string
		cache int64
		batch int
		below bool // every chunk from the disk tier below the cache
	}{
		{"one chunk, batch 32", chunk, 32, false},
		{"one chunk, batch 64 across windows", chunk, 64, false},
		{"half a chunk", chunk / 2, 32, false},
		{"half a chunk, from the disk", chunk / 2, 32, true},
		{"three chunks", 3 * chunk, 48, false},
		{"three chunks, from the disk", 3 * chunk, 48, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var loader chunkcache.Loader = &reader.Store{}
			if tc.below {
				loader = fromDisk{&reader.Store{}}
			}
			r, c, _ := reader.NewCachedReader(t, tc.cache, loader, false)
			orders := units.Orders(nil)
			job := api.Job{Params: shuffle.Params{BatchSize: tc.batch, Window: 8, Seed: 9, World: 1}}
			for epoch := range uint64(2) {
				seen := map[int]int{}
				for m := range uint64((304 + tc.batch - 1) / tc.batch) {
					b, err := orders.Layout(context.Background(), layout.Source{DS: ds}, job, epoch, m)
					if err != nil {
						t.Fatal(err)
					}
					res, err := r.ReadBatch(context.Background(), b)
					if err != nil {
						t.Fatalf("epoch %d batch %d: %v", epoch, m, err)
					}
					if len(res.Parts) != b.Len() {
						t.Fatalf("epoch %d batch %d: %d samples read of %d", epoch, m, len(res.Parts), b.Len())
					}
					for i := range b.Len() {
						_, id, _ := b.Sample(i)
						seen[id]++
						if !bytes.Equal(res.Parts[i], reader.SampleBytes(ds, id)) {
							t.Fatalf("epoch %d batch %d: sample %d has the wrong bytes", epoch, m, id)
						}
					}
					f := res.PerPart[0]
					if disk := map[bool]int64{true: f.LoadedBytes}[tc.below]; f.DiskBytes != disk || f.StoreBytes != f.LoadedBytes-disk {
						t.Errorf("epoch %d batch %d: %d bytes loaded, %d from the disk, %d from the store", epoch, m, f.LoadedBytes, f.DiskBytes, f.StoreBytes)
					}
					res.Release()
				}
				if len(seen) != 304 {
					t.Fatalf("epoch %d: %d distinct samples, want 304", epoch, len(seen))
				}
				for id, n := range seen {
					if n != 1 {
						t.Fatalf("epoch %d: sample %d read %d times", epoch, id, n)
					}
				}
			}
			if n := testutil.ToFloat64(reader.AssembledInParts(r)); tc.cache < 8*chunk && n == 0 {
				t.Errorf("no batch was assembled in parts with a cache of %d bytes", tc.cache)
			}
			if st := c.Stats(); st.PinnedBytes != 0 {
				t.Errorf("%d bytes still pinned after every batch was released", st.PinnedBytes)
			}
		})
	}
}

// fromDisk is a store whose every chunk the disk tier below the cache
// gives (chunkcache.TieredLoader).
type fromDisk struct{ *reader.Store }

func (d fromDisk) LoadTiered(ctx context.Context, k chunkcache.Key, buf []byte) (bool, error) {
	return true, d.Load(ctx, k, buf)
}
