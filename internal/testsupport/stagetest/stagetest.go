// Package stagetest wires the stages of a batch as the gateway does
// (gateway.New), without HTTP: the catalog of datasets loaded from their
// stores, the jobs stage (the resolver and the layout), the use table, a
// chunk cache over the catalog's loader, the reader and its preloads, the
// transform and clip stage, the pack stage and the visit. A test of what a batch holds —
// its samples, its clips, its sequences, what skip mode leaves out and
// names — asks it with the query a client sends and reads the batch the
// visit serves, real stages from the store up; the gateway's tests keep
// the HTTP contract (statuses, headers).
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package stagetest

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/buckets"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/preload"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
	tvideo "github.com/brandgw/brand/transform/video"
)

// Spec names a dataset to serve (gateway.DatasetSpec).
type Spec = catalog.Spec

// Config is what a test sets of the stages; the zero value of every
// field but Datasets is the gateway's default, or a test's small one.
type Config struct {
	Datasets []Spec // the first is the default dataset
	// CacheSize bounds the chunk cache; default 64 MiB.
	CacheSize int64
	// SkipDamaged is --on-damaged-chunk=skip; SkipBadImages
	// --on-bad-image=skip.
	SkipDamaged, SkipBadImages bool
	// ChecksumRereads is gateway.Config.ChecksumRereads: 0 is its
	// default (2), negative none.
	ChecksumRereads int
	// Transforms and MaxImagePixels are the transform stage's pipelines
	// and pixel bound (0: transform.DefaultMaxPixels).
	Transforms     transform.Config
	MaxImagePixels int64
	// Defaults are the job parameters a query does not give; default
	// batch 8, window 2, seed 42 (the gateway tests' fixture).
	Defaults query.Defaults
	// Log hears the stages' log lines (a reader's damaged chunk, a
	// skipped clip); the zero value logs nothing.
	Log zerolog.Logger
	// Optimum computes the live statistics' optimal hit ratios, as the
	// gateway's planner does (planner.ForGateway); nil: none.
	Optimum livestats.Optimizer
	// GOPCacheBytes is gateway.Config.GOPCacheBytes: 0 half the decodes,
	// negative none. Workers is the transform stage's (default the
	// machine's cores).
	GOPCacheBytes int64
	Workers       int
}

// Stages are the wired stages of one node; Close, registered with the
// test's cleanup, ends what they run.
type Stages struct {
	Catalog  *catalog.Catalog
	Jobs     *resolve.Resolver
	Cache    *chunkcache.Cache
	Reader   *reader.Reader
	Stage    *tensorize.Stage
	Batches  *visit.Batches
	Stats    *livestats.Stats // what /stats says of the jobs and epochs served
	Registry *prometheus.Registry
}

// New wires the stages over cfg's datasets, loaded from their stores,
// and closes them when t ends.
func New(t testing.TB, cfg Config) *Stages {
	t.Helper()
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 64 << 20
	}
	switch {
	case cfg.ChecksumRereads == 0:
		cfg.ChecksumRereads = 2
	case cfg.ChecksumRereads < 0:
		cfg.ChecksumRereads = 0
	}
	if cfg.MaxImagePixels == 0 {
		cfg.MaxImagePixels = transform.DefaultMaxPixels
	}
	d := cfg.Defaults
	if d == (query.Defaults{}) {
		d = query.Defaults{BatchSize: 8, Window: 2, Seed: 42}
	}
	d.Fill()
	var limits query.Limits
	limits.Fill()
	reg := prometheus.NewRegistry()
	life := stopper.New()
	t.Cleanup(life.Stop)
	pipelines, err := transform.NewSet(cfg.Transforms, transform.Options{MaxPixels: cfg.MaxImagePixels})
	if err != nil {
		t.Fatal(err)
	}
	workers := cmp.Or(cfg.Workers, runtime.NumCPU())
	mem := memory.New(memory.Config{Budget: memory.Budget{Cache: cfg.CacheSize, Base: memory.DefaultBase, Copies: 2 * limits.MaxBatchBytes,
		Decodes: max(pipelines.MaxWork(), int64(workers)*16<<20)}, MaxWait: time.Minute, Busy: chunkcache.ErrBusy, Registry: reg})
	gopCache := cfg.GOPCacheBytes
	switch {
	case gopCache < 0:
		gopCache = 0
	case gopCache == 0:
		gopCache = mem.Budget().Decodes / 2
	}
	var names []string
	for _, s := range cfg.Datasets {
		names = append(names, s.Name)
	}
	s := &Stages{Registry: reg}
	s.Catalog = catalog.New(names, names[0], catalog.NewMetrics(reg), cfg.Log)
	fb := feedback.NewWith(feedback.Config{Log: cfg.Log, Buffers: mem})
	s.Stage = tensorize.New(tensorize.Config{Pipelines: pipelines, Workers: workers, Buffers: mem.Copies(), Decodes: mem.Decodes(),
		GOPCache: gopCache, GOPBudget: mem.Decodes().Within(gopCache),
		MaxBytes: limits.MaxBatchBytes, Group: life.Group("tensors: workers"), Registry: reg, Log: cfg.Log})
	packer := sequences.New(sequences.Config{Workers: s.Stage, MaxBytes: limits.MaxBatchBytes, Registry: reg})
	var noVideo error
	if !tvideo.Available() {
		noVideo = tvideo.ErrNoDecoder
	}
	// The node's kinds of batch, as gateway.New makes them.
	orders := layout.New(fb, units.New(units.Node{Pack: packer, Clips: s.Stage, Pipelines: s.Stage, Sizes: buckets.CatalogSizes{},
		SkipBadImages: cfg.SkipBadImages, SkipDamaged: cfg.SkipDamaged, NoVideo: noVideo, GOPCacheBytes: gopCache, Log: cfg.Log}))
	rt := route.Solo{}
	sched := usetable.New(usetable.Config{Orders: orders, Capacity: cfg.CacheSize, Local: rt.Local})
	reg.MustRegister(sched.Collectors()...)
	loader := catalog.NewLoader(s.Catalog, time.Minute, cfg.ChecksumRereads).WithMemory(mem, mem.Decodes())
	s.Cache = chunkcache.New(chunkcache.Config{Capacity: cfg.CacheSize, Loader: loader, Policy: usetable.NewPolicy(sched.Snapshot, sched.Ticks),
		MaxWait: time.Minute, Recycler: mem, Tasks: life.Group("chunkcache: loads, spills")})
	mem.Watch(s.Cache)
	stats := livestats.New(reg, cfg.CacheSize, cfg.Optimum, life.Group("livestats: optima"), cfg.Log)
	s.Stats = stats
	// A batch's later parts loaded while its first is read, bounded as
	// the gateway bounds them (its maxAhead).
	ahead := preload.New(preload.Config{Group: life.Group("preload: loads"), Limit: stopper.NewLimit(64), Cache: s.Cache, Timeout: time.Minute})
	s.Reader = reader.New(reader.Config{Cache: s.Cache, Loader: loader, Remote: rt, SkipDamaged: cfg.SkipDamaged,
		MaxBytes: limits.MaxBatchBytes, Copies: mem.Copies(), Through: mem.Decodes(), Assemblers: 2, MaxWait: time.Minute,
		Shared: sched.Shared, Preload: ahead, Tally: stats, Registry: reg, Log: cfg.Log})
	s.Batches = visit.New(visit.Config{UseTable: sched, Prefetch: usetable.NoPrefetch{}, Windows: 1, Orders: orders,
		Peers: rt, Reader: s.Reader, Stats: stats, Stage: s.Stage, SkipBadImages: cfg.SkipBadImages,
		Group: life.Group("visit: premade batches"), Log: cfg.Log})
	rc := resolve.Config{Catalog: s.Catalog, Versions: membership.Solo{Held: s.Catalog.HeldIDs}, Orders: orders, Snapshots: fb,
		Pipelines: pipelines, Limits: limits, Defaults: query.Query{Job: api.Job{Dataset: names[0],
			Params: shuffle.Params{Seed: d.Seed, BatchSize: d.BatchSize, Window: d.Window, World: 1, DropLast: d.DropLast}}}}
	s.Jobs = resolve.New(rc)
	ctx := context.Background()
	for _, spec := range cfg.Datasets {
		ds, err := catalog.Load(ctx, spec, s3backend.Config{}, cfg.Log)
		if err != nil {
			t.Fatal(err)
		}
		s.Catalog.Add(ds)
	}
	s.Catalog.MarkReady()
	return s
}

// Epoch is what /epoch/{epoch}?raw answers: the epoch's extent under the
// job raw (a request's query) names.
func (s *Stages) Epoch(ctx context.Context, raw string, epoch uint64) (api.EpochInfo, error) {
	j, err := s.Jobs.Epoch(ctx, raw, strconv.FormatUint(epoch, 10), "")
	if err != nil {
		return api.EpochInfo{}, err
	}
	return s.Jobs.Orders().Info(j.Source, j.Query.Job, j.Epoch)
}

// Layout lays batch m of epoch out under the job raw names, reading
// nothing: a manifest's samples.
func (s *Stages) Layout(ctx context.Context, raw string, epoch, m uint64) (*layout.Batch, error) {
	b, _, err := s.Jobs.Batch(ctx, raw, strconv.FormatUint(epoch, 10), strconv.FormatUint(m, 10))
	return b, err
}

// Batch is what a GET of batch m of epoch answers, read through the
// stages: the batch as served (Missing and MissingKeys name what skip
// mode left out) and its tar, or the error the gateway answers with
// (Status gives its status).
func (s *Stages) Batch(ctx context.Context, raw string, epoch, m uint64) (*layout.Batch, []byte, error) {
	b, err := s.Layout(ctx, raw, epoch, m)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.Batches.Read(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	defer v.Release()
	var body bytes.Buffer
	for _, p := range v.Parts {
		body.Write(p)
	}
	body.Write(chunkindex.EndOfArchive[:])
	return v.Batch, body.Bytes(), nil
}

// Served is a batch of an epoch as Batches reads it: the batch and its
// tar, or the error the gateway answers with.
type Served struct {
	Batch *layout.Batch
	Body  []byte
	Err   error
}

// EpochBatches reads every batch of epoch under the job raw names, in order.
func (s *Stages) EpochBatches(t testing.TB, raw string, epoch uint64) []Served {
	t.Helper()
	ctx := context.Background()
	info, err := s.Epoch(ctx, raw, epoch)
	if err != nil {
		t.Fatalf("epoch %d of %s: %v", epoch, raw, err)
	}
	out := make([]Served, info.Batches)
	for m := range out {
		b, body, err := s.Batch(ctx, raw, epoch, uint64(m))
		out[m] = Served{b, body, err}
	}
	return out
}

// Status and Message are the status and the error's text the gateway
// answers err with (internal/server/httperr): a failure on the server's
// side is told in the words that name no store.
func Status(err error) int { return httperr.Status(err) }

// Message is the text of the error the gateway answers err with.
func Message(err error) string {
	if p := httperr.Public(Status(err), err); p != "" {
		return p
	}
	return err.Error()
}

// Metric is the sum of the series of the metric name the stages have
// counted (what /metrics says of them), 0 if none.
func (s *Stages) Metric(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// Sample is a sample of a batch's tar: its key and its members by
// extension.
type Sample struct {
	Key   string
	Files map[string][]byte
}

// Samples decodes a batch's tar into its samples, in order, grouping
// consecutive members of one key.
func Samples(t testing.TB, body []byte) []Sample {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(body))
	var out []Sample
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("batch is not a valid tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		key, ext := chunkindex.SplitKey(h.Name)
		if len(out) == 0 || out[len(out)-1].Key != key {
			out = append(out, Sample{Key: key, Files: map[string][]byte{}})
		}
		out[len(out)-1].Files[ext] = data
	}
}
