package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
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

	// ChecksumRereads is how many more times a chunk that fails its
	// CRC32C check is read before the failure is reported: a byte damaged
	// in transit passes on a re-read, a byte damaged at rest fails the same
	// way every time (see chunkLoader). Default 2; negative: no re-read.
	ChecksumRereads int

	// OnDamagedChunk is what a batch does when one of its chunks is damaged
	// at rest: "fail" (the default) answers 502; "skip" serves the batch
	// without that chunk's samples, names them in the Brand-Missing-*
	// headers, counts them in brand_skipped_samples_total and logs them.
	OnDamagedChunk string

	// IndexPoll is how often each dataset's index object is checked for a
	// new ETag; a changed index is loaded and swapped in atomically, and
	// batches already being served finish on the version they started on.
	// Default 30 s; negative disables polling (Reload still works).
	IndexPoll time.Duration

	// NoPrefault turns off preallocation: by default Load allocates the
	// chunk buffers the cache will fill — up to the smaller of the cache
	// size and the datasets' bytes — and touches their pages before the
	// gateway reports ready, so that the first epoch does not pay the
	// kernel's page faults and a machine short of memory fails at start.
	NoPrefault bool

	// MaxWaiting bounds the batch requests queued for room in the cache;
	// one more is answered 503 with Retry-After at once. Default 256.
	MaxWaiting int
	// MaxWait bounds how long a request waits in that queue (not for its
	// chunks' loads); past it, 503 with Retry-After. Default 1 minute.
	MaxWait time.Duration
	// WriteTimeout bounds the writing of one response: this, plus the
	// time to send its bytes at MinWriteRate, after which the connection
	// is closed. Defaults 1 minute and 1 MiB/s. A client that stops
	// reading cannot hold a connection, or the chunks it pins, longer.
	WriteTimeout time.Duration
	MinWriteRate int64

	// AuthTokens, if not empty, are the bearer tokens requests must carry
	// (Authorization: Bearer <token>) on every endpoint but /healthz and
	// /readyz, which probes reach without credentials. A request without
	// one is answered 401 with a WWW-Authenticate challenge.
	AuthTokens []string
	// SeparateAdmin takes /metrics, /stats and /plan off the data handler:
	// serve them, with pprof, from AdminHandler on a listener of its own
	// (`brand serve --admin-listen`).
	SeparateAdmin bool

	// Cluster, if it lists peers, makes this gateway one node of a
	// cluster (docs/scale-out.md): each chunk is read from the store by
	// its owner only, other nodes fetch its samples from the owner, and
	// ranks receive the samples their home node holds.
	Cluster ClusterConfig

	// Planner answers /plan and computes the optimal policy's figures for
	// the epochs served; nil leaves both out (/plan answers 501).
	// `brand serve` passes planner.ForGateway.
	Planner Planner

	Logger   zerolog.Logger       // zero value logs nothing
	Registry *prometheus.Registry // default: a new registry
}

// ClusterConfig places a gateway in a cluster. Every node must be given
// the same Peers, in the same order: the layout (chunk owners, rank
// homes, the stratified chunk order) is computed from the list alone.
type ClusterConfig struct {
	// Peers are the base URLs of the cluster's gateways, node k being
	// Peers[k] (cluster.ParsePeers). Empty: a single gateway.
	Peers []string
	// Self is this node's position in Peers.
	Self int
	// PeerTimeout bounds one sample fetch from a peer; past it the
	// samples are read from the next node in their chunk's ranking, or
	// from the store. Default 10 s.
	PeerTimeout time.Duration
	// ProbeInterval is how often a peer's /readyz is probed while it is
	// up; a peer that is down is probed with back-off up to 4 times as
	// long. Default 1 s.
	ProbeInterval time.Duration
	// Token is the bearer token sent to peers (their AuthTokens must
	// hold it). `brand serve` sends the first of --auth-token-file's.
	Token string
}

// DefaultPeerTimeout is ClusterConfig.PeerTimeout when zero.
const DefaultPeerTimeout = 10 * time.Second

// DefaultProbeInterval is ClusterConfig.ProbeInterval when zero.
const DefaultProbeInterval = time.Second

// DefaultCacheSize is the cache bound when Config.CacheSize is zero.
const DefaultCacheSize = 4 << 30

// DefaultFetchTimeout bounds one chunk read when Config.FetchTimeout is zero.
const DefaultFetchTimeout = 5 * time.Minute

// Defaults of the bounds on waiting and writing (see Config).
const (
	DefaultMaxWaiting   = 256
	DefaultMaxWait      = time.Minute
	DefaultWriteTimeout = time.Minute
	DefaultMinWriteRate = 1 << 20
)

// DefaultChecksumRereads is Config.ChecksumRereads when zero.
const DefaultChecksumRereads = 2

// DefaultIndexPoll is Config.IndexPoll when zero.
const DefaultIndexPoll = 30 * time.Second

// What Config.OnDamagedChunk may say.
const (
	OnDamagedFail = "fail"
	OnDamagedSkip = "skip"
)

// Gateway serves batches of one or more datasets over HTTP.
//
// A request flows one way through its parts, each built from the few
// things it uses: the catalog (loaded datasets) and orders (memoised epoch
// orders) lay a batch out; the schedule follows job streams and publishes
// when each chunk is next needed; the cache, whose policy reads that, pins
// the batch's chunks, loading them through the loader; the prefetcher
// reads ahead what the schedule says comes next; the live statistics
// record what each epoch cost.
type Gateway struct {
	cfg      Config
	defaults query // the query a request starts from
	log      zerolog.Logger
	registry *prometheus.Registry
	metrics  *metrics

	tokens tokenSet

	catalog  *catalog
	orders   *orders
	sched    *schedule
	cache    *chunkcache.Cache
	prefetch *prefetcher   // nil when prefetch is off
	peers    *peerSet      // nil for a single gateway
	snaps    *snapshots    // importance snapshots requests name
	accs     *accumulators // importance feedback of the epochs being trained
	ahead    *peerAhead    // samples fetched from peers ahead of need; nil for a single gateway
	aheadCtx context.Context
	aheadEnd context.CancelFunc
	aheadWG  sync.WaitGroup
	stats    *liveStats
	reload   *reloader

	loader chunkLoader

	handler   http.Handler
	planning  chan struct{} // one /plan simulation at a time
	partSlots chan struct{} // batches being assembled in parts (parts.go)
	copySlots chan struct{} // batches copied out of the cache to be written (batch.go)
	coalesce  *sync.Pool    // buffers for batchWriter
}

// New builds a gateway. It does not touch the store: call Load to read the
// dataset indexes (the gateway answers 503 until then).
func New(cfg Config) (*Gateway, error) {
	if len(cfg.Datasets) == 0 {
		return nil, errors.New("gateway: no datasets configured")
	}
	names := make([]string, 0, len(cfg.Datasets))
	for _, d := range cfg.Datasets {
		if d.Name == "" {
			return nil, fmt.Errorf("gateway: dataset %q has no name", d.URL)
		}
		if slices.Contains(names, d.Name) {
			return nil, fmt.Errorf("gateway: dataset name %q given twice", d.Name)
		}
		if d.URL == "" && d.Store == nil {
			return nil, fmt.Errorf("gateway: dataset %q has neither URL nor Store", d.Name)
		}
		names = append(names, d.Name)
	}
	if cfg.DefaultDataset == "" {
		cfg.DefaultDataset = cfg.Datasets[0].Name
	} else if !slices.Contains(names, cfg.DefaultDataset) {
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
	if cfg.MaxWaiting == 0 {
		cfg.MaxWaiting = DefaultMaxWaiting
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MinWriteRate == 0 {
		cfg.MinWriteRate = DefaultMinWriteRate
	}
	if cfg.MaxWaiting < 0 || cfg.MaxWait < 0 || cfg.WriteTimeout < 0 || cfg.MinWriteRate < 0 {
		return nil, errors.New("gateway: negative MaxWaiting, MaxWait, WriteTimeout or MinWriteRate")
	}
	if cfg.FetchTimeout < 0 {
		return nil, fmt.Errorf("gateway: negative fetch timeout %s", cfg.FetchTimeout)
	}
	switch {
	case cfg.ChecksumRereads == 0:
		cfg.ChecksumRereads = DefaultChecksumRereads
	case cfg.ChecksumRereads < 0:
		cfg.ChecksumRereads = 0
	}
	switch cfg.OnDamagedChunk {
	case "":
		cfg.OnDamagedChunk = OnDamagedFail
	case OnDamagedFail, OnDamagedSkip:
	default:
		return nil, fmt.Errorf("gateway: on-damaged-chunk %q: want fail or skip", cfg.OnDamagedChunk)
	}
	if cfg.IndexPoll == 0 {
		cfg.IndexPoll = DefaultIndexPoll
	}
	if c := &cfg.Cluster; len(c.Peers) > 0 {
		if c.Self < 0 || c.Self >= len(c.Peers) {
			return nil, fmt.Errorf("gateway: cluster self %d outside the %d peers", c.Self, len(c.Peers))
		}
		if c.PeerTimeout == 0 {
			c.PeerTimeout = DefaultPeerTimeout
		}
		if c.ProbeInterval == 0 {
			c.ProbeInterval = DefaultProbeInterval
		}
		if c.PeerTimeout < 0 || c.ProbeInterval < 0 {
			return nil, errors.New("gateway: negative PeerTimeout or ProbeInterval")
		}
	}
	cfg.Defaults.fill()
	cfg.Limits.fill()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, registry: cfg.Registry, planning: make(chan struct{}, 1),
		partSlots: make(chan struct{}, maxPartBatches), copySlots: make(chan struct{}, maxCopiedBatches), coalesce: newCoalescePool()}
	d := cfg.Defaults
	g.defaults = query{job: api.Job{Dataset: cfg.DefaultDataset,
		Params: shuffle.Params{Seed: d.Seed, BatchSize: d.BatchSize, Window: d.Window, World: 1, DropLast: d.DropLast}}}
	g.tokens = newTokenSet(cfg.AuthTokens)
	g.catalog = newCatalog(names, cfg.DefaultDataset)
	g.peers = newPeerSet(cfg.Cluster, cfg.Registry, cfg.Logger)
	nodes := 1
	if g.peers != nil {
		nodes = g.peers.nodes()
	}
	g.snaps = newSnapshots()
	g.accs = newAccumulators()
	g.orders = newOrders(nodes, g.snaps)
	g.sched = newSchedule(g.orders)
	var policy chunkcache.Policy = chunkcache.NewLRU()
	if cfg.CachePolicy == "schedule" {
		policy = newSchedulePolicy(g.sched.table)
	}
	// The metrics read the cache's counters, and the cache's loader counts
	// into the metrics: the cache reads stats through a closure, set below.
	var cache *chunkcache.Cache
	g.metrics = newMetrics(cfg.Registry, func() chunkcache.Stats { return cache.Stats() }, cfg.CacheSize)
	g.reload = newReloader()
	g.loader = chunkLoader{resolve: g.catalog.chunk, timeout: cfg.FetchTimeout, rereads: cfg.ChecksumRereads,
		metrics: g.metrics, log: cfg.Logger, changed: g.reload.poke}
	cache = chunkcache.New(chunkcache.Config{Capacity: cfg.CacheSize, Loader: g.loader, Policy: policy,
		MaxWaiting: cfg.MaxWaiting, MaxWait: cfg.MaxWait})
	g.cache = cache
	var opt optimizer
	if cfg.Planner != nil {
		opt = cfg.Planner
	}
	g.stats = newLiveStats(cfg.Registry, cfg.CacheSize, opt, cfg.Logger)
	if cfg.PrefetchConcurrency > 0 {
		g.prefetch = newPrefetcher(prefetcherConfig{workers: cfg.PrefetchConcurrency, cache: cache,
			distance: g.sched.distance, loaded: g.stats.prefetched, metrics: g.metrics, log: cfg.Logger})
	}
	g.handler = g.routes()
	if g.peers != nil {
		g.ahead = newPeerAhead(max(cfg.CacheSize/16, 64<<20))
		g.aheadCtx, g.aheadEnd = context.WithCancel(context.Background())
		g.peers.start()
	}
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// Cache returns the gateway's chunk cache, for statistics.
func (g *Gateway) Cache() *chunkcache.Cache { return g.cache }

// Registry returns the gateway's metrics registry.
func (g *Gateway) Registry() *prometheus.Registry { return g.registry }

// EpochStats returns the per-epoch figures of the job streams served most
// recently: chunk accesses, loads, backend bytes and hit ratio, and the
// optimal policy's hit ratio on the same requests for complete epochs.
func (g *Gateway) EpochStats() []EpochStat { return g.stats.snapshot() }

// Ready reports whether every dataset index is loaded.
func (g *Gateway) Ready() bool { return g.catalog.notReady() == nil }

// Close stops background prefetching and the statistics' computations and
// waits for them, then cancels the chunk loads still in flight. In-flight
// requests are the HTTP server's to drain first.
func (g *Gateway) Close() {
	g.stopPolling()
	if g.peers != nil {
		g.aheadEnd()
		g.aheadWG.Wait()
		g.peers.stop()
	}
	if g.prefetch != nil {
		g.prefetch.close()
	}
	g.stats.close()
	g.cache.Close()
}

// Load reads every dataset's index. Transient store errors are retried with
// backoff until ctx ends; a missing or invalid index fails at once, since
// waiting will not fix it. After Load succeeds the gateway is ready.
func (g *Gateway) Load(ctx context.Context) error {
	bcfg := g.cfg.Backend
	bcfg.Observer = g.metrics
	var loaded []*loadedDataset
	for _, spec := range g.cfg.Datasets {
		ds, err := loadDataset(ctx, spec, bcfg, g.log)
		if err != nil {
			return err
		}
		g.catalog.add(ds)
		g.metrics.indexInfo.WithLabelValues(ds.name, ds.index.ID(), ds.indexETag).Set(1)
		loaded = append(loaded, ds)
		g.log.Info().Str("dataset", ds.name).Str("url", ds.url).Str("index", ds.index.ID()).
			Int("chunks", ds.index.NumChunks()).Int("samples", ds.index.NumSamples()).
			Int64("bytes", ds.index.TotalBytes()).Msg("dataset loaded")
	}
	g.warnSmallCache(loaded)
	if !g.cfg.NoPrefault {
		// Touching gigabytes of pages takes seconds: say so in the 503s.
		why := fmt.Sprintf("allocating the chunk cache's memory (up to %s); the indexes are loaded", humanize.IBytes(uint64(g.cfg.CacheSize)))
		g.catalog.waitFor(why)
		g.log.Info().Int64("cache_bytes", g.cfg.CacheSize).Msg("allocating chunk cache memory")
		if err := g.preallocate(ctx, loaded); err != nil {
			return err
		}
	}
	g.catalog.markReady()
	if g.cfg.IndexPoll > 0 {
		g.startPolling(g.cfg.IndexPoll)
	}
	return nil
}

// warnSmallCache says, at start, when the cache is smaller than what the
// default job needs at once, and what that costs: a batch across a window
// boundary needs the chunks of two windows, and prefetch wants room for
// the windows ahead.
func (g *Gateway) warnSmallCache(datasets []*loadedDataset) {
	w := g.defaults.job.Window
	if g.peers != nil {
		// A node of a cluster holds the chunks it owns: with stratified
		// windows about 1/N of each, at most 17/16 of that.
		n := g.peers.nodes()
		w = (17*w + 16*n - 1) / (16 * n)
	}
	for _, ds := range datasets {
		sizes := make([]int64, ds.index.NumChunks())
		for c := range sizes {
			sizes[c] = ds.index.Chunk(c).Size
		}
		slices.Sort(sizes)
		slices.Reverse(sizes)
		largest := func(n int) (sum int64) {
			for _, s := range sizes[:min(n, len(sizes))] {
				sum += s
			}
			return sum
		}
		batchNeeds, prefetchNeeds := largest(2*w), largest((2+g.cfg.PrefetchWindows)*w)
		switch {
		case g.cfg.CacheSize < batchNeeds:
			g.log.Warn().Str("dataset", ds.name).Int64("cache_bytes", g.cfg.CacheSize).Int64("batch_needs_bytes", batchNeeds).Int("window", w).
				Msg("the cache is smaller than a batch across a window boundary can need: such batches are assembled a few chunks at a time and read their chunks from the store again; raise --cache-size or lower --window")
		case g.cfg.CacheSize < prefetchNeeds && g.prefetch != nil:
			g.log.Warn().Str("dataset", ds.name).Int64("cache_bytes", g.cfg.CacheSize).Int64("prefetch_needs_bytes", prefetchNeeds).Int("window", w).
				Msg("the cache has no room to prefetch the next windows of the default job: batches will wait for chunks at window boundaries; raise --cache-size or lower --window")
		}
	}
}

// preallocate gives the cache, dataset by dataset in configuration order,
// the buffers it will fill: as many of each dataset's largest chunk as fit
// in what is left of the cache size and the dataset's bytes.
func (g *Gateway) preallocate(ctx context.Context, datasets []*loadedDataset) error {
	start := time.Now()
	left := g.cfg.CacheSize
	var total int64
	for _, ds := range datasets {
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
	g.log.Info().Int64("bytes", total).Float64("took_ms", millis(time.Since(start))).Msg("chunk cache memory preallocated")
	return nil
}
