package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/idleconns"
	"github.com/brandgw/brand/internal/server/logbuffer"
	"github.com/brandgw/brand/internal/task"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/transform"
)

// serveFlags are the gateway's flags, shared by serve and demo.
type serveFlags struct {
	listen          string
	datasets        datasetFlags
	defaultDataset  string
	cacheSize       cli.ByteSize
	cachePolicy     string
	diskCache       datasetFlags
	diskCacheSize   cli.ByteSize
	indexTables     cli.ByteSize
	seed            uint64
	batchSize       int
	window          int
	dropLast        bool
	maxBatchSize    int
	maxBatchBytes   cli.ByteSize
	copyBytes       cli.ByteSize
	taskPlanBytes   cli.ByteSize
	prefetchWorkers int
	prefetchWindows int
	maxTurnWait     time.Duration
	prefault        bool
	fetchTimeout    time.Duration
	idleTimeout     time.Duration
	checksumRereads int
	maxTextBytes    cli.ByteSize
	storeGETs       float64
	storeBytes      cli.ByteSize
	prices          cli.PriceFlags
	onDamagedChunk  string
	transforms      transformFlags
	indexPoll       time.Duration
	memoryLimit     string
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	maxIdleConns    int
	pprofAddr       string
	cpuProfile      string
	s3              cli.S3Flags
	s3face          s3FaceFlags
	security        securityFlags
	cluster         clusterFlags
}

// defaultListen is where `brand serve` listens unless told otherwise:
// loopback only, so that a gateway started as the README starts it on a
// shared machine serves nobody else. Containers and Kubernetes, where the
// port is published or fronted by a Service, say --listen :8080.
const defaultListen = "127.0.0.1:8080"

func (f *serveFlags) register(fs *flag.FlagSet, listen string) {
	fs.StringVar(&f.listen, "listen", listen, "address to serve HTTP on; the default serves this machine only: give :8080 (every interface) to serve others, with --auth-token-file unless a private network or a proxy that authenticates is in front")
	f.cluster.register(fs)
	fs.Var(&f.datasets, "dataset", "dataset to serve, as name=URL or URL (repeatable); URL is s3://bucket/prefix, file:///dir or a directory")
	fs.StringVar(&f.defaultDataset, "default-dataset", "", "dataset used when a request names none (default: the first)")
	f.cacheSize = gateway.DefaultCacheSize
	fs.Var(&f.cacheSize, "cache-size", "chunk cache bound in bytes (e.g. 4GiB)")
	fs.StringVar(&f.cachePolicy, "cache-policy", gateway.PolicyNextUse, "eviction: next-use (the chunk needed furthest ahead in the known order goes first) or lru; schedule, its old name, is a deprecated alias of next-use")
	fs.Var(&f.diskCache, "disk-cache", "directory keeping chunks on local disk below the RAM cache, kept across restarts (repeatable, or comma-separated: one per drive)")
	fs.Var(&f.indexTables, "index-tables-cache", "on a cluster node, memory for the sample tables of chunks other nodes own, read from the index on demand (default 64MiB)")
	fs.Var(&f.diskCacheSize, "disk-cache-size", "bound on the disk cache, in all, split equally between its directories (e.g. 500GiB); required with --disk-cache")
	fs.Uint64Var(&f.seed, "seed", 0, "default shuffle seed")
	fs.IntVar(&f.batchSize, "batch-size", query.DefaultBatchSize, "default batch size (samples per rank)")
	fs.IntVar(&f.window, "window", query.DefaultWindow, "default shuffle window, in chunks")
	fs.BoolVar(&f.dropLast, "drop-last", false, "default: drop the last partial global batch")
	fs.IntVar(&f.maxBatchSize, "max-batch-size", query.DefaultMaxBatchSize, "largest batch_size a request may ask for")
	f.maxBatchBytes = query.DefaultMaxBatchBytes
	fs.Var(&f.maxBatchBytes, "max-batch-bytes", "largest response carrying samples (a batch, a peer's request); a larger batch is refused with 400")
	f.taskPlanBytes = task.DefaultPlanBytes
	fs.Var(&f.taskPlanBytes, "task-plan-bytes", "memory task jobs' plans hold at once (about 56 bytes a prompt), part of --memory-limit: the job asked for least recently is let go (and read again when asked) to make room, and a job whose plan alone is larger is refused; above the default it grows the rest of the process's part by what it adds")
	fs.Var(&f.copyBytes, "copy-bytes", "memory for responses copied out of the cache at once (batches larger than the cache, or copied out under pressure) (default twice --max-batch-bytes)")
	fs.IntVar(&f.prefetchWorkers, "prefetch-concurrency", gateway.DefaultPrefetchConcurrency, "concurrent background chunk reads; 0 disables prefetch")
	fs.IntVar(&f.prefetchWindows, "prefetch-windows", gateway.DefaultPrefetchWindows, "windows to prefetch beyond the current one")
	fs.DurationVar(&f.maxTurnWait, "max-turn-wait", gateway.DefaultMaxTurnWait, "when the windows of the jobs served do not fit in the cache together, the longest a batch waits for its job's turn before it goes ahead anyway; 0 disables turns")
	fs.BoolVar(&f.prefault, "cache-prefault", true, "allocate and touch the cache's memory (up to the datasets' size) before reporting ready, so the first epoch pays no page faults")
	fs.DurationVar(&f.fetchTimeout, "fetch-timeout", gateway.DefaultFetchTimeout, "bound on reading one chunk from the store, retries included")
	fs.DurationVar(&f.idleTimeout, "s3-idle-timeout", s3backend.DefaultIdleTimeout, "abandon and resume a part GET that delivers no byte for this long; 0 disables")
	f.maxTextBytes = gateway.DefaultMaxTextBytes
	fs.Var(&f.maxTextBytes, "max-text-bytes", "longest text value of a sample served in place (Parquet): a chunk holding a longer one is decoded without it, never holding it in memory, and a batch of its sample is refused with 422 naming it (skipped with --on-damaged-chunk skip); 0: no bound")
	fs.Float64Var(&f.storeGETs, "store-gets-per-sec", 0, "the store's budget of GETs a second (and HEADs), split among a cluster's members (docs/scale-out.md, \"The store's budget\"): reads are paced under it, and a 503 or 429 from the store multiplies this node's rate by 0.7 at once (then a tenth of its share comes back each quiet second); 0: no budget (reads unpaced until the store throttles, then paced under the rate it answered, never under its floor: docs/scale-out.md), else at least 1")
	f.prices.Register(fs)
	fs.Var(&f.storeBytes, "store-bytes-per-sec", "the store's budget of bytes read a second, split and paced as --store-gets-per-sec (e.g. 2GiB); 0: no bound, else at least 1MiB")
	fs.IntVar(&f.checksumRereads, "checksum-rereads", gateway.DefaultChecksumRereads, "times a chunk failing its CRC32C (served in place: its indexed checksums, or its decode) is read again before it is declared damaged")
	fs.StringVar(&f.onDamagedChunk, "on-damaged-chunk", gateway.OnDamagedFail, "a chunk damaged or lost (its object no longer in the store) at rest, or a clip job's video that does not decode: fail (502; 422 for the decode) or skip (serve the batch without its samples or clips, named in Brand-Missing-* headers, a clip job's counted in /stats)")
	f.transforms.register(fs)
	fs.DurationVar(&f.indexPoll, "index-poll", gateway.DefaultIndexPoll, "how often to check the stored index for a new version and reload it (also on SIGHUP); 0 disables polling")
	fs.StringVar(&f.memoryLimit, "memory-limit", "auto", "the node's memory budget, also set as Go's memory limit: the cache (--cache-size), 256MiB for the rest of the process, and what copies out of the cache (--copy-bytes) and decodes of images and of chunks served in place share, each admitted against its part (503 with Retry-After past a wait); "+
		"auto: their total, with room for the largest decode --max-image-pixels allows (Go's limit left to GOMEMLIMIT if set); a size: the cache and the rest first, copies and decodes share what is left, an image whose decode needs more than their part refused; off: the parts as auto, and no Go memory limit")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "auto", "json, console, or auto (console on a terminal); JSON lines below warn are written together, at most 100 ms after they are logged")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for in-flight responses")
	fs.IntVar(&f.maxIdleConns, "max-idle-conns", idleconns.DefaultMax, "idle keep-alive connections each listener keeps (data, --admin-listen, --s3-face-listen, --pprof): past it the one idle longest is closed, which a client sends its next request again on a new one for; 0: no cap")
	fs.StringVar(&f.pprofAddr, "pprof", "", "serve Go profiles (/debug/pprof/) on this address, e.g. 127.0.0.1:6060; keep it off public interfaces")
	f.s3face.register(fs)
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file at shutdown; samples carry dataset and epoch labels (go tool pprof -tagfocus epoch=0)")
	f.s3.Register(fs)
	f.security.register(fs)
}

// logger is the log of --log-level and --log-format on w, and what
// writes the lines it still holds. JSON lines below warn go out a few at
// a time (package logbuffer): written one by one, the access log's lines
// are a system call a batch beside the batch's own. A console's lines,
// read by a person as they come, go out at once.
func (f *serveFlags) logger(w io.Writer) (zerolog.Logger, func(), error) {
	lvl, err := zerolog.ParseLevel(f.logLevel)
	if err != nil || f.logLevel == "" {
		return zerolog.Logger{}, nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", f.logLevel)
	}
	console := f.logFormat == "console"
	if f.logFormat == "auto" {
		if file, ok := w.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
			console = true
		}
	} else if f.logFormat != "json" && f.logFormat != "console" {
		return zerolog.Logger{}, nil, fmt.Errorf("--log-format: %q is not json, console or auto", f.logFormat)
	}
	if console {
		out := zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), func() {}, nil
	}
	lines := logbuffer.New(w)
	return zerolog.New(lines).Level(lvl).Hook(millis{}), func() { _ = lines.Close() }, nil
}

// millis stamps a JSON line with its time to the millisecond, UTC
// (RFC 3339): the order of a cluster's nodes' lines within a second —
// a peer taken for down, a node settled, a job's first request — is
// what a cold epoch's reads are explained by. zerolog's own Timestamp
// writes whole seconds unless a package-level format is changed.
type millis struct{}

func (millis) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// specs turns --dataset values into dataset specs. A bare URL is named
// after its last path element.
func (f *serveFlags) specs() ([]gateway.DatasetSpec, error) {
	if len(f.datasets) == 0 {
		return nil, errors.New("no --dataset given (try `brand demo` for a local one)")
	}
	var out []gateway.DatasetSpec
	for _, v := range f.datasets {
		name, url, ok := strings.Cut(v, "=")
		if !ok || strings.Contains(name, "/") || strings.Contains(name, ":") {
			url = v
			name = path.Base(strings.TrimRight(strings.TrimPrefix(strings.TrimPrefix(v, "s3://"), "file://"), "/"))
			if name == "" || name == "." || name == "/" {
				name = "default"
			}
		}
		out = append(out, gateway.DatasetSpec{Name: name, URL: url, Formats: formats()})
	}
	return out, nil
}

// diskDirs are the --disk-cache directories, comma-separated lists split.
func (f *serveFlags) diskDirs() []string {
	var dirs []string
	for _, v := range f.diskCache {
		for d := range strings.SplitSeq(v, ",") {
			if d = strings.TrimSpace(d); d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// besideCache is the memory --memory-limit auto allows beside the cache:
// the copies out of it (--copy-bytes, transformed batches included), the
// decodes (the largest one --max-image-pixels allows, and at least
// transformWorkerBytes a transform worker), and 256 MiB for the rest
// (gateway.MemoryBudget); 0 if the flags do not make a configuration.
func (f *serveFlags) besideCache() int64 {
	cfg, err := f.gatewayConfig(zerolog.Nop())
	if err != nil {
		return 0
	}
	parts, err := gateway.MemoryBudget(cfg)
	if err != nil {
		return 0
	}
	return parts.Total() - parts.Cache
}

// copyLimit is the memory for copies out of the cache: --copy-bytes, or
// the gateway's default.
func (f *serveFlags) copyLimit() int64 {
	if f.copyBytes > 0 {
		return int64(f.copyBytes)
	}
	return 2 * int64(f.maxBatchBytes)
}

// outsideGo is what a node holds resident beyond the memory Go's limit
// governs: the binary's pages, and what the kernel maps for it. With Go's
// limit at the budget itself, a node whose live heap was 400 MB of 1 GiB
// let its heap grow to the limit between collections (the garbage of
// chunks read through), and peaked at 1,031 MiB resident (issue 98,
// item 8); 947–965 MiB with the limit this much lower.
const outsideGo = 64 << 20

// goMemoryLimit is Go's memory limit for a budget of total bytes: the
// budget less what the process holds outside Go's memory.
func goMemoryLimit(total int64) int64 { return max(total-outsideGo, total/2) }

// applyMemoryLimit sets cfg's memory budget from --memory-limit and the
// Go runtime's memory limit to it, less outsideGo (auto: unless GOMEMLIMIT is set; off:
// not at all), and logs its parts. A limit too small for the cache and
// the rest of the process fails here, at start.
func (f *serveFlags) applyMemoryLimit(log zerolog.Logger, getenv func(string) string, cfg *gateway.Config) error {
	cfg.MemoryLimit = 0
	if f.memoryLimit != "auto" && f.memoryLimit != "off" {
		var b cli.ByteSize
		if err := b.Set(f.memoryLimit); err != nil || b <= 0 {
			return fmt.Errorf("--memory-limit %q: want auto, off or a size", f.memoryLimit)
		}
		cfg.MemoryLimit = int64(b)
	}
	parts, err := gateway.MemoryBudget(*cfg)
	if err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	switch {
	case f.memoryLimit == "off":
	case f.memoryLimit == "auto" && getenv("GOMEMLIMIT") != "":
	default:
		debug.SetMemoryLimit(goMemoryLimit(parts.Total()))
	}
	log.Info().Int64("limit", parts.Total()).Int64("cache", parts.Cache).Int64("base", parts.Base).Int64("copies", parts.Copies).
		Int64("decodes", parts.Decodes).Str("go_limit", f.memoryLimit).Msg("memory budget")
	return nil
}

func (f *serveFlags) gatewayConfig(log zerolog.Logger) (gateway.Config, error) {
	specs, err := f.specs()
	if err != nil {
		return gateway.Config{}, err
	}
	if err := (s3backend.Budget{GETs: f.storeGETs}).Check(); err != nil {
		return gateway.Config{}, fmt.Errorf("--store-gets-per-sec: %w", err)
	}
	if err := (s3backend.Budget{Bytes: float64(f.storeBytes)}).Check(); err != nil {
		return gateway.Config{}, fmt.Errorf("--store-bytes-per-sec: %w", err)
	}
	if err := f.prices.Check(); err != nil {
		return gateway.Config{}, err
	}
	workers := f.prefetchWorkers
	if workers == 0 {
		workers = -1
	}
	backend := f.s3.Config()
	backend.IdleTimeout = orNegative(f.idleTimeout)
	tokens, err := f.security.tokens()
	if err != nil {
		return gateway.Config{}, err
	}
	clusterCfg, err := f.cluster.config()
	if err != nil {
		return gateway.Config{}, err
	}
	if f.cluster.secretFile != "" && clusterCfg.Members == nil {
		return gateway.Config{}, errPeerSecretAlone
	}
	s3cfg, err := f.s3face.config()
	if err != nil {
		return gateway.Config{}, err
	}
	transforms, err := f.transforms.config()
	if err != nil {
		return gateway.Config{}, err
	}
	rereads := f.checksumRereads
	if rereads == 0 {
		rereads = -1 // the gateway's "none"
	}
	maxText := int64(f.maxTextBytes)
	if maxText == 0 {
		maxText = -1 // the gateway's "none"
	}
	return gateway.Config{
		Datasets:            specs,
		DefaultDataset:      f.defaultDataset,
		Backend:             backend,
		StoreBudget:         s3backend.Budget{GETs: f.storeGETs, Bytes: float64(f.storeBytes)},
		StorePrices:         f.prices.Prices(),
		CacheSize:           int64(f.cacheSize),
		DiskCache:           gateway.DiskCacheConfig{Dirs: f.diskDirs(), Size: int64(f.diskCacheSize)},
		IndexTablesCache:    int64(f.indexTables),
		CachePolicy:         f.cachePolicy,
		Defaults:            gateway.Defaults{Seed: f.seed, BatchSize: f.batchSize, Window: f.window, DropLast: f.dropLast},
		Limits:              gateway.Limits{MaxBatchSize: f.maxBatchSize, MaxBatchBytes: int64(f.maxBatchBytes)},
		CopyBytes:           f.copyLimit(),
		TaskPlanBytes:       int64(f.taskPlanBytes),
		PrefetchConcurrency: workers,
		PrefetchWindows:     f.prefetchWindows,
		MaxTurnWait:         orNegative(f.maxTurnWait),
		FetchTimeout:        f.fetchTimeout,
		ChecksumRereads:     rereads,
		MaxTextBytes:        maxText,
		OnDamagedChunk:      f.onDamagedChunk,
		Transforms:          transforms,
		MaxImagePixels:      f.transforms.maxPixels,
		TransformWorkers:    f.transforms.workerCount(),
		OnBadImage:          f.transforms.onBadImage,
		TransformAheadBytes: f.transforms.aheadBytes(),
		GOPCacheBytes:       f.transforms.gopCacheBytes(),
		IndexPoll:           orNegative(f.indexPoll),
		NoPrefault:          !f.prefault,
		Cluster:             clusterCfg,
		Planner:             planner.ForGateway{},
		Tokens:              tokens,
		S3:                  s3cfg,
		SeparateAdmin:       f.security.adminListen != "",
		Logger:              log,
	}, nil
}

// orNegative maps a flag's 0 ("off") to the negative duration that
// disables the feature in a Config, where 0 means the default.
func orNegative(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func runServe(ctx context.Context, env *cli.Env, args []string) error {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f.register(fs, defaultListen)
	if err := cli.ParseFlags(fs, env, args, "brand serve --dataset [name=]URL [--dataset ...] [flags]"); err != nil {
		return err
	}
	if err := cli.NoArgs(fs); err != nil {
		return err
	}
	log, flush, err := f.logger(env.Stderr)
	if err != nil {
		return err
	}
	defer flush()
	cfg, err := f.gatewayConfig(log)
	if err != nil {
		return err
	}
	if err := f.applyMemoryLimit(log, env.Getenv, &cfg); err != nil {
		return err
	}
	if f.pprofAddr != "" {
		if err := startPprof(ctx, log, f.pprofAddr, f.maxIdleConns); err != nil {
			return err
		}
	}
	if f.cpuProfile != "" {
		stop, err := cli.StartCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	ln, err = f.security.wrap(ln, log)
	if err != nil {
		return err
	}
	f.security.warnIfOpen(ln.Addr(), len(cfg.Tokens) > 0, log)
	f.security.warnTokenFile(log)
	var ready func(*gateway.Gateway)
	if f.security.adminListen != "" {
		admin, err := net.Listen("tcp", f.security.adminListen)
		if err != nil {
			return fmt.Errorf("--admin-listen: %w", err)
		}
		if admin, err = f.security.wrap(admin, log); err != nil {
			return err
		}
		ready = func(g *gateway.Gateway) { serveAdmin(ctx, log, g, admin, f.maxIdleConns) }
	}
	var starts []func(*gateway.Gateway)
	if f.s3face.listen != "" {
		s3ln, err := net.Listen("tcp", f.s3face.listen)
		if err != nil {
			return fmt.Errorf("--s3-face-listen: %w", err)
		}
		if s3ln, err = f.security.wrap(s3ln, log); err != nil {
			return err
		}
		starts = append(starts, func(g *gateway.Gateway) { serveS3(ctx, log, g, s3ln, f.maxIdleConns) })
	}
	if f.security.tokenFile != "" {
		starts = append(starts, func(g *gateway.Gateway) { go f.security.watchTokens(ctx, log, g, tokenPoll) })
	}
	started := func(g *gateway.Gateway) {
		for _, s := range starts {
			s(g)
		}
	}
	return serve(ctx, log, cfg, ln, f.maxIdleConns, stopping{leave: f.cluster.leave, drain: f.shutdownTimeout}, started, ready)
}

// newServer is an HTTP server of h with the bounds every listener of
// `brand serve` shares (docs/http-api.md "Bounds and timeouts"): a
// request's headers read within 10 s, an idle keep-alive connection closed
// after 2 minutes, and at most maxIdle kept idle (internal/server/idleconns;
// 0: no cap). Request bodies are bounded per route by the handlers
// (gateway.Config.BodyTimeout), and responses that carry samples by their
// writer's deadlines (gateway.Config.WriteTimeout): a server-wide
// ReadTimeout or WriteTimeout would be one bound for every route.
func newServer(h http.Handler, maxIdle int) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	idleconns.New(maxIdle).Serve(srv)
	return srv
}

// stopping bounds a gateway's stop: a cluster node's hand-over of its
// chunks (Gateway.Leave), then the drain of in-flight responses.
type stopping struct{ leave, drain time.Duration }

// serve runs a gateway on ln until ctx ends; then a node of a cluster
// leaves it, handing its chunks over to their next owners for up to
// stop.leave (it stops being ready, and keeps serving meanwhile), and the
// gateway drains in-flight responses for up to stop.drain. started, if
// set, is called once the gateway is built, ready once the indexes are
// loaded.
func serve(ctx context.Context, log zerolog.Logger, cfg gateway.Config, ln net.Listener, maxIdle int, stop stopping, started, ready func(*gateway.Gateway)) error {
	g, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	if started != nil {
		started(g)
	}
	srv := newServer(g, maxIdle)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Int64("cache_bytes", cfg.CacheSize).Str("cache_policy", cfg.CachePolicy).
		Str("jpeg_decoder", transform.JPEGDecoderBuild()).Msg("listening; loading dataset indexes")
	if note := pureGoDecoderNote(); note != "" {
		log.Warn().Msg(note)
	}
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	go func() {
		if err := g.Load(loadCtx); err != nil {
			errc <- fmt.Errorf("loading datasets: %w", err)
			return
		}
		log.Info().Msg("ready")
		if ready != nil {
			ready(g)
		}
	}()
	// SIGHUP: check the stored indexes now rather than at the next poll.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-hup:
				reloaded, err := g.Reload(loadCtx)
				if err != nil {
					log.Warn().Err(err).Msg("SIGHUP: reloading the dataset indexes")
				}
				log.Info().Strs("reloaded", reloaded).Msg("SIGHUP: dataset indexes checked")
			}
		}
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
			return err
		}
		return nil
	case <-ctx.Done():
	}
	if cfg.Cluster.Members != nil && stop.leave > 0 {
		log.Info().Float64("leave_timeout_ms", float64(stop.leave)/float64(time.Millisecond)).Msg("leaving the cluster: handing this node's chunks over")
		lctx, cancel := context.WithTimeout(context.Background(), stop.leave)
		if err := g.Leave(lctx); err != nil {
			log.Warn().Err(err).Msg("the cluster did not agree on a membership without this node within --leave-timeout; stopping anyway (its peers read its chunks from the store)")
		}
		cancel()
	}
	grace := stop.drain
	log.Info().Float64("grace_ms", float64(grace)/float64(time.Millisecond)).Msg("shutting down: finishing in-flight responses")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info().Msg("stopped")
	return nil
}

// startPprof serves the runtime profiles on their own listener, so that
// profiling is opt-in and never exposed on the data port.
func startPprof(ctx context.Context, log zerolog.Logger, addr string, maxIdle int) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof: %w", err)
	}
	srv := newServer(mux, maxIdle)
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving profiles at /debug/pprof/")
	return nil
}
