package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// The shared-cache benchmark (brand-bench jobs): J jobs, seeds 1..J, read
// one dataset through one gateway at once, each from its own goroutine,
// and the store bytes the gateway read are compared, per job-epoch, with
// the planner's optimum over the jobs' merged uses (Belady on
// planner.SharedTrace) and with the same jobs through an LRU gateway. The
// dataset is small (about 80 chunks of 512 KiB) and in a local directory:
// what is measured is which chunks the cache keeps for whom, not how fast
// a store answers.

// JobsConfig describes a shared-cache benchmark run. Zero fields take
// DefaultJobsConfig's values.
type JobsConfig struct {
	Samples   int    // of the synthetic dataset
	MeanBytes int64  // their mean size
	ChunkSize int64  // of the packed chunks
	Seed      uint64 // of the samples and the pack

	BatchSize int
	Window    int
	Epochs    int // each job reads epochs 0..Epochs-1

	Jobs           []int     // job counts
	CacheFractions []float64 // cache sizes, as fractions of the dataset's bytes
	// Speeds are the speed mixes: "equal" (every job as fast as it is
	// served) and "1:2" (the odd jobs read at half the rate of the even
	// ones, both paced below what the gateway serves).
	Speeds []string
	// Pace is the even jobs' time per batch in the "1:2" mix, per job
	// sharing the gateway: with J jobs, an even job reads a batch every
	// J × Pace, an odd one every 2 × J × Pace.
	Pace time.Duration

	GatewayArgs   []string
	ConfigTimeout time.Duration
	Harness
}

// Speed mixes of JobsConfig.Speeds.
const (
	SpeedsEqual = "equal"
	SpeedsHalf  = "1:2"
)

// DefaultJobsConfig is the benchmark the issue of shared caches asks for:
// 4,000 samples of 10 KiB in 512 KiB chunks, batch 64, window 8, three
// epochs, J = 1, 2, 4, 8, caches of 25 % and 50 %, equal speeds and 1:2.
func DefaultJobsConfig() JobsConfig {
	return JobsConfig{
		Samples: 4000, MeanBytes: 10 << 10, ChunkSize: 512 << 10, Seed: 1,
		BatchSize: 64, Window: 8, Epochs: 3,
		Jobs: []int{1, 2, 4, 8}, CacheFractions: []float64{0.25, 0.5}, Speeds: []string{SpeedsEqual, SpeedsHalf},
		Pace:          1500 * time.Microsecond,
		ConfigTimeout: 5 * time.Minute,
	}
}

func (c JobsConfig) withDefaults() (JobsConfig, error) {
	fillZero(&c, DefaultJobsConfig())
	if err := c.check(); err != nil {
		return c, err
	}
	switch {
	case c.Epochs < 1 || c.BatchSize < 1 || c.Window < 1 || c.Samples < 1:
		return c, fmt.Errorf("%w: epochs, batch size, window and samples must be positive", ErrConfig)
	}
	for _, j := range c.Jobs {
		if j < 1 || j > planner.MaxSharedJobs {
			return c, fmt.Errorf("%w: %d jobs; 1..%d", ErrConfig, j, planner.MaxSharedJobs)
		}
	}
	if err := checkFractions(c.CacheFractions...); err != nil {
		return c, err
	}
	for _, s := range c.Speeds {
		if s != SpeedsEqual && s != SpeedsHalf {
			return c, fmt.Errorf("%w: speeds %q; %s or %s", ErrConfig, s, SpeedsEqual, SpeedsHalf)
		}
	}
	return c, nil
}

// JobsReport is a shared-cache benchmark's result: jobs.json.
type JobsReport struct {
	Header
	Dataset struct {
		Samples int   `json:"samples"`
		Chunks  int   `json:"chunks"`
		Bytes   int64 `json:"bytes"`
	} `json:"dataset"`
	BatchSize int        `json:"batch_size"`
	Window    int        `json:"window"`
	Epochs    int        `json:"epochs"`
	Rows      []JobsRow  `json:"rows"`
	Targets   []Target   `json:"targets"`
	Seconds   float64    `json:"seconds"`
	Config    JobsConfig `json:"-"`
}

// JobsRow is one configuration: J jobs at a cache size and speed mix,
// through the next-use policy and through LRU, beside the planner.
type JobsRow struct {
	Jobs          int     `json:"jobs"`
	CacheFraction float64 `json:"cache_fraction"`
	CacheBytes    int64   `json:"cache_bytes"`
	Speeds        string  `json:"speeds"`
	// Store reads per job-epoch, in datasets: the gateway's chunk loads
	// over the run (prefetch included) ÷ dataset bytes ÷ (J × epochs).
	NextUse JobsLive `json:"next_use"`
	LRU     JobsLive `json:"lru"`
	// The planner's, on the merged uses of the same jobs.
	Optimal     float64 `json:"optimal"`
	PlannerLRU  float64 `json:"planner_lru"`
	Partitioned float64 `json:"partitioned"`
	// Ratio is Schedule.Reads ÷ Optimal.
	Ratio float64 `json:"ratio"`
}

// JobsLive is one gateway's run of the jobs.
type JobsLive struct {
	Reads         float64 `json:"reads_per_job_epoch"`
	Seconds       float64 `json:"seconds"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	// JobSeconds are the jobs' times to read their epochs, fastest
	// first; the spread between jobs of one speed is how fairly the
	// gateway shared itself.
	JobSeconds []float64 `json:"job_seconds"`
	// TurnWaitSeconds and Overdue are the gateway's turns (/stats).
	TurnWaitSeconds float64 `json:"turn_wait_seconds"`
	Overdue         int64   `json:"turns_overdue"`
}

// RunJobs runs the shared-cache benchmark. It stops by itself: every
// configuration is bounded by cfg.ConfigTimeout, the whole by ctx.
func RunJobs(ctx context.Context, cfg JobsConfig) (*JobsReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &JobsReport{Header: newHeader(started, cfg.Command),
		BatchSize: cfg.BatchSize, Window: cfg.Window, Epochs: cfg.Epochs, Config: cfg}
	dir, ix, err := ensureJobsDataset(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rep.Dataset.Samples, rep.Dataset.Chunks, rep.Dataset.Bytes = ix.NumSamples(), ix.NumChunks(), ix.TotalBytes()
	logf(cfg.Log, "dataset: %d samples in %d chunks, %s, at %s", ix.NumSamples(), ix.NumChunks(), sizeString(ix.TotalBytes()), dir)
	pds := planner.DatasetOf(ix)
	for _, speeds := range cfg.Speeds {
		for _, frac := range cfg.CacheFractions {
			for _, j := range cfg.Jobs {
				row := JobsRow{Jobs: j, CacheFraction: frac, Speeds: speeds, CacheBytes: int64(math.Round(frac * float64(ix.TotalBytes())))}
				plan, err := planner.MakeSharedPlan(ctx, planner.SharedInput{Dataset: pds, Jobs: cfg.sharedJobs(j, speeds), CacheBytes: row.CacheBytes})
				if err != nil {
					return nil, fmt.Errorf("bench: planning %d jobs: %w", j, err)
				}
				row.Optimal, row.PlannerLRU, row.Partitioned = plan.OptimalReads, plan.LRUReads, plan.PartitionedReads
				for _, policy := range []string{"next-use", "lru"} {
					live, err := runJobsOnce(ctx, cfg, dir, ix, row, policy)
					if err != nil {
						return nil, err
					}
					if policy == "next-use" {
						row.NextUse = live
					} else {
						row.LRU = live
					}
				}
				row.Ratio = ratio(row.NextUse.Reads, row.Optimal)
				logf(cfg.Log, "%d jobs, cache %s, speeds %s: store reads per job-epoch: next-use %.3f (%.2f× the optimum %.3f), lru %.3f; planner lru %.3f, partitioned %.3f",
					j, percentString(frac), speeds, row.NextUse.Reads, row.Ratio, row.Optimal, row.LRU.Reads, row.PlannerLRU, row.Partitioned)
				rep.Rows = append(rep.Rows, row)
			}
		}
	}
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// sharedJobs are j jobs of the run in the planner's terms: seeds 1..j,
// started together, at the speeds of the mix (even jobs 2, odd 1 for 1:2).
func (c JobsConfig) sharedJobs(j int, speeds string) []planner.SharedJob {
	out := make([]planner.SharedJob, j)
	for i := range out {
		out[i] = planner.SharedJob{Job: planner.Job{Params: shuffle.Params{Seed: uint64(i + 1), Window: c.Window, BatchSize: c.BatchSize, World: 1}, Epochs: c.Epochs}, Speed: 1}
		if speeds == SpeedsHalf && i%2 == 0 {
			out[i].Speed = 2
		}
	}
	return out
}

// interval is job i's time per batch with j jobs: 0 (as fast as served)
// for equal speeds.
func (c JobsConfig) interval(i, j int, speeds string) time.Duration {
	if speeds != SpeedsHalf {
		return 0
	}
	d := time.Duration(j) * c.Pace
	if i%2 == 1 {
		d *= 2
	}
	return d
}

// ensureJobsDataset packs the synthetic dataset into a directory of the
// work directory unless an earlier run did.
func ensureJobsDataset(ctx context.Context, cfg JobsConfig) (string, *chunkindex.Index, error) {
	dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("jobs-dataset-%d-%d-%d-%d", cfg.Samples, cfg.MeanBytes, cfg.ChunkSize, cfg.Seed))
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	if ix, err := stored.ReadIndex(ctx, store); err == nil {
		return dir, ix, nil
	} else if !errors.Is(err, s3backend.ErrNotFound) {
		return "", nil, fmt.Errorf("bench: reading the dataset index: %w", err)
	}
	src := filepath.Join(cfg.WorkDir, "jobs-src")
	if err := os.RemoveAll(src); err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(src)
	spec := synth.Spec{Samples: cfg.Samples, MeanBytes: cfg.MeanBytes, Classes: 100, Seed: cfg.Seed}
	if err := spec.WriteTree(src); err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: cfg.ChunkSize, Shuffle: true, Seed: cfg.Seed, Parallel: 2, Name: "jobs", Overwrite: true})
	if err != nil {
		return "", nil, fmt.Errorf("bench: packing the dataset: %w", err)
	}
	return dir, res.Index, nil
}

// runJobsOnce starts a gateway of the row's cache and the policy, runs the
// row's jobs through it and measures them.
func runJobsOnce(ctx context.Context, cfg JobsConfig, dir string, ix *chunkindex.Index, row JobsRow, policy string) (JobsLive, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.ConfigTimeout)
	defer cancel()
	args := []string{"serve",
		"--listen", "127.0.0.1:0",
		"--dataset", gatewayDataset + "=file://" + dir,
		"--cache-size", strconv.FormatInt(row.CacheBytes, 10),
		"--cache-policy", policy,
		"--batch-size", strconv.Itoa(cfg.BatchSize),
		"--window", strconv.Itoa(cfg.Window),
		"--log-format", "json",
		"--log-level", "info",
		"--shutdown-timeout", "10s",
	}
	args = append(args, cfg.GatewayArgs...)
	name := fmt.Sprintf("gateway-jobs-%d-%g-%s-%s", row.Jobs, row.CacheFraction*100, strings.ReplaceAll(row.Speeds, ":", "to"), policy)
	g, err := startGateway(ctx, cfg.GatewayBinary, args, gatewayEnv("", ""), filepath.Join(cfg.WorkDir, name+".log"))
	if err != nil {
		return JobsLive{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			g.kill()
		}
	}()
	before, err := jobsStats(ctx, g)
	if err != nil {
		return JobsLive{}, err
	}
	batches := (ix.NumSamples() + cfg.BatchSize - 1) / cfg.BatchSize
	hc := &http.Client{Transport: newTransport(row.Jobs + 4)}
	defer hc.CloseIdleConnections()
	secs := make([]float64, row.Jobs)
	errs := make([]error, row.Jobs)
	began := time.Now()
	var wg sync.WaitGroup
	for i := range row.Jobs {
		wg.Go(func() {
			every := cfg.interval(i, row.Jobs, row.Speeds)
			start := time.Now()
			next := start
			for e := range cfg.Epochs {
				for m := range batches {
					if every > 0 {
						next = next.Add(every)
						if d := time.Until(next); d > 0 {
							select {
							case <-time.After(d):
							case <-ctx.Done():
							}
						}
					}
					if errs[i] = jobsBatch(ctx, hc, g.base, e, m, i+1); errs[i] != nil {
						return
					}
				}
			}
			secs[i] = time.Since(start).Seconds()
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if err := errors.Join(errs...); err != nil {
		return JobsLive{}, fmt.Errorf("bench: %d jobs through %s: %w", row.Jobs, policy, err)
	}
	after, err := jobsStats(ctx, g)
	if err != nil {
		return JobsLive{}, err
	}
	stopped = true
	if err := g.stop(15 * time.Second); err != nil {
		return JobsLive{}, err
	}
	slices.Sort(secs)
	jobEpochs := float64(row.Jobs * cfg.Epochs)
	return JobsLive{
		Reads:           float64(after.Cache.LoadedBytes-before.Cache.LoadedBytes) / float64(ix.TotalBytes()) / jobEpochs,
		Seconds:         elapsed.Seconds(),
		SamplesPerSec:   float64(ix.NumSamples()) * jobEpochs / elapsed.Seconds(),
		JobSeconds:      secs,
		TurnWaitSeconds: after.Turns.WaitSeconds,
		Overdue:         after.Turns.Overdue,
	}, nil
}

// jobsBatch reads one batch of the job of seed, to the end of its body.
func jobsBatch(ctx context.Context, hc *http.Client, base string, epoch, batch, seed int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/epoch/%d/batch/%d?seed=%d", base, epoch, batch, seed), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return fmt.Errorf("epoch %d batch %d of seed %d: %w", epoch, batch, seed, err)
	}
	if resp.StatusCode != http.StatusOK || n == 0 {
		return fmt.Errorf("epoch %d batch %d of seed %d: status %d, %d bytes", epoch, batch, seed, resp.StatusCode, n)
	}
	return nil
}

// jobsGatewayStats is what the benchmark reads of /stats.
type jobsGatewayStats struct {
	Cache struct {
		LoadedBytes int64 `json:"loaded_bytes"`
	} `json:"cache"`
	Turns struct {
		WaitSeconds float64 `json:"wait_seconds"`
		Overdue     int64   `json:"overdue"`
	} `json:"turns"`
}

func jobsStats(ctx context.Context, g *gatewayProc) (jobsGatewayStats, error) {
	var b strings.Builder
	code, err := g.get(ctx, "/stats", &b)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	var st jobsGatewayStats
	if err == nil {
		err = json.Unmarshal([]byte(b.String()), &st)
	}
	if err != nil {
		return st, fmt.Errorf("bench: gateway /stats: %w", err)
	}
	return st, nil
}

// targets are the shared cache's: within 1.15× of the optimum in every
// configuration, and at most 0.45 datasets per job-epoch at 4 jobs, half
// the dataset cached, equal speeds.
func (rep *JobsReport) targets() []Target {
	worst := 0.0
	var where string
	for _, r := range rep.Rows {
		if r.Ratio > worst {
			worst, where = r.Ratio, fmt.Sprintf("%d jobs, cache %s, speeds %s", r.Jobs, percentString(r.CacheFraction), r.Speeds)
		}
	}
	out := []Target{{Name: "store reads within 1.15× of the optimum, every configuration", Want: "≤ 1.15", Ratio: worst, Note: "worst: " + where}}
	out[0].Status = status(worst <= 1.15 && len(rep.Rows) > 0)
	t := Target{Name: "4 jobs, 50 % cache, equal speeds: datasets per job-epoch", Want: "≤ 0.45", Status: NA}
	for _, r := range rep.Rows {
		if r.Jobs == 4 && r.CacheFraction == 0.5 && r.Speeds == SpeedsEqual {
			t.Ratio, t.Status = r.NextUse.Reads, status(r.NextUse.Reads <= 0.45)
		}
	}
	return append(out, t)
}

func status(ok bool) string {
	if ok {
		return Pass
	}
	return Miss
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, time.Now().Format("15:04:05 ")+format+"\n", args...)
}
