package gateway

import (
	"context"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/brandgw/brand/chunkcache"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkLoader reads whole chunks from their dataset's store and checks every
// sample against the index before the chunk enters the cache, so that no
// response ever carries bytes that fail their CRC32C.
type chunkLoader struct {
	g *Gateway
}

func (l chunkLoader) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	ds, err := l.g.dataset(k.Dataset)
	if err != nil {
		return err
	}
	c, ok := ds.chunkByKey[k.Object]
	if !ok {
		return fmt.Errorf("%w: chunk %q is not in dataset %q", ErrNotFound, k.Object, k.Dataset)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.g.cfg.FetchTimeout)
	defer cancel()
	if err := ds.store.ReadRange(ctx, k.Object, k.ETag, 0, buf); err != nil {
		l.g.metrics.fetchErrors.Inc()
		return fmt.Errorf("reading chunk %s of dataset %s: %w", k.Object, k.Dataset, err)
	}
	l.g.metrics.fetchSeconds.Observe(time.Since(start).Seconds())
	first, n := ds.index.ChunkRange(c)
	for id := first; id < first+n; id++ {
		_, off, length, want := ds.index.SampleRange(id)
		if got := crc32.Checksum(buf[off:off+length], castagnoli); got != want {
			l.g.metrics.corruptChunks.Inc()
			return fmt.Errorf("%w: sample %q in chunk %s of dataset %s has CRC32C %08x, the index says %08x; the object was modified or damaged",
				ErrCorrupt, ds.index.SampleKey(id), k.Object, k.Dataset, got, want)
		}
	}
	return nil
}
