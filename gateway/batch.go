package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
)

// handleBatch serves GET and HEAD /epoch/{epoch}/batch/{batch}: the batch
// as a tar stream, or its manifest with format=json.
func (g *Gateway) handleBatch(w http.ResponseWriter, r *http.Request) {
	b, q, err := g.layoutRequest(r, jobParams)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	if q.format == "json" {
		writeManifest(w, b)
		return
	}
	if notModified(r, b.etag) {
		g.advance(b)
		b.setHeaders(w.Header())
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		// Everything a HEAD answers is known from the index: read nothing.
		b.setHeaders(w.Header())
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Length", strconv.FormatInt(b.length, 10))
		w.WriteHeader(http.StatusOK)
		return
	}
	// Until its chunks are pinned, this batch's position is what "now"
	// means to the schedule, however far ahead other requests have gone.
	tok, err := g.sched.begin(b.js, b.epoch, b.start, b.job.BatchSize*b.job.World)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	var once sync.Once
	pinned := func() { once.Do(func() { g.sched.finish(tok) }) }
	defer pinned()
	g.advance(b)
	// Labels let a CPU profile be cut by epoch (go tool pprof -tagfocus
	// epoch=0 shows the cold one); the chunk loads this batch starts
	// inherit them.
	pprof.Do(r.Context(), epochLabels(b.js.ds, b.epoch), func(ctx context.Context) {
		if err := g.writeBatch(ctx, w, b, pinned); err != nil {
			g.log.Debug().Err(err).Msg("batch not completed")
		}
	})
}

// layoutRequest parses a batch request and lays the batch out.
func (g *Gateway) layoutRequest(r *http.Request, accepted []string) (*batchLayout, query, error) {
	q, ds, epoch, err := g.parseEpochRequest(r, accepted)
	if err != nil {
		return nil, q, err
	}
	b, err := layoutBatch(g.orders, ds, q.job, epoch, chi.URLParam(r, "batch"))
	return b, q, err
}

// advance moves the batch's stream forward and queues the chunks it will
// need next.
func (g *Gateway) advance(b *batchLayout) {
	st, moved := g.sched.advance(b.js, b.epoch, b.end)
	if moved && g.prefetch != nil {
		g.prefetch.enqueue(b.js, g.ownedUses(b.js, g.sched.upcoming(st, g.cfg.PrefetchWindows)))
	}
}

// epochLabels are the profiler labels of work done for an epoch.
func epochLabels(ds *loadedDataset, epoch uint64) pprof.LabelSet {
	return pprof.Labels("dataset", ds.name, "epoch", strconv.FormatUint(epoch, 10))
}

func (b *batchLayout) setHeaders(h http.Header) {
	h.Set("ETag", b.etag)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set(api.HeaderDataset, b.js.ds.name)
	h.Set(api.HeaderIndex, b.js.ds.index.ID())
	h.Set(api.HeaderEpoch, strconv.FormatUint(b.epoch, 10))
	h.Set(api.HeaderBatch, strconv.FormatUint(b.batch, 10))
	h.Set(api.HeaderEpochBatches, strconv.Itoa(b.batches))
	h.Set(api.HeaderEpochSamples, strconv.Itoa(b.samples))
	h.Set(api.HeaderBatchSamples, strconv.Itoa(len(b.ids)))
	if b.job.Offset != 0 {
		h.Set(api.HeaderOffset, strconv.Itoa(b.job.Offset))
	}
}

// notModified answers a matching If-None-Match without reading any chunk.
func notModified(r *http.Request, etag string) bool {
	for _, t := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if t = strings.TrimSpace(t); t == etag || t == "*" {
			return true
		}
	}
	return false
}

// maxCopiedBatches bounds the batches copied out of the cache at once (see
// mustCopyOut), so that copies cost at most that many batches' bytes.
const maxCopiedBatches = 16

// mustCopyOut reports whether a batch should be written from a copy rather
// than from its pinned chunks: when the cache is under pressure — other
// requests wait for room, or responses pin more than half of it. Writing
// from the chunks saves a copy (docs/benchmarks.md), but holds them for as
// long as the client takes to read: under pressure a client that stops
// reading would keep other batches out of the cache until its write
// deadline.
func (g *Gateway) mustCopyOut() bool {
	st := g.cache.Stats()
	return st.Waiting > 0 || st.PinnedBytes > g.cfg.CacheSize/2
}

// copyOutUnderPressure writes body from a copy and releases lease at once
// when the cache is under pressure (mustCopyOut) and fewer than
// maxCopiedBatches copies exist: the client may read slowly, and its
// chunks go back to the cache now. It returns what to call once the body
// is written.
func (g *Gateway) copyOutUnderPressure(body *batchBody, lease *chunkcache.Lease, n int64) (done func()) {
	if !g.mustCopyOut() {
		return func() {}
	}
	select {
	case g.copySlots <- struct{}{}:
	default:
		return func() {}
	}
	copied := make([]byte, 0, n)
	for _, p := range body.parts {
		copied = append(copied, p...)
	}
	body.parts = net.Buffers{copied}
	lease.Release()
	g.metrics.batchesCopied.Inc()
	return func() { <-g.copySlots }
}

// setWriteDeadline bounds the writing of a response of n bytes: the
// configured timeout, plus the time to send n bytes at the minimum rate.
func (g *Gateway) setWriteDeadline(w http.ResponseWriter, n int64) {
	d := g.cfg.WriteTimeout + time.Duration(float64(n)/float64(g.cfg.MinWriteRate)*float64(time.Second))
	// Not every ResponseWriter supports deadlines (a test recorder does
	// not); without one the server's own timeouts apply.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
}

// writeBatch pins the batch's chunks, then writes each sample's tar bytes
// straight from the cached chunk and closes the archive. Nothing is written
// before every chunk is resident and verified, so a failure is always a
// clean error response, never a truncated batch. pinned is called once
// every chunk is pinned.
func (g *Gateway) writeBatch(ctx context.Context, w http.ResponseWriter, b *batchLayout, pinned func()) error {
	if g.peers != nil {
		return g.writeClusterBatch(ctx, w, b, pinned)
	}
	return g.writeLocalBatch(ctx, w, b, pinned)
}

// writeLocalBatch serves b from this gateway's own cache.
func (g *Gateway) writeLocalBatch(ctx context.Context, w http.ResponseWriter, b *batchLayout, pinned func()) error {
	lease, b, err := g.acquire(ctx, b)
	if errors.Is(err, chunkcache.ErrTooLarge) {
		return g.writeBatchInParts(ctx, w, b, pinned)
	}
	if err != nil {
		writeError(ctx, w, err)
		return err
	}
	defer lease.Release()
	pinned()
	loads, loadedBytes := lease.Loaded()
	g.stats.batch(b.js, b.epoch, b.samples, len(b.ids), b.chunks, loads, loadedBytes)
	body := &batchBody{parts: make(net.Buffers, 0, len(b.ids)+1), pool: g.coalesce}
	for i, id := range b.ids {
		_, off, length, _ := b.js.ds.index.SampleRange(id)
		body.parts = append(body.parts, lease.Bytes(b.slot[i])[off:off+length])
	}
	body.parts = append(body.parts, chunkindex.EndOfArchive[:])
	defer g.copyOutUnderPressure(body, lease, b.length)()
	if g.peers != nil {
		g.peers.metrics.locality.WithLabelValues("home").Add(float64(b.length - int64(len(chunkindex.EndOfArchive))))
	}
	return g.writeBody(w, b, body)
}
