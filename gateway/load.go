package gateway

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/memory"
)

// warnSmallCache says, at start, when the cache is smaller than what the
// default job needs at once, and what that costs: a batch across a window
// boundary needs the chunks of two windows, and prefetch wants room for
// the windows ahead.
func warnSmallCache(log zerolog.Logger, cfg Config, nodes int, datasets []*catalog.Dataset) {
	w := cfg.Defaults.Window
	if n := nodes; n > 1 {
		// A node of a cluster holds the chunks it owns: about 1/N of each
		// window (owners are rendezvous hashing, the order does not know
		// them), and in most windows no more than that plus twice its
		// square root.
		share := float64(w) / float64(n)
		w = min(w, int(math.Ceil(share+2*math.Sqrt(share))))
	}
	for _, ds := range datasets {
		sizes := make([]int64, ds.Index.NumChunks())
		for c := range sizes {
			sizes[c] = ds.Index.Chunk(c).Size
		}
		slices.Sort(sizes)
		slices.Reverse(sizes)
		largest := func(n int) (sum int64) {
			for _, s := range sizes[:min(n, len(sizes))] {
				sum += s
			}
			return sum
		}
		batchNeeds, prefetchNeeds := largest(2*w), largest((2+cfg.PrefetchWindows)*w)
		switch {
		case cfg.CacheSize < batchNeeds:
			log.Warn().Str("dataset", ds.Name).Int64("cache_bytes", cfg.CacheSize).Int64("batch_needs_bytes", batchNeeds).Int("window", w).
				Msg("the cache is smaller than a batch across a window boundary can need: such batches are assembled a few chunks at a time and read their chunks from the store again; raise --cache-size or lower --window")
		case cfg.CacheSize < prefetchNeeds && cfg.PrefetchConcurrency > 0:
			log.Warn().Str("dataset", ds.Name).Int64("cache_bytes", cfg.CacheSize).Int64("prefetch_needs_bytes", prefetchNeeds).Int("window", w).
				Msg("the cache has no room to prefetch the next windows of the default job: batches will wait for chunks at window boundaries; raise --cache-size or lower --window")
		}
	}
}

// preallocate gives the cache the buffers it will fill: for each dataset,
// as many as its chunks fill its share of the cache size (Dataset.Buffers),
// a share in proportion to its bytes — of the whole cache, so that when
// the datasets fit together with room to spare, a dataset whose chunks
// differ in size (a Parquet file's last chunk of fewer row groups than the
// others) has a buffer for each of them, not only for its bytes' worth of
// its largest chunk's class (measured: 69 buffers for 72 chunks, a cold
// projected epoch faulting the other three in, 0.25 s of the gateway's
// CPU at 12,000 photos).
func preallocate(ctx context.Context, cache *chunkcache.Cache, capacity int64, datasets []*catalog.Dataset, log zerolog.Logger) error {
	start := time.Now()
	// Buffers are sized by each dataset's largest chunk, so a buffer of
	// one dataset serves no other: when the datasets together exceed the
	// cache, each gets a share in proportion to its size — all of it to
	// the first would leave the others' loads faulting fresh memory in
	// (measured: a mixture's cold epoch at 0.6× one dataset's rate with
	// 10 KiB samples).
	var all int64
	for _, ds := range datasets {
		if ds.MaxChunk > 0 {
			all += ds.Index.TotalBytes()
		}
	}
	var total int64
	for _, ds := range datasets {
		if ds.MaxChunk == 0 {
			continue
		}
		share := int64(float64(capacity) * float64(ds.Index.TotalBytes()) / float64(all))
		n := ds.Buffers(share)
		if err := cache.Preallocate(ctx, ds.MaxChunk, n); err != nil {
			return fmt.Errorf("preallocating the chunk cache: %w", err)
		}
		total += int64(n) * ds.MaxChunk
	}
	log.Info().Int64("bytes", total).Float64("took_ms", millis(time.Since(start))).Msg("chunk cache memory preallocated")
	return nil
}

// prefillDecodes puts into the node's pools, touched, the buffers the
// first loads of the datasets served in place read their chunks into
// before decoding them: as many as the loads a cold epoch keeps in
// flight (the prefetch workers' and about as many on demand; 8–12 with
// 4 workers, measured), each of the largest chunk's store extent. Tar
// chunks are read into the cache's buffers, which preallocate touched.
func prefillDecodes(mem *memory.Manager, prefetchWorkers int, datasets []*catalog.Dataset, log zerolog.Logger) {
	var largest int64
	for _, ds := range datasets {
		if ds.InPlace == nil {
			continue
		}
		for c := range ds.Index.NumChunks() {
			largest = max(largest, ds.StoreSize(c))
		}
	}
	if largest == 0 {
		return
	}
	start := time.Now()
	n := mem.Prefill(largest, 2*max(prefetchWorkers, 2))
	log.Info().Int64("bytes", n).Float64("took_ms", millis(time.Since(start))).Msg("decode buffers preallocated")
}
