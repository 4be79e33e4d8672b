package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// DatasetSpec names a dataset to serve.
type DatasetSpec struct {
	Name  string
	URL   string          // s3://bucket/prefix, file:///dir or a directory
	Store s3backend.Store // optional; used instead of opening URL (tests, embedding)
}

// Config configures a Gateway. The zero value of every field but Datasets
// is a sane default.
type Config struct {
	Datasets       []DatasetSpec
	DefaultDataset string           // default: the first dataset
	Backend        s3backend.Config // how to reach S3 for s3:// URLs

	CacheSize   int64  // bytes; default 4 GiB
	CachePolicy string // "schedule" (default) or "lru"

	Defaults Defaults
	Limits   Limits

	// PrefetchConcurrency bounds background chunk reads; default 4,
	// negative disables prefetch.
	PrefetchConcurrency int
	// PrefetchWindows is how many windows beyond the current one each job
	// stream prefetches; default 1.
	PrefetchWindows int

	// FetchTimeout bounds the read of one chunk from the store, retries
	// included; default 5 minutes. A chunk load outlives the request that
	// started it (others may wait for the same chunk), so this, not the
	// client, ends a read that hangs.
	FetchTimeout time.Duration

	// NoPrefault turns off preallocation: by default Load allocates the
	// chunk buffers the cache will fill — up to the smaller of the cache
	// size and the datasets' bytes — and touches their pages before the
	// gateway reports ready, so that the first epoch does not pay the
	// kernel's page faults and a machine short of memory fails at start.
	NoPrefault bool

	Logger   zerolog.Logger       // zero value logs nothing
	Registry *prometheus.Registry // default: a new registry
}

// DefaultCacheSize is the cache bound when Config.CacheSize is zero.
const DefaultCacheSize = 4 << 30

// DefaultFetchTimeout bounds one chunk read when Config.FetchTimeout is zero.
const DefaultFetchTimeout = 5 * time.Minute

type served struct {
	name, url  string
	store      s3backend.Store
	index      *chunkindex.Index
	counts     []int
	chunkByKey map[string]int
	maxChunk   int64 // every chunk's buffer is this big, so buffers are interchangeable
}

// request is what the cache needs to load chunk c.
func (d *served) request(c int) chunkcache.Request {
	return chunkcache.Request{Key: d.chunkKey(c), Size: d.index.Chunk(c).Size, Alloc: d.maxChunk}
}

func (d *served) chunkKey(c int) chunkcache.Key {
	ch := d.index.Chunk(c)
	return chunkcache.Key{Dataset: d.name, Object: ch.Key, ETag: ch.ETag}
}

// Gateway serves batches of one or more datasets over HTTP.
type Gateway struct {
	cfg      Config
	log      zerolog.Logger
	registry *prometheus.Registry
	metrics  *metrics
	cache    *chunkcache.Cache
	sched    *schedule
	stats    *epochStats
	prefetch *prefetcher
	handler  http.Handler
	planning chan struct{} // one /plan simulation at a time

	mu       sync.RWMutex
	datasets map[string]*served
	ready    atomic.Bool

	epochs  *lru.Cache[epochKey, *shuffle.Epoch]
	windows *lru.Cache[windowKey, []int]

	// writeBufs holds the buffers in which batch responses coalesce small
	// samples (see batchWriter).
	writeBufs sync.Pool
}

type epochKey struct {
	dataset string
	seed    uint64
	epoch   uint64
	window  int
}

type windowKey struct {
	epochKey
	w int
}

// New builds a gateway. It does not touch the store: call Load to read the
// dataset indexes (the gateway answers 503 until then).
func New(cfg Config) (*Gateway, error) {
	if len(cfg.Datasets) == 0 {
		return nil, errors.New("gateway: no datasets configured")
	}
	seen := map[string]bool{}
	for _, d := range cfg.Datasets {
		if d.Name == "" {
			return nil, fmt.Errorf("gateway: dataset %q has no name", d.URL)
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("gateway: dataset name %q given twice", d.Name)
		}
		if d.URL == "" && d.Store == nil {
			return nil, fmt.Errorf("gateway: dataset %q has neither URL nor Store", d.Name)
		}
		seen[d.Name] = true
	}
	if cfg.DefaultDataset == "" {
		cfg.DefaultDataset = cfg.Datasets[0].Name
	} else if !seen[cfg.DefaultDataset] {
		return nil, fmt.Errorf("gateway: default dataset %q is not configured", cfg.DefaultDataset)
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.CacheSize < 0 {
		return nil, fmt.Errorf("gateway: negative cache size %d", cfg.CacheSize)
	}
	switch cfg.CachePolicy {
	case "":
		cfg.CachePolicy = "schedule"
	case "lru", "schedule":
	default:
		return nil, fmt.Errorf("gateway: unknown cache policy %q (want lru or schedule)", cfg.CachePolicy)
	}
	if cfg.PrefetchConcurrency == 0 {
		cfg.PrefetchConcurrency = 4
	}
	if cfg.PrefetchWindows == 0 {
		cfg.PrefetchWindows = 1
	}
	if cfg.FetchTimeout == 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.FetchTimeout < 0 {
		return nil, fmt.Errorf("gateway: negative fetch timeout %s", cfg.FetchTimeout)
	}
	cfg.Defaults.fill()
	cfg.Limits.fill()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, registry: cfg.Registry, datasets: map[string]*served{}, planning: make(chan struct{}, 1)}
	g.writeBufs.New = func() any {
		b := make([]byte, 0, coalesceBuffer)
		return &b
	}
	g.epochs, _ = lru.New[epochKey, *shuffle.Epoch](64)
	g.windows, _ = lru.New[windowKey, []int](32)
	g.sched = newSchedule(g)
	var policy chunkcache.Policy = chunkcache.NewLRU()
	if cfg.CachePolicy == "schedule" {
		policy = g.sched.policy()
	}
	g.cache = chunkcache.New(chunkcache.Config{Capacity: cfg.CacheSize, Loader: chunkLoader{g}, Policy: policy})
	g.metrics = newMetrics(cfg.Registry, g.cache.Stats, cfg.CacheSize)
	g.stats = newEpochStats(cfg.Registry, cfg.CacheSize)
	g.prefetch = newPrefetcher(g, cfg.PrefetchConcurrency, cfg.PrefetchWindows)
	g.handler = g.routes()
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// Cache returns the gateway's chunk cache, for statistics.
func (g *Gateway) Cache() *chunkcache.Cache { return g.cache }

// Registry returns the gateway's metrics registry.
func (g *Gateway) Registry() *prometheus.Registry { return g.registry }

// EpochStats returns the per-epoch figures measured so far: chunk accesses,
// loads, backend bytes and hit ratio, and the optimal policy's hit ratio on
// the same requests for completed epochs.
func (g *Gateway) EpochStats() []EpochStat { return g.stats.snapshot() }

// Ready reports whether every dataset index is loaded.
func (g *Gateway) Ready() bool { return g.ready.Load() }

// Close stops background prefetching and waits for it, then cancels the
// chunk loads still in flight. In-flight requests are the HTTP server's to
// drain first.
func (g *Gateway) Close() {
	g.prefetch.close()
	g.cache.Close()
}

// Load reads every dataset's index. Transient store errors are retried with
// backoff until ctx ends; a missing or invalid index fails at once, since
// waiting will not fix it. After Load succeeds the gateway is ready.
func (g *Gateway) Load(ctx context.Context) error {
	for _, spec := range g.cfg.Datasets {
		ds, err := g.loadDataset(ctx, spec)
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.datasets[ds.name] = ds
		g.mu.Unlock()
		g.log.Info().Str("dataset", ds.name).Str("url", ds.url).Str("index", ds.index.ID()).
			Int("chunks", ds.index.NumChunks()).Int("samples", ds.index.NumSamples()).
			Int64("bytes", ds.index.TotalBytes()).Msg("dataset loaded")
	}
	if !g.cfg.NoPrefault {
		if err := g.preallocate(ctx); err != nil {
			return err
		}
	}
	g.ready.Store(true)
	return nil
}

// preallocate gives the cache, dataset by dataset in configuration order,
// the buffers it will fill: as many of each dataset's largest chunk as fit
// in what is left of the cache size and the dataset's bytes.
func (g *Gateway) preallocate(ctx context.Context) error {
	start := time.Now()
	left := g.cfg.CacheSize
	var total int64
	for _, spec := range g.cfg.Datasets {
		ds := g.datasets[spec.Name]
		if ds.maxChunk == 0 {
			continue
		}
		n := min(left, ds.index.TotalBytes()) / ds.maxChunk
		if err := g.cache.Preallocate(ctx, ds.maxChunk, int(n)); err != nil {
			return fmt.Errorf("preallocating the chunk cache: %w", err)
		}
		left -= n * ds.maxChunk
		total += n * ds.maxChunk
	}
	g.log.Info().Int64("bytes", total).Dur("took", time.Since(start)).Msg("chunk cache memory preallocated")
	return nil
}

func (g *Gateway) loadDataset(ctx context.Context, spec DatasetSpec) (*served, error) {
	store := spec.Store
	if store == nil {
		bcfg := g.cfg.Backend
		bcfg.Observer = g.metrics
		var err error
		if store, err = s3backend.Open(ctx, spec.URL, bcfg); err != nil {
			return nil, fmt.Errorf("dataset %s: %w", spec.Name, err)
		}
	}
	backoff := 250 * time.Millisecond
	for {
		ix, err := dataset.ReadIndex(ctx, store)
		if err == nil {
			ds := &served{name: spec.Name, url: spec.URL, store: store, index: ix,
				counts: ix.SampleCounts(), chunkByKey: make(map[string]int, ix.NumChunks())}
			for c := range ix.NumChunks() {
				ds.chunkByKey[ix.Chunk(c).Key] = c
				ds.maxChunk = max(ds.maxChunk, ix.Chunk(c).Size)
			}
			return ds, nil
		}
		if !errors.Is(err, s3backend.ErrUnavailable) {
			return nil, fmt.Errorf("dataset %s (%s): %w", spec.Name, spec.URL, err)
		}
		g.log.Warn().Err(err).Str("dataset", spec.Name).Dur("retry_in", backoff).Msg("index not reachable yet")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dataset %s: %w (last error: %w)", spec.Name, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// dataset returns a loaded dataset by name.
func (g *Gateway) dataset(name string) (*served, error) {
	if !g.ready.Load() {
		return nil, ErrNotReady
	}
	g.mu.RLock()
	ds, ok := g.datasets[name]
	g.mu.RUnlock()
	if !ok {
		names := make([]string, 0, len(g.cfg.Datasets))
		for _, d := range g.cfg.Datasets {
			names = append(names, d.Name)
		}
		return nil, fmt.Errorf("%w: unknown dataset %q (serving: %v)", ErrNotFound, name, names)
	}
	return ds, nil
}

// epoch returns the (cached) order of one epoch.
func (g *Gateway) epoch(ds *served, seed, epoch uint64, window int) (*shuffle.Epoch, error) {
	k := epochKey{ds.name, seed, epoch, window}
	if e, ok := g.epochs.Get(k); ok {
		return e, nil
	}
	e, err := shuffle.NewEpoch(ds.counts, seed, epoch, window)
	if err != nil {
		return nil, err
	}
	g.epochs.Add(k, e)
	return e, nil
}

// window returns the (cached) sample order of window w of an epoch.
func (g *Gateway) window(ds *served, e *shuffle.Epoch, k epochKey, w int) []int {
	wk := windowKey{k, w}
	if ids, ok := g.windows.Get(wk); ok {
		return ids
	}
	ids := e.Window(w)
	g.windows.Add(wk, ids)
	return ids
}
