package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/buckets"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/preload"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/cluster/handover"
	"github.com/brandgw/brand/internal/cluster/hedge"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/cluster/storepath"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/s3face"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/server/scope"
	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/internal/task"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/transform"
	tvideo "github.com/brandgw/brand/transform/video"
)

// DatasetSpec names a dataset to serve: a name, and a store URL
// (s3://bucket/prefix, file:///dir or a directory) or a Store.
type DatasetSpec = catalog.Spec

// Defaults are the job parameters used when a request does not give them.
type Defaults = query.Defaults

// Limits bound what one request may ask for.
type Limits = query.Limits

// Config configures a Gateway. The zero value of every field but Datasets
// is a sane default.
type Config struct {
	Datasets       []DatasetSpec
	DefaultDataset string           // default: the first dataset
	Backend        s3backend.Config // how to reach S3 for s3:// URLs
	// StoreBudget paces the GETs and bytes every dataset's store reads
	// through Backend's one pool of connections (s3backend.Pacer): the
	// store's budget, split among a cluster's agreed members. Zero: no
	// budget; the node's own bound is then learned from the store's
	// throttling (s3backend.Pacer).
	StoreBudget s3backend.Budget
	// StorePrices bill a plan's store reads (GET /plan's bill); zero
	// bills nothing.
	StorePrices api.Prices

	CacheSize   int64  // bytes; default 4 GiB
	CachePolicy string // PolicyNextUse (default) or PolicyLRU; "schedule", its old name, is read as PolicyNextUse

	// IndexTablesCache bounds, on a cluster node, the sample tables of
	// chunks other nodes own that it keeps after reading them on demand
	// from the index object; 0 is chunkindex.DefaultTableCacheBytes
	// (64 MiB). A node keeps its own chunks' tables whole. A single
	// gateway reads the whole index and keeps it.
	IndexTablesCache int64

	// DiskCache, if it names directories, keeps chunks on local disk below
	// the RAM cache (internal/cache/disktier): a chunk the cache misses is read
	// from disk before the store, chunks read from the store are written
	// there, and what stays is chosen by next use like the RAM cache's.
	// A restarted gateway finds the chunks it kept.
	DiskCache DiskCacheConfig

	Defaults Defaults
	Limits   Limits

	// PrefetchConcurrency bounds background chunk reads; default
	// DefaultPrefetchConcurrency, negative disables prefetch.
	PrefetchConcurrency int
	// PrefetchWindows is how many windows beyond the current one each job
	// stream prefetches; default DefaultPrefetchWindows.
	PrefetchWindows int
	// MaxTurnWait bounds how long a batch waits for its job's turn when
	// the windows the jobs read do not fit in the cache together
	// (docs/architecture.md, "Several jobs"); default 10 s, negative: no
	// turns (every batch goes ahead at once). The lru policy takes none.
	MaxTurnWait time.Duration

	// FetchTimeout bounds the read of one chunk from the store, retries
	// included; default 5 minutes. A chunk load outlives the request that
	// started it (others may wait for the same chunk), so this, not the
	// client, ends a read that hangs.
	FetchTimeout time.Duration

	// ChecksumRereads is how many more times a chunk that fails its
	// CRC32C check — for a dataset served in place, the CRC32Cs an index
	// with checksums recorded, or its decode — is read before the failure
	// is reported: a byte damaged in transit passes on a re-read, a byte
	// damaged at rest fails the same way every time (see catalog.Loader).
	// Default 2; negative: no re-read.
	ChecksumRereads int

	// OnDamagedChunk is what a batch does when one of its chunks is damaged
	// at rest, or lost (its object no longer in the store): "fail" (the
	// default) answers 502; "skip" serves the batch without that chunk's
	// samples, names them in the Brand-Missing-* headers, counts them in
	// brand_skipped_samples_total and logs them. A clip job's clips that
	// need such a chunk's GOPs, or whose video's packets do not decode
	// (422 by default), are left out and named the same way, and counted
	// in /stats (video.clips_skipped).
	OnDamagedChunk string

	// MaxTextBytes bounds a text value of a sample served in place
	// (`brand serve --max-text-bytes`): a chunk whose format finds a
	// longer one before reading it (Parquet's size statistics, pages'
	// headers, values' length prefixes) is decoded without it, its sample
	// written unread, and a batch that holds that sample is 422 naming
	// it (skipped under OnDamagedChunk "skip"): the value is never held
	// in memory. Default DefaultMaxTextBytes, what a tokenizer reads and
	// `brand index --tokenizer` refuses past; negative: no bound.
	MaxTextBytes int64

	// Transforms defines pipelines beside the built-ins (imagenet-train,
	// imagenet-eval) that a job may name (transform=), or replaces a
	// built-in (`brand serve --transform-config`, docs/transform.md §2).
	Transforms transform.Config
	// MaxImagePixels bounds an image's width × height as its header
	// claims; a larger one is refused before any pixel is allocated.
	// Default transform.DefaultMaxPixels (8192×8192).
	MaxImagePixels int64
	// TransformWorkers bounds the samples this node transforms at once
	// (a batch's, a peer's, ahead of a request); default the node's cores.
	TransformWorkers int
	// TransformCalibration is how many generated photos /plan transforms
	// to calibrate a pipeline's cost on this node before it has served
	// enough images to measure it; 0 means DefaultTransformCalibration
	// (about a second of one core with the pure-Go decoder).
	TransformCalibration int
	// OnBadImage is what a batch does with a sample whose image its
	// pipeline cannot transform (undecodable, truncated, over
	// MaxImagePixels): "fail" (the default) answers 422 naming it;
	// "skip" serves the batch without it, named in the Brand-Missing-*
	// headers as a damaged chunk's samples are. A vision job's bad
	// samples (package vision's kinds) follow the same rule when its
	// epoch is laid out: fail names the first, skip leaves them out of
	// every sequence; a sample whose image's header reads but whose
	// pixels do not, found when its sequence is written, fails that
	// batch, or is left out of its sequence and named in the headers.
	OnBadImage string
	// TransformAheadBytes bounds the batches transformed ahead of their
	// requests and held for them; they count against CopyBytes. Default a
	// quarter of CopyBytes; negative: none is made ahead.
	TransformAheadBytes int64
	// GOPCacheBytes bounds the decoded frames clip jobs keep for the
	// later batches of a decode horizon that want them (the decoded-GOP
	// cache, docs/transform.md §12.9), part of the memory budget's
	// decodes, taken only where free. Default half the decodes; negative:
	// none kept (each batch decodes its own GOPs).
	GOPCacheBytes int64

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
	// chunks' loads), or for room to assemble or copy a batch; past it,
	// 503 with Retry-After. Default 1 minute.
	MaxWait time.Duration
	// WriteTimeout and MinWriteRate bound the writing of a response that
	// carries samples: it is written in segments of at most 4 MiB, and
	// each must be sent within WriteTimeout plus the time to send it at
	// MinWriteRate, after which the connection is closed. Defaults 10 s
	// and 1 MiB/s. A client that stops reading holds its response's
	// chunks, or its copy, for at most that long; a small response is
	// in the kernel's socket buffer at once and holds nothing.
	WriteTimeout time.Duration
	MinWriteRate int64
	// BodyTimeout bounds the reading of a request's body, from when its
	// route's handler starts to the body's last byte, its waits for
	// memory included; past it the read fails and the connection is
	// closed. LargeBodyTimeout is the bound of the routes whose body may
	// be large (importance feedback, up to 8 MiB; exclusion lists, up to
	// 256 MiB). Defaults 10 s and 30 s. A body is also bounded in size,
	// per route, and a declared length over the bound is refused before
	// a byte is read (internal/server/reqbody, docs/http-api.md "Bounds and
	// timeouts").
	BodyTimeout, LargeBodyTimeout time.Duration
	// CopyBytes bounds the bytes of responses copied out of the cache
	// (batches assembled in parts, or copied out under pressure) and of
	// transformed batches held at once; default twice
	// Limits.MaxBatchBytes. It is a part of the memory budget
	// (MemoryLimit), which may give it less.
	CopyBytes int64
	// TaskPlanBytes bounds the memory task jobs' plans hold at once
	// (task.PlanBytes each: 56 bytes a prompt at the default history),
	// part of the budget's base; default task.DefaultPlanBytes, half the
	// base. A larger bound grows the base by what it adds.
	TaskPlanBytes int64
	// MemoryLimit is the node's memory budget (`brand serve
	// --memory-limit`): the cache, the rest of the process
	// (memory.DefaultBase), and what copies and decodes share
	// (MemoryBudget). 0: the parts' total at their defaults — decodes at
	// least the largest decode MaxImagePixels allows — which `brand serve
	// --memory-limit auto` sets as the Go runtime's limit.
	MemoryLimit int64

	// AuthTokens and Tokens, if either is not empty, are the bearer tokens
	// requests must carry (Authorization: Bearer <token>) on every
	// endpoint but /healthz and /readyz, which probes reach without
	// credentials, and the peers' internal endpoints, which take a peer's
	// credential instead. A request without one is answered 401 with a
	// WWW-Authenticate challenge; one whose token lacks the right its
	// endpoint asks over the datasets and job it names, 403 (the table of
	// endpoints, endpoints.go). Each of AuthTokens may do anything (admin);
	// Tokens carry their scopes (`brand serve --auth-token-file`,
	// scope.ParseTokens).
	AuthTokens []string
	Tokens     []scope.Token
	// SeparateAdmin takes /metrics, /stats and /plan off the data handler:
	// serve them, with pprof, from AdminHandler on a listener of its own
	// (`brand serve --admin-listen`).
	SeparateAdmin bool

	// S3, with credentials, adds the S3 face: the datasets as read-only
	// buckets of their samples' files, for unchanged S3 clients
	// (S3Handler, `brand serve --s3-face-listen`).
	S3 S3Config

	// Cluster, if it lists peers, makes this gateway one node of a
	// cluster (docs/scale-out.md): each chunk is read from the store by
	// its owner only, other nodes fetch its samples from the owner, and
	// ranks receive the samples their home node holds.
	Cluster ClusterConfig

	// Planner answers /plan and computes the optimal policy's figures for
	// the epochs served; nil leaves both out (/plan answers 501).
	// `brand serve` passes planner.ForGateway.
	Planner Planner

	// ClipsWithoutDecoder, on a build without a video decoder (no
	// -tags brand_libav: transform/video.Available is false), answers a
	// clip job's /epoch/N, /plan and batch manifests (format=json) from
	// the index, as a build with one does, and 501 for its frames alone:
	// a node that plans and describes clip jobs served by others, and
	// tests of that build. By default such a build answers every request
	// of a clip job 501 naming the missing decoder, where the job is
	// first named. No effect on a build that decodes video.
	ClipsWithoutDecoder bool

	Logger   zerolog.Logger       // zero value logs nothing
	Registry *prometheus.Registry // default: a new registry

	// useTableClock is the use table's clock (nil: time.Now); a test
	// holds it still (export_test.go's HoldUseTableClock).
	useTableClock func() time.Time
}

// ClusterConfig places a gateway in a cluster. The members come from
// Members (a watched file, the platform's DNS) or, for a fixed cluster,
// from Peers; nodes that list the same set, in any order, compute the
// same membership version, and the cluster agrees on the version most of
// its live nodes use (docs/scale-out.md, "Membership"). A job's order
// never depends on the cluster; which rank of a global batch receives
// which sample depends on the membership version the request pins or the
// cluster agrees on.
type ClusterConfig struct {
	// Peers are the base URLs of a fixed cluster's gateways
	// (cluster.ParsePeers), used when Members is nil; Self is this node's
	// position in them unless Advertise names it.
	Peers []string
	Self  int
	// Members lists the cluster's members at runtime (package
	// membership); Advertise is this node's URL as they list it.
	Members   membership.Lister
	Advertise string
	// MembersPoll is how often Members is listed; default ProbeInterval.
	MembersPoll time.Duration
	// FlipTimeout bounds a membership change on this node: loading the
	// chunks it gains that the jobs need soon (internal/cluster/handover), then
	// waiting for the other members gaining chunks to do the same, after
	// which it reports the new version anyway. Default
	// membership.DefaultFlipTimeout (30 s).
	FlipTimeout time.Duration
	// PeerTimeout bounds one sample fetch from a peer; past it the
	// samples are read from the next node in their chunk's ranking, or
	// from the store. Default 10 s.
	PeerTimeout time.Duration
	// Hedge is when a sample fetch from a peer that has not answered is
	// also asked of the next node of its chunks' rankings (or read from
	// the store), and how many such hedges a second: a deadline learnt
	// from the peers' answers, within a floor and a ceiling
	// (internal/cluster/hedge; zero fields take its defaults, a negative
	// Rate none).
	Hedge hedge.Config
	// ProbeInterval is how often a peer's state is probed while it is
	// up; a peer that is down is probed with back-off up to 4 times as
	// long. Default 1 s.
	ProbeInterval time.Duration
	// TransformSlack is how much longer, in expected wait, a chunk's
	// owner's transform queue must be than this node's before this node
	// asks it for samples as stored and transforms them itself; 0:
	// route.OffloadSlack (10 ms); negative: never (the owner transforms).
	TransformSlack time.Duration
	// Secret is the peer secret every node of the cluster is given
	// (`brand serve --peer-secret-file`): internal requests carry a
	// credential derived from it (peercred.Credentials), and only those are
	// served and believed. Without it the internal endpoints are open
	// and nothing a request claims about its sender is believed; a
	// cluster with AuthTokens or Tokens must have one.
	Secret []byte
	// CredentialSkew is how far a peer's credential's time may be from
	// this node's clock, either way; default peercred.DefaultSkew (30 s).
	CredentialSkew time.Duration
}

// DiskCacheConfig is the disk tier under the chunk cache.
type DiskCacheConfig struct {
	// Dirs are the directories to keep chunks in, one per drive; the
	// tier keeps its files in a subdirectory of each (disktier.Subdir).
	Dirs []string
	// Size bounds the bytes kept, in all, split equally between Dirs.
	// Required with Dirs.
	Size int64
	// WriteFile, if set, writes the tier's files instead of the operating
	// system (disktier.Config.WriteFile): tests fail writes with it as a
	// full or failing drive would.
	WriteFile func(path string, header, data []byte) error
}

// DefaultPeerTimeout is ClusterConfig.PeerTimeout when zero.
const DefaultPeerTimeout = 10 * time.Second

// DefaultProbeInterval is ClusterConfig.ProbeInterval when zero.
const DefaultProbeInterval = time.Second

// DefaultCacheSize is the cache bound when Config.CacheSize is zero.
const DefaultCacheSize = 4 << 30

// Defaults of the prefetch (Config.PrefetchConcurrency, PrefetchWindows).
const (
	DefaultPrefetchConcurrency = 4
	DefaultPrefetchWindows     = 1
)

// DefaultFetchTimeout bounds one chunk read when Config.FetchTimeout is zero.
const DefaultFetchTimeout = 5 * time.Minute

// Defaults of the bounds on waiting and writing (see Config).
const (
	DefaultMaxWaiting   = 256
	DefaultMaxWait      = time.Minute
	DefaultWriteTimeout = respond.DefaultWriteTimeout
	DefaultMinWriteRate = respond.DefaultMinWriteRate
	// DefaultMaxTurnWait is Config.MaxTurnWait's default.
	DefaultMaxTurnWait = 10 * time.Second
	// DefaultBodyTimeout and DefaultLargeBodyTimeout are
	// Config.BodyTimeout's and Config.LargeBodyTimeout's defaults.
	DefaultBodyTimeout      = 10 * time.Second
	DefaultLargeBodyTimeout = 30 * time.Second
)

// DefaultChecksumRereads is Config.ChecksumRereads when zero.
const DefaultChecksumRereads = 2

// DefaultMaxTextBytes is Config.MaxTextBytes when zero: the most a
// tokenizer reads of one text (tokenize.MaxTextBytes).
const DefaultMaxTextBytes = tokenize.MaxTextBytes

// DefaultIndexPoll is Config.IndexPoll when zero.
const DefaultIndexPoll = 30 * time.Second

// What Config.CachePolicy may say: evict the chunk whose next use in the
// known order (the use table's) is furthest, or the least recently used
// chunk (a baseline).
const (
	PolicyNextUse = "next-use"
	PolicyLRU     = "lru"
)

// policyScheduleAlias is PolicyNextUse's old name, still accepted with a
// warning: "schedule" now means a mixture's weights over steps only.
const policyScheduleAlias = "schedule"

// What Config.OnDamagedChunk and Config.OnBadImage may say.
const (
	OnDamagedFail = "fail"
	OnDamagedSkip = "skip"
)

// maxAhead bounds the background tasks requests leave behind them (the
// preloads, the premade batches); one more is dropped, not queued.
const maxAhead = 64

// maxAssembling bounds the reads assembled in parts at once: each pins up
// to half the cache while it copies.
const maxAssembling = 2

// Gateway serves batches of one or more datasets over HTTP. It is the
// HTTP face of parts that know nothing of HTTP, each built from the few
// things it uses and wired once, in New: the catalog of loaded datasets,
// the jobs stage (what a request's job reads, its batches' layout), the
// use table (when each chunk is next needed, the cache's eviction and the
// prefetch), the cluster, the reader (the one path samples are read by),
// the batches (every batch's visit and read: internal/batch/visit), the one response writer,
// the importance state and the live statistics. docs/architecture.md
// draws them.
type Gateway struct {
	cfg      Config
	log      zerolog.Logger
	registry *prometheus.Registry
	metrics  *metrics
	tokens   atomic.Pointer[tokenSet]
	// closeIdle closes the idle connections of the stores' one pool
	// (s3backend.Config.SharedTransport), on Close.
	closeIdle func()

	catalog  *catalog.Catalog
	jobs     *resolve.Resolver
	sched    *usetable.Table
	cache    *chunkcache.Cache
	disk     diskTier
	prefetch usetable.Prefetch
	node     node // its place in a cluster (cluster.go)
	reader   *reader.Reader
	// mem is the memory manager every part holding bytes beside the
	// cache takes them from: copies, decodes, pools, the pressure signal.
	mem     *memory.Manager
	stage   *tensorize.Stage // the transform stage: images to tensors
	packer  *sequences.Stage // the pack stage: token jobs' sequences, on the transform stage's workers
	batches *visit.Batches
	out     *respond.Writer // every response that carries samples
	// preload loads what requests leave behind them — a mixture's later
	// parts, the S3 face's read-ahead — bounded and tracked.
	preload  *preload.Set
	feedback *feedback.State
	// store is whether this node reaches its datasets' store, returned
	// the chunks its peers read for it while it did not (nil on a single
	// gateway).
	store    *storepath.Watch
	returned *storepath.Returned
	// back gives back, and takes back, what a healed fault moved
	// (handback.go).
	back *giveBack
	// handover loads the chunks this node gains in a membership change
	// (nil on a single gateway); leaving is set once Leave is called.
	handover *handover.Handover
	// ready says whether the gateway takes work now: /readyz, the S3
	// face and the peers ask it; Leave makes it refuse.
	ready      *readiness
	importance *importanceAPI
	tasks      taskAPI
	peers      *peerAPI
	stats      *livestats.Stats

	// life owns every goroutine that outlives a request: each part that
	// runs some registers a stopper.Group as it is built, and Close drains
	// them in the reverse order. polls is the catalog's.
	life  *stopper.Stopper
	polls *stopper.Group

	s3      *s3face.Face        // nil without S3 credentials: S3Handler is nil
	objects *s3face.ReadThrough // the S3 face's read-through buckets, loaded through the cache
	started time.Time
	handler http.Handler
	bodies  bodies // the routes' request bodies' bounds
	plans   *plans.Maker
	nodes   func() int // the cluster's member count now (1 on a single gateway)
}

// New builds a gateway. It does not touch the store: call Load to read the
// dataset indexes (the gateway answers 503 until then).
func New(cfg Config) (*Gateway, error) {
	names, err := cfg.fill()
	if err != nil {
		return nil, err
	}
	// Every dataset's store reaches the endpoint through one pool of
	// connections: goroutines do not grow with the sources.
	var closeIdle func()
	cfg.Backend, closeIdle = cfg.Backend.SharedTransport()
	// Every store read goes through the pacer: under the budget's share
	// when one is set, and with none, once the store throttles, at the
	// rate it throttled at (s3backend.Pacer).
	pacer := s3backend.NewPacer(cfg.StoreBudget, cfg.Backend.Transport)
	cfg.Backend.Transport = pacer
	splitPacer := pacer // split among the members: only a budget is
	if cfg.StoreBudget == (s3backend.Budget{}) {
		splitPacer = nil
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, started: time.Now(), registry: cfg.Registry,
		life: stopper.New(), closeIdle: closeIdle}
	tokens := newTokenSet(cfg.AuthTokens, cfg.Tokens)
	g.tokens.Store(&tokens)
	reg := cfg.Registry
	registerPacer(reg, pacer)
	pipelines, err := transform.NewSet(cfg.Transforms, transform.Options{MaxPixels: cfg.MaxImagePixels})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	budget, err := cfg.memoryBudget(pipelines)
	if err != nil {
		return nil, err
	}
	g.mem = memory.New(memory.Config{Budget: budget, MaxWait: cfg.MaxWait, Busy: chunkcache.ErrBusy, Registry: reg})
	// Each part that runs goroutines registers with g.life as it is built,
	// after the parts it is built from: Close drains them in the reverse
	// order, so nothing is closed while a part built on it still runs.
	g.catalog = catalog.New(names, cfg.DefaultDataset, catalog.NewMetrics(reg), cfg.Logger)
	g.polls = g.life.Group("catalog: index polls")
	// The cluster's rooms (cluster.go): the peers and the router first,
	// since the use table, the reader and the batches route by them; the
	// membership once the hand-over it warms up with is built, below.
	var (
		peers   *transport.Nodes
		ask     nodeAsks // peers and their questions, for the parts that need both
		routing *route.Router
		rt      router         = route.Solo{}
		parts   feedback.Nodes = feedback.Solo{}
	)
	c := cfg.Cluster
	if c.Members != nil {
		// A peer taken back up after it was down is first told which of
		// its chunks this node read in its stead, and asked which of this
		// node's own it holds (giveBack.returning).
		peers = transport.New(transport.Config{Self: c.Advertise, Timeout: c.PeerTimeout, Probe: c.ProbeInterval, Credentials: peercred.NewCredentials(c.Secret),
			MaxReplyBytes: cfg.Limits.MaxBatchBytes, Group: g.life.Group("peer: probes"), Registry: reg, Log: cfg.Logger,
			// g.ready is set below, before the probes start.
			Serving:   func() bool { return g.ready.servingNotReady() == nil },
			Returning: func(ctx context.Context, url string) { g.back.returning(ctx, url) }})
		ask = nodeAsks{peers, peers.Asks()}
		// Whether this node reaches the store: cut off from it, it ends
		// its store reads, says so to its peers and routes its chunks
		// through them, and once it reaches the store again it asks them
		// for the chunks they read for it (internal/cluster/storepath).
		g.returned = storepath.NewReturned(ask, cfg.Logger).WithSearch(func(ds *catalog.Dataset, c int) bool { return routing.Owns(ds, c) }, g.catalog.Chunk,
			func() []string {
				var urls []string
				for _, k := range peers.Peers() {
					urls = append(urls, peers.URL(k))
				}
				return urls
			})
		g.store = storepath.New(storepath.Config{Probe: g.probeStore, Interval: c.ProbeInterval, Timeout: max(c.ProbeInterval, 2*time.Second),
			Returned: func(ctx context.Context) { g.back.takeBack(ctx) },
			Group:    g.life.Group("storepath: probes"), Registry: reg, Log: cfg.Logger})
		routing = route.New(route.Config{Self: c.Advertise, SelfSlot: peers.Self(), Peers: peers, Timeout: c.PeerTimeout, Hedge: c.Hedge, Fresh: max(2*c.ProbeInterval, 2*time.Second),
			NextBudget: g.mem.Copies().Within(max(cfg.CacheSize/16, 64<<20)), Group: g.life.Group("route: next batches' samples"), Slack: c.TransformSlack,
			Registry: reg, Log: cfg.Logger,
			Load:      func() nodestate.Load { return nodestate.Load(g.stage.Load()) },
			StoreDown: func(ds *catalog.Dataset) bool { return ds.Remote() && g.store.Down() },
			Holds:     func(ds *catalog.Dataset, c int) bool { return g.cache.Contains(ds.ChunkKey(c)) }})
		rt, parts = routing, ask
	}
	g.feedback = feedback.NewWith(feedback.Config{Log: cfg.Logger, Buffers: g.mem})
	// The node's kinds of batch, the one list the test harness makes
	// its orders with too; their stages are found when a batch is made
	// (they are made after the orders).
	var noVideo error
	if !tvideo.Available() && !cfg.ClipsWithoutDecoder {
		noVideo = fmt.Errorf("%w: a clip job's frames are decoded by the node that serves it; serve it from a brand built with libavcodec (the container image is)", tvideo.ErrNoDecoder)
	}
	gopCache := gopCacheBytes(cfg.GOPCacheBytes, budget)
	orders := layout.New(g.feedback, units.New(units.Node{Pack: stageOf{g}, Clips: stageOf{g}, Pipelines: stagePipelines{g}, Sizes: buckets.CatalogSizes{},
		SkipBadImages: cfg.OnBadImage == OnDamagedSkip, SkipDamaged: cfg.OnDamagedChunk == OnDamagedSkip, NoVideo: noVideo,
		GOPCacheBytes: gopCache, Log: cfg.Logger}))
	var own func(ds *catalog.Dataset, c int) bool // a single gateway owns every chunk
	if routing != nil {
		own = routing.Owns
	}
	sc := usetable.Config{Orders: orders, Capacity: cfg.CacheSize, MaxTurnWait: cfg.MaxTurnWait, Local: rt.Local, Own: own, Clock: cfg.useTableClock}
	var kept *handover.Kept
	if peers != nil {
		// The chunks this node read for the jobs before a membership
		// change whose new owners will ask for them stay keyed as its
		// own until they do.
		kept = handover.NewKept()
		sc.Keep = kept.Holds
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brand_handover_kept_chunks",
			Help: "Chunks this node keeps for the nodes that gained them in a membership change and will ask it for them."},
			func() float64 { return float64(kept.Len()) }))
	}
	g.sched = usetable.New(sc)
	reg.MustRegister(g.sched.Collectors()...)
	var policy chunkcache.Policy = chunkcache.NewLRU()
	shared := func() bool { return false }  // the lru policy, a baseline, loads as it always did
	var distance func(chunkcache.Key) int64 // the disk tier's order under lru: least recently used
	if cfg.CachePolicy == PolicyNextUse {
		policy = usetable.NewPolicy(g.sched.Snapshot, g.sched.Ticks)
		shared, distance = g.sched.Shared, g.sched.Distance
	}
	loader := catalog.NewLoader(g.catalog, cfg.FetchTimeout, cfg.ChecksumRereads).WithMemory(g.mem, g.mem.Decodes()).WithTexts(cfg.MaxTextBytes)
	var sources *handover.Sources
	if peers != nil {
		// Chunks this node gains in a membership change are read from
		// their old owner's cache before the store.
		sources = handover.NewSources(ask, cfg.Logger)
		through := storepath.NewThrough(storepath.ThroughConfig{Down: func(ds *catalog.Dataset) bool { return ds.Remote() && g.store.Down() },
			Chunk: g.catalog.Chunk, Pick: routing.Through, Fetch: ask.FetchChunkThrough, Log: cfg.Logger})
		loader = loader.WithHandover(eitherOf{sources, g.returned, through}).WithGuard(g.store)
	}
	if g.disk, loader, err = openDisk(cfg, distance, loader); err != nil {
		return nil, err
	}
	// The disk tier's writes are the cache's spills, run by the cache's
	// part; the tier waits for those it began.
	g.life.Group("disktier: writes").OnStop(g.disk.Close)
	// Each kind of cache entry has its own loader: the dataset loader (and
	// the disk tier under it) never sees the S3 face's read-through
	// objects.
	g.objects = s3face.NewReadThrough(cfg.S3, cfg.CacheSize, cfg.FetchTimeout)
	g.cache = chunkcache.New(chunkcache.Config{Capacity: cfg.CacheSize, Loader: chunkcache.BySpace{Chunks: loader, Objects: g.objects}, Policy: policy,
		MaxWaiting: cfg.MaxWaiting, MaxWait: cfg.MaxWait, Recycler: g.mem, Tasks: g.life.Group("chunkcache: loads, spills")})
	g.mem.Watch(g.cache)
	if peers != nil {
		g.back = &giveBack{datasets: g.catalog.All, cache: g.cache, routing: routing, peers: ask, returned: g.returned, distance: g.sched.Distance,
			copies: g.life.Group("peer: chunks given back"), timeout: c.PeerTimeout, log: cfg.Logger}
	}
	g.metrics = newMetrics(reg, g.cache.Stats, cfg.CacheSize)
	slots := stopper.NewLimit(maxAhead) // the preloads' and the premade batches'
	g.preload = preload.New(preload.Config{Group: g.life.Group("preload: loads"), Limit: slots, Cache: g.cache, Timeout: cfg.FetchTimeout})
	var opt livestats.Optimizer
	if cfg.Planner != nil {
		opt = cfg.Planner
	}
	g.stats = livestats.New(reg, cfg.CacheSize, opt, g.life.Group("livestats: optima"), cfg.Logger)
	g.prefetch = usetable.NoPrefetch{}
	if cfg.PrefetchConcurrency > 0 {
		g.prefetch = usetable.NewPrefetcher(usetable.PrefetcherConfig{Workers: cfg.PrefetchConcurrency, Cache: g.cache,
			Distance: g.sched.Distance, Prefetchable: g.sched.Prefetchable, Displaces: g.sched.Displaces, Keeps: g.sched.Keeps, StandIn: g.sched.StandIn, Local: rt.Local, Tally: g.stats,
			Group: g.life.Group("usetable: prefetch"), Registry: reg, Log: cfg.Logger})
	}
	g.reader = reader.New(reader.Config{Cache: g.cache, Loader: loader, Remote: rt, SkipDamaged: cfg.OnDamagedChunk == OnDamagedSkip,
		MaxBytes: cfg.Limits.MaxBatchBytes, Copies: g.mem.Copies(), Through: g.mem.Decodes(), Assemblers: maxAssembling, MaxWait: cfg.MaxWait,
		Shared: shared, Preload: g.preload, Tally: g.stats, Registry: reg, Log: cfg.Logger})
	g.stage = tensorize.New(tensorize.Config{Pipelines: pipelines, Workers: cfg.TransformWorkers, Buffers: g.mem.Copies(), Decodes: g.mem.Decodes(),
		GOPCache: gopCache, GOPBudget: g.mem.Decodes().Within(gopCache),
		MaxBytes: cfg.Limits.MaxBatchBytes, Group: g.life.Group("tensors: workers"), Registry: reg, Log: cfg.Logger})
	g.packer = sequences.New(sequences.Config{Workers: g.stage, MaxBytes: cfg.Limits.MaxBatchBytes, Registry: reg})
	g.batches = visit.New(visit.Config{UseTable: g.sched, Prefetch: g.prefetch, Windows: cfg.PrefetchWindows, Orders: orders,
		Peers: rt, Reader: g.reader, Stats: g.stats, Stage: g.stage, SkipBadImages: cfg.OnBadImage == OnDamagedSkip,
		Group: g.life.Group("visit: premade batches"), Limit: slots, PremadeBytes: max(cfg.TransformAheadBytes, 0), Log: cfg.Logger})
	cfg.Logger.Info().Str("decoder", g.stage.Stats().Decoder).Strs("pipelines", pipelines.Names()).
		Int("workers", cfg.TransformWorkers).Int64("max_image_pixels", cfg.MaxImagePixels).Str("video_decoder", g.stage.VideoDecoder()).Msg("transform stage")
	g.out = respond.New(respond.Config{WriteTimeout: cfg.WriteTimeout, MinWriteRate: cfg.MinWriteRate,
		Pressure: g.mem.UnderPressure, Served: g.metrics.bytesServed, Buffers: g.mem})
	g.node = soloNode{}
	var versions resolve.Versions = membership.Solo{Held: g.catalog.HeldIDs}
	if peers != nil {
		g.handover = handover.New(handover.Config{Self: c.Advertise, Peers: ask, UseTable: g.sched, Cache: g.cache,
			Sources: sources, Datasets: g.catalog.All, PrefetchWindows: cfg.PrefetchWindows, Log: cfg.Logger,
			Admit: func(victim chunkcache.Key) bool { return !usetable.Needed(g.sched.Distance(victim)) }})
		tracker := membership.New(membership.Config{Self: c.Advertise, SelfSlot: peers.Self(), Members: c.Members, Poll: c.MembersPoll,
			Probe: c.ProbeInterval, Peers: ask, Warm: g.handover, Follower: follow(routing, splitPacer, c.Advertise, paceHold(c)), FlipTimeout: c.FlipTimeout,
			Held: g.catalog.HeldIDs, Skew: g.catalog.Poke, Datasets: g.catalog.All, Group: g.life.Group("membership: polls, warm-ups, kept versions"),
			Registry: reg, Log: cfg.Logger})
		g.node, versions = clusterNode{peers: peers, members: tracker, route: routing, store: g.store}, tracker
		g.peers = &peerAPI{creds: peercred.NewVerifier(peercred.NewCredentials(c.Secret), c.Advertise, c.CredentialSkew, tracker), nodes: peers, members: tracker, store: g.store, catalog: g.catalog, batches: g.batches, out: g.out,
			feedback: g.feedback, limits: cfg.Limits, transforms: g.stage, chunks: g.cache, soon: g.sched, kept: kept, log: cfg.Logger,
			take: g.back.take}
	}
	g.ready = &readiness{catalog: g.catalog, cache: g.cache, reader: g.reader, mem: g.mem, node: g.node}
	d := cfg.Defaults
	rc := resolve.Config{Catalog: g.catalog, Versions: versions, Orders: orders, Snapshots: g.feedback, Pipelines: pipelines, Limits: cfg.Limits,
		Defaults: query.Query{Job: api.Job{Dataset: cfg.DefaultDataset,
			Params: shuffle.Params{Seed: d.Seed, BatchSize: d.BatchSize, Window: d.Window, World: 1, DropLast: d.DropLast}}},
		Node: c.Advertise}
	if peers != nil {
		// An edit of a named job asks every other member what it has
		// served of the job; they answer from their books.
		rc.Others = othersOf(ask)
	}
	g.jobs = resolve.New(rc)
	if peers != nil {
		g.peers.served = g.jobs.Edits().Answer
		g.peers.edited = g.jobs.Edits().PeerEdit
		g.peers.ready = g.ready.servingNotReady
	}
	g.importance = &importanceAPI{jobs: g.jobs, state: g.feedback, parts: parts}
	g.tasks = taskAPI{book: task.NewBookBounded(0, cfg.TaskPlanBytes, nil, task.NewMetrics(g.registry)), catalog: g.catalog, jobs: g.jobs, reader: g.reader, out: g.out}
	g.nodes = rt.Nodes
	g.plans = newPlans(cfg, g.jobs, rt.Nodes, newPipelineCosts(g.stage, cfg.TransformWorkers, cmp.Or(cfg.TransformCalibration, DefaultTransformCalibration)), g.feedback)
	g.bodies = bodies{timeout: cfg.BodyTimeout, large: cfg.LargeBodyTimeout, mem: g.mem.Decodes()}
	if cfg.S3.Credentials != nil {
		g.s3 = g.newS3Face(g.objects, rt)
	}
	g.handler = g.routes()
	g.node.Start()
	return g, nil
}

// fill checks cfg and applies its defaults; it returns the dataset names.
func (cfg *Config) fill() ([]string, error) {
	if len(cfg.Datasets) == 0 {
		return nil, errors.New("gateway: no datasets configured")
	}
	names := make([]string, 0, len(cfg.Datasets))
	for _, d := range cfg.Datasets {
		if d.Name == "" {
			return nil, fmt.Errorf("gateway: dataset %q has no name", d.URL)
		}
		if err := api.CheckDatasetName(d.Name); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		if slices.Contains(names, d.Name) {
			return nil, fmt.Errorf("gateway: dataset name %q given twice", d.Name)
		}
		if d.URL == "" && d.Store == nil {
			return nil, fmt.Errorf("gateway: dataset %q has neither URL nor Store", d.Name)
		}
		names = append(names, d.Name)
	}
	if err := cfg.S3.Check(names); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
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
	if err := cfg.StoreBudget.Check(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := cfg.StorePrices.Check(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	switch d := cfg.DiskCache; {
	case len(d.Dirs) > 0 && d.Size <= 0:
		return nil, fmt.Errorf("gateway: a disk cache (%s) needs a positive size, not %d bytes", strings.Join(d.Dirs, ", "), d.Size)
	case len(d.Dirs) == 0 && d.Size != 0:
		return nil, fmt.Errorf("gateway: a disk cache size (%d bytes) without a directory", d.Size)
	}
	switch cfg.CachePolicy {
	case "":
		cfg.CachePolicy = PolicyNextUse
	case policyScheduleAlias:
		cfg.Logger.Warn().Str("cache_policy", cfg.CachePolicy).Str("read_as", PolicyNextUse).
			Msg("the cache policy \"schedule\" is deprecated: it is now called \"next-use\"")
		cfg.CachePolicy = PolicyNextUse
	case PolicyLRU, PolicyNextUse:
	default:
		return nil, fmt.Errorf("gateway: unknown cache policy %q (want next-use or lru)", cfg.CachePolicy)
	}
	if cfg.PrefetchConcurrency == 0 {
		cfg.PrefetchConcurrency = DefaultPrefetchConcurrency
	}
	if cfg.PrefetchWindows == 0 {
		cfg.PrefetchWindows = DefaultPrefetchWindows
	}
	if cfg.MaxTurnWait == 0 {
		cfg.MaxTurnWait = DefaultMaxTurnWait
	}
	if cfg.MaxTurnWait < 0 || cfg.CachePolicy == PolicyLRU {
		cfg.MaxTurnWait = 0
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
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.LargeBodyTimeout == 0 {
		cfg.LargeBodyTimeout = DefaultLargeBodyTimeout
	}
	if cfg.MaxWaiting < 0 || cfg.MaxWait < 0 || cfg.WriteTimeout < 0 || cfg.MinWriteRate < 0 || cfg.CopyBytes < 0 ||
		cfg.BodyTimeout < 0 || cfg.LargeBodyTimeout < 0 || cfg.MemoryLimit < 0 || cfg.TaskPlanBytes < 0 {
		return nil, errors.New("gateway: negative MaxWaiting, MaxWait, WriteTimeout, MinWriteRate, CopyBytes, BodyTimeout, LargeBodyTimeout, MemoryLimit or TaskPlanBytes")
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
	switch {
	case cfg.MaxTextBytes == 0:
		cfg.MaxTextBytes = DefaultMaxTextBytes
	case cfg.MaxTextBytes < 0:
		cfg.MaxTextBytes = 0
	}
	switch cfg.OnDamagedChunk {
	case "":
		cfg.OnDamagedChunk = OnDamagedFail
	case OnDamagedFail, OnDamagedSkip:
	default:
		return nil, fmt.Errorf("gateway: on-damaged-chunk %q: want fail or skip", cfg.OnDamagedChunk)
	}
	switch cfg.OnBadImage {
	case "":
		cfg.OnBadImage = OnDamagedFail
	case OnDamagedFail, OnDamagedSkip:
	default:
		return nil, fmt.Errorf("gateway: on-bad-image %q: want fail or skip", cfg.OnBadImage)
	}
	if cfg.MaxImagePixels == 0 {
		cfg.MaxImagePixels = transform.DefaultMaxPixels
	}
	if cfg.TransformWorkers == 0 {
		cfg.TransformWorkers = runtime.NumCPU()
	}
	if cfg.MaxImagePixels < 0 || cfg.TransformWorkers < 0 {
		return nil, errors.New("gateway: negative MaxImagePixels or TransformWorkers")
	}
	if cfg.IndexPoll == 0 {
		cfg.IndexPoll = DefaultIndexPoll
	}
	if c := &cfg.Cluster; len(c.Peers) > 0 || c.Members != nil {
		if c.Members == nil {
			if c.Advertise == "" && (c.Self < 0 || c.Self >= len(c.Peers)) {
				return nil, fmt.Errorf("gateway: cluster self %d outside the %d peers", c.Self, len(c.Peers))
			}
			if c.Advertise == "" {
				c.Advertise = c.Peers[c.Self]
			}
			c.Members = membership.Static(c.Peers)
		}
		self, err := gcluster.NewMembership([]string{c.Advertise})
		if err != nil {
			return nil, fmt.Errorf("gateway: this node's URL: %w", err)
		}
		c.Advertise = self.Members()[0] // as the memberships spell it
		if c.PeerTimeout == 0 {
			c.PeerTimeout = DefaultPeerTimeout
		}
		if c.ProbeInterval == 0 {
			c.ProbeInterval = DefaultProbeInterval
		}
		if c.PeerTimeout < 0 || c.ProbeInterval < 0 {
			return nil, errors.New("gateway: negative PeerTimeout or ProbeInterval")
		}
		if len(cfg.AuthTokens)+len(cfg.Tokens) > 0 && len(c.Secret) == 0 {
			return nil, errors.New("gateway: a cluster whose clients need tokens needs a peer secret too (--peer-secret-file): a client's token is not a peer's")
		}
	}
	cfg.Defaults.Fill()
	cfg.Limits.Fill()
	if cfg.CopyBytes == 0 {
		cfg.CopyBytes = 2 * cfg.Limits.MaxBatchBytes
	}
	if cfg.TransformAheadBytes == 0 {
		cfg.TransformAheadBytes = cfg.CopyBytes / 4
	}
	if cfg.TaskPlanBytes == 0 {
		cfg.TaskPlanBytes = task.DefaultPlanBytes
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	return names, nil
}

// MemoryBudget returns the node's memory budget in shares as cfg gives it
// (Config.MemoryLimit): what `brand serve --memory-limit auto` sets the
// Go runtime's limit to, and what a node admits copies and decodes
// against.
func MemoryBudget(cfg Config) (memory.Budget, error) {
	if _, err := cfg.fill(); err != nil {
		return memory.Budget{}, err
	}
	pipelines, err := transform.NewSet(cfg.Transforms, transform.Options{MaxPixels: cfg.MaxImagePixels})
	if err != nil {
		return memory.Budget{}, fmt.Errorf("gateway: %w", err)
	}
	return cfg.memoryBudget(pipelines)
}

// gopCacheBytes is the decoded-GOP cache's bound for Config.GOPCacheBytes
// v and the node's budget: half the decodes by default, none when
// negative, never more than the decodes.
func gopCacheBytes(v int64, b memory.Budget) int64 {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return b.Decodes / 2
	}
	return min(v, b.Decodes)
}

// TransformWorkerBytes is what the decodes part holds at least for each
// transform worker: an ImageNet-sized photo's decode takes about 1 MB
// (docs/transform.md §10), and a worker keeps buffers up to 12 MB
// between images (transform.ScratchKeep).
const TransformWorkerBytes = 16 << 20

// memoryBudget is the budget's shares for cfg (filled) and its pipelines:
// the cache, the base, the copies, and decodes room for the largest
// decode the pixel bound allows, and at least TransformWorkerBytes a
// worker; fitted to MemoryLimit.
func (cfg *Config) memoryBudget(pipelines *transform.Set) (memory.Budget, error) {
	// Task plans are part of the base, up to task.DefaultPlanBytes of it.
	base := memory.DefaultBase + max(cfg.TaskPlanBytes-task.DefaultPlanBytes, 0)
	want := memory.Budget{Cache: cfg.CacheSize, Base: base, Copies: cfg.CopyBytes,
		Decodes: max(pipelines.MaxWork(), int64(cfg.TransformWorkers)*TransformWorkerBytes)}
	parts, err := memory.Fit(cfg.MemoryLimit, want)
	if err != nil {
		return memory.Budget{}, fmt.Errorf("gateway: %w", err)
	}
	return parts, nil
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
func (g *Gateway) EpochStats() []api.EpochStat { return g.stats.Snapshot() }

// Ready reports whether every dataset index is loaded.
func (g *Gateway) Ready() bool { return g.catalog.NotReady() == nil }

// Reload checks every dataset's stored index and swaps in those that
// changed, returning the names of the datasets reloaded (see
// catalog.Catalog.Reload).
func (g *Gateway) Reload(ctx context.Context) ([]string, error) { return g.catalog.Reload(ctx) }

// Close stops every goroutine the gateway runs beside its requests and
// waits for each: the parts that run them are drained in the reverse of
// the order they were built in (ShutdownOrder), each one's tasks told to
// stop, waited for, and what it holds given back, so no part is closed
// while a part built on it runs. No goroutine outlives it. In-flight
// requests are the HTTP server's to drain first. Idempotent.
func (g *Gateway) Close() {
	g.life.Stop()
	g.closeIdle()
}

// probeStore asks the store of the first remote dataset loaded for its
// index object's metadata: the probe of this node's path to the store
// (storepath.Watch). Nothing to probe before the datasets are loaded, or
// when none is remote.
func (g *Gateway) probeStore(ctx context.Context) error {
	all, err := g.catalog.All()
	if err != nil {
		return nil // not loaded yet
	}
	for _, ds := range all {
		if ds.Remote() {
			_, err := ds.Store.Stat(ctx, chunkindex.IndexKey)
			return err
		}
	}
	return nil
}

// ShutdownOrder names the gateway's parts that run goroutines, in the
// order Close drains them.
func (g *Gateway) ShutdownOrder() []string { return g.life.Order() }

// Leave takes this node out of its cluster, as a platform's scale-down or
// a pod's preStop asks (`brand serve` on SIGTERM): it stops being ready
// (/readyz answers 503, so the platform sends no new work), tells its
// peers it leaves, keeps serving them while the next owners of its
// chunks load the ones the jobs need soon from its cache, and returns
// once the cluster agrees on a membership without it — or with ctx's
// error when ctx ends first, the caller's bound. On a single gateway it
// returns at once. The caller then shuts the server down and Closes.
func (g *Gateway) Leave(ctx context.Context) error {
	g.ready.leaving.Store(true)
	return g.node.Leave(ctx)
}

// Load reads every dataset's index. Transient store errors are retried with
// backoff until ctx ends; a missing or invalid index fails at once, since
// waiting will not fix it. After Load succeeds the gateway is ready.
func (g *Gateway) Load(ctx context.Context) error {
	bcfg := g.cfg.Backend
	bcfg.Observer = g.metrics
	var loaded []*catalog.Dataset
	for _, spec := range g.cfg.Datasets {
		if ms, _ := g.jobs.Members(ctx, ""); ms != nil && ms.Len() > 1 {
			// A node keeps its own chunks' sample tables and reads the
			// others' on demand (docs/scale-out.md, "Index memory").
			spec.Partition = catalog.Partition{Self: g.cfg.Cluster.Advertise, Members: ms, TableCacheBytes: g.cfg.IndexTablesCache}
			if g.store != nil {
				spec.Partition.Guard = g.store
			}
		}
		ds, err := catalog.Load(ctx, spec, bcfg, g.log)
		if err != nil {
			return err
		}
		g.catalog.Add(ds)
		loaded = append(loaded, ds)
		g.log.Info().Str("dataset", ds.Name).Str("url", ds.URL).Str("index", ds.ID()).
			Int("chunks", ds.Index.NumChunks()).Int("samples", ds.Index.NumSamples()).
			Int64("bytes", ds.Index.TotalBytes()).Msg("dataset loaded")
	}
	if err := g.objects.Open(ctx, bcfg); err != nil {
		return err
	}
	warnSmallCache(g.log, g.cfg, g.nodes(), loaded)
	g.pruneDisk(loaded)
	if !g.cfg.NoPrefault {
		// Touching gigabytes of pages takes seconds: say so in the 503s.
		why := fmt.Sprintf("allocating the chunk cache's memory (up to %s); the indexes are loaded", humanize.IBytes(uint64(g.cfg.CacheSize)))
		g.catalog.WaitFor(why)
		g.log.Info().Int64("cache_bytes", g.cfg.CacheSize).Msg("allocating chunk cache memory")
		if err := preallocate(ctx, g.cache, g.cfg.CacheSize, loaded, g.log); err != nil {
			return err
		}
		prefillDecodes(g.mem, g.cfg.PrefetchConcurrency, loaded, g.log)
	}
	g.catalog.MarkReady()
	if g.cfg.IndexPoll > 0 {
		g.catalog.Poll(g.polls, g.cfg.IndexPoll)
	}
	return nil
}

// JobStats returns the figures of the jobs served most recently, each
// over everything served to it.
func (g *Gateway) JobStats() []api.JobStat { return g.stats.Jobs() }
