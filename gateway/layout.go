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
	js := jobStream{ds, job.Seed, job.Window}
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
	b := &batchLayout{js: js, job: job, epoch: epoch, batch: m, batches: batches, samples: n, start: start, end: end,
		ids: make([]int, 0, end-start), slot: make([]int, 0, end-start), length: int64(len(chunkindex.EndOfArchive))}
	for pos := start; pos < end; {
		w := e.WindowOf(pos)
		ws := e.WindowStart(w)
		win := o.window(js, epoch, e, w)
		take := min(end, ws+len(win)) - pos
		b.ids = append(b.ids, win[pos-ws:pos-ws+take]...)
		pos += take
	}
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
	b.etag = batchETag(ds, job, epoch, m)
	return b, nil
}

// batchETag names a batch's bytes: the index's identity and every parameter
// that selects the batch. A batch from offset 0 keeps the ETag it had
// before offsets existed, so that caches in front of a gateway stay warm
// across the upgrade.
func batchETag(ds *loadedDataset, job api.Job, epoch, m uint64) string {
	s := fmt.Appendf(nil, "brand-batch-v1|%s|%s|%d|%d|%d|%d|%d|%t|%d|%d",
		ds.index.ID(), ds.name, job.Seed, job.Window, job.BatchSize, job.World, job.Rank, job.DropLast, epoch, m)
	if job.Offset != 0 {
		s = fmt.Appendf(s, "|offset=%d", job.Offset)
	}
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}
