package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
)

// brandRun is one gateway process serving one job for several epochs.
type brandRun struct {
	fraction   float64
	cacheBytes int64
	policy     string
	opts       brandOpts
	epochs     []brandEpoch
	// ahead are warm epochs read after epochs, one per Config.AheadLevels
	// entry, by clients keeping that many batches in flight.
	ahead    []aheadEpoch
	stats    gatewayStats // per-epoch accesses, loads and backend bytes
	counters map[string]float64
	start    time.Duration // from starting the process to ready
	startCPU time.Duration // the gateway's CPU time until ready
}

// gatewayCounters are the gateway metrics a report keeps from the end of
// each run, to explain its figures: what was loaded, by whom, and what
// prefetch gave up on.
var gatewayCounters = []string{
	"brand_backend_read_bytes_total",
	"brand_cache_loads_total",
	"brand_cache_prefetch_loads_total",
	"brand_cache_evictions_total",
	"brand_cache_buffer_bytes",
	"brand_cache_hits_total",
	"brand_cache_misses_total",
	"brand_prefetch_queued_total",
	"brand_prefetch_dropped_total",
	"brand_chunk_fetch_duration_seconds_sum",
	"brand_disk_reads_total",
	"brand_disk_read_bytes_total",
	"brand_disk_writes_total",
	"brand_disk_found_chunks",
	"brand_chunk_fetch_duration_seconds_count",
	"go_gc_duration_seconds_count",
	"process_cpu_seconds_total",
}

// brandEpoch is what the client saw of one epoch, with the gateway's
// counters over it.
type brandEpoch struct {
	samples      int64
	bytes        int64 // batch body bytes
	elapsed      time.Duration
	waits        []time.Duration // per batch, the time the loop waited
	requests     []time.Duration // per batch, from sending its request to the end of its body
	hits, misses float64         // demand chunk lookups during the epoch
	peakRSS      int64           // the gateway's VmHWM at the epoch's end
	cpu          CPUUse
}

// aheadEpoch is a warm epoch read with a given read-ahead depth.
type aheadEpoch struct {
	level int
	brandEpoch
}

// cacheBytes is the cache size for a fraction of the dataset.
func (r *runner) cacheBytes(fraction float64) int64 {
	return int64(math.Ceil(fraction * float64(r.tb.index.TotalBytes())))
}

// brandOpts are what a run of the disk group adds to a gateway's run.
type brandOpts struct {
	diskDir   string // --disk-cache; "" for none
	diskBytes int64  // --disk-cache-size
	first     int    // the first epoch read
	restarted bool   // a gateway started again on a disk cache another filled
	tag       string // of the gateway's log name, for runs of other groups
}

// config is the run's rows' configuration name.
func (o brandOpts) config() string {
	switch {
	case o.restarted:
		return ConfigBrandRestart
	case o.diskDir != "":
		return ConfigBrandDisk
	}
	return ConfigBrand
}

// runBrand starts a gateway with a cache of the given fraction and policy
// and reads epochs 0..epochs-1 through it with the Go client.
func (r *runner) runBrand(ctx context.Context, fraction float64, policy string, epochs int) (*brandRun, error) {
	return r.runBrandWith(ctx, fraction, policy, epochs, brandOpts{})
}

// runBrandWith is runBrand with a disk tier, or a first epoch other than 0.
func (r *runner) runBrandWith(ctx context.Context, fraction float64, policy string, epochs int, opts brandOpts) (*brandRun, error) {
	run := &brandRun{fraction: fraction, cacheBytes: r.cacheBytes(fraction), policy: policy, opts: opts}
	r.logf("brand: cache %s (%s of the dataset), policy %s, %d epochs%s", sizeString(run.cacheBytes), percentString(fraction), policy, epochs, opts.describe())
	g, err := r.startBrandGateway(ctx, fraction, policy, opts)
	if err != nil {
		return nil, err
	}
	run.start, run.startCPU = g.start, g.startCPU
	stopped := false
	defer func() {
		if !stopped {
			g.kill()
		}
	}()

	c, ct, err := r.brandClient(g.base, r.cfg.Brand.Ahead)
	if err != nil {
		return nil, err
	}
	for e := opts.first; e < opts.first+epochs; e++ {
		ep, err := r.brandEpoch(ctx, g, c, ct, e, pprof.Labels("config", opts.config(), "policy", policy, "cache", percentString(fraction), "epoch", strconv.Itoa(e)))
		if err != nil {
			return nil, err
		}
		run.epochs = append(run.epochs, ep)
		r.logf("  epoch %d: %.0f samples/s, %.0f MB/s, demand hit ratio %.3f, peak RSS %s",
			e, float64(ep.samples)/ep.elapsed.Seconds(), float64(ep.bytes)/ep.elapsed.Seconds()/1e6,
			ratio(ep.hits, ep.hits+ep.misses), sizeString(ep.peakRSS))
	}
	if fraction >= 1 && policy == "next-use" && len(r.cfg.Brand.AheadLevels) > 0 && opts.diskDir == "" {
		// Warm epochs at each read-ahead depth, after the run's own: the
		// client's concurrency, swept as the limits' is.
		for i, level := range r.cfg.Brand.AheadLevels {
			e := epochs + i
			c, ct, err := r.brandClient(g.base, level)
			if err != nil {
				return nil, err
			}
			ep, err := r.brandEpoch(ctx, g, c, ct, e, pprof.Labels("config", ConfigBrandAhead, "ahead", strconv.Itoa(level), "epoch", strconv.Itoa(e)))
			if err != nil {
				return nil, err
			}
			r.logf("  epoch %d, %d ahead: %.0f samples/s, %.0f MB/s", e, level, float64(ep.samples)/ep.elapsed.Seconds(), float64(ep.bytes)/ep.elapsed.Seconds()/1e6)
			run.ahead = append(run.ahead, aheadEpoch{level: level, brandEpoch: ep})
		}
	}
	if run.stats, err = g.stats(ctx); err != nil {
		return nil, err
	}
	end, err := g.metrics(ctx)
	if err != nil {
		return nil, err
	}
	run.counters = map[string]float64{}
	for _, name := range gatewayCounters {
		if v, ok := end[name]; ok {
			run.counters[name] = v
		}
	}
	stopped = true
	if err := g.stop(15 * time.Second); err != nil {
		return nil, err
	}
	return run, nil
}

// startBrandGateway starts a fresh `brand serve` for the run's dataset and
// job, with a cache of the given fraction of the dataset and policy, and
// waits until it is ready. Its log (and profile) is named
// gateway-<tag><policy>-<cache %>.
func (r *runner) startBrandGateway(ctx context.Context, fraction float64, policy string, opts brandOpts) (*gatewayProc, error) {
	srv := r.tb.srv
	args := []string{"serve",
		"--listen", "127.0.0.1:0",
		"--dataset", gatewayDataset + "=s3://" + r.cfg.Bucket + "/" + r.tb.datasetPrefix,
		"--cache-size", strconv.FormatInt(r.cacheBytes(fraction), 10),
		"--cache-policy", policy,
		"--seed", strconv.FormatUint(r.cfg.Job.Seed, 10),
		"--batch-size", strconv.Itoa(r.cfg.Job.BatchSize),
		"--window", strconv.Itoa(r.cfg.Job.Window),
		"--log-format", "json",
		"--log-level", "info",
		// Past net/http's 5 s: Shutdown counts a connection that was
		// opened but never sent a request as idle only once it is 5 s old,
		// so a grace of exactly 5 s can fail on a client's spare dial.
		"--shutdown-timeout", "10s",
		"--s3-endpoint", srv.URL(),
		"--s3-region", "us-east-1",
	}
	tag := opts.tag
	if opts.diskDir != "" {
		args = append(args, "--disk-cache", opts.diskDir, "--disk-cache-size", strconv.FormatInt(opts.diskBytes, 10))
		tag = "disk-"
		if opts.restarted {
			tag = "disk-restarted-"
		}
	}
	args = append(args, r.cfg.Processes.GatewayArgs...)
	name := fmt.Sprintf("gateway-%s%s-%g", tag, policy, fraction*100)
	if r.cfg.Processes.GatewayProfiles != "" {
		args = append(args, "--cpuprofile", filepath.Join(r.cfg.Processes.GatewayProfiles, name+".pprof"))
	}
	logPath := filepath.Join(r.cfg.WorkDir, name+".log")
	r.logf("  gateway with a cache of %s (%s of the dataset), policy %s; log %s",
		sizeString(r.cacheBytes(fraction)), percentString(fraction), policy, logPath)
	started := time.Now()
	g, err := startGateway(ctx, r.cfg.Processes.GatewayBinary, args, gatewayEnv(srv.AccessKey, srv.SecretKey), logPath)
	if err != nil {
		return nil, err
	}
	if err := r.pinServer(g.cmd.Process.Pid); err != nil {
		g.kill()
		return nil, err
	}
	g.start, g.startCPU = time.Since(started), processCPU(g.cmd.Process.Pid)
	r.logf("  ready after %.2f s (%.2f s of CPU: index load and cache preallocation)", g.start.Seconds(), g.startCPU.Seconds())
	return g, nil
}

// brandClient is a Go client of the gateway at base for the run's job,
// keeping ahead batches in flight, and the transport that meters it.
func (r *runner) brandClient(base string, ahead int) (*client.Client, *countingTransport, error) {
	ct := &countingTransport{base: newTransport(ahead + 2)}
	c, err := client.New(base, r.clientOptions(&http.Client{Transport: ct}, ahead))
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	return c, ct, nil
}

// clientOptions are the Go client's options for the run's job.
func (r *runner) clientOptions(hc *http.Client, ahead int) client.Options {
	return client.Options{HTTPClient: hc, Job: r.cfg.Job, Ahead: ahead}
}

// brandEpoch reads epoch e through the gateway g with c and measures it,
// releasing each batch once counted.
// The labels let a --cpuprofile of the harness be cut by epoch, as the
// gateway's profiles are.
func (r *runner) brandEpoch(ctx context.Context, g *gatewayProc, c *client.Client, ct *countingTransport, e int, labels pprof.LabelSet) (brandEpoch, error) {
	var ep brandEpoch
	before, err := g.metrics(ctx)
	if err != nil {
		return ep, err
	}
	bytes0 := ct.tar.Load()
	cm := r.cpuMeter(g.cmd.Process.Pid)
	mark := cm.mark()
	start := time.Now()
	last := start
	pprof.Do(ctx, labels, func(ctx context.Context) {
		for b, ierr := range c.Epoch(ctx, e) {
			if ierr != nil {
				err = fmt.Errorf("bench: brand epoch %d: %w", e, ierr)
				return
			}
			now := time.Now()
			ep.waits = append(ep.waits, now.Sub(last))
			last = now
			ep.samples += int64(len(b.Samples))
			// Done with the batch: its memory goes to a later one, as
			// the limits' clients reuse theirs (bodyPool).
			b.Release()
		}
	})
	if err != nil {
		return ep, err
	}
	ep.elapsed = last.Sub(start)
	ep.cpu = cm.since(mark)
	ep.bytes = ct.tar.Load() - bytes0
	ep.requests = ct.epochLatencies(e, len(ep.waits))
	after, err := g.metrics(ctx)
	if err != nil {
		return ep, err
	}
	ep.hits = after["brand_cache_hits_total"] - before["brand_cache_hits_total"]
	ep.misses = after["brand_cache_misses_total"] - before["brand_cache_misses_total"]
	ep.peakRSS = g.peakRSS()
	return ep, nil
}

// describe says what opts add, for the log.
func (o brandOpts) describe() string {
	if o.diskDir == "" {
		return ""
	}
	s := fmt.Sprintf(", disk cache of %s in %s", sizeString(o.diskBytes), o.diskDir)
	if o.restarted {
		s += ", restarted on it"
	}
	return s
}

// rows turns a run into one row per epoch.
func (run *brandRun) rows(group string) []Row {
	var out []Row
	for i, ep := range run.epochs {
		e := run.opts.first + i
		st := run.stats.epoch(e)
		name := "Brand"
		switch {
		case run.opts.restarted:
			name = "Brand + disk, restarted"
		case run.opts.diskDir != "":
			name = "Brand + disk"
		}
		label := fmt.Sprintf("%s, cache %s, epoch %d", name, percentString(run.fraction), e)
		if run.policy != "next-use" {
			label = fmt.Sprintf("%s %s, cache %s, epoch %d", name, run.policy, percentString(run.fraction), e)
		}
		row := run.row(run.opts.config(), group, label, ep, st)
		epoch := e
		row.Epoch = &epoch
		out = append(out, row)
	}
	return out
}

// row is the row of one epoch ep of the run, st its gateway counts.
func (run *brandRun) row(config, group, label string, ep brandEpoch, st api.EpochStat) Row {
	row := newRow(config, group, label, pass{samples: ep.samples, bytes: ep.bytes,
		backendBytes: st.BackendBytes, elapsed: ep.elapsed, waits: ep.waits, cpu: ep.cpu})
	row.CacheBytes, row.CacheFraction, row.Policy = run.cacheBytes, run.fraction, run.policy
	if ep.hits+ep.misses > 0 {
		h := ep.hits / (ep.hits + ep.misses)
		row.HitRatio = &h
	}
	row.PeakRSS = ep.peakRSS
	row.RequestP50Ms = ms(percentile(ep.requests, 50))
	row.RequestP99Ms = ms(percentile(ep.requests, 99))
	return row
}

// aheadRow is the best of the run's warm epochs at each read-ahead depth,
// with every depth's figures as its sweep; ok is false when there are
// none.
func (run *brandRun) aheadRow(group string) (row Row, ok bool) {
	var points []SweepPoint
	best := -1
	for i, a := range run.ahead {
		sec := a.elapsed.Seconds()
		points = append(points, SweepPoint{Concurrency: a.level, SamplesPerSec: ratio(float64(a.samples), sec), MBPerSec: ratio(float64(a.bytes), sec) / 1e6})
		if best < 0 || points[i].SamplesPerSec > points[best].SamplesPerSec {
			best = i
		}
	}
	if best < 0 {
		return Row{}, false
	}
	a := run.ahead[best]
	row = run.row(ConfigBrandAhead, group, fmt.Sprintf("Brand, cache %s, warm, best ahead", percentString(run.fraction)),
		a.brandEpoch, run.stats.epoch(len(run.epochs)+best))
	row.Concurrency, row.Sweep = a.level, points
	return row, true
}

// countingTransport counts the body bytes of batch (tar) responses and
// times each batch request, from sending it to the end of its body.
type countingTransport struct {
	base http.RoundTripper
	tar  atomic.Int64

	mu      sync.Mutex
	latency map[[2]int]time.Duration // (epoch, batch) → latency
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-tar") {
		return resp, err
	}
	body := &timedBody{countingBody: countingBody{countingReader{r: resp.Body, n: &t.tar}, resp.Body}}
	if e, b, ok := batchOf(req.URL.Path); ok {
		body.done = func() { t.record(e, b, time.Since(start)) }
	}
	resp.Body = body
	return resp, nil
}

func (t *countingTransport) record(epoch, batch int, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latency == nil {
		t.latency = map[[2]int]time.Duration{}
	}
	t.latency[[2]int{epoch, batch}] = d // a retry replaces the failed attempt
}

// epochLatencies returns the latencies of batches 0..n-1 of an epoch.
func (t *countingTransport) epochLatencies(epoch, n int) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, 0, n)
	for b := range n {
		if d, ok := t.latency[[2]int{epoch, b}]; ok {
			out = append(out, d)
		}
	}
	return out
}

// batchOf parses /epoch/N/batch/M at the end of a URL path.
func batchOf(path string) (epoch, batch int, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 4 || parts[len(parts)-4] != "epoch" || parts[len(parts)-2] != "batch" {
		return 0, 0, false
	}
	e, err1 := strconv.Atoi(parts[len(parts)-3])
	b, err2 := strconv.Atoi(parts[len(parts)-1])
	return e, b, err1 == nil && err2 == nil
}

// timedBody calls done once, when the body is read to its end or closed.
type timedBody struct {
	countingBody
	done func()
	once sync.Once
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.countingBody.Read(p)
	if err == io.EOF && b.done != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *timedBody) Close() error {
	if b.done != nil {
		b.once.Do(b.done)
	}
	return b.countingBody.Close()
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
