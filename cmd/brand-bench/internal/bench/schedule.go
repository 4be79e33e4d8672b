package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/promtest"
	"github.com/brandgw/brand/s3backend"
)

// The schedule benchmark (brand-bench schedule) measures schedules
// (mix_schedule=, docs/shuffle.md §11.9) in two parts, on datasets in a
// MinIO it starts on loopback, through `brand serve` processes:
//
//   - Switches. Three sources read under a three-phase schedule — constant,
//     a linear ramp, then constant with one source's weight rising sharply
//     — through a gateway whose cold cache is smaller than the data, by
//     ranks that read each global step's batches together at a steady
//     pace (StepTime, as a training loop asks for its next batch). After
//     every step the harness scrapes the gateway's /metrics: the chunks a
//     batch of that step had to wait for because prefetch had not read
//     them (brand_cache_misses_total, as the mix section counts them) and
//     the time its batches waited in the gateway (brand_job_wait_seconds_
//     total: for chunks loading, prefetched or not, for room, for turns).
//     The 100 steps after each phase switch are set against the steady
//     state (every step neither among the first 100 nor among the 100
//     after a switch): batch latency p50 and p99, the steps that waited on
//     the store. The same run without prefetch (--prefetch-concurrency 0)
//     is the reference of what a switch costs when nothing reads ahead;
//     the gateway has no flag that turns off only prefetch's view of the
//     phases (layout.Pace), so the phase-blind prefetcher is not measured.
//   - Sources. One gateway each serving a schedule over 2, 10 and 100
//     datasets of the same bytes in all, read for a fixed number of steps: its resident
//     memory (VmRSS and VmHWM from /proc) and goroutines (go_goroutines)
//     at ready and after the reads.

// ScheduleConfig describes a schedule benchmark run. Zero fields take
// DefaultScheduleConfig's values.
type ScheduleConfig struct {
	// Switches: three sources of Samples each.
	Samples   int
	MeanBytes int64
	ChunkSize int64
	Seed      uint64
	BatchSize int // per rank
	World     int
	Window    int
	// CacheFraction is the cold cache's size, a fraction of the three
	// sources' bytes.
	CacheFraction float64
	// Switch1 and Switch2 are the steps where the ramp starts and where
	// the sharp phase starts (the ramp ends there); Steps the steps read.
	Switch1, Switch2, Steps int
	// After is the steps after a switch (and at the start) reported
	// apart from the steady state.
	After    int
	StepTime time.Duration

	// Sources: the mixtures' sizes, their samples (split evenly among the
	// sources, so that every mixture holds the same bytes), and the steps
	// read through each.
	SourceCounts  []int
	SourceSamples int
	SourceSteps   int

	GatewayArgs   []string
	ConfigTimeout time.Duration
	Harness
}

// DefaultScheduleConfig: three sources of 3,072 samples of 10 KiB (about
// 31 MB each) in 1 MiB chunks, batch 32 × world 2 (144 steps an epoch),
// window 4, a cache of 40 % of the data; the ramp from step 288 (epoch 2)
// to 576, where the third source jumps from 0.1 to 0.8; 864 steps (six
// epochs) at 20 ms a step; mixtures of 2, 10 and 100 sources of 6,400
// samples in all (64 MiB: 3,200 a source at 2, 64 at 100), 200 steps
// each.
func DefaultScheduleConfig() ScheduleConfig {
	return ScheduleConfig{Samples: 3072, MeanBytes: 10 << 10, ChunkSize: 1 << 20, Seed: 1,
		BatchSize: 32, World: 2, Window: 4, CacheFraction: 0.4,
		Switch1: 288, Switch2: 576, Steps: 864, After: 100, StepTime: 20 * time.Millisecond,
		SourceCounts: []int{2, 10, 100}, SourceSamples: 6400, SourceSteps: 200,
		ConfigTimeout: 10 * time.Minute}
}

// SmallScheduleConfig is a short run: 1,024 samples a source (48 steps
// an epoch), switches at 150 and 300, 450 steps, and 100 steps through
// each mixture of sources.
func SmallScheduleConfig() ScheduleConfig {
	c := DefaultScheduleConfig()
	c.Samples, c.Switch1, c.Switch2, c.Steps, c.SourceSteps = 1024, 150, 300, 450, 100
	return c
}

func (c ScheduleConfig) withDefaults() (ScheduleConfig, error) {
	fillZero(&c, DefaultScheduleConfig())
	if err := c.check(); err != nil {
		return c, err
	}
	if err := checkFractions(c.CacheFraction); err != nil {
		return c, err
	}
	switch {
	case !(0 < c.Switch1 && c.Switch1 < c.Switch2 && c.Switch2 < c.Steps):
		return c, fmt.Errorf("%w: want 0 < switch1 < switch2 < steps", ErrConfig)
	case c.Samples < 1 || c.BatchSize < 1 || c.World < 1 || c.Window < 1 || c.After < 1 || c.SourceSteps < 1:
		return c, fmt.Errorf("%w: samples, batch size, world, window, after and source steps >= 1", ErrConfig)
	}
	for _, n := range c.SourceCounts {
		if n < 2 || n > 100 || c.SourceSamples < n {
			return c, fmt.Errorf("%w: a mixture of %d sources of %d samples in all; 2..100 sources, a sample each at least", ErrConfig, n, c.SourceSamples)
		}
	}
	return c, nil
}

// schedSources are the switches' sources; scheduleText their schedule.
var schedSources = []string{"a", "b", "c"}

func (c ScheduleConfig) scheduleText() string {
	return fmt.Sprintf("0:a:0.6,b:0.3,c:0.1;%d~%d:a:0.3,b:0.6,c:0.1;%d:a:0.1,b:0.1,c:0.8", c.Switch1, c.Switch2, c.Switch2)
}

// The switches' configurations: the gateway as it is, and without
// prefetch.
const (
	schedPrefetch   = "prefetch"
	schedNoPrefetch = "no prefetch"
)

// ScheduleReport is a schedule benchmark's result: schedule.json.
type ScheduleReport struct {
	Header
	LoadAverage   [2]float64     `json:"load_average"` // 1-minute, before and after
	Schedule      string         `json:"schedule"`
	Samples       int            `json:"samples"` // per source
	MeanBytes     int64          `json:"mean_bytes"`
	Bytes         int64          `json:"bytes"` // the three sources'
	Chunks        int            `json:"chunks"`
	CacheBytes    int64          `json:"cache_bytes"`
	BatchSize     int            `json:"batch_size"`
	World         int            `json:"world"`
	Window        int            `json:"window"`
	StepMs        float64        `json:"step_ms"`
	Steps         int            `json:"steps"`
	Switches      []int          `json:"switches"`
	After         int            `json:"after"`
	Runs          []SchedRun     `json:"runs"`
	Sources       []SchedSources `json:"sources"`
	SourceSamples int            `json:"source_samples"`
	SourceSteps   int            `json:"source_steps"`
	Targets       []Target       `json:"targets"`
	Seconds       float64        `json:"seconds"`
}

// SchedRun is one gateway's run of the switches.
type SchedRun struct {
	Config  string        `json:"config"`
	Windows []SchedWindow `json:"windows"`
	// Per step: the slowest rank's batch latency (ms), the loads on
	// demand and the gateway's wait (ms) over the step's batches.
	StepMs     []float64 `json:"step_latency_ms"`
	StepLoads  []int     `json:"step_demand_loads"`
	StepWaitMs []float64 `json:"step_wait_ms"`
	StoreBytes float64   `json:"store_bytes"`
	Seconds    float64   `json:"seconds"`
}

// SchedWindow is a run's figures over a range of steps.
type SchedWindow struct {
	Name  string  `json:"name"`
	Steps int     `json:"steps"`
	P50Ms float64 `json:"p50_ms"` // over the window's batches (every rank's)
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// StalledSteps are the steps a batch of which waited for a chunk
	// prefetch had not read; DemandLoads those chunks.
	StalledSteps int     `json:"stalled_steps"`
	DemandLoads  int     `json:"demand_loads"`
	WaitMs       float64 `json:"wait_ms"` // the gateway's wait over the window's batches
}

// SchedSources is a gateway serving a schedule over n sources.
type SchedSources struct {
	Sources         int     `json:"sources"`
	ReadyRSS        int64   `json:"ready_rss"`
	ReadyGoroutines int     `json:"ready_goroutines"`
	RSS             int64   `json:"rss"` // after the reads
	PeakRSS         int64   `json:"peak_rss"`
	Goroutines      int     `json:"goroutines"`
	HeapInuse       int64   `json:"heap_inuse"`
	Batches         int     `json:"batches"`
	SamplesPerSec   float64 `json:"samples_per_sec"`
	DatasetBytes    int64   `json:"dataset_bytes"` // all n sources'
}

// RunSchedule runs the schedule benchmark.
func RunSchedule(ctx context.Context, cfg ScheduleConfig) (*ScheduleReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &ScheduleReport{Header: newHeader(started, cfg.Command),
		Schedule: cfg.scheduleText(), Samples: cfg.Samples, MeanBytes: cfg.MeanBytes, BatchSize: cfg.BatchSize, World: cfg.World,
		Window: cfg.Window, StepMs: ms(cfg.StepTime), Steps: cfg.Steps, Switches: []int{cfg.Switch1, cfg.Switch2}, After: cfg.After,
		SourceSamples: cfg.SourceSamples, SourceSteps: cfg.SourceSteps}
	rep.LoadAverage[0] = loadAverage()
	srv, err := miniotest.Start(ctx, filepath.Join(cfg.WorkDir, "schedule-minio"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	const bucket = "schedule"
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		return nil, err
	}
	sb := &schedBed{cfg: cfg, srv: srv, bucket: bucket}
	var urls []string
	for i, name := range schedSources {
		u, ix, err := sb.ensure(ctx, name, cfg.Samples, cfg.Seed+uint64(i))
		if err != nil {
			return nil, err
		}
		urls = append(urls, name+"="+u)
		rep.Bytes += ix.TotalBytes()
		rep.Chunks += ix.NumChunks()
	}
	rep.CacheBytes = int64(cfg.CacheFraction * float64(rep.Bytes))
	logf(cfg.Log, "switches: 3 sources, %d chunks, %s; cache %s; schedule %s", rep.Chunks, sizeString(rep.Bytes), sizeString(rep.CacheBytes), rep.Schedule)
	for _, config := range []string{schedPrefetch, schedNoPrefetch} {
		run, err := sb.switches(ctx, config, urls, rep.CacheBytes)
		if err != nil {
			return nil, err
		}
		for _, w := range run.Windows {
			logf(cfg.Log, "%s, %s: %d steps, p50 %.1f ms, p99 %.1f ms, %d steps stalled (%d loads on demand), wait %.0f ms",
				config, w.Name, w.Steps, w.P50Ms, w.P99Ms, w.StalledSteps, w.DemandLoads, w.WaitMs)
		}
		rep.Runs = append(rep.Runs, run)
	}
	for _, n := range cfg.SourceCounts {
		s, err := sb.sources(ctx, n)
		if err != nil {
			return nil, err
		}
		logf(cfg.Log, "%d sources: RSS %s at ready, %s after %d batches (peak %s), goroutines %d then %d",
			n, sizeString(s.ReadyRSS), sizeString(s.RSS), s.Batches, sizeString(s.PeakRSS), s.ReadyGoroutines, s.Goroutines)
		rep.Sources = append(rep.Sources, s)
	}
	rep.Targets = rep.targets()
	rep.LoadAverage[1] = loadAverage()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// schedBed is the schedule benchmark's store and gateways.
type schedBed struct {
	cfg    ScheduleConfig
	srv    *miniotest.Server
	bucket string
}

// ensure packs a synthetic dataset into the bucket unless an earlier run
// did, and returns its s3:// URL and index.
func (sb *schedBed) ensure(ctx context.Context, name string, samples int, seed uint64) (string, *chunkindex.Index, error) {
	cfg := sb.cfg
	prefix := fmt.Sprintf("%s-%d-%d-%d-%d", name, samples, cfg.MeanBytes, cfg.ChunkSize, seed)
	store, err := s3backend.NewS3(sb.srv.Config(), sb.bucket, prefix)
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	u := "s3://" + sb.bucket + "/" + prefix
	if ix, err := stored.ReadIndex(ctx, store); err == nil {
		return u, ix, nil
	} else if !errors.Is(err, s3backend.ErrNotFound) {
		return "", nil, fmt.Errorf("bench: reading the index of %s: %w", name, err)
	}
	src := filepath.Join(cfg.WorkDir, "schedule-src-"+name)
	_ = os.RemoveAll(src)
	defer os.RemoveAll(src)
	spec := synth.Spec{Samples: samples, MeanBytes: cfg.MeanBytes, Classes: 100, Seed: seed}
	if err := spec.WriteTree(src); err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: cfg.ChunkSize, Shuffle: true, Seed: seed, Parallel: 2, Name: name, Overwrite: true})
	if err != nil {
		return "", nil, fmt.Errorf("bench: packing %s: %w", name, err)
	}
	return u, res.Index, nil
}

// start starts a gateway over datasets (NAME=URL) with a cache of cache
// bytes.
func (sb *schedBed) start(ctx context.Context, name string, datasets []string, cache int64, extra ...string) (*gatewayProc, error) {
	cfg := sb.cfg
	args := []string{"serve", "--listen", "127.0.0.1:0", "--cache-size", strconv.FormatInt(cache, 10),
		"--s3-endpoint", sb.srv.URL(), "--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	for _, d := range datasets {
		args = append(args, "--dataset", d)
	}
	args = append(append(args, extra...), cfg.GatewayArgs...)
	return startGateway(ctx, cfg.GatewayBinary, args, gatewayEnv(sb.srv.AccessKey, sb.srv.SecretKey), filepath.Join(cfg.WorkDir, name+".log"))
}

// schedCounters are the gateway's counters a step is measured by.
type schedCounters struct{ misses, wait, store float64 }

func schedCountersOf(m promtest.Scrape) schedCounters {
	var c schedCounters
	for series, v := range m {
		name, _, _ := strings.Cut(series, "{")
		switch name {
		case "brand_cache_misses_total":
			c.misses += v
		case "brand_job_wait_seconds_total":
			c.wait += v
		case "brand_backend_read_bytes_total":
			c.store += v
		}
	}
	return c
}

// switches reads cfg.Steps global steps of the three-phase schedule
// through a fresh gateway, the ranks of each step together, at most one
// step per StepTime, scraping the gateway's counters after each step.
func (sb *schedBed) switches(ctx context.Context, config string, datasets []string, cache int64) (SchedRun, error) {
	cfg := sb.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.ConfigTimeout)
	defer cancel()
	var extra []string
	if config == schedNoPrefetch {
		extra = []string{"--prefetch-concurrency", "0"}
	}
	g, err := sb.start(ctx, "schedule-"+strings.ReplaceAll(config, " ", "-"), datasets, cache, extra...)
	if err != nil {
		return SchedRun{}, err
	}
	defer g.kill()
	job := url.Values{}
	job.Set("mix_schedule", cfg.scheduleText())
	job.Set("seed", "7")
	job.Set("window", strconv.Itoa(cfg.Window))
	job.Set("batch_size", strconv.Itoa(cfg.BatchSize))
	job.Set("world", strconv.Itoa(cfg.World))
	q := job.Encode()
	hc := &http.Client{Transport: newTransport(cfg.World + 2)}
	defer hc.CloseIdleConnections()
	counters := func() (schedCounters, error) {
		m, err := g.metrics(ctx)
		return schedCountersOf(m), err
	}
	run := SchedRun{Config: config}
	lat := make([][]time.Duration, cfg.Steps) // per step, every rank's
	began := time.Now()
	prev, err := counters()
	if err != nil {
		return SchedRun{}, err
	}
	first := prev
	step := 0
	for e := 0; step < cfg.Steps; e++ {
		var info struct {
			Batches int `json:"batches"`
		}
		if err := getJSON(ctx, hc, g.base+fmt.Sprintf("/epoch/%d?", e)+q+"&rank=0", &info); err != nil {
			return SchedRun{}, err
		}
		if info.Batches < 1 {
			return SchedRun{}, fmt.Errorf("bench: epoch %d has no batches", e)
		}
		for m := 0; m < info.Batches && step < cfg.Steps; m, step = m+1, step+1 {
			next := time.Now().Add(cfg.StepTime)
			d := make([]time.Duration, cfg.World)
			errs := make([]error, cfg.World)
			var wg sync.WaitGroup
			for r := range cfg.World {
				wg.Go(func() {
					start := time.Now()
					_, errs[r] = readBatch(ctx, hc, g.base+fmt.Sprintf("/epoch/%d/batch/%d?", e, m)+q+"&rank="+strconv.Itoa(r))
					d[r] = time.Since(start)
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return SchedRun{}, fmt.Errorf("bench: %s, step %d: %w", config, step, err)
			}
			now, err := counters()
			if err != nil {
				return SchedRun{}, err
			}
			lat[step] = d
			slowest := time.Duration(0)
			for _, x := range d {
				slowest = max(slowest, x)
			}
			run.StepMs = append(run.StepMs, ms(slowest))
			run.StepLoads = append(run.StepLoads, int(now.misses-prev.misses))
			run.StepWaitMs = append(run.StepWaitMs, 1000*(now.wait-prev.wait))
			prev = now
			time.Sleep(time.Until(next))
		}
	}
	run.Seconds = time.Since(began).Seconds()
	run.StoreBytes = prev.store - first.store
	run.Windows = cfg.windows(run, lat)
	// The gateway's last /metrics and /stats are kept beside its log, to
	// read what the figures do not show (prefetch queued, dropped, unused).
	for _, f := range []string{"metrics", "stats"} {
		if err := saveURL(ctx, hc, g.base+"/"+f, filepath.Join(cfg.WorkDir, "schedule-"+strings.ReplaceAll(config, " ", "-")+"."+f)); err != nil {
			return SchedRun{}, err
		}
	}
	return run, g.stop(10 * time.Second)
}

// windows cuts a run into the first After steps (cold start), the After
// steps after each switch, and the rest: the steady state.
func (c ScheduleConfig) windows(run SchedRun, lat [][]time.Duration) []SchedWindow {
	type span struct {
		name     string
		from, to int
	}
	spans := []span{
		{"start (cold)", 0, min(c.After, c.Switch1)},
		{fmt.Sprintf("after switch 1 (ramp, step %d)", c.Switch1), c.Switch1, min(c.Switch1+c.After, c.Switch2)},
		{fmt.Sprintf("after switch 2 (c 0.1 → 0.8, step %d)", c.Switch2), c.Switch2, min(c.Switch2+c.After, c.Steps)},
	}
	in := make([]bool, c.Steps)
	for _, s := range spans {
		for i := s.from; i < s.to; i++ {
			in[i] = true
		}
	}
	window := func(name string, steps []int) SchedWindow {
		w := SchedWindow{Name: name, Steps: len(steps)}
		var all []time.Duration
		for _, i := range steps {
			all = append(all, lat[i]...)
			if run.StepLoads[i] > 0 {
				w.StalledSteps++
			}
			w.DemandLoads += run.StepLoads[i]
			w.WaitMs += run.StepWaitMs[i]
		}
		w.P50Ms, w.P99Ms, w.MaxMs = ms(percentile(all, 50)), ms(percentile(all, 99)), ms(percentile(all, 100))
		return w
	}
	var steady []int
	for i := range c.Steps {
		if !in[i] {
			steady = append(steady, i)
		}
	}
	out := []SchedWindow{window("steady state", steady)}
	for _, s := range spans {
		steps := make([]int, 0, s.to-s.from)
		for i := s.from; i < s.to; i++ {
			steps = append(steps, i)
		}
		out = append(out, window(s.name, steps))
	}
	return out
}

// sources starts a gateway over n small datasets, serves a two-phase
// schedule over them for cfg.SourceSteps steps (world 1) and reads its
// memory and goroutines at ready and after the reads.
func (sb *schedBed) sources(ctx context.Context, n int) (SchedSources, error) {
	cfg := sb.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.ConfigTimeout)
	defer cancel()
	out := SchedSources{Sources: n}
	var datasets, w1, w2 []string
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		u, ix, err := sb.ensure(ctx, name, cfg.SourceSamples/n, cfg.Seed+100+uint64(i))
		if err != nil {
			return out, err
		}
		out.DatasetBytes += ix.TotalBytes()
		datasets = append(datasets, name+"="+u)
		w1 = append(w1, name+":1")
		wt := "1"
		if i == 0 {
			wt = strconv.Itoa(n) // the first source rises to half
		}
		w2 = append(w2, name+":"+wt)
	}
	// The same cache for every n, holding the 100 sources' data.
	const cache = 128 << 20
	pprofAddr, err := freeAddr()
	if err != nil {
		return out, err
	}
	g, err := sb.start(ctx, fmt.Sprintf("schedule-sources-%d", n), datasets, cache, "--pprof", pprofAddr)
	if err != nil {
		return out, err
	}
	defer g.kill()
	pid := g.cmd.Process.Pid
	goroutines := func() (int, int64, error) {
		m, err := g.metrics(ctx)
		return int(m["go_goroutines"]), int64(m["go_memstats_heap_inuse_bytes"]), err
	}
	out.ReadyRSS = residentRSS(pid)
	if out.ReadyGoroutines, _, err = goroutines(); err != nil {
		return out, err
	}
	const batch = 64
	job := url.Values{}
	job.Set("mix_schedule", "0:"+strings.Join(w1, ",")+fmt.Sprintf(";%d:", cfg.SourceSteps/2)+strings.Join(w2, ","))
	job.Set("seed", "7")
	job.Set("window", "2")
	job.Set("batch_size", strconv.Itoa(batch))
	q := job.Encode()
	hc := &http.Client{Transport: newTransport(2)}
	defer hc.CloseIdleConnections()
	began := time.Now()
	samples := 0
	step := 0
	for e := 0; step < cfg.SourceSteps; e++ {
		var info struct {
			Batches int `json:"batches"`
		}
		if err := getJSON(ctx, hc, g.base+fmt.Sprintf("/epoch/%d?", e)+q, &info); err != nil {
			return out, err
		}
		if info.Batches < 1 {
			return out, fmt.Errorf("bench: epoch %d has no batches", e)
		}
		for m := 0; m < info.Batches && step < cfg.SourceSteps; m, step = m+1, step+1 {
			k, err := readBatch(ctx, hc, g.base+fmt.Sprintf("/epoch/%d/batch/%d?", e, m)+q)
			if err != nil {
				return out, fmt.Errorf("bench: %d sources, step %d: %w", n, step, err)
			}
			samples += k
		}
	}
	out.Batches = step
	out.SamplesPerSec = float64(samples) / time.Since(began).Seconds()
	out.RSS, out.PeakRSS = residentRSS(pid), g.peakRSS()
	if out.Goroutines, out.HeapInuse, err = goroutines(); err != nil {
		return out, err
	}
	// The goroutines' stacks and the heap's profile are kept beside the
	// gateway's log, to say what grows with the sources.
	// The heap is profiled as the reads left it, then again after a
	// collection (heap-gc): the first counts garbage not yet collected,
	// the second only what is live. The last /metrics (memstats) say how
	// much of the RSS is heap in use and how much the runtime keeps idle.
	for f, u := range map[string]string{
		"goroutine": "http://" + pprofAddr + "/debug/pprof/goroutine?debug=1",
		"heap":      "http://" + pprofAddr + "/debug/pprof/heap?debug=1",
		"metrics":   g.base + "/metrics",
	} {
		if err := saveURL(ctx, hc, u, filepath.Join(cfg.WorkDir, fmt.Sprintf("schedule-sources-%d.%s", n, f))); err != nil {
			return out, err
		}
	}
	if err := saveURL(ctx, hc, "http://"+pprofAddr+"/debug/pprof/heap?debug=1&gc=1", filepath.Join(cfg.WorkDir, fmt.Sprintf("schedule-sources-%d.heap-gc", n))); err != nil {
		return out, err
	}
	return out, g.stop(10 * time.Second)
}

// residentRSS reads VmRSS, the resident set size now, from
// /proc/<pid>/status; 0 where the platform has no /proc.
func residentRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// saveURL GETs u into the file path.
func saveURL(ctx context.Context, hc *http.Client, u, path string) error {
	b, err := getBody(ctx, hc, u)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
