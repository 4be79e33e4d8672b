package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
)

// objectReader is a store that reads whole objects and reports the ranges
// of a read as they arrive (s3backend.S3 and Local are), so that the loader
// can verify them while they are hot in the cache, and the store can ask
// for a whole chunk with its cheapest request.
type objectReader interface {
	ReadObject(ctx context.Context, key, etag string, p []byte, progress func(start, end int)) error
}

// chunkLoader reads whole chunks from their dataset's store and checks every
// sample against the index before the chunk enters the cache, so that no
// response ever carries bytes that fail their CRC32C.
type chunkLoader struct {
	resolve func(chunkcache.Key) (*loadedDataset, int, error)
	timeout time.Duration // bounds one chunk's read, retries included
	metrics *metrics
}

// Load implements chunkcache.Loader.
func (l chunkLoader) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	ds, c, err := l.resolve(k)
	if err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	v := chunkindex.NewVerifier(ds.index, c, buf)
	if or, ok := ds.store.(objectReader); ok {
		err = or.ReadObject(ctx, k.Object, k.ETag, buf, v.Progress)
	} else {
		err = ds.store.ReadRange(ctx, k.Object, k.ETag, 0, buf)
	}
	if err != nil {
		l.metrics.fetchErrors.Inc()
		return fmt.Errorf("reading chunk %s of dataset %s: %w", k.Object, k.Dataset, err)
	}
	l.metrics.fetchSeconds.Observe(time.Since(start).Seconds())
	if id, got := v.Finish(); id >= 0 {
		l.metrics.corruptChunks.Inc()
		return checksumError(ds.index, id, got, k.Object, k.Dataset)
	}
	return nil
}

// checksumError describes a sample that failed its CRC32C.
func checksumError(ix *chunkindex.Index, id int, got uint32, object, dataset string) error {
	_, _, _, want := ix.SampleRange(id)
	return fmt.Errorf("%w: sample %q in chunk %s of dataset %s has CRC32C %08x, the index says %08x; the object was modified or damaged",
		ErrCorrupt, ix.SampleKey(id), object, dataset, got, want)
}

// _ checks that chunkLoader is a chunkcache.Loader.
var _ chunkcache.Loader = chunkLoader{}
