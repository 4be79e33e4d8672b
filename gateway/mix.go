package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/livestats"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/internal/peer"
	"github.com/brandgw/brand/internal/query"
	"github.com/brandgw/brand/internal/reader"
	"github.com/brandgw/brand/internal/respond"
	"github.com/brandgw/brand/internal/schedule"
)

// A mixture (mix=) is served by the same parts as one dataset: each
// component is a stream of its own dataset's epochs (its passes), which
// the schedule follows, prefetches and caches like any job's; a batch
// reads each component's samples through the reader and interleaves them
// in the mixture's order (docs/shuffle.md §11).

// isMix reports whether a request names a mixture.
func isMix(r *http.Request) bool { return r.URL.Query().Get(api.ParamMix) != "" }

// mixRequest parses an epoch request over a mixture and resolves its
// components against the datasets this gateway serves.
func (g *Gateway) mixRequest(r *http.Request) (query.Query, *order.Mixed, uint64, error) {
	q, _, epoch, err := g.parseEpochRequest(r)
	if err != nil {
		return q, nil, 0, err
	}
	ds := make([]*catalog.Dataset, len(q.Job.Mix))
	for i, c := range q.Job.Mix {
		if ds[i], err = g.version(api.Job{Dataset: c.Dataset}); err != nil {
			return q, nil, 0, err
		}
	}
	m, err := g.orders.Mixture(q.Job.Mix, ds, q.Job)
	if err != nil {
		return q, nil, 0, err
	}
	return q, m, epoch, nil
}

// handleMixEpoch serves /epoch/{epoch}?mix=…: the mixture epoch's extent
// and each component's share.
func (g *Gateway) handleMixEpoch(w http.ResponseWriter, r *http.Request) {
	q, m, epoch, err := g.mixRequest(r)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	job := q.Job
	batches, n, err := g.orders.MixBatches(m, job)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	info := &api.MixInfo{Block: m.Order.Block()}
	chunks := 0
	for i, c := range job.Mix {
		ds := m.DS[i]
		chunks += ds.Index.NumChunks()
		start := m.Order.Start(i, epoch)
		info.Components = append(info.Components, api.MixComponentInfo{Dataset: c.Dataset, Weight: c.Weight, IndexID: ds.ID(),
			Samples: m.Order.Size(i), EpochSamples: m.Order.EpochSamples(i), Window: m.Order.ComponentWindow(i, job.Window),
			FirstPass: start.Pass, FirstIndex: start.Index})
	}
	setMixHeaders(w.Header(), m)
	writeJSON(w, http.StatusOK, api.EpochInfo{Dataset: job.Mix.String(), Epoch: int(epoch), Samples: n,
		Batches: batches, BatchSize: job.BatchSize, World: job.World, Rank: job.Rank, Window: job.Window,
		Seed: job.Seed, DropLast: job.DropLast, Offset: job.Offset, Chunks: chunks,
		RankSamples: job.RankSamples(n), Mix: info})
}

// mixLayoutRequest parses a batch request over a mixture and lays the
// batch out.
func (g *Gateway) mixLayoutRequest(r *http.Request) (*order.MixLayout, query.Query, error) {
	q, m, epoch, err := g.mixRequest(r)
	if err != nil {
		return nil, q, err
	}
	b, err := query.ParseNumber("batch", chi.URLParam(r, "batch"), 1<<62)
	if err != nil {
		return nil, q, err
	}
	l, err := g.orders.MixLayout(r.Context(), m, q.Job, epoch, b)
	return l, q, err
}

// handleMixManifest serves a mixture batch's manifest.
func (g *Gateway) handleMixManifest(w http.ResponseWriter, r *http.Request) {
	l, _, err := g.mixLayoutRequest(r)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeMixManifest(w, l)
}

func writeMixManifest(w http.ResponseWriter, l *order.MixLayout) {
	m := api.Manifest{Dataset: l.Job.Mix.String(), Epoch: int(l.Epoch), Batch: int(l.Batch), Rank: l.Job.Rank,
		World: l.Job.World, BatchSize: l.Job.BatchSize, Offset: l.Job.Offset, Batches: l.Batches, ETag: l.ETag,
		Bytes: l.Bytes() + int64(len(chunkindex.EndOfArchive)), Samples: make([]api.ManifestSample, len(l.Take))}
	for i, t := range l.Take {
		p := l.Parts[t.Part]
		s, ds := p.Samples.Info[t.At], p.Samples.DS
		m.Samples[i] = api.ManifestSample{ID: p.Samples.IDs[t.At], Key: s.Key, Chunk: ds.Index.Chunk(s.Chunk).Key,
			Offset: s.Offset, Length: s.Length, CRC32C: s.CRC, Dataset: ds.Name}
		if ds.IsDamaged(s.Chunk) {
			m.Missing = append(m.Missing, s.Key)
		}
	}
	setMixHeaders(w.Header(), l.Mixed)
	writeJSON(w, http.StatusOK, m)
}

// setMixHeaders sets what names a mixture: its text, block and the
// components' index versions.
func setMixHeaders(h http.Header, m *order.Mixed) {
	h.Set(api.HeaderMix, m.Text())
	h.Set(api.HeaderMixBlock, strconv.Itoa(m.Order.Block()))
	h.Set(api.HeaderMixIndex, m.IndexIDs())
}

// setMixBatchHeaders sets a mixture batch's headers; comps are the
// served samples' components.
func setMixBatchHeaders(h http.Header, l *order.MixLayout, comps []int, missing int) {
	h.Set("ETag", l.ETag)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	setMixHeaders(h, l.Mixed)
	h.Set(api.HeaderEpoch, strconv.FormatUint(l.Epoch, 10))
	h.Set(api.HeaderBatch, strconv.FormatUint(l.Batch, 10))
	h.Set(api.HeaderEpochBatches, strconv.Itoa(l.Batches))
	h.Set(api.HeaderEpochSamples, strconv.Itoa(l.EpochSamples))
	h.Set(api.HeaderBatchSamples, strconv.Itoa(len(comps)))
	h.Set(api.HeaderMixComponents, order.FormatComponents(comps))
	if l.Job.Offset != 0 {
		h.Set(api.HeaderOffset, strconv.Itoa(l.Job.Offset))
	}
	if missing > 0 {
		// A partial batch (skip mode) must not be cached as the batch.
		h.Set("Cache-Control", "no-store")
		h.Set(api.HeaderMissingSamples, strconv.Itoa(missing))
	}
}

// handleMixBatch serves a batch of a mixture: each component pass's
// samples read through the reader, interleaved in the mixture's order.
func (g *Gateway) handleMixBatch(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	l, q, err := g.mixLayoutRequest(r)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	if q.Format == "json" {
		writeMixManifest(w, l)
		return
	}
	comps := l.Components()
	if notModified(r, l.ETag) {
		g.followMix(l)
		setMixBatchHeaders(w.Header(), l, comps, 0)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		setMixBatchHeaders(w.Header(), l, comps, 0)
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Length", strconv.FormatInt(l.Bytes()+int64(len(chunkindex.EndOfArchive)), 10))
		w.WriteHeader(http.StatusOK)
		return
	}
	// Each component's part is a request of its stream to the schedule.
	toks := make([]schedule.Inflight, 0, len(l.Parts))
	finish := func() {
		for _, t := range toks {
			g.sched.Finish(t)
		}
		toks = nil
	}
	defer finish()
	global := l.Job.BatchSize * l.Job.World
	for _, p := range l.Parts {
		t, err := g.sched.Begin(p.Stream, p.Pass, p.First, g.mixShare(l, p.Comp, global), l.Job.Weight)
		if err != nil {
			writeError(ctx, w, err)
			return
		}
		toks = append(toks, t)
	}
	g.followMix(l)
	g.fetchMixAhead(l)
	// No turns (internal/schedule/turn.go): turns sequence jobs whose
	// windows do not fit in the cache together, but a mixture's batch
	// needs every component's window at once, so its components cannot
	// take turns with each other — each would wait for the other's turn
	// to end. Like a peer's stream, a mixture's components are counted
	// in what holds the cache and never held back.
	waitFrom := time.Now()
	body, served, release, relieve, err := g.readMix(ctx, l, waitFrom)
	finish()
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	defer release()
	var comps2 []int
	for i, t := range l.Take {
		if served[i] {
			comps2 = append(comps2, l.Parts[t.Part].Comp)
		}
	}
	var n int64
	for _, b := range body {
		n += int64(len(b))
	}
	setMixBatchHeaders(w.Header(), l, comps2, len(l.Take)-len(comps2))
	if len(comps2) < len(l.Take) {
		var gone []int
		for i, ok := range served {
			if !ok {
				gone = append(gone, i)
			}
		}
		w.Header().Set("ETag", order.PartialETag(l.ETag, gone))
	}
	if _, err := g.out.Write(w, r, "application/x-tar", respond.Payload{Parts: append(body, chunkindex.EndOfArchive[:]), N: n + int64(len(chunkindex.EndOfArchive)), Relieve: relieve}); err != nil {
		g.log.Debug().Err(err).Msg("batch not completed")
		return
	}
	g.metrics.samplesServed.Add(float64(len(comps2)))
}

// mixShare is a component's share of a global batch, as the schedule's
// clock counts a stream's progress per batch.
func (g *Gateway) mixShare(l *order.MixLayout, comp, global int) int {
	w := l.Mixed.Order.Weights()
	var sum uint64
	for _, a := range w {
		sum += a
	}
	return max(1, int(uint64(global)*w[comp]/sum))
}

// readMix reads a mixture batch's parts, one component pass at a time,
// and returns the samples in the batch's order (served[i]: whether sample
// i was read; skip mode leaves out those of damaged chunks). A part's
// chunks stay pinned only while it is read: its samples are copied out
// before the next part's chunks are acquired — holding one part's pins
// while waiting for another's room could deadlock a small cache — except
// for the largest part, read last and written from the cache.
func (g *Gateway) readMix(ctx context.Context, l *order.MixLayout, waitFrom time.Time) (net.Buffers, []bool, func(), func(net.Buffers) (net.Buffers, bool), error) {
	if len(l.Parts) == 0 { // an empty slice of a short final batch
		return net.Buffers{}, nil, func() {}, nil, nil
	}
	if g.orders.Nodes() < 2 {
		body, served, release, relieve, err := g.readMixTogether(ctx, l, waitFrom)
		if !errors.Is(err, reader.ErrNotTogether) {
			return body, served, release, relieve, err
		}
	}
	order := make([]int, len(l.Parts))
	last := 0
	for p := range l.Parts {
		order[p] = p
		if l.Parts[p].Samples.Bytes > l.Parts[last].Samples.Bytes {
			last = p
		}
	}
	order[last], order[len(order)-1] = order[len(order)-1], order[last]
	g.warmMix(ctx, l, order[0])
	data := make([][][]byte, len(l.Parts)) // per part, per sample: its bytes (nil: missing)
	var releases []func()
	release := func() {
		for _, f := range releases {
			f()
		}
	}
	var relieve func(net.Buffers) (net.Buffers, bool)
	for k, p := range order {
		part := l.Parts[p]
		res, err := g.reader.Read(ctx, reader.Request{Samples: part.Samples, AheadKey: mixAheadKey(l.ETag, part),
			Origin: &peer.Origin{Stream: part.Stream, Epoch: part.Pass, Pos: part.First, Weight: l.Job.Weight}})
		if err != nil {
			release()
			return nil, nil, nil, nil, err
		}
		g.stats.Batch(livestats.Served{Stream: part.Stream, Epoch: part.Pass, EpochSamples: part.Stream.DS.Index.NumSamples(),
			Samples: len(part.Samples.IDs) - len(res.Missing), Chunks: res.Chunks, Loads: res.Loads, LoadedBytes: res.LoadedBytes,
			DiskBytes: res.DiskBytes, Wait: time.Since(waitFrom)})
		g.mix.add(l, part, len(part.Samples.IDs)-len(res.Missing), res.LoadedBytes-res.DiskBytes, res.DiskBytes)
		// Each sample's bytes, nil for those left out.
		d := make([][]byte, len(part.Samples.IDs))
		missing := make(map[int]bool, len(res.MissingPos))
		for _, i := range res.MissingPos {
			missing[i] = true
		}
		j := 0
		for i := range d {
			if !missing[i] {
				d[i] = res.Parts[j]
				j++
			}
		}
		if k < len(order)-1 {
			// Copy out and give the pins back before the next part.
			var n int
			for _, b := range d {
				n += len(b)
			}
			g.mix.copied.Inc()
			bp := g.mixBufs.get(n)
			releases = append(releases, func() { g.mixBufs.put(bp) })
			buf := (*bp)[:0]
			for i, b := range d {
				if b != nil {
					buf = append(buf, b...)
					d[i] = buf[len(buf)-len(b) : len(buf) : len(buf)]
				}
			}
			res.Release()
		} else {
			releases = append(releases, res.Release)
			relieve = res.Relieve
		}
		data[p] = d
	}
	body := make(net.Buffers, 0, len(l.Take)+1)
	served := make([]bool, len(l.Take))
	for i, t := range l.Take {
		if b := data[t.Part][t.At]; b != nil {
			body = append(body, b)
			served[i] = true
		}
	}
	return body, served, release, relieve, nil
}

// readMixTogether reads a mixture batch's parts on a gateway without
// peers under one pin of the cache, as one dataset's batch is read: no
// part is copied out, and its figures are counted per part. It fails with
// reader.ErrNotTogether, holding nothing, when the parts cannot be read
// so (readMix then reads them one at a time).
func (g *Gateway) readMixTogether(ctx context.Context, l *order.MixLayout, waitFrom time.Time) (net.Buffers, []bool, func(), func(net.Buffers) (net.Buffers, bool), error) {
	reqs := make([]reader.Request, len(l.Parts))
	for p, part := range l.Parts {
		reqs[p] = reader.Request{Samples: part.Samples}
	}
	res, parts, err := g.reader.ReadTogether(ctx, reqs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	wait := time.Since(waitFrom)
	for p, part := range l.Parts {
		rp := parts[p]
		g.stats.Batch(livestats.Served{Stream: part.Stream, Epoch: part.Pass, EpochSamples: part.Stream.DS.Index.NumSamples(),
			Samples: len(part.Samples.IDs), Chunks: rp.Chunks, Loads: rp.Loads, LoadedBytes: rp.LoadedBytes,
			DiskBytes: rp.DiskBytes, Wait: wait})
		g.mix.add(l, part, len(part.Samples.IDs), rp.LoadedBytes-rp.DiskBytes, rp.DiskBytes)
	}
	body := make(net.Buffers, len(l.Take), len(l.Take)+1)
	served := make([]bool, len(l.Take))
	for i, t := range l.Take {
		body[i] = parts[t.Part].Parts[t.At]
		served[i] = true
	}
	return body, served, res.Release, res.Relieve, nil
}

// warmMix starts loading, without pinning them, this node's chunks of
// every part but the one read first, so that the parts' loads overlap as
// one batch's do, though the parts are read one at a time: each part's
// read then finds its chunks resident or loading. A chunk the cache has
// no room for without waiting is left to the part's own read.
func (g *Gateway) warmMix(ctx context.Context, l *order.MixLayout, first int) {
	self := g.cfg.Cluster.Self
	anywhere := func(int) bool { return false }
	for p, part := range l.Parts {
		if p == first {
			continue
		}
		ds := part.Stream.DS
		for _, c := range part.Samples.Chunks {
			if g.cluster.Source(ds, c, anywhere) != self || g.cache.Contains(ds.ChunkKey(c)) {
				continue
			}
			g.ahead.Load(ds.ChunkRequest(c), func(res chunkcache.PrefetchResult) {
				if res != chunkcache.PrefetchLoaded && res != chunkcache.PrefetchLoadedBelow {
					return
				}
				size, disk := ds.Index.Chunk(c).Size, res == chunkcache.PrefetchLoadedBelow
				g.stats.Prefetched(part.Stream, part.Pass, c, size, disk)
				g.mix.prefetched(part.Stream, size, disk)
			})
		}
	}
}

// copyBuffers recycles the buffers a mixture batch's parts are copied
// into: a fresh buffer per batch costs its page faults, which measured
// more than the copy itself (a 100 KiB-sample mixture served at 0.4× one
// dataset's rate, nearly all of it in faulting in new buffers).
type copyBuffers struct{ pool sync.Pool }

// get returns a buffer of at least n bytes of capacity.
func (c *copyBuffers) get(n int) *[]byte {
	if bp, ok := c.pool.Get().(*[]byte); ok && cap(*bp) >= n {
		return bp
	}
	// Sizes rounded up to a MiB, so that the next batch's parts, a
	// little larger, reuse the buffer.
	b := make([]byte, 0, (n+1<<20-1)&^(1<<20-1))
	return &b
}

func (c *copyBuffers) put(bp *[]byte) { c.pool.Put(bp) }

// mixAheadKey names a part's samples fetched ahead from peers.
func mixAheadKey(etag string, p order.MixPart) string {
	return etag + "#" + strconv.Itoa(p.Comp) + "/" + strconv.FormatUint(p.Pass, 10)
}

// followMix moves each component's stream to the end of its part.
func (g *Gateway) followMix(l *order.MixLayout) {
	g.mix.follow(l)
	for _, p := range l.Parts {
		g.follow(p.Stream, p.Pass, p.End)
	}
}

// fetchMixAhead starts fetching from peers the samples of the rank's next
// batch (nothing on a single gateway).
func (g *Gateway) fetchMixAhead(l *order.MixLayout) {
	next := l.Batch + 1
	if g.orders.Nodes() < 2 || next >= uint64(l.Batches) {
		return
	}
	// Tracked, not a bare goroutine: it may outlive the request that
	// started it, and must not hand fetches to a closed cluster.
	g.ahead.TryGo(func(ctx context.Context) {
		nl, err := g.orders.MixLayout(ctx, l.Mixed, l.Job, l.Epoch, next)
		if err != nil {
			return
		}
		for _, p := range nl.Parts {
			g.cluster.FetchAhead(mixAheadKey(nl.ETag, p), func() (order.Samples, *peer.Origin, error) {
				return p.Samples, &peer.Origin{Stream: p.Stream, Epoch: p.Pass, Pos: p.First, Weight: nl.Job.Weight}, nil
			})
		}
	})
}

// mixStats counts what mixtures served, per component, for /stats and
// /metrics: the samples, and the bytes loaded for them — by their
// batches' reads and by the prefetch that follows their component
// streams. It keeps the most recent maxMixStats mixtures.
type mixStats struct {
	mu      sync.Mutex
	byMix   map[string]*api.MixStat
	order   []string
	streams map[order.Stream]mixComp // component streams seen, to credit prefetch loads
	samples *prometheus.CounterVec
	backend *prometheus.CounterVec
	disk    *prometheus.CounterVec
	copied  prometheus.Counter
}

const maxMixStats = 64

func newMixStats(reg prometheus.Registerer) *mixStats {
	s := &mixStats{byMix: map[string]*api.MixStat{}, streams: map[order.Stream]mixComp{},
		samples: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_mix_samples_total",
			Help: "Samples served as components of mixtures (mix=), by dataset."}, []string{"dataset"}),
		backend: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_mix_backend_bytes_total",
			Help: "Bytes read from the store for mixtures' batches, by component dataset."}, []string{"dataset"}),
		disk: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_mix_disk_bytes_total",
			Help: "Bytes read from the disk tier for mixtures' batches, by component dataset."}, []string{"dataset"}),
		copied: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_mix_parts_copied_total",
			Help: "Parts of mixture batches copied out of the cache so that the next part's chunks were acquired without holding theirs: the parts' chunks did not fit in the cache together, or the gateway has peers."}),
	}
	reg.MustRegister(s.samples, s.backend, s.disk, s.copied)
	return s
}

// mixComp is a component of a mixture.
type mixComp struct {
	mix  string
	comp int
}

// prefetched credits a prefetch load to the mixture component whose
// stream it was for, if any.
func (s *mixStats) prefetched(js order.Stream, bytes int64, disk bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mc, ok := s.streams[js]
	if !ok {
		return
	}
	st, ok := s.byMix[mc.mix]
	if !ok {
		return
	}
	c := &st.Components[mc.comp]
	if disk {
		c.DiskBytes += bytes
		s.disk.WithLabelValues(c.Dataset).Add(float64(bytes))
	} else {
		c.BackendBytes += bytes
		s.backend.WithLabelValues(c.Dataset).Add(float64(bytes))
	}
}

// follow registers a batch's mixture and its component streams, before
// its prefetch starts, so that their loads are credited to it.
func (s *mixStats) follow(l *order.MixLayout) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.entryLocked(l).Mix
	for _, p := range l.Parts {
		if _, ok := s.streams[p.Stream]; !ok && len(s.streams) >= 16*maxMixStats {
			clear(s.streams) // bounded: a flood of seeds forgets the older streams
		}
		s.streams[p.Stream] = mixComp{key, p.Comp}
	}
}

// entryLocked returns the figures of l's mixture, made if new.
func (s *mixStats) entryLocked(l *order.MixLayout) *api.MixStat {
	key := l.Mixed.Text()
	st, ok := s.byMix[key]
	if !ok {
		st = &api.MixStat{Mix: key}
		for _, c := range l.Job.Mix {
			st.Components = append(st.Components, api.MixComponentStat{Dataset: c.Dataset})
		}
		if len(s.order) >= maxMixStats {
			delete(s.byMix, s.order[0]) // its streams find no mixture and are skipped
			s.order = s.order[1:]
		}
		s.byMix[key] = st
		s.order = append(s.order, key)
	}
	return st
}

// add counts what a part's read served and loaded.
func (s *mixStats) add(l *order.MixLayout, p order.MixPart, samples int, backend, disk int64) {
	name := p.Stream.DS.Name
	s.samples.WithLabelValues(name).Add(float64(samples))
	s.backend.WithLabelValues(name).Add(float64(backend))
	s.disk.WithLabelValues(name).Add(float64(disk))
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.entryLocked(l).Components[p.Comp]
	c.Samples += int64(samples)
	c.BackendBytes += backend
	c.DiskBytes += disk
}

// snapshot returns the mixtures' figures, oldest first.
func (s *mixStats) snapshot() []api.MixStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]api.MixStat, 0, len(s.order))
	for _, k := range s.order {
		st := *s.byMix[k]
		st.Components = append([]api.MixComponentStat(nil), st.Components...)
		out = append(out, st)
	}
	return out
}
