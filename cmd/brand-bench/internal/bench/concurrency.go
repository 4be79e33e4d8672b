package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/s3backend"
)

// The concurrency benchmark (brand-bench concurrency) measures one
// gateway, its cache warm and holding the dataset, under many concurrent
// streams of requests: a training job that outgrows one machine opens
// one a rank (8 ranks × up to 8 loader workers a node, a hundred nodes),
// and its step waits for its slowest rank. At each concurrency C it runs
// two shapes for Duration each:
//
//   - one job: C ranks r of world C of one named job, each reading its
//     own batches in order, one request in flight;
//   - C jobs: C named jobs of world 1, each reading its own order.
//
// Then the ranks of one job read through a cluster of three nodes, one
// of them killed halfway (concurrencycluster.go).
//
// A request answered 503 is retried after its Retry-After (counted as
// refused; the batch's latency runs from its first request to its
// answer, the waits included, as a training step sees it); any other
// failure is an error. The
// gateway's resident set (VmRSS, sampled through the run, and VmHWM) and
// goroutines (go_goroutines) are read while the streams read. The dataset
// is generated on the local disk: with the cache warm the store is not
// read, so none is started.

// ConcurrencyConfig describes a concurrency benchmark run. Zero fields
// take DefaultConcurrencyConfig's values.
type ConcurrencyConfig struct {
	Samples   int
	MeanBytes int64
	ChunkSize int64
	Seed      uint64
	BatchSize int // per rank
	Window    int
	// Streams are the concurrencies measured, each for Duration.
	Streams  []int
	Duration time.Duration
	// CacheSize is the gateway's cache (--cache-size), at least the
	// dataset; MemoryLimit its --memory-limit, which its peak resident
	// set is held to.
	CacheSize   int64
	MemoryLimit int64
	// ClusterStreams ranks of one job read through a cluster of three
	// nodes for ClusterDuration, one node killed halfway; SkipCluster
	// leaves the cluster out.
	ClusterStreams  int
	ClusterDuration time.Duration
	SkipCluster     bool `zero:"kept"`
	GatewayArgs     []string
	ConfigTimeout   time.Duration
	Harness
}

// DefaultConcurrencyConfig: the reproduction of the issue that
// measured the bound per job: 100,000 samples of 4 KiB (about 560 MiB
// in tar) in 8 MiB chunks, batch 16, window 4, 8 s at each of 8, 64, 512
// and 1,024 streams, a cache of 2 GiB and --memory-limit 4GiB.
func DefaultConcurrencyConfig() ConcurrencyConfig {
	return ConcurrencyConfig{Samples: 100_000, MeanBytes: 4 << 10, ChunkSize: 8 << 20, Seed: 1, BatchSize: 16, Window: 4,
		Streams: []int{8, 64, 512, 1024}, Duration: 8 * time.Second, CacheSize: 2 << 30, MemoryLimit: 4 << 30,
		ClusterStreams: 1024, ClusterDuration: 16 * time.Second, ConfigTimeout: 20 * time.Minute}
}

// SmallConcurrencyConfig is a short run for a test or a look: 4,096
// samples of 2 KiB in 1 MiB chunks, 0.5 s at 4 and at 96 streams (past
// 64, the bound a job had before it knew its width), a cache of 64 MiB
// and --memory-limit 512MiB.
func SmallConcurrencyConfig() ConcurrencyConfig {
	c := DefaultConcurrencyConfig()
	c.Samples, c.MeanBytes, c.ChunkSize = 4096, 2<<10, 1<<20
	c.Streams, c.Duration = []int{4, 96}, 500*time.Millisecond
	c.CacheSize, c.MemoryLimit = 64<<20, 512<<20
	c.ClusterStreams, c.ClusterDuration = 48, 2*time.Second
	return c
}

func (c ConcurrencyConfig) withDefaults() (ConcurrencyConfig, error) {
	fillZero(&c, DefaultConcurrencyConfig())
	if err := c.check(); err != nil {
		return c, err
	}
	switch {
	case c.Samples < 1 || c.MeanBytes < 1 || c.ChunkSize < 1 || c.BatchSize < 1 || c.Window < 1 || c.Duration <= 0:
		return c, fmt.Errorf("%w: samples, mean bytes, chunk size, batch size, window and duration > 0", ErrConfig)
	case len(c.Streams) == 0:
		return c, fmt.Errorf("%w: no concurrency to measure", ErrConfig)
	case c.ClusterStreams < 1 || c.ClusterDuration <= 0:
		return c, fmt.Errorf("%w: the cluster's streams and duration > 0", ErrConfig)
	case c.CacheSize < 1 || c.MemoryLimit <= c.CacheSize:
		return c, fmt.Errorf("%w: a cache of %d bytes under a memory limit of %d; the limit holds the cache and more", ErrConfig, c.CacheSize, c.MemoryLimit)
	}
	for _, n := range c.Streams {
		if n < 1 {
			return c, fmt.Errorf("%w: %d streams", ErrConfig, n)
		}
	}
	return c, nil
}

// The shapes of a concurrency point.
const (
	ShapeOneJob  = "one job"
	ShapeManyJob = "as many jobs"
)

// ConcurrencyReport is a concurrency benchmark's result: concurrency.json.
type ConcurrencyReport struct {
	Header
	LoadAverage [2]float64 `json:"load_average"` // 1-minute, before and after
	Samples     int        `json:"samples"`
	Chunks      int        `json:"chunks"`
	Bytes       int64      `json:"bytes"`
	BatchSize   int        `json:"batch_size"`
	Window      int        `json:"window"`
	CacheBytes  int64      `json:"cache_bytes"`
	MemoryLimit int64      `json:"memory_limit"`
	DurationS   float64    `json:"duration_s"` // at each point
	// WarmSeconds is the epoch read to warm the cache; ReadyRSS and
	// ReadyGoroutines the gateway's after it.
	WarmSeconds     float64            `json:"warm_seconds"`
	ReadyRSS        int64              `json:"ready_rss"`
	ReadyGoroutines int                `json:"ready_goroutines"`
	Points          []ConcurrencyPoint `json:"points"`
	// Cluster is the three nodes' run, one killed halfway (nil: left out).
	Cluster *ConcurrencyCluster `json:"cluster,omitempty"`
	PeakRSS int64               `json:"peak_rss"` // VmHWM over the whole run
	// StoreBytes is what the gateway read from the store during the
	// points: none, with the cache warm.
	StoreBytes int64    `json:"store_bytes"`
	Targets    []Target `json:"targets"`
	Seconds    float64  `json:"seconds"`
}

// ConcurrencyPoint is one shape at one concurrency.
type ConcurrencyPoint struct {
	Shape         string  `json:"shape"`
	Streams       int     `json:"streams"`
	Batches       int64   `json:"batches"`
	BatchesPerSec float64 `json:"batches_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
	// Refused are the answers 503 (each retried after its Retry-After);
	// Errors every other failure, FirstError the first's text.
	Refused    int64  `json:"refused"`
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// RSS and Goroutines are the gateway's largest sampled during the
	// point.
	RSS        int64 `json:"rss"`
	Goroutines int   `json:"goroutines"`
	// CPUPerBatchUs is the gateway's CPU time (user and system) over the
	// point per batch served: what a batch costs it, whatever else the
	// machine runs.
	CPUPerBatchUs float64 `json:"cpu_per_batch_us"`
	Seconds       float64 `json:"seconds"`
}

// RunConcurrency runs the concurrency benchmark.
func RunConcurrency(ctx context.Context, cfg ConcurrencyConfig) (*ConcurrencyReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &ConcurrencyReport{Header: newHeader(started, cfg.Command), Samples: cfg.Samples, BatchSize: cfg.BatchSize,
		Window: cfg.Window, CacheBytes: cfg.CacheSize, MemoryLimit: cfg.MemoryLimit, DurationS: cfg.Duration.Seconds()}
	rep.LoadAverage[0] = loadAverage()
	dir, ix, err := cfg.ensure(ctx)
	if err != nil {
		return nil, err
	}
	rep.Chunks, rep.Bytes = ix.NumChunks(), ix.TotalBytes()
	if rep.Bytes > cfg.CacheSize {
		return nil, fmt.Errorf("%w: the dataset's %s do not fit in a cache of %s: the benchmark measures a warm cache", ErrConfig, sizeString(rep.Bytes), sizeString(cfg.CacheSize))
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ConfigTimeout)
	defer cancel()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--dataset", "d=" + dir,
		"--cache-size", strconv.FormatInt(cfg.CacheSize, 10), "--memory-limit", strconv.FormatInt(cfg.MemoryLimit, 10),
		"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	g, err := startGateway(ctx, cfg.GatewayBinary, append(args, cfg.GatewayArgs...), gatewayEnv("", ""), filepath.Join(cfg.WorkDir, "concurrency.log"))
	if err != nil {
		return nil, err
	}
	defer g.kill()
	pid := g.cmd.Process.Pid
	logf(cfg.Log, "concurrency: %d samples in %d chunks (%s); cache %s, memory limit %s", cfg.Samples, rep.Chunks, sizeString(rep.Bytes),
		sizeString(cfg.CacheSize), sizeString(cfg.MemoryLimit))

	began := time.Now()
	if err := cfg.warm(ctx, g); err != nil {
		return nil, err
	}
	rep.WarmSeconds = time.Since(began).Seconds()
	rep.ReadyRSS = residentRSS(pid)
	m, err := g.metrics(ctx)
	if err != nil {
		return nil, err
	}
	rep.ReadyGoroutines = int(m["go_goroutines"])
	storeBefore := m.Sum("brand_backend_read_bytes_total")
	for _, shape := range []string{ShapeOneJob, ShapeManyJob} {
		for _, n := range cfg.Streams {
			p, err := cfg.point(ctx, g, shape, n)
			if err != nil {
				return nil, err
			}
			logf(cfg.Log, "%s, %d streams: %.0f batches/s, p50 %.2f ms, p99 %.2f ms, max %.1f ms; %d refused, %d errors; RSS %s, %d goroutines, %.0f µs of CPU a batch",
				shape, n, p.BatchesPerSec, p.P50Ms, p.P99Ms, p.MaxMs, p.Refused, p.Errors, sizeString(p.RSS), p.Goroutines, p.CPUPerBatchUs)
			rep.Points = append(rep.Points, p)
		}
	}
	rep.PeakRSS = g.peakRSS()
	if m, err = g.metrics(ctx); err != nil {
		return nil, err
	}
	rep.StoreBytes = int64(m.Sum("brand_backend_read_bytes_total") - storeBefore)
	// The gateway's last /metrics are kept beside its log, to read what
	// the figures do not show.
	if err := saveURL(ctx, g.hc, g.base+"/metrics", filepath.Join(cfg.WorkDir, "concurrency.metrics")); err != nil {
		return nil, err
	}
	if err := g.stop(10 * time.Second); err != nil {
		return nil, err
	}
	if !cfg.SkipCluster {
		if rep.Cluster, err = cfg.cluster(ctx, dir); err != nil {
			return nil, err
		}
		cl := rep.Cluster
		logf(cfg.Log, "cluster of %d, %d ranks, a node killed after %.1f s: before %.0f batches/s, p99 %.1f ms; after %.0f batches/s, p99 %.1f ms, max %.1f ms; %d failed over, %d refused, %d errors",
			cl.Nodes, cl.Streams, cl.KilledAfterS, cl.Before.BatchesPerSec, cl.Before.P99Ms, cl.After.BatchesPerSec, cl.After.P99Ms, cl.After.MaxMs, cl.FailedOver, cl.Refused, cl.Errors)
	}
	rep.Targets = rep.targets()
	rep.LoadAverage[1] = loadAverage()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// ensure generates and packs the dataset into the work directory unless
// an earlier run did, and returns its directory and index.
func (c ConcurrencyConfig) ensure(ctx context.Context) (string, *chunkindex.Index, error) {
	dir := filepath.Join(c.WorkDir, fmt.Sprintf("concurrency-%d-%d-%d-%d", c.Samples, c.MeanBytes, c.ChunkSize, c.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	if ix, err := stored.ReadIndex(ctx, store); err == nil {
		return dir, ix, nil
	} else if !errors.Is(err, s3backend.ErrNotFound) {
		return "", nil, fmt.Errorf("bench: reading the index in %s: %w", dir, err)
	}
	src := dir + "-src"
	_ = os.RemoveAll(src)
	defer os.RemoveAll(src)
	spec := synth.Spec{Samples: c.Samples, MeanBytes: c.MeanBytes, Classes: 100, Seed: c.Seed}
	if err := spec.WriteTree(src); err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: c.ChunkSize, Shuffle: true, Seed: c.Seed, Parallel: 2, Name: "d", Overwrite: true})
	if err != nil {
		return "", nil, fmt.Errorf("bench: packing: %w", err)
	}
	return dir, res.Index, nil
}

// warm reads an epoch through the gateway, so that its cache holds the
// dataset before any point is measured.
func (c ConcurrencyConfig) warm(ctx context.Context, g *gatewayProc) error {
	const conns, bs = 4, 256
	hc := &http.Client{Transport: newTransport(conns)}
	defer hc.CloseIdleConnections()
	q := fmt.Sprintf("job=warm&batch_size=%d&window=%d", bs, c.Window)
	batches := (c.Samples + bs - 1) / bs
	var next atomic.Int64
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for m := next.Add(1) - 1; m < int64(batches); m = next.Add(1) - 1 {
				if _, err := readBatch(ctx, hc, g.base+fmt.Sprintf("/epoch/0/batch/%d?", m)+q); err != nil {
					errs[i] = fmt.Errorf("bench: warming the cache: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// point runs n streams of shape for the configured duration and returns
// their figures and the gateway's.
func (c ConcurrencyConfig) point(ctx context.Context, g *gatewayProc, shape string, n int) (ConcurrencyPoint, error) {
	p := ConcurrencyPoint{Shape: shape, Streams: n}
	hc := &http.Client{Transport: newTransport(n)}
	defer hc.CloseIdleConnections()
	// Each point's jobs are named afresh, so that no point starts where
	// another left a job's streams.
	query := func(i int) string {
		if shape == ShapeOneJob {
			return fmt.Sprintf("job=wide-%d&batch_size=%d&window=%d&world=%d&rank=%d", n, c.BatchSize, c.Window, n, i)
		}
		return fmt.Sprintf("job=many-%d-%d&batch_size=%d&window=%d&seed=%d", n, i, c.BatchSize, c.Window, i)
	}
	var info struct {
		Batches int `json:"batches"`
	}
	if err := getJSON(ctx, hc, g.base+"/epoch/0?"+query(0), &info); err != nil {
		return p, err
	}
	if info.Batches < 1 {
		return p, fmt.Errorf("bench: %s at %d streams: an epoch of no batches", shape, n)
	}

	var (
		batches, refused, errCount atomic.Int64
		firstErr                   atomic.Pointer[string]
	)
	lat := make([][]time.Duration, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(c.Duration)
	watch := make(chan struct{})
	go func() { // the gateway's memory and goroutines while the streams read
		defer close(watch)
		pid := g.cmd.Process.Pid
		for {
			p.RSS = max(p.RSS, residentRSS(pid))
			if m, err := g.metrics(ctx); err == nil {
				p.Goroutines = max(p.Goroutines, int(m["go_goroutines"]))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(max(c.Duration/16, 50*time.Millisecond)):
			}
			if time.Now().After(deadline) {
				return
			}
		}
	}()
	began, cpu0 := time.Now(), processCPU(g.cmd.Process.Pid)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			q := query(i)
			start := time.Now() // of the batch, retries and their waits included
			for e, m := 0, 0; time.Now().Before(deadline); {
				status, retry, err := getBatch(ctx, hc, g.base+fmt.Sprintf("/epoch/%d/batch/%d?", e, m)+q)
				switch {
				case ctx.Err() != nil:
					return
				case status == http.StatusServiceUnavailable:
					refused.Add(1)
					wait := retry
					if left := time.Until(deadline); wait > left {
						wait = left
					}
					time.Sleep(wait)
					continue // the same batch again
				case err != nil:
					errCount.Add(1)
					s := err.Error()
					firstErr.CompareAndSwap(nil, &s)
				default:
					batches.Add(1)
					lat[i] = append(lat[i], time.Since(start))
				}
				if m++; m == info.Batches {
					e, m = e+1, 0
				}
				start = time.Now()
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(began), processCPU(g.cmd.Process.Pid)-cpu0
	cancel()
	<-watch
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	p.Batches, p.Refused, p.Errors = batches.Load(), refused.Load(), errCount.Load()
	if s := firstErr.Load(); s != nil {
		p.FirstError = *s
	}
	p.Seconds = elapsed.Seconds()
	p.BatchesPerSec = float64(p.Batches) / p.Seconds
	if p.Batches > 0 {
		p.CPUPerBatchUs = float64(cpu.Microseconds()) / float64(p.Batches)
	}
	p.P50Ms, p.P99Ms, p.MaxMs = ms(percentile(all, 50)), ms(percentile(all, 99)), ms(percentile(all, 100))
	return p, nil
}

// getBatch GETs a batch and reads its body whole: its status, the
// Retry-After of a 503 (2 s if it names none), and an error for a
// status other than 200 or a body cut short.
func getBatch(ctx context.Context, hc *http.Client, u string) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return resp.StatusCode, 0, err
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		retry := 2 * time.Second
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			retry = time.Duration(s) * time.Second
		}
		return resp.StatusCode, retry, fmt.Errorf("%s: 503", u)
	}
	if resp.StatusCode != http.StatusOK || n != resp.ContentLength {
		return resp.StatusCode, 0, fmt.Errorf("%s: %d, %d of %d bytes", u, resp.StatusCode, n, resp.ContentLength)
	}
	return resp.StatusCode, 0, nil
}
