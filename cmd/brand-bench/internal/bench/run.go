package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/planner"
)

// Configuration identifiers of a Row.
const (
	ConfigProxy = "limit-proxy" // (a)
	// ConfigProxyInProcess is (a) with the proxy in the client's process,
	// for comparison only.
	ConfigProxyInProcess = "limit-proxy-in-process"
	// ConfigStoreForward is (a′), a gateway that only caches: see storeForward.
	ConfigStoreForward = "limit-store-forward"
	// ConfigStoreVerify is (a″), (a′) checking CRC32C as Brand's loader does.
	ConfigStoreVerify = "limit-store-verify"
	ConfigMemory      = "limit-memory" // (b)
	// ConfigMemoryBatches is (b′): (b)'s server asked for slices of a
	// batch's size.
	ConfigMemoryBatches = "limit-memory-batches"
	// ConfigMemoryShuffled is (b″): (b)'s server asked for a warm epoch's
	// shuffled batches, each sample a part of its own, written with
	// writev as the gateway writes a batch.
	ConfigMemoryShuffled = "limit-memory-shuffled"
	ConfigObjects        = "per-object" // (c)
	ConfigWebDataset     = "webdataset" // (d)
	ConfigBrand          = "brand"
	// ConfigBrandAhead is Brand's warm epochs with the cache holding the
	// dataset, at the best of Config.AheadLevels.
	ConfigBrandAhead = "brand-ahead"
	// ConfigBrandDisk is Brand with a disk tier holding the dataset
	// below the RAM cache; ConfigBrandRestart the same gateway started
	// again on the disk cache it filled (the disk group).
	ConfigBrandDisk    = "brand-disk"
	ConfigBrandRestart = "brand-disk-restarted"
	// The python group's rows are ConfigPyObjects, ConfigPyBrand,
	// ConfigPyClient and ConfigGoClient (python.go).
)

// Report is a run's results.
type Report struct {
	Header
	Config  ReportInput `json:"config"`
	Dataset DatasetInfo `json:"dataset"`
	Rows    []Row       `json:"rows"`
	// Policy is the lru / next-use / optimum comparison; nil when the
	// policy group did not run.
	Policy *PolicyReport `json:"policy,omitempty"`
	// Gateways are the gateway processes' counters at the end of each run.
	Gateways []GatewayRun `json:"gateways,omitempty"`
	Targets  []Target     `json:"targets"`
	// Skipped are selected groups the run could not measure, and why.
	Skipped []SkippedGroup `json:"skipped,omitempty"`
	Seconds float64        `json:"seconds"` // the whole run, setup included
}

// ReportInput is the part of the Config a report records.
type ReportInput struct {
	Samples        int       `json:"samples"`
	MeanBytes      int64     `json:"mean_bytes"`
	ChunkSize      int64     `json:"chunk_size"`
	Seed           uint64    `json:"seed"`         // the dataset's
	ShuffleSeed    uint64    `json:"shuffle_seed"` // the job's
	BatchSize      int       `json:"batch_size"`
	Window         int       `json:"window"`
	Ahead          int       `json:"ahead"`
	AheadLevels    []int     `json:"ahead_levels"`
	CacheFractions []float64 `json:"cache_fractions"`
	Epochs         int       `json:"epochs"`
	PolicyCache    float64   `json:"policy_cache"`
	PolicyEpochs   int       `json:"policy_epochs"`
	StreamReaders  []int     `json:"stream_readers"`
	ObjectReaders  []int     `json:"object_readers"`
	ShardReaders   []int     `json:"shard_readers"`
	ShuffleBuffer  int       `json:"shuffle_buffer"`
	Groups         []string  `json:"groups"`
}

// DatasetInfo describes the packed dataset.
type DatasetInfo struct {
	Samples   int   `json:"samples"`
	Chunks    int   `json:"chunks"`
	Bytes     int64 `json:"bytes"`       // total chunk bytes
	MeanBytes int64 `json:"mean_sample"` // mean sample size in the chunks, tar framing included
	// SampleBytes is the sum of the samples' tar ranges: what an epoch
	// delivers, less the end-of-archive blocks closing each batch.
	SampleBytes int64 `json:"sample_bytes"`
	// WorkingSetBytes is the planner's working set of the job: the chunks
	// of the windows a batch spans and the prefetch window after them, at
	// their largest.
	WorkingSetBytes int64 `json:"working_set_bytes"`
}

// Row is one configuration's figures (for Brand, one epoch's).
type Row struct {
	Config string `json:"config"` // one of the Config* identifiers
	Group  string `json:"group"`
	Label  string `json:"label"`

	Epoch         *int    `json:"epoch,omitempty"`
	CacheBytes    int64   `json:"cache_bytes,omitempty"`
	CacheFraction float64 `json:"cache_fraction,omitempty"`
	Policy        string  `json:"policy,omitempty"`
	// Concurrency is the best of the levels in Sweep, for the limits and
	// baselines, and for Brand's warm epochs at each read-ahead depth.
	Concurrency int          `json:"concurrency,omitempty"`
	Sweep       []SweepPoint `json:"sweep,omitempty"`

	Samples       int64   `json:"samples"`
	Bytes         int64   `json:"bytes"` // HTTP body bytes delivered to the client
	Seconds       float64 `json:"seconds"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // 10^6 bytes
	// BackendBytes are the bytes read from the store; for Brand, the
	// gateway's count for this epoch (prefetches included).
	BackendBytes      int64   `json:"backend_bytes"`
	ReadAmplification float64 `json:"read_amplification"`
	// HitRatio is the demand chunk hit ratio of the gateway's cache over
	// the epoch; absent where there is no cache.
	HitRatio *float64 `json:"hit_ratio,omitempty"`
	Batches  int      `json:"batches"`
	P50Ms    float64  `json:"p50_batch_ms"`
	P99Ms    float64  `json:"p99_batch_ms"`
	// RequestP50Ms and RequestP99Ms are, for Brand, the latency of the
	// batch requests themselves: from sending one to the end of its body.
	RequestP50Ms float64 `json:"request_p50_ms,omitempty"`
	RequestP99Ms float64 `json:"request_p99_ms,omitempty"`
	// PeakRSS is the gateway's VmHWM at the end of the epoch; 0 where no
	// gateway runs.
	PeakRSS int64 `json:"gateway_peak_rss_bytes,omitempty"`
	// CPU is what each process spent during the measurement; absent where
	// the platform does not report it.
	CPU *CPUUse `json:"cpu,omitempty"`
}

// GatewayRun is one gateway process's counters (from /metrics) at the end
// of its run, and its peak RSS.
type GatewayRun struct {
	CacheBytes    int64   `json:"cache_bytes"`
	CacheFraction float64 `json:"cache_fraction"`
	Policy        string  `json:"policy"`
	Epochs        int     `json:"epochs"`
	PeakRSS       int64   `json:"peak_rss_bytes"`
	// StartSeconds is the time from starting the process to its first
	// ready answer: loading the index and preallocating the cache's
	// memory, which a cold epoch does not pay again.
	StartSeconds float64 `json:"start_seconds"`
	// StartCPU is the CPU time the gateway used before it was ready.
	StartCPU float64            `json:"start_cpu_seconds"`
	Counters map[string]float64 `json:"counters"`
	// DiskBytes is the disk tier's size (--disk-cache-size), 0 without
	// one; Restarted, whether the gateway started on a disk cache an
	// earlier one filled.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	Restarted bool  `json:"restarted,omitempty"`
}

// SweepPoint is one concurrency level's throughput.
type SweepPoint struct {
	Concurrency   int     `json:"concurrency"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
}

func newRow(config, group, label string, p pass) Row {
	sec := p.elapsed.Seconds()
	return Row{
		Config: config, Group: group, Label: label,
		Samples: p.samples, Bytes: p.bytes, Seconds: sec,
		SamplesPerSec:     ratio(float64(p.samples), sec),
		MBPerSec:          ratio(float64(p.bytes), sec) / 1e6,
		BackendBytes:      p.backendBytes,
		ReadAmplification: ratio(float64(p.backendBytes), float64(p.bytes)),
		Batches:           len(p.waits),
		P50Ms:             ms(percentile(p.waits, 50)),
		P99Ms:             ms(percentile(p.waits, 99)),
		CPU:               cpuOrNil(p.cpu),
	}
}

func cpuOrNil(c CPUUse) *CPUUse {
	if c.Total() == 0 {
		return nil
	}
	return &c
}

// cpuMeter measures the harness, the S3 server and, if gatewayPid is not
// 0, a gateway.
func (r *runner) cpuMeter(gatewayPid int) cpuMeter {
	return cpuMeter{store: r.tb.srv.Pid(), gateway: gatewayPid}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// runner carries a run's state.
type runner struct {
	cfg     Config
	tb      *testbed
	rep     *Report
	runs    map[runKey]*brandRun
	planDS  planner.Dataset
	started time.Time
	// clientsPinned: this process runs off Processes.ServerCPU (pinServer).
	clientsPinned bool
}

type runKey struct {
	fraction float64
	policy   string
}

// Run performs a benchmark run: it starts MinIO (unless cfg.Server is
// set), makes sure the data is there, measures every configuration of the
// selected groups one after another, and evaluates the targets. It stops by
// itself: each configuration is bounded by cfg.ConfigTimeout and the whole
// run by ctx.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, runs: map[runKey]*brandRun{}, started: time.Now()}
	r.rep = &Report{Header: newHeader(r.started, cfg.Command), Config: ReportInput{
		Samples: cfg.Dataset.Samples, MeanBytes: cfg.Dataset.MeanBytes, ChunkSize: cfg.Dataset.ChunkSize, Seed: cfg.Dataset.Seed, ShuffleSeed: cfg.Job.Seed,
		BatchSize: cfg.Job.BatchSize, Window: cfg.Job.Window, Ahead: cfg.Brand.Ahead, AheadLevels: cfg.Brand.AheadLevels, CacheFractions: cfg.Brand.CacheFractions,
		Epochs: cfg.Brand.Epochs, PolicyCache: cfg.Policy.Cache, PolicyEpochs: cfg.Policy.Epochs,
		StreamReaders: cfg.Concurrency.StreamReaders, ObjectReaders: cfg.Concurrency.ObjectReaders, ShardReaders: cfg.Concurrency.ShardReaders,
		ShuffleBuffer: cfg.ShuffleBuffer, Groups: cfg.Groups,
	}}

	srv := cfg.Server
	if srv == nil {
		dir := filepath.Join(cfg.WorkDir, "minio")
		r.logf("starting MinIO with its data in %s", dir)
		if srv, err = miniotest.Start(ctx, dir); err != nil {
			return nil, err
		}
		defer srv.Close()
	}
	if r.tb, err = newTestbed(ctx, cfg, srv); err != nil {
		return nil, err
	}
	if err := r.describeDataset(); err != nil {
		return nil, err
	}

	steps := []struct {
		group string
		run   func(context.Context) error
	}{
		{GroupLimits, r.runLimits},
		{GroupBaselines, r.runBaselines},
		{GroupBrand, r.runBrandGroup},
		{GroupPolicy, r.runPolicyGroup},
		{GroupDisk, r.runDiskGroup},
		{GroupPython, r.runPythonGroup},
	}
	for _, s := range steps {
		if !cfg.runs(s.group) {
			continue
		}
		if err := s.run(ctx); err != nil {
			return nil, err
		}
		releaseMemory()
	}
	r.rep.Targets = r.targets()
	r.rep.Seconds = time.Since(r.started).Seconds()
	return r.rep, nil
}

// describeDataset records the dataset and the job's working set.
func (r *runner) describeDataset() error {
	ix := r.tb.index
	sizes := make([]int64, ix.NumChunks())
	for c := range sizes {
		sizes[c] = ix.Chunk(c).Size
	}
	r.planDS = planner.Dataset{ChunkSizes: sizes, Counts: ix.SampleCounts()}
	plan, err := planner.MakePlan(context.Background(), planner.PlanInput{
		Dataset:            r.planDS,
		Job:                r.plannerJob(2),
		CacheBytes:         ix.TotalBytes(),
		BackendBytesPerSec: 1e9, // any rate: only the working set is used
		PrefetchWindows:    1,
	})
	if err != nil {
		return fmt.Errorf("bench: planning the job: %w", err)
	}
	r.rep.Dataset = DatasetInfo{
		Samples: ix.NumSamples(), Chunks: ix.NumChunks(), Bytes: ix.TotalBytes(),
		MeanBytes:       ix.SampleBytes() / int64(max(ix.NumSamples(), 1)),
		SampleBytes:     ix.SampleBytes(),
		WorkingSetBytes: plan.WorkingSetBytes,
	}
	r.logf("dataset: %d samples in %d chunks, %s; working set of the job %s",
		ix.NumSamples(), ix.NumChunks(), sizeString(ix.TotalBytes()), sizeString(plan.WorkingSetBytes))
	return nil
}

// plannerJob is the run's job, read for epochs epochs, in the planner's
// terms.
func (r *runner) plannerJob(epochs int) planner.Job {
	return planner.Job{Params: r.cfg.Job.Params, Epochs: epochs}
}

// runBrandGroup reads epochs through a fresh gateway at each cache
// fraction. The run at the policy comparison's fraction reads as many
// epochs as that comparison needs, so it is not run twice.
func (r *runner) runBrandGroup(ctx context.Context) error {
	for _, f := range r.cfg.Brand.CacheFractions {
		epochs := r.cfg.Brand.Epochs
		if f == r.cfg.Policy.Cache && r.cfg.runs(GroupPolicy) {
			epochs = max(epochs, r.cfg.Policy.Epochs+1)
		}
		if _, err := r.brandRun(ctx, f, "next-use", epochs, GroupBrand); err != nil {
			return err
		}
	}
	return nil
}

// brandRun runs (or returns the earlier run of) a Brand configuration and
// adds its rows.
func (r *runner) brandRun(ctx context.Context, fraction float64, policy string, epochs int, group string) (*brandRun, error) {
	k := runKey{fraction, policy}
	if run, ok := r.runs[k]; ok && len(run.epochs) >= epochs {
		return run, nil
	}
	var run *brandRun
	err := r.measured(ctx, func(ctx context.Context) error {
		var err error
		run, err = r.runBrand(ctx, fraction, policy, epochs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("brand, cache %s, policy %s: %w", percentString(fraction), policy, err)
	}
	r.runs[k] = run
	r.rep.Gateways = append(r.rep.Gateways, GatewayRun{CacheBytes: run.cacheBytes, CacheFraction: fraction, Policy: policy,
		Epochs: len(run.epochs), PeakRSS: run.epochs[len(run.epochs)-1].peakRSS,
		StartSeconds: run.start.Seconds(), StartCPU: run.startCPU.Seconds(), Counters: run.counters})
	for _, row := range run.rows(group) {
		r.add(row)
	}
	if row, ok := run.aheadRow(group); ok {
		r.add(row)
	}
	return run, nil
}

// measured runs fn bounded by the configuration timeout.
func (r *runner) measured(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ConfigTimeout)
	defer cancel()
	err := fn(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("took longer than %s: %w", r.cfg.ConfigTimeout, err)
	}
	return err
}

func (r *runner) add(row Row) {
	r.rep.Rows = append(r.rep.Rows, row)
	if !slices.Contains([]string{ConfigBrand, ConfigBrandAhead, ConfigBrandDisk, ConfigBrandRestart}, row.Config) {
		r.logf("  %s: %.0f samples/s, %.0f MB/s at concurrency %d", row.Label, row.SamplesPerSec, row.MBPerSec, row.Concurrency)
	}
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// releaseMemory returns the previous configuration's garbage to the OS so
// that it does not tax the next one's GC or the machine's memory.
func releaseMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// Machine describes where a run ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	Memory    int64  `json:"memory_bytes"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel,omitempty"`
	MinIO     string `json:"minio"`
	// FirstTouchMBPerSec is how fast the machine faults in fresh memory
	// (MB/s); 0 where not measured. See the benchmark doc.
	FirstTouchMBPerSec float64 `json:"first_touch_mb_per_sec,omitempty"`
	// FirstTouchHugeMBPerSec is the same with the mapping advised as
	// transparent huge pages, as the gateway's chunk buffers are.
	FirstTouchHugeMBPerSec float64 `json:"first_touch_huge_mb_per_sec,omitempty"`
}

func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, MinIO: miniotest.Version}
	m.CPUModel, m.Memory, m.Kernel = platformInfo()
	m.FirstTouchMBPerSec = firstTouchRate(false)
	m.FirstTouchHugeMBPerSec = firstTouchRate(true)
	return m
}
