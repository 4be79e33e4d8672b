package bench

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/minio/minio-go/v7"

	"github.com/brandgw/brand/client"
)

// runBaselines measures (c) one GET per sample and (d) WebDataset-style
// shard streaming, each at its best concurrency.
func (r *runner) runBaselines(ctx context.Context) error {
	tb := r.tb
	objOrder := shuffled(len(tb.objects), r.cfg.Job.Seed, 102)
	r.logf("baseline (c): one GET per sample, %d objects, concurrency %v", len(tb.objects), r.cfg.Concurrency.ObjectReaders)
	err := r.sweepRow(ctx, 0, ConfigObjects, GroupBaselines, "(c) one GET per sample", r.cfg.Concurrency.ObjectReaders, func(ctx context.Context, level int) (pass, error) {
		var body, next atomic.Int64
		p, err := consume(ctx, r.cfg.Job.BatchSize, level, nil, func(ctx context.Context, emit func(item) error) error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(objOrder) {
					return nil
				}
				o := tb.objects[objOrder[i]]
				data, err := r.getObject(ctx, o.key, o.size)
				if err != nil {
					return err
				}
				body.Add(int64(len(data)))
				if err := emit(item{s: &client.Sample{Key: o.key, Files: map[string][]byte{"jpg": data}}}); err != nil {
					return err
				}
			}
		}, &body)
		p.backendBytes = p.bytes // the client reads the store directly
		return p, err
	})
	if err != nil {
		return fmt.Errorf("baseline (c): %w", err)
	}

	keys, _ := tb.chunkKeys()
	shardOrder := shuffled(len(keys), r.cfg.Job.Seed, 103)
	r.logf("baseline (d): WebDataset, %d shards through a %d-sample shuffle buffer, concurrency %v", len(keys), r.cfg.ShuffleBuffer, r.cfg.Concurrency.ShardReaders)
	err = r.sweepRow(ctx, 0, ConfigWebDataset, GroupBaselines, "(d) WebDataset shards + shuffle buffer", r.cfg.Concurrency.ShardReaders, func(ctx context.Context, level int) (pass, error) {
		var body, next atomic.Int64
		p, err := consume(ctx, r.cfg.Job.BatchSize, level, newShuffleBuffer(r.cfg.ShuffleBuffer, r.cfg.Job.Seed), func(ctx context.Context, emit func(item) error) error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(shardOrder) {
					return nil
				}
				c := shardOrder[i]
				if err := r.streamShard(ctx, tb.datasetPrefix+"/"+keys[c], tb.index.Chunk(c).Size, &body, nil, emit); err != nil {
					return err
				}
			}
		}, &body)
		p.backendBytes = p.bytes
		return p, err
	})
	if err != nil {
		return fmt.Errorf("baseline (d): %w", err)
	}
	return nil
}

// getObject reads one whole object with a plain GET, as boto3's get_object
// does for a map-style PyTorch Dataset.
func (r *runner) getObject(ctx context.Context, key string, size int64) ([]byte, error) {
	obj, err := r.tb.mc.GetObject(ctx, r.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", key, err)
	}
	defer obj.Close()
	data, err := readFull(obj, size)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", key, err)
	}
	return data, nil
}

// streamShard reads one shard with a single GET, into a buffer from pool,
// and decodes it into samples, as WebDataset's tar reader does. (d) passes
// no pool: its shuffle buffer lets out a random one of its samples for
// each new one, so a shard's buffer would come back only when the last of
// its samples happened to be drawn, long after the read (measured: half
// the throughput with a pool, the harness spending three times the CPU
// per GB, most of it in the read system call).
func (r *runner) streamShard(ctx context.Context, key string, size int64, body *atomic.Int64, pool *bodyPool, emit func(item) error) error {
	obj, err := r.tb.mc.GetObject(ctx, r.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("GET %s: %w", key, err)
	}
	defer obj.Close()
	if err := decodeBody(countingReader{r: obj, n: body}, size, pool, emit); err != nil {
		return fmt.Errorf("GET %s: %w", key, err)
	}
	return nil
}
