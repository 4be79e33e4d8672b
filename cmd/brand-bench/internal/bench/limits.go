package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"golang.org/x/sync/errgroup"
)

// pass is what one measured read of the data delivered.
type pass struct {
	samples      int64
	bytes        int64 // HTTP body bytes the client received
	backendBytes int64 // bytes read from the store on the client's behalf
	elapsed      time.Duration
	waits        []time.Duration
	cpu          CPUUse // of every process, over the pass
}

// shuffled returns a seeded permutation of 0..n-1: the same run always
// reads in the same order, and the limits and baselines read in a
// different order from each other only because their data differs.
func shuffled(n int, seed, stream uint64) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	r := rand.New(rand.NewPCG(seed, stream))
	r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// sweep runs measure at each concurrency level and returns the best pass
// by samples/s, its level, and every level's figures.
func sweep(ctx context.Context, cm cpuMeter, levels []int, measure func(ctx context.Context, level int) (pass, error)) (pass, int, []SweepPoint, error) {
	var best pass
	bestLevel := 0
	var points []SweepPoint
	for _, level := range levels {
		mark := cm.mark()
		p, err := measure(ctx, level)
		if err != nil {
			return pass{}, 0, nil, fmt.Errorf("concurrency %d: %w", level, err)
		}
		p.cpu = cm.since(mark)
		sec := p.elapsed.Seconds()
		points = append(points, SweepPoint{Concurrency: level, SamplesPerSec: float64(p.samples) / sec, MBPerSec: float64(p.bytes) / sec / 1e6})
		if bestLevel == 0 || float64(p.samples)/sec > float64(best.samples)/best.elapsed.Seconds() {
			best, bestLevel = p, level
		}
	}
	return best, bestLevel, points, nil
}

// sweepRow measures a configuration at each concurrency level, bounded by
// the configuration timeout, and adds its best level as a row. serverPid is
// the process serving the client, if not this one.
func (r *runner) sweepRow(ctx context.Context, serverPid int, config, group, label string, levels []int, measure func(ctx context.Context, level int) (pass, error)) error {
	return r.measured(ctx, func(ctx context.Context) error {
		var (
			best   pass
			level  int
			points []SweepPoint
			err    error
		)
		pprof.Do(ctx, pprof.Labels("config", config), func(ctx context.Context) {
			best, level, points, err = sweep(ctx, r.cpuMeter(serverPid), levels, measure)
		})
		if err != nil {
			return err
		}
		row := newRow(config, group, label, best)
		row.Concurrency, row.Sweep = level, points
		r.add(row)
		return nil
	})
}

// streamThrough measures streaming the chunks from a server at base;
// upstream reports the bytes it has read from the store so far.
func (r *runner) streamThrough(hc *http.Client, base string, keys []string, order []int, upstream func(context.Context) (int64, error)) func(ctx context.Context, level int) (pass, error) {
	return func(ctx context.Context, level int) (pass, error) {
		before, err := upstream(ctx)
		if err != nil {
			return pass{}, err
		}
		p, err := streamChunks(ctx, hc, base, keys, order, level, r.cfg.Job.BatchSize)
		if err != nil {
			return pass{}, err
		}
		after, err := upstream(ctx)
		p.backendBytes = after - before
		return p, err
	}
}

// serveLoopback serves h on a fresh 127.0.0.1 port until stop is called.
func serveLoopback(h http.Handler) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func() {
		_ = srv.Close()
		<-done
	}, nil
}

// streamChunks reads the chunks in order with readers concurrent GETs of
// base/<key>, decoding each body into samples for one consuming loop.
func streamChunks(ctx context.Context, hc *http.Client, base string, keys []string, order []int, readers, batchSize int) (pass, error) {
	var body atomic.Int64
	var next atomic.Int64
	var pool bodyPool
	return consume(ctx, batchSize, readers, nil, func(ctx context.Context, emit func(item) error) error {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(order) {
				return nil
			}
			if err := getTar(ctx, hc, base+"/"+keys[order[i]], &body, &pool, emit); err != nil {
				return err
			}
		}
	}, &body)
}

// consume runs readers copies of read, each handing samples to emit, and
// meters the samples in one consuming loop, as a training loop takes them
// from a data loader's queue. With a shuffle buffer the loop draws samples
// from it at random, as WebDataset's shuffle stage does.
//
// The loop is done with a sample once it has counted it (or, with a shuffle
// buffer, let it out), and then releases it, as a training loop releases a
// batch of Brand's client once it has read it.
func consume(ctx context.Context, batchSize, readers int, shuf *shuffleBuffer, read func(ctx context.Context, emit func(item) error) error, body *atomic.Int64) (pass, error) {
	ch := make(chan item, 4*batchSize)
	g, gctx := errgroup.WithContext(ctx)
	emit := func(s item) error {
		select {
		case ch <- s:
			return nil
		case <-gctx.Done():
			return gctx.Err()
		}
	}
	m := newMeter(batchSize)
	for range readers {
		g.Go(func() error { return read(gctx, emit) })
	}
	errc := make(chan error, 1)
	go func() {
		errc <- g.Wait()
		close(ch)
	}()
	for s := range ch {
		if shuf != nil {
			var ok bool
			if s, ok = shuf.push(s); !ok {
				continue
			}
		}
		m.samplesArrived(1)
		s.done()
	}
	for shuf != nil {
		s, ok := shuf.pop()
		if !ok {
			break
		}
		m.samplesArrived(1)
		s.done()
	}
	elapsed := m.stop()
	if err := <-errc; err != nil {
		return pass{}, err
	}
	return pass{samples: m.samples, bytes: body.Load(), elapsed: elapsed, waits: m.waits}, nil
}

// shuffleBuffer is WebDataset's shuffle stage: it fills up to its size,
// then hands out a random resident sample for every new one.
type shuffleBuffer struct {
	size int
	buf  []item
	rng  *rand.Rand
}

func newShuffleBuffer(size int, seed uint64) *shuffleBuffer {
	return &shuffleBuffer{size: size, buf: make([]item, 0, size), rng: rand.New(rand.NewPCG(seed, 104))}
}

// push adds s and returns the sample it lets out; ok is false while the
// buffer fills.
func (b *shuffleBuffer) push(s item) (out item, ok bool) {
	if len(b.buf) < b.size {
		b.buf = append(b.buf, s)
		return item{}, false
	}
	j := b.rng.IntN(len(b.buf))
	out = b.buf[j]
	b.buf[j] = s
	return out, true
}

// pop drains the buffer in random order; ok is false when it is empty.
func (b *shuffleBuffer) pop() (out item, ok bool) {
	n := len(b.buf)
	if n == 0 {
		return item{}, false
	}
	j := b.rng.IntN(n)
	out = b.buf[j]
	b.buf[j] = b.buf[n-1]
	b.buf[n-1] = item{}
	b.buf = b.buf[:n-1]
	return out, true
}

// getTar GETs a tar object and decodes it into samples, counting its body
// bytes; the body is read into a buffer from pool.
func getTar(ctx context.Context, hc *http.Client, url string, body *atomic.Int64, pool *bodyPool, emit func(item) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	cr := countingReader{r: resp.Body, n: body}
	if err := decodeBody(cr, resp.ContentLength, pool, emit); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// s3Proxy is limit (a): a plain reverse proxy that forwards GET /<key> to
// the chunk object in S3 (by a presigned URL, so it need not sign each
// request itself) and streams the body back unchanged.
type s3Proxy struct {
	store    *s3backend.S3
	tr       *http.Transport
	pool     *bufferPool
	upstream atomic.Int64 // body bytes read from S3
}

func (p *s3Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, err := p.store.PresignGet(r.Context(), strings.TrimPrefix(r.URL.Path, "/"), time.Hour)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = u
			pr.Out.Host = ""
		},
		Transport:  p.tr,
		BufferPool: p.pool,
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = countingBody{countingReader{r: resp.Body, n: &p.upstream}, resp.Body}
			return nil
		},
	}
	rp.ServeHTTP(w, r)
}

// bufferPool lends the proxy 256 KiB copy buffers: large enough that
// copying is not the proxy's bottleneck.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return make([]byte, 256<<10) }}}
}

func (b *bufferPool) Get() []byte  { return b.p.Get().([]byte) }
func (b *bufferPool) Put(v []byte) { b.p.Put(v) }

// memServer is limit (b): a plain Go HTTP server that serves each chunk's
// bytes from memory in one write. Asked for /<key>?first=i&count=n it
// serves samples i..i+n-1 of the chunk instead, a contiguous slice, closed
// as a tar: limit (b′), requests of a batch's size without a batch's
// assembly.
type memServer struct {
	ix     *chunkindex.Index
	chunks map[string]int // key → chunk
	bufs   [][]byte
}

// load reads every chunk of ix into memory.
func (m *memServer) load(ctx context.Context, store *s3backend.S3, ix *chunkindex.Index) error {
	m.ix, m.chunks, m.bufs = ix, make(map[string]int, ix.NumChunks()), make([][]byte, ix.NumChunks())
	for c := range ix.NumChunks() {
		ch := ix.Chunk(c)
		buf := make([]byte, ch.Size)
		if err := store.ReadObject(ctx, ch.Key, ch.ETag, buf, nil); err != nil {
			return fmt.Errorf("loading %s: %w", ch.Key, err)
		}
		m.chunks[ch.Key], m.bufs[c] = c, buf
	}
	return nil
}

func (m *memServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/"+shuffledPath {
		m.serveSamples(w, r)
		return
	}
	c, ok := m.chunks[strings.TrimPrefix(r.URL.Path, "/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b := m.bufs[c]
	var tail []byte
	if q := r.URL.Query(); q.Has("first") {
		first, n := m.ix.ChunkRange(c)
		i, err1 := strconv.Atoi(q.Get("first"))
		k, err2 := strconv.Atoi(q.Get("count"))
		if err1 != nil || err2 != nil || i < 0 || k < 1 || i+k > n {
			http.Error(w, "bad sample range", http.StatusBadRequest)
			return
		}
		_, from, _, _ := m.ix.SampleRange(first + i)
		_, off, length, _ := m.ix.SampleRange(first + i + k - 1)
		b, tail = b[from:off+length], chunkindex.EndOfArchive[:]
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+len(tail)))
	_, _ = w.Write(b)
	if tail != nil {
		_, _ = w.Write(tail)
	}
}

// shuffledPath is where memServer answers limit (b″): /samples?ids=i,j,...
// (global sample IDs).
const shuffledPath = "samples"

// serveSamples answers limit (b″): the samples named by ids, in that
// order, closed as a tar, written as Brand's gateway writes a batch — a
// part a sample straight from the chunks in memory, gathered into writev
// calls — with nothing else of a gateway's work: the ceiling of a
// shuffled order's batches, whose samples lie scattered over the cache
// where (b′)'s lie side by side.
func (m *memServer) serveSamples(w http.ResponseWriter, r *http.Request) {
	list := r.URL.Query().Get("ids")
	parts := make(net.Buffers, 0, strings.Count(list, ",")+2)
	n := int64(len(chunkindex.EndOfArchive))
	for s := range strings.SplitSeq(list, ",") {
		id, err := strconv.Atoi(s)
		if err != nil || id < 0 || id >= m.ix.NumSamples() {
			http.Error(w, "bad sample ID", http.StatusBadRequest)
			return
		}
		c, off, length, _ := m.ix.SampleRange(id)
		parts = append(parts, m.bufs[c][off:off+length])
		n += length
	}
	parts = append(parts, chunkindex.EndOfArchive[:])
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	if rf, ok := w.(io.ReaderFrom); ok {
		_, _ = rf.ReadFrom(&gathered{parts})
		return
	}
	_, _ = parts.WriteTo(w)
}

// gathered is a body of scattered parts that net/http's ReadFrom hands
// the connection itself, so that net.Buffers writes it with writev, as
// internal/batch/respond's body does.
type gathered struct{ parts net.Buffers }

func (g *gathered) Read(p []byte) (int, error)         { return g.parts.Read(p) }
func (g *gathered) WriteTo(w io.Writer) (int64, error) { return g.parts.WriteTo(w) }

// shuffledBatches lists limit (b″)'s requests: a warm epoch's batches in
// the order the gateway serves them to one rank (shuffle.NewEpoch of the
// job's seed and window, epoch 1), batchSize samples each.
func shuffledBatches(ix *chunkindex.Index, seed uint64, window, batchSize int) ([]string, error) {
	counts := make([]int, ix.NumChunks())
	for c := range counts {
		_, counts[c] = ix.ChunkRange(c)
	}
	e, err := shuffle.NewEpoch(counts, seed, 1, window)
	if err != nil {
		return nil, err
	}
	var out []string
	ids := make([]int, 0, batchSize)
	var b strings.Builder
	for start := 0; start < e.NumSamples(); start += batchSize {
		ids = e.AppendRange(ids[:0], start, min(start+batchSize, e.NumSamples()))
		b.Reset()
		b.WriteString(shuffledPath + "?ids=")
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(id))
		}
		out = append(out, b.String())
	}
	return out, nil
}

// identity is 0, 1, ..., n-1: requests read in the order listed.
func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// batchSlices lists, for chunks in order, each chunk's samples in slices of
// batchSize as memServer's requests for them.
func batchSlices(ix *chunkindex.Index, order []int, batchSize int) []string {
	var out []string
	for _, c := range order {
		_, n := ix.ChunkRange(c)
		for i := 0; i < n; i += batchSize {
			out = append(out, fmt.Sprintf("%s?first=%d&count=%d", ix.Chunk(c).Key, i, min(batchSize, n-i)))
		}
	}
	return out
}

// The limits a run measures, each as a server process of its own.
var limitRows = []struct {
	kind, config, label string
}{
	{LimitProxy, ConfigProxy, "(a) limit: reverse proxy, whole chunks"},
	{LimitStoreForward, ConfigStoreForward, "(a') limit: store-and-forward, whole chunks"},
	{LimitStoreVerify, ConfigStoreVerify, "(a'') limit: store-and-forward + CRC32C check"},
	{LimitMemory, ConfigMemory, "(b) limit: HTTP server from memory"},
}

// runLimits measures (a), (a′), (a″), (b) and (b′), each at its best client
// concurrency and each served by a process of its own (ServeLimit), and
// then (a) once more with the proxy in this process, to show what the
// process boundary costs.
func (r *runner) runLimits(ctx context.Context) error {
	keys, _ := r.tb.chunkKeys()
	order := shuffled(len(keys), r.cfg.Job.Seed, 101)
	hc := &http.Client{Transport: newTransport(64)}
	defer hc.CloseIdleConnections()

	for _, l := range limitRows {
		if err := r.runLimit(ctx, hc, l.kind, l.config, l.label, keys, order); err != nil {
			return err
		}
	}

	proxy := &s3Proxy{store: r.tb.store, tr: newTransport(64), pool: newBufferPool()}
	base, stop, err := serveLoopback(proxy)
	if err != nil {
		return err
	}
	defer proxy.tr.CloseIdleConnections()
	defer stop()
	r.logf("limit (a) in this process: reverse proxy streaming whole chunks, concurrency %v", r.cfg.Concurrency.StreamReaders)
	err = r.sweepRow(ctx, 0, ConfigProxyInProcess, GroupLimits, "(a) in the client's process", r.cfg.Concurrency.StreamReaders,
		r.streamThrough(hc, base, keys, order, func(context.Context) (int64, error) { return proxy.upstream.Load(), nil }))
	if err != nil {
		return fmt.Errorf("limit (a) in this process: %w", err)
	}
	return nil
}

// runLimit starts the limit server of kind, measures it at each client
// concurrency and stops it.
func (r *runner) runLimit(ctx context.Context, hc *http.Client, kind, config, label string, keys []string, order []int) error {
	srv := r.tb.srv
	logPath := filepath.Join(r.cfg.WorkDir, "limit-"+kind+".log")
	args := []string{"limit",
		"--kind", kind,
		"--listen", "127.0.0.1:0",
		"--dataset", "s3://" + r.cfg.Bucket + "/" + r.tb.datasetPrefix,
		"--s3-endpoint", srv.URL(),
		"--s3-region", "us-east-1",
	}
	r.logf("limit %s: starting %s; log %s", label[:strings.IndexByte(label, ' ')], kind, logPath)
	p, err := startGateway(ctx, r.cfg.Processes.LimitBinary, args, gatewayEnv(srv.AccessKey, srv.SecretKey), logPath)
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	defer p.kill()
	if err := r.pinServer(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	r.logf("  measuring at concurrency %v", r.cfg.Concurrency.StreamReaders)
	err = r.sweepRow(ctx, p.cmd.Process.Pid, config, GroupLimits, label, r.cfg.Concurrency.StreamReaders,
		r.streamThrough(hc, p.base, keys, order, p.limitUpstream))
	if err == nil && kind == LimitMemory {
		// (b′): the same server and bytes, in requests of a batch's size.
		slices := batchSlices(r.tb.index, order, r.cfg.Job.BatchSize)
		ident := identity(len(slices))
		r.logf("limit (b'): the same, %d requests of %d samples; concurrency %v", len(slices), r.cfg.Job.BatchSize, r.cfg.Concurrency.StreamReaders)
		err = r.sweepRow(ctx, p.cmd.Process.Pid, ConfigMemoryBatches, GroupLimits, "(b') limit: from memory, batch-sized requests", r.cfg.Concurrency.StreamReaders,
			r.streamThrough(hc, p.base, slices, ident, p.limitUpstream))
		if err == nil {
			// (b″): the same server and bytes, in the batches of a warm
			// epoch's shuffled order.
			var batches []string
			batches, err = shuffledBatches(r.tb.index, r.cfg.Job.Seed, r.cfg.Job.Window, r.cfg.Job.BatchSize)
			if err == nil {
				r.logf("limit (b''): the same, %d shuffled batches of %d samples; concurrency %v", len(batches), r.cfg.Job.BatchSize, r.cfg.Concurrency.StreamReaders)
				err = r.sweepRow(ctx, p.cmd.Process.Pid, ConfigMemoryShuffled, GroupLimits, "(b'') limit: from memory, shuffled batches", r.cfg.Concurrency.StreamReaders,
					r.streamThrough(hc, p.base, batches, identity(len(batches)), p.limitUpstream))
			}
		}
	}
	hc.CloseIdleConnections()
	if err == nil {
		err = p.stop(10 * time.Second)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	return nil
}
