package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
)

// writeClusterBatch serves b on a node of a cluster. Each of the batch's
// chunks is read where its source is (peerSet.source: the owner, or the
// next live node of its ranking): the chunks this node reads are pinned in
// its cache as on a single gateway, and the samples of the others are
// fetched from their nodes, one request per node, checked against their
// CRC32C on arrival. A node that fails is skipped and its samples are
// fetched from the next node of their chunks' rankings, ending with this
// node, which reads the store: a peer's loss costs time, never the batch.
// As on a single gateway, nothing is written before every sample is here
// and verified.
func (g *Gateway) writeClusterBatch(ctx context.Context, w http.ResponseWriter, b *batchLayout, pinned func()) error {
	self := g.peers.self
	src := make([]int, len(b.reqs))
	remote := false
	for s, c := range b.chunks {
		src[s] = g.peers.source(b.js.ds, c, nil)
		remote = remote || src[s] != self
	}
	if !remote {
		g.fetchAhead(b)
		return g.writeLocalBatch(ctx, w, b, pinned)
	}
	data := make([][]byte, len(b.ids))
	g.fetchedAhead(ctx, b, data)
	g.fetchAhead(b)
	skip := map[int]bool{}
	for {
		failed := g.fetchFromPeers(ctx, b, src, data, skip)
		if len(failed) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			writeError(ctx, w, err)
			return err
		}
		for _, i := range failed {
			s := b.slot[i]
			src[s] = g.peers.source(b.js.ds, b.chunks[s], skip)
		}
	}
	var local []int // batch positions read through this node's cache
	var peerBytes int64
	for i, id := range b.ids {
		_, _, length, _ := b.js.ds.index.SampleRange(id)
		if src[b.slot[i]] == self {
			local = append(local, i)
		} else {
			peerBytes += length
		}
	}
	lease, lb, dropped, loads, loadedBytes, err := g.readLocal(ctx, b, local, data)
	pinned()
	if err != nil {
		writeError(ctx, w, err)
		return err
	}
	if lease != nil {
		defer lease.Release()
	}
	g.stats.batch(b.js, b.epoch, b.samples, len(b.ids), lb.chunks, loads, loadedBytes)
	final := b
	for _, k := range dropped {
		final, _ = final.without(k)
	}
	body := &batchBody{parts: make(net.Buffers, 0, len(final.ids)+1), pool: g.coalesce}
	var homeBytes int64
	for i := range b.ids {
		if data[i] == nil {
			continue // a sample of a chunk damaged at rest, left out (skip mode)
		}
		body.parts = append(body.parts, data[i])
		if src[b.slot[i]] == self {
			homeBytes += int64(len(data[i]))
		}
	}
	body.parts = append(body.parts, chunkindex.EndOfArchive[:])
	g.peers.metrics.locality.WithLabelValues("home").Add(float64(homeBytes))
	g.peers.metrics.locality.WithLabelValues("peer").Add(float64(peerBytes))
	if lease != nil {
		defer g.copyOutUnderPressure(body, lease, final.length)()
	}
	return g.writeBody(w, final, body)
}

// readLocal reads the samples at batch positions local through this
// node's cache into data. When their chunks fit in the cache together they
// are pinned, and data points into the lease the caller releases;
// otherwise they are assembled in parts into a copy (lease nil). With
// OnDamagedChunk "skip", the keys of chunks damaged at rest are returned
// and their samples' data left nil.
func (g *Gateway) readLocal(ctx context.Context, b *batchLayout, local []int, data [][]byte) (
	lease *chunkcache.Lease, lb *batchLayout, dropped []chunkcache.Key, loads int, loadedBytes int64, err error) {
	ids := make([]int, len(local))
	for j, i := range local {
		ids[j] = b.ids[i]
	}
	lb = layoutSamples(b.js, b.epoch, ids)
	if len(ids) == 0 {
		return nil, lb, nil, 0, 0, nil
	}
	got, pinnedLayout, err := g.acquire(ctx, lb)
	if errors.Is(err, chunkcache.ErrTooLarge) {
		buf, n, nb, err := g.assemble(ctx, lb)
		if err != nil {
			return nil, lb, nil, 0, 0, err
		}
		var off int64
		for _, i := range local {
			_, _, length, _ := b.js.ds.index.SampleRange(b.ids[i])
			data[i] = buf[off : off+length : off+length]
			off += length
		}
		return nil, lb, nil, n, nb, nil
	}
	if err != nil {
		return nil, lb, nil, 0, 0, err
	}
	// In skip mode the chunks damaged at rest are left out.
	for _, r := range lb.reqs {
		if !slices.ContainsFunc(pinnedLayout.reqs, func(p chunkcache.Request) bool { return p.Key == r.Key }) {
			dropped = append(dropped, r.Key)
		}
	}
	lb = pinnedLayout
	at := make(map[chunkcache.Key]int, len(lb.reqs))
	for s, r := range lb.reqs {
		at[r.Key] = s
	}
	for _, i := range local {
		c, off, length, _ := b.js.ds.index.SampleRange(b.ids[i])
		s, ok := at[b.js.ds.chunkKey(c)]
		if !ok {
			continue // dropped
		}
		data[i] = got.Bytes(s)[off : off+length : off+length]
	}
	n, nb := got.Loaded()
	return got, lb, dropped, n, nb, nil
}

// writeBody sends a complete, verified batch: headers, then body.
func (g *Gateway) writeBody(w http.ResponseWriter, b *batchLayout, body *batchBody) error {
	g.setWriteDeadline(w, b.length)
	h := w.Header()
	b.setHeaders(h)
	b.setMissingHeaders(h)
	h.Set("Content-Type", "application/x-tar")
	h.Set("Content-Length", strconv.FormatInt(b.length, 10))
	w.WriteHeader(http.StatusOK)
	n, err := writeParts(w, body)
	g.metrics.bytesServed.Add(float64(n))
	if err != nil {
		return fmt.Errorf("writing batch: %w", err)
	}
	if n != b.length {
		return fmt.Errorf("writing batch: wrote %d of %d bytes", n, b.length)
	}
	g.metrics.samplesServed.Add(float64(len(b.ids)))
	return nil
}

// writeParts writes body after the status line: through the connection's
// ReadFrom, and so writev, where the ResponseWriter has one.
func writeParts(w http.ResponseWriter, body *batchBody) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(body)
	}
	return body.WriteTo(w)
}
