package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/shuffle"
)

// batchPlan is everything about one batch that the order and the index
// determine, computed before any chunk is read.
type batchPlan struct {
	ds           *served
	job          Job
	epoch, batch uint64
	batches      int // global batches in the epoch for this job
	samples      int // samples in the epoch
	start, end   int // epoch positions of this rank's slice
	ids          []int
	reqs         []chunkcache.Request // distinct chunks, in first-use order
	chunks       []int                // their chunk IDs
	slot         []int                // per sample: its chunk's index in reqs
	length       int64                // response body bytes
	etag         string
}

// request parses the job and epoch from a request.
func (g *Gateway) request(r *http.Request) (Job, uint64, *served, error) {
	job, err := parseJob(r.URL.Query(), g.cfg.Defaults, g.cfg.Limits, g.cfg.DefaultDataset)
	if err != nil {
		return Job{}, 0, nil, err
	}
	epoch, err := parseNumber("epoch", chi.URLParam(r, "epoch"), g.cfg.Limits.MaxEpoch)
	if err != nil {
		return Job{}, 0, nil, err
	}
	ds, err := g.dataset(job.Dataset)
	if err != nil {
		return Job{}, 0, nil, err
	}
	return job, epoch, ds, nil
}

// plan computes a batch: its sample IDs in order, the chunks they live in,
// the exact response length and the ETag.
func (g *Gateway) plan(ds *served, job Job, epoch uint64, batchArg string) (*batchPlan, error) {
	e, err := g.epoch(ds, job.Seed, epoch, job.Window)
	if err != nil {
		return nil, err
	}
	n := e.NumSamples()
	batches := shuffle.NumBatches(n, job.BatchSize, job.World, job.DropLast)
	if batches == 0 {
		return nil, fmt.Errorf("%w: epoch %d has no batches: %d samples with batch_size=%d world=%d drop_last=%t",
			ErrNotFound, epoch, n, job.BatchSize, job.World, job.DropLast)
	}
	m, err := parseNumber("batch", batchArg, uint64(batches-1))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w (epoch %d has %d batches for batch_size=%d world=%d drop_last=%t)",
				err, epoch, batches, job.BatchSize, job.World, job.DropLast)
		}
		return nil, err
	}
	start, end, err := shuffle.BatchRange(n, int(m), job.BatchSize, job.World, job.Rank, job.DropLast)
	if err != nil {
		return nil, err
	}
	p := &batchPlan{ds: ds, job: job, epoch: epoch, batch: m, batches: batches, samples: n, start: start, end: end,
		ids: make([]int, 0, end-start), slot: make([]int, 0, end-start), length: int64(len(chunkindex.EndOfArchive))}
	ek := epochKey{ds.name, job.Seed, epoch, job.Window}
	for pos := start; pos < end; {
		w := e.WindowOf(pos)
		ws := e.WindowStart(w)
		win := g.window(ds, e, ek, w)
		take := min(end, ws+len(win)) - pos
		p.ids = append(p.ids, win[pos-ws:pos-ws+take]...)
		pos += take
	}
	seen := make(map[int]int, 16)
	for _, id := range p.ids {
		c, _, length, _ := ds.index.SampleRange(id)
		i, ok := seen[c]
		if !ok {
			i = len(p.reqs)
			seen[c] = i
			p.reqs = append(p.reqs, ds.request(c))
			p.chunks = append(p.chunks, c)
		}
		p.slot = append(p.slot, i)
		p.length += length
	}
	h := sha256.Sum256(fmt.Appendf(nil, "brand-batch-v1|%s|%s|%d|%d|%d|%d|%d|%t|%d|%d",
		ds.index.ID(), ds.name, job.Seed, job.Window, job.BatchSize, job.World, job.Rank, job.DropLast, epoch, m))
	p.etag = `"` + hex.EncodeToString(h[:16]) + `"`
	return p, nil
}

func (p *batchPlan) setHeaders(h http.Header) {
	h.Set("ETag", p.etag)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("Brand-Dataset", p.ds.name)
	h.Set("Brand-Index", p.ds.index.ID())
	h.Set("Brand-Epoch", strconv.FormatUint(p.epoch, 10))
	h.Set("Brand-Batch", strconv.FormatUint(p.batch, 10))
	h.Set("Brand-Epoch-Batches", strconv.Itoa(p.batches))
	h.Set("Brand-Epoch-Samples", strconv.Itoa(p.samples))
	h.Set("Brand-Batch-Samples", strconv.Itoa(len(p.ids)))
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

// planRequest parses a batch request and plans the batch.
func (g *Gateway) planRequest(r *http.Request) (*batchPlan, error) {
	job, epoch, ds, err := g.request(r)
	if err != nil {
		return nil, err
	}
	return g.plan(ds, job, epoch, chi.URLParam(r, "batch"))
}

func (g *Gateway) handleBatch(w http.ResponseWriter, r *http.Request) {
	p, err := g.planRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ds, job, epoch := p.ds, p.job, p.epoch
	if r.URL.Query().Get("format") == "json" {
		g.writeManifest(w, p)
		return
	}
	if notModified(r, p.etag) {
		g.prefetch.observe(ds, job, epoch, p.end)
		p.setHeaders(w.Header())
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		// Everything a HEAD answers is known from the index: read nothing.
		p.setHeaders(w.Header())
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Length", strconv.FormatInt(p.length, 10))
		w.WriteHeader(http.StatusOK)
		return
	}
	// Until its chunks are pinned, this batch's position is what "now"
	// means to the schedule, however far ahead other requests have gone.
	tok := g.sched.begin(ds, job.Seed, job.Window, epoch, p.start, job.BatchSize*job.World)
	var once sync.Once
	pinned := func() { once.Do(func() { g.sched.finish(tok) }) }
	defer pinned()
	g.prefetch.observe(ds, job, epoch, p.end)
	// Labels let a CPU profile be cut by epoch (go tool pprof -tagfocus
	// epoch=0 shows the cold one); the chunk loads this batch starts
	// inherit them.
	pprof.Do(r.Context(), epochLabels(ds, epoch), func(ctx context.Context) {
		if err := g.writeBatch(ctx, w, p, pinned); err != nil {
			g.log.Debug().Err(err).Msg("batch not completed")
		}
	})
}

// epochLabels are the profiler labels of work done for an epoch.
func epochLabels(ds *served, epoch uint64) pprof.LabelSet {
	return pprof.Labels("dataset", ds.name, "epoch", strconv.FormatUint(epoch, 10))
}

// writeBatch pins the batch's chunks, then writes each sample's tar bytes
// straight from the cached chunk and closes the archive. Nothing is written
// before every chunk is resident and verified, so a failure is always a
// clean error response, never a truncated batch.
// pinned is called once every chunk is pinned.
func (g *Gateway) writeBatch(ctx context.Context, w http.ResponseWriter, p *batchPlan, pinned func()) error {
	lease, err := g.cache.Acquire(ctx, p.reqs)
	if err != nil {
		if errors.Is(err, chunkcache.ErrTooLarge) {
			err = fmt.Errorf("%w; lower batch_size or window, or raise the gateway's --cache-size", err)
		}
		writeError(w, err)
		return err
	}
	defer lease.Release()
	pinned()
	loads, loadedBytes := lease.Loaded()
	g.stats.batch(p.ds, p.epoch, p.chunks, loads, loadedBytes)
	h := w.Header()
	p.setHeaders(h)
	h.Set("Content-Type", "application/x-tar")
	h.Set("Content-Length", strconv.FormatInt(p.length, 10))
	w.WriteHeader(http.StatusOK)
	body := &batchBody{parts: make(net.Buffers, 0, len(p.ids)+1), pool: &g.writeBufs}
	for i, id := range p.ids {
		_, off, length, _ := p.ds.index.SampleRange(id)
		body.parts = append(body.parts, lease.Bytes(p.slot[i])[off:off+length])
	}
	body.parts = append(body.parts, chunkindex.EndOfArchive[:])
	var n int64
	if rf, ok := w.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(body)
	} else {
		n, err = body.WriteTo(w)
	}
	g.metrics.bytesServed.Add(float64(n))
	if err != nil {
		return fmt.Errorf("writing batch: %w", err)
	}
	if n != p.length {
		return fmt.Errorf("writing batch: wrote %d of %d bytes", n, p.length)
	}
	g.metrics.samplesServed.Add(float64(len(p.ids)))
	return nil
}

// batchBody is a batch's response body: each sample's tar member, straight
// from its cached chunk, then the end-of-archive blocks.
//
// The handler hands it to the response's ReadFrom. net/http's HTTP/1.1
// response then flushes the headers and passes it the connection itself,
// and WriteTo gathers the scattered samples into writev calls (net.Buffers):
// no copy in user space and one system call per 1,024 samples. Anywhere
// else (TLS, HTTP/2, a test recorder) WriteTo gets a plain writer and
// coalesces small samples into 1 MiB writes instead. Before this, batches
// were copied into 1 MiB buffers on every path, a pass over every byte
// that was an eighth of the gateway's CPU in a cold epoch
// (docs/benchmarks.md).
type batchBody struct {
	parts net.Buffers
	pool  *sync.Pool // of coalescing buffers
}

// Read copies the body out; net/http reads the first 512 bytes this way
// before it hands over the connection.
func (b *batchBody) Read(p []byte) (int, error) { return b.parts.Read(p) }

// WriteTo writes what Read has not returned yet.
func (b *batchBody) WriteTo(w io.Writer) (int64, error) {
	if _, ok := w.(syscall.Conn); ok {
		// A socket: net.Buffers writes with writev.
		return b.parts.WriteTo(w)
	}
	bw := &batchWriter{w: w, buf: (*b.pool.Get().(*[]byte))[:0], pool: b.pool}
	defer bw.release()
	for _, part := range b.parts {
		if err := bw.write(part); err != nil {
			return bw.n, err
		}
	}
	b.parts = nil
	return bw.n, bw.flush()
}

// Where a batch cannot be written with writev (see batchBody), samples
// smaller than coalesceBelow are copied into a buffer of coalesceBuffer
// bytes and written with their neighbours; larger ones are written
// straight from the cached chunk. A batch is many scattered samples, and
// on the benchmark machine (a VM, where a system call is dear) copying them
// into 1 MiB writes cost less CPU than a write call each, for 10 KiB
// samples and for 100 KiB ones alike (docs/benchmarks.md).
const (
	coalesceBelow  = 1 << 20
	coalesceBuffer = 1 << 20
)

// batchWriter writes a batch's samples to a response, coalescing small ones.
type batchWriter struct {
	w    io.Writer
	buf  []byte
	n    int64 // bytes written to w
	pool *sync.Pool
}

func (b *batchWriter) write(p []byte) error {
	if len(p) >= coalesceBelow {
		if err := b.flush(); err != nil {
			return err
		}
		n, err := b.w.Write(p)
		b.n += int64(n)
		return err
	}
	if len(b.buf)+len(p) > cap(b.buf) {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.buf = append(b.buf, p...)
	return nil
}

func (b *batchWriter) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	n, err := b.w.Write(b.buf)
	b.n += int64(n)
	b.buf = b.buf[:0]
	return err
}

// release returns the buffer to the pool; b must not be used after.
func (b *batchWriter) release() {
	buf := b.buf[:0]
	b.pool.Put(&buf)
	b.buf = nil
}

// manifestSample describes one sample of a batch without its data.
type manifestSample struct {
	ID     int    `json:"id"`
	Key    string `json:"key"`
	Chunk  string `json:"chunk"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	CRC32C uint32 `json:"crc32c"`
}

type manifest struct {
	Dataset   string           `json:"dataset"`
	Index     string           `json:"index"`
	Epoch     uint64           `json:"epoch"`
	Batch     uint64           `json:"batch"`
	Rank      int              `json:"rank"`
	World     int              `json:"world"`
	BatchSize int              `json:"batch_size"`
	Batches   int              `json:"batches"`
	ETag      string           `json:"etag"`
	Bytes     int64            `json:"bytes"`
	Samples   []manifestSample `json:"samples"`
}

func (g *Gateway) handleManifest(w http.ResponseWriter, r *http.Request) {
	p, err := g.planRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g.writeManifest(w, p)
}

func (g *Gateway) writeManifest(w http.ResponseWriter, p *batchPlan) {
	m := manifest{Dataset: p.ds.name, Index: p.ds.index.ID(), Epoch: p.epoch, Batch: p.batch, Rank: p.job.Rank,
		World: p.job.World, BatchSize: p.job.BatchSize, Batches: p.batches, ETag: p.etag, Bytes: p.length,
		Samples: make([]manifestSample, len(p.ids))}
	for i, id := range p.ids {
		s := p.ds.index.Sample(id)
		m.Samples[i] = manifestSample{ID: id, Key: s.Key, Chunk: p.ds.index.Chunk(s.Chunk).Key, Offset: s.Offset, Length: s.Length, CRC32C: s.CRC}
	}
	writeJSON(w, http.StatusOK, m)
}

type epochInfo struct {
	Dataset   string `json:"dataset"`
	Index     string `json:"index"`
	Epoch     uint64 `json:"epoch"`
	Samples   int    `json:"samples"`
	Batches   int    `json:"batches"`
	BatchSize int    `json:"batch_size"`
	World     int    `json:"world"`
	Rank      int    `json:"rank"`
	Window    int    `json:"window"`
	Seed      uint64 `json:"seed"`
	DropLast  bool   `json:"drop_last"`
	Chunks    int    `json:"chunks"`
	Windows   int    `json:"windows"`
	// RankSamples is how many samples this rank receives in the epoch.
	RankSamples int `json:"rank_samples"`
}

func (g *Gateway) handleEpoch(w http.ResponseWriter, r *http.Request) {
	job, epoch, ds, err := g.request(r)
	if err != nil {
		writeError(w, err)
		return
	}
	e, err := g.epoch(ds, job.Seed, epoch, job.Window)
	if err != nil {
		writeError(w, err)
		return
	}
	n := e.NumSamples()
	batches := shuffle.NumBatches(n, job.BatchSize, job.World, job.DropLast)
	rankSamples := 0
	if batches > 0 {
		// Every batch but the last gives the rank a full slice.
		s, end, err := shuffle.BatchRange(n, batches-1, job.BatchSize, job.World, job.Rank, job.DropLast)
		if err == nil {
			rankSamples = (batches-1)*job.BatchSize + end - s
		}
	}
	writeJSON(w, http.StatusOK, epochInfo{Dataset: ds.name, Index: ds.index.ID(), Epoch: epoch, Samples: n,
		Batches: batches, BatchSize: job.BatchSize, World: job.World, Rank: job.Rank, Window: job.Window,
		Seed: job.Seed, DropLast: job.DropLast, Chunks: ds.index.NumChunks(), Windows: e.NumWindows(), RankSamples: rankSamples})
}

type datasetInfo struct {
	Name    string `json:"name"`
	URL     string `json:"url"`
	Index   string `json:"index"`
	Chunks  int    `json:"chunks"`
	Samples int    `json:"samples"`
	Bytes   int64  `json:"bytes"`
	Default bool   `json:"default"`
}

func (g *Gateway) handleDatasets(w http.ResponseWriter, r *http.Request) {
	if !g.Ready() {
		writeError(w, ErrNotReady)
		return
	}
	out := struct {
		Datasets []datasetInfo `json:"datasets"`
	}{Datasets: []datasetInfo{}}
	for _, spec := range g.cfg.Datasets {
		ds, err := g.dataset(spec.Name)
		if err != nil {
			writeError(w, err)
			return
		}
		out.Datasets = append(out.Datasets, datasetInfo{Name: ds.name, URL: ds.url, Index: ds.index.ID(),
			Chunks: ds.index.NumChunks(), Samples: ds.index.NumSamples(), Bytes: ds.index.TotalBytes(),
			Default: ds.name == g.cfg.DefaultDataset})
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSample serves one sample, by key, as a tar of its members.
func (g *Gateway) handleSample(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "dataset" {
			writeError(w, fmt.Errorf("%w: unknown query parameter %q (only dataset applies to /samples)", ErrBadRequest, k))
			return
		}
	}
	name := q.Get("dataset")
	if name == "" {
		name = g.cfg.DefaultDataset
	}
	ds, err := g.dataset(name)
	if err != nil {
		writeError(w, err)
		return
	}
	key := chi.URLParam(r, "*")
	id, ok := ds.index.Lookup(key)
	if !ok {
		writeError(w, fmt.Errorf("%w: no sample with key %q in dataset %q", ErrNotFound, key, ds.name))
		return
	}
	c, off, length, _ := ds.index.SampleRange(id)
	lease, err := g.cache.Acquire(r.Context(), []chunkcache.Request{ds.request(c)})
	if err != nil {
		writeError(w, err)
		return
	}
	defer lease.Release()
	h := w.Header()
	h.Set("Content-Type", "application/x-tar")
	h.Set("Content-Length", strconv.FormatInt(length+int64(len(chunkindex.EndOfArchive)), 10))
	h.Set("Brand-Dataset", ds.name)
	h.Set("Brand-Index", ds.index.ID())
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	n, err := w.Write(lease.Bytes(0)[off : off+length])
	if err == nil {
		var m int
		m, err = w.Write(chunkindex.EndOfArchive[:])
		n += m
	}
	g.metrics.bytesServed.Add(float64(n))
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		g.log.Debug().Err(err).Msg("sample not completed")
	}
}
