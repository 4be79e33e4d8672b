package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
)

// batchLayout is everything about one batch that the order and the index
// determine, computed before any chunk is read: which samples, in which
// chunks, at which bytes, and the response's length and ETag.
type batchLayout struct {
	js           jobStream
	job          api.Job
	epoch, batch uint64
	batches      int // global batches from the job's offset on
	samples      int // samples in the epoch
	start, end   int // epoch positions of this rank's slice
	ids          []int
	reqs         []chunkcache.Request // distinct chunks, in first-use order
	chunks       []int                // their chunk IDs
	slot         []int                // per sample: its chunk's index in reqs
	length       int64                // response body bytes
	etag         string
	missing      []int  // samples left out because their chunk is damaged (skip mode)
	full         string // with missing samples: the full batch's ETag
}

// layoutBatch lays out batch batchArg (a path segment, checked here against
// the epoch's batch count) of an epoch of a job over ds.
func layoutBatch(o *orders, ds *loadedDataset, job api.Job, epoch uint64, batchArg string) (*batchLayout, error) {
	js := streamOf(ds, job)
	e, err := o.epoch(js, epoch)
	if err != nil {
		return nil, err
	}
	n := e.NumSamples()
	if job.Offset > n {
		return nil, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d samples", ErrNotFound, job.Offset, epoch, n)
	}
	batches := job.NumBatches(n)
	if batches == 0 {
		return nil, fmt.Errorf("%w: epoch %d has no batches: %d samples from offset %d with batch_size=%d world=%d drop_last=%t",
			ErrNotFound, epoch, n, job.Offset, job.BatchSize, job.World, job.DropLast)
	}
	m, err := parseNumber("batch", batchArg, uint64(batches-1))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w (epoch %d has %d batches for batch_size=%d world=%d drop_last=%t offset=%d)",
				err, epoch, batches, job.BatchSize, job.World, job.DropLast, job.Offset)
		}
		return nil, err
	}
	start, end, err := job.BatchRange(n, int(m))
	if err != nil {
		return nil, err
	}
	var ids []int
	if o.nodes > 1 && !job.NoLocality && job.World > 1 {
		ids, err = o.assigned(js, e, epoch, job, n, int(m))
		if err != nil {
			return nil, err
		}
	} else {
		ids = o.appendRange(nil, js, e, epoch, start, end)
	}
	b := layoutSamples(js, epoch, ids)
	b.job, b.batch, b.batches, b.samples, b.start, b.end = job, m, batches, n, start, end
	b.etag = batchETag(ds, job, epoch, m, o.nodes)
	return b, nil
}

// layoutSamples lays out samples ids of a stream's epoch: their chunks,
// in first-use order, and the bytes they take as a tar stream.
func layoutSamples(js jobStream, epoch uint64, ids []int) *batchLayout {
	ds := js.ds
	b := &batchLayout{js: js, epoch: epoch, ids: ids, slot: make([]int, 0, len(ids)),
		length: int64(len(chunkindex.EndOfArchive))}
	seen := make(map[int]int, 16)
	for _, id := range b.ids {
		c, _, length, _ := ds.index.SampleRange(id)
		i, ok := seen[c]
		if !ok {
			i = len(b.reqs)
			seen[c] = i
			b.reqs = append(b.reqs, ds.chunkRequest(c))
			b.chunks = append(b.chunks, c)
		}
		b.slot = append(b.slot, i)
		b.length += length
	}
	return b
}

// batchETag names a batch's bytes: the index's identity and every parameter
// that selects the batch. A batch from offset 0 keeps the ETag it had
// before offsets existed, so that caches in front of a gateway stay warm
// across the upgrade.
//
// In a cluster the order depends on the node count, and the batch on
// whether locality-aware assignment is on; both are then named. So is an
// importance snapshot an epoch is drawn from.
func batchETag(ds *loadedDataset, job api.Job, epoch, m uint64, nodes int) string {
	s := fmt.Appendf(nil, "brand-batch-v1|%s|%s|%d|%d|%d|%d|%d|%t|%d|%d",
		ds.index.ID(), ds.name, job.Seed, job.Window, job.BatchSize, job.World, job.Rank, job.DropLast, epoch, m)
	if job.Offset != 0 {
		s = fmt.Appendf(s, "|offset=%d", job.Offset)
	}
	if nodes > 1 {
		s = fmt.Appendf(s, "|nodes=%d|locality=%t", nodes, !job.NoLocality)
	}
	if imp := job.Importance; imp.Version != "" {
		s = fmt.Appendf(s, "|importance=%s|%s|%d", imp.Job, imp.Version, imp.Hot)
	}
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}
