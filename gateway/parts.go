package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/brandgw/brand/chunkindex"
)

// A batch whose chunks do not all fit in the cache at once — a small cache,
// a large batch, a batch across a window boundary — is assembled in parts:
// its chunks are pinned a group at a time, each group no larger than half
// the cache (or one chunk, if a chunk is larger than that), and the
// samples are copied out of each group into the response before the next
// is pinned. A chunk larger than the whole cache is read through, into a
// buffer of its own, and checked as any load is. The batch is complete and
// verified before its status line is sent, as every batch is: slower, and
// it costs a copy of the batch, but never partial.
//
// At most maxPartBatches batches are assembled at once, so the copies
// cost at most that many batches' bytes beside the cache.
const maxPartBatches = 2

// writeBatchInParts serves b, whose chunks do not fit in the cache
// together. pinned is called once the last group is released.
func (g *Gateway) writeBatchInParts(ctx context.Context, w http.ResponseWriter, b *batchLayout, pinned func()) error {
	select {
	case g.partSlots <- struct{}{}:
		defer func() { <-g.partSlots }()
	case <-ctx.Done():
		writeError(ctx, w, ctx.Err())
		return ctx.Err()
	}
	body, loads, loadedBytes, err := g.assemble(ctx, b)
	pinned()
	if err != nil {
		writeError(ctx, w, err)
		return err
	}
	g.metrics.batchesInParts.Inc()
	g.stats.batch(b.js, b.epoch, b.samples, len(b.ids), b.chunks, loads, loadedBytes)
	g.setWriteDeadline(w, b.length)
	h := w.Header()
	b.setHeaders(h)
	h.Set("Content-Type", "application/x-tar")
	h.Set("Content-Length", strconv.FormatInt(b.length, 10))
	w.WriteHeader(http.StatusOK)
	n, err := w.Write(body)
	g.metrics.bytesServed.Add(float64(n))
	if err != nil {
		return fmt.Errorf("writing batch: %w", err)
	}
	g.metrics.samplesServed.Add(float64(len(b.ids)))
	return nil
}

// assemble copies b's samples, group by group, into one buffer followed by
// the end-of-archive blocks.
func (g *Gateway) assemble(ctx context.Context, b *batchLayout) (body []byte, loads int, loadedBytes int64, err error) {
	body = make([]byte, b.length)
	at := make([]int64, len(b.ids)) // each sample's offset in body
	var pos int64
	for i, id := range b.ids {
		at[i] = pos
		_, _, length, _ := b.js.ds.index.SampleRange(id)
		pos += length
	}
	copy(body[pos:], chunkindex.EndOfArchive[:])
	// copyOut copies the samples of the chunks in reqs[from:to] from their
	// bytes, data(k) being the bytes of reqs[from+k].
	copyOut := func(from, to int, data func(k int) []byte) {
		for i, id := range b.ids {
			if s := b.slot[i]; s >= from && s < to {
				_, off, length, _ := b.js.ds.index.SampleRange(id)
				copy(body[at[i]:at[i]+length], data(s - from)[off:off+length])
			}
		}
	}
	limit := max(g.cache.Capacity()/2, 1)
	for from := 0; from < len(b.reqs); {
		to, size := from, int64(0)
		for to < len(b.reqs) && (to == from || size+b.reqs[to].Size <= limit) {
			size += b.reqs[to].Size
			to++
		}
		if size > g.cache.Capacity() {
			// One chunk larger than the whole cache: read it through.
			r := b.reqs[from]
			buf := make([]byte, r.Size)
			if err := g.loader.Load(ctx, r.Key, buf); err != nil {
				return nil, 0, 0, err
			}
			loads++
			loadedBytes += r.Size
			copyOut(from, to, func(int) []byte { return buf })
		} else {
			lease, err := g.cache.Acquire(ctx, b.reqs[from:to])
			if err != nil {
				return nil, 0, 0, err
			}
			n, nb := lease.Loaded()
			loads += n
			loadedBytes += nb
			copyOut(from, to, lease.Bytes)
			lease.Release()
		}
		from = to
	}
	return body, loads, loadedBytes, nil
}
