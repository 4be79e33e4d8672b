package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/internal/seeded"
	"github.com/brandgw/brand/s3backend"
)

// The tasks benchmark (brand-bench tasks): a task job (docs/tasks.md) run
// as a post-training run reads it, and the same sampler written the usual
// way, in the trainer's process in Python, side by side.
//
//	(1) brand   G generator goroutines lease K prompts at a time through
//	            client.Tasks (HTTP on loopback), answer each prompt with N
//	            scores of a toy model, and lease again; a trainer goroutine
//	            consumes S steps in order (WaitStep, Trained). The window
//	            (ahead steps) is the gateway's: a lease beyond it is a 503,
//	            and the generator backs off briefly.
//	(2) python  python/bench/tasks_sampler.py: the same policy (passes,
//	            curriculum weights over a sum tree, dynamic sampling,
//	            retirement, the window) as an in-process sampler over the
//	            same P prompts, G simulated generators drawing K at a time,
//	            fed the same toy model, standard library only.
//
// The figure compared is CPU seconds per 1,000 prompts leased: for (1)
// the whole of this process (getrusage), which holds the gateway, the
// generators' and the trainer's HTTP clients and the toy model when the
// gateway is in-process; for (2) the Python process's over its sampling
// loop. The dataset is P tiny samples (a "txt" member of about 40 bytes)
// in tar shards in a local store, indexed by dataset.IndexShards; the
// gateway is gateway.New over that store on 127.0.0.1.

// TasksConfig describes a tasks benchmark run. Zero fields take
// DefaultTasksConfig's values.
type TasksConfig struct {
	Prompts   int           `json:"prompts"` // P
	Step      int           `json:"step"`    // B
	Ahead     int           `json:"ahead"`
	Policy    string        `json:"policy"`
	Redraws   int           `json:"redraws" zero:"kept"`
	Retire    int           `json:"retire" zero:"kept"`
	Seed      uint64        `json:"seed"`
	TTL       time.Duration `json:"ttl_ns"`
	Gens      int           `json:"generators"` // G
	Lease     int           `json:"lease"`      // K
	Answers   int           `json:"answers"`    // N, scores an answer
	Steps     int           `json:"steps"`      // S, the trainer's
	Backoff   time.Duration `json:"backoff_ns"`
	Poll      time.Duration `json:"poll_ns"` // the trainer's, while a step fills
	ShardSize int           `json:"shard_samples"`
	// Gateway, if set, is an external gateway's URL, serving Dataset: no
	// dataset is built and no gateway started.
	Gateway string `json:"gateway,omitempty"`
	Dataset string `json:"dataset"`
	Token   string `json:"-"`
	// NoPython skips (2).
	NoPython    bool   `json:"no_python,omitempty"`
	Interpreter string `json:"-"`
	Script      string `json:"-"`
	Harness     `json:"-"`
}

// DefaultTasksConfig: the run, 1,000,000 prompts, steps of 256,
// 8 ahead, a curriculum with dynamic sampling (2 redraws) retiring a
// prompt after 3 solves, 8 generators leasing 64 at a time, answers of 8
// scores, 1,000 trainer steps (under a minute on two shared cores, the
// dataset built and the Python sampler run).
func DefaultTasksConfig() TasksConfig {
	return TasksConfig{Prompts: 1_000_000, Step: 256, Ahead: 8, Policy: "curriculum", Redraws: 2, Retire: 3, Seed: 7,
		TTL: time.Minute, Gens: 8, Lease: 64, Answers: 8, Steps: 1000, Backoff: 2 * time.Millisecond, Poll: 5 * time.Millisecond, ShardSize: 16384,
		Dataset: "prompts"}
}

// SmallTasksConfig is --small: 20,000 prompts, 10 steps of 64.
func SmallTasksConfig() TasksConfig {
	c := DefaultTasksConfig()
	c.Prompts, c.Step, c.Steps, c.ShardSize = 20_000, 64, 10, 4096
	return c
}

// The toy model's constants (python/bench/tasks_sampler.py has the same).
const (
	toyDifficulty = 0x746f796469666669 // "toydiffi"
	toyScore      = 0x746f7973636f7265 // "toyscore"
)

// toyUnit is x's top 53 bits as a float in [0, 1).
func toyUnit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// toyPass is the toy model's chance that an answer to prompt q passes at
// model version v (the trainer's step) of a run of steps steps: a
// logistic in the model's skill, rising from 0.2 to 0.8 over the run,
// less the prompt's difficulty, uniform in [0, 1). At version 0 the
// easiest prompt passes 0.69 of the time and the hardest 0.04; at the
// end, 0.96 and 0.31: groups of 8 answers with no variance (all fail, or
// later all pass) are common, as dynamic sampling expects.
func toyPass(q int, v uint32, steps int) float64 {
	d := toyUnit(seeded.Mix64(uint64(q) ^ toyDifficulty))
	skill := 0.2 + 0.6*float64(v)/float64(max(steps, 1))
	return 1 / (1 + math.Exp(-4*(skill-d)))
}

// toyScores are the n scores of answers to prompt q at version v under
// lease number lease: each 1 (passes) or 0, a function of the five.
func toyScores(q int, v uint32, steps int, lease uint64, n int) []float64 {
	p := toyPass(q, v, steps)
	out := make([]float64, n)
	h := seeded.Mix64(seeded.Mix64(uint64(q)^toyScore) ^ lease)
	for j := range out {
		if toyUnit(seeded.Mix64(h^uint64(j))) < p {
			out[j] = 1
		}
	}
	return out
}

// TasksReport is the benchmark's result: tasks.json.
type TasksReport struct {
	Header
	Config     TasksConfig `json:"config"`
	InProcess  bool        `json:"in_process"` // the gateway ran in this process
	BuildSecs  float64     `json:"dataset_build_s,omitempty"`
	LoadSecs   float64     `json:"gateway_load_s,omitempty"`
	MakeSecs   float64     `json:"make_s"` // PUT /tasks/{job}
	Brand      TasksBrand  `json:"brand"`
	Python     *TasksPy    `json:"python,omitempty"`
	PySkipped  string      `json:"python_skipped,omitempty"`
	CPURatio   float64     `json:"cpu_ratio,omitempty"` // Brand's CPU per 1,000 prompts ÷ Python's
	Targets    []Target    `json:"targets"`
	Load       float64     `json:"load_average"`
	Seconds    float64     `json:"seconds"`
	ReplanNote string      `json:"replan_note"`
}

// TasksBrand is run (1): the job through the gateway.
type TasksBrand struct {
	Seconds        float64 `json:"seconds"`
	Leases         int64   `json:"leases"`
	Prompts        int64   `json:"prompts_leased"`
	Refused        int64   `json:"refused_503"`
	FeedbackRows   int64   `json:"feedback_rows_sent"`
	LeasesPerSec   float64 `json:"leases_per_s"`
	PromptsPerSec  float64 `json:"prompts_per_s"`
	RowsPerSec     float64 `json:"feedback_rows_per_s"`
	LeaseMeanMs    float64 `json:"lease_mean_ms"`
	LeaseP50Ms     float64 `json:"lease_p50_ms"`
	LeaseP99Ms     float64 `json:"lease_p99_ms"`
	CPUSeconds     float64 `json:"cpu_s"`
	CPUPer1000     float64 `json:"cpu_s_per_1000_prompts"`
	StepsRead      int     `json:"steps_read"`
	StepWaitMeanMs float64 `json:"trainer_wait_mean_ms"`
	// From GET /tasks/{job} at the end.
	Plan           api.TaskPlan `json:"plan"`
	PlanMs         float64      `json:"get_plan_ms"` // GET /tasks/{job}, which counts every prompt
	BytesPerRow    float64      `json:"log_bytes_per_feedback_row"`
	BytesPerStep   float64      `json:"log_bytes_per_step"`
	SegmentsPerStp float64      `json:"segments_per_step"`
	RowsPerSegment float64      `json:"feedback_rows_per_segment"`
}

// TasksPy is run (2): what tasks_sampler.py prints.
type TasksPy struct {
	Interpreter  string  `json:"interpreter"`
	Version      string  `json:"python"`
	SetupSeconds float64 `json:"setup_s"`
	SetupCPU     float64 `json:"setup_cpu_s"`
	Seconds      float64 `json:"seconds"`
	CPUSeconds   float64 `json:"cpu_s"`
	Leases       int64   `json:"leases"`
	Prompts      int64   `json:"prompts_leased"`
	FeedbackRows int64   `json:"feedback_rows"`
	Steps        int     `json:"steps"`
	Counted      int64   `json:"counted"`
	Redrawn      int64   `json:"redrawn"`
	Rested       int64   `json:"rested"`
	Retired      int64   `json:"retired"`
	Refused      int64   `json:"refused"`
	CPUPer1000   float64 `json:"cpu_s_per_1000_prompts"`
}

// RunTasks runs the tasks benchmark.
func RunTasks(ctx context.Context, cfg TasksConfig) (*TasksReport, error) {
	fillZero(&cfg, DefaultTasksConfig())
	if cfg.Log == nil {
		cfg.Log = nopWriter{}
	}
	switch {
	case cfg.Prompts < 1 || cfg.Step < 1 || cfg.Steps < 1 || cfg.Gens < 1 || cfg.Lease < 1 || cfg.Answers < 1:
		return nil, fmt.Errorf("%w: tasks: prompts %d, step %d, steps %d, generators %d, lease %d, answers %d: each at least 1",
			ErrConfig, cfg.Prompts, cfg.Step, cfg.Steps, cfg.Gens, cfg.Lease, cfg.Answers)
	case cfg.Gateway == "" && cfg.WorkDir == "":
		return nil, fmt.Errorf("%w: tasks needs a work directory", ErrConfig)
	}
	started := time.Now()
	rep := &TasksReport{Header: newHeader(started, cfg.Command), Config: cfg, InProcess: cfg.Gateway == ""}
	base := cfg.Gateway
	if base == "" {
		srv, err := startTaskGateway(ctx, cfg, rep)
		if err != nil {
			return nil, err
		}
		defer srv.close()
		base = srv.base
	}
	job := fmt.Sprintf("bench-%d", started.UnixMilli())
	if err := runTaskJob(ctx, cfg, base, job, rep); err != nil {
		return nil, err
	}
	if cfg.NoPython {
		rep.PySkipped = "--no-python"
	} else if err := runTaskSampler(ctx, cfg, rep); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		rep.PySkipped = err.Error()
		logf(cfg.Log, "python: skipped: %v", err)
	}
	rep.targets()
	rep.ReplanNote = "re-planning after 10,000 feedback rows and a cold load of the log: go test ./internal/task -run XXX -bench Replan (internal/task/bench_test.go)"
	rep.Load = loadAverage()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// taskGateway is the in-process gateway and its listener.
type taskGateway struct {
	base string
	srv  *http.Server
	g    *gateway.Gateway
}

func (t *taskGateway) close() {
	_ = t.srv.Close()
	t.g.Close()
}

// startTaskGateway builds the dataset (tar shards written with the
// project's ustar writer, indexed by dataset.IndexShards) in a local store
// under the work directory and serves it from a gateway in this process.
func startTaskGateway(ctx context.Context, cfg TasksConfig, rep *TasksReport) (*taskGateway, error) {
	dir := filepath.Join(cfg.WorkDir, "tasks-store")
	_ = os.RemoveAll(dir)
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := writePromptShards(ctx, store, cfg.Prompts, cfg.ShardSize); err != nil {
		return nil, err
	}
	res, err := dataset.IndexShards(ctx, store, dataset.IndexOptions{Prefix: "shards/", Name: cfg.Dataset, Parallel: 2})
	if err != nil {
		return nil, err
	}
	rep.BuildSecs = time.Since(t0).Seconds()
	logf(cfg.Log, "dataset: %d prompts in %d shards (%s), built and indexed in %.1f s", res.Index.NumSamples(), res.Index.NumChunks(),
		sizeString(res.Index.TotalBytes()), rep.BuildSecs)
	t0 = time.Now()
	g, err := gateway.New(gateway.Config{Datasets: []gateway.DatasetSpec{{Name: cfg.Dataset, Store: store}},
		CacheSize: 64 << 20, NoPrefault: true, IndexPoll: -1})
	if err != nil {
		return nil, err
	}
	if err := g.Load(ctx); err != nil {
		g.Close()
		return nil, err
	}
	rep.LoadSecs = time.Since(t0).Seconds()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		return nil, err
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &taskGateway{base: "http://" + ln.Addr().String(), srv: srv, g: g}, nil
}

// promptText is prompt i's text, about 40 bytes.
func promptText(i int) string {
	return fmt.Sprintf("prompt %07d: what is %d + %d?", i, i%997, i%1009)
}

// writePromptShards writes n samples p/NNNNNNNNN.txt into tar shards of
// per samples each, two shards at a time.
func writePromptShards(ctx context.Context, st s3backend.Store, n, per int) error {
	tmpl, err := ustar.NewTemplate(0o644, time.Unix(1_700_000_000, 0))
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		g.Go(func() error {
			size := 2 * ustar.BlockSize // the end of the archive
			for i := lo; i < hi; i++ {
				size += ustar.BlockSize + int(ustar.Padded(int64(len(promptText(i)))))
			}
			buf := make([]byte, size)
			w := ustar.NewWriter(buf, tmpl)
			for i := lo; i < hi; i++ {
				text := promptText(i)
				data, err := w.Member(len(text), promptKey(i), ".txt")
				if err != nil {
					return err
				}
				copy(data, text)
			}
			_, err := st.Put(gctx, fmt.Sprintf("shards/%06d.tar", lo/per), bytes.NewReader(buf), int64(len(buf)))
			return err
		})
	}
	return g.Wait()
}

func promptKey(i int) string { return fmt.Sprintf("p/%09d", i) }

// leaseNumber is a lease ID's number (TAG-N).
func leaseNumber(id string) uint64 {
	n, _ := strconv.ParseUint(id[strings.LastIndexByte(id, '-')+1:], 10, 64)
	return n
}

// runTaskJob is run (1).
func runTaskJob(ctx context.Context, cfg TasksConfig, base, job string, rep *TasksReport) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Gens + 4, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	tk := client.NewTasks(base, job, client.TasksOptions{Dataset: cfg.Dataset, Token: cfg.Token, HTTP: hc})
	t0 := time.Now()
	plan, _, err := tk.Make(ctx, map[string]any{"seed": cfg.Seed, "step": cfg.Step, "ahead": cfg.Ahead, "policy": cfg.Policy,
		"redraws": cfg.Redraws, "retire": cfg.Retire, "ttl": cfg.TTL.String(), "max_lease": max(cfg.Lease, 1024)})
	if err != nil {
		return fmt.Errorf("bench: making task job %s: %w", job, err)
	}
	rep.MakeSecs = time.Since(t0).Seconds()
	logf(cfg.Log, "task job %s over %d prompts: step %d, ahead %d, %s, redraws %d, retire %d; %d generators leasing %d, %d scores an answer, %d steps",
		job, plan.Prompts, cfg.Step, cfg.Ahead, cfg.Policy, cfg.Redraws, cfg.Retire, cfg.Gens, cfg.Lease, cfg.Answers, cfg.Steps)

	var (
		version                      atomic.Uint32 // the trainer's step: the generators' model version
		leases, prompts, rows, fails atomic.Int64
		mu                           sync.Mutex
		lats                         []time.Duration
	)
	// A generator's failure ends the run: the trainer waits on egCtx.
	genCtx, stopGens := context.WithCancel(ctx)
	defer stopGens()
	eg, egCtx := errgroup.WithContext(genCtx)
	cpu0, wall0 := processCPUTime(), time.Now()
	for g := range cfg.Gens {
		eg.Go(func() error {
			gen := fmt.Sprint("gen-", g)
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			}()
			for genCtx.Err() == nil {
				t := time.Now()
				l, err := tk.Lease(genCtx, gen, cfg.Lease)
				if ae, ok := errors.AsType[*client.APIError](err); ok && ae.StatusCode == http.StatusServiceUnavailable {
					fails.Add(1)
					select {
					case <-genCtx.Done():
					case <-time.After(cfg.Backoff):
					}
					continue
				}
				if err != nil {
					if genCtx.Err() != nil {
						return nil
					}
					return fmt.Errorf("bench: %s leasing: %w", gen, err)
				}
				mine = append(mine, time.Since(t))
				leases.Add(1)
				prompts.Add(int64(len(l.Prompts)))
				v, num := version.Load(), leaseNumber(l.Lease)
				rs := make([]api.TaskResult, len(l.Prompts))
				for i, p := range l.Prompts {
					rs[i] = api.TaskResult{Key: p.Key, Scores: toyScores(p.ID, v, cfg.Steps, num, cfg.Answers), Version: v}
				}
				if _, err := tk.Answer(genCtx, l.Lease, rs); err != nil {
					if genCtx.Err() != nil {
						return nil
					}
					return fmt.Errorf("bench: %s answering %s: %w", gen, l.Lease, err)
				}
				rows.Add(int64(len(rs)))
			}
			return nil
		})
	}
	var waited time.Duration
	trainErr := func() error {
		for n := range uint64(cfg.Steps) {
			t := time.Now()
			s, err := tk.WaitStep(egCtx, n, cfg.Poll)
			if err != nil {
				if egCtx.Err() != nil && ctx.Err() == nil {
					return nil // a generator failed: its error is the run's
				}
				return fmt.Errorf("bench: the trainer waiting for step %d: %w", n, err)
			}
			waited += time.Since(t)
			if len(s.Prompts) != cfg.Step {
				return fmt.Errorf("bench: step %d holds %d prompts, want %d", n, len(s.Prompts), cfg.Step)
			}
			version.Store(uint32(n + 1))
			if err := tk.Trained(ctx, n+1); err != nil {
				return fmt.Errorf("bench: the trainer at step %d: %w", n+1, err)
			}
			rep.Brand.StepsRead++
		}
		return nil
	}()
	wall := time.Since(wall0)
	cpu := processCPUTime() - cpu0
	b := &rep.Brand
	b.Leases, b.Prompts, b.Refused, b.FeedbackRows = leases.Load(), prompts.Load(), fails.Load(), rows.Load()
	stopGens()
	if err := errors.Join(trainErr, eg.Wait()); err != nil {
		return err
	}
	b.Seconds, b.CPUSeconds = wall.Seconds(), cpu.Seconds()
	b.LeasesPerSec, b.PromptsPerSec, b.RowsPerSec = float64(b.Leases)/b.Seconds, float64(b.Prompts)/b.Seconds, float64(b.FeedbackRows)/b.Seconds
	if b.Prompts > 0 {
		b.CPUPer1000 = 1000 * b.CPUSeconds / float64(b.Prompts)
	}
	if len(lats) > 0 {
		var sum time.Duration
		for _, d := range lats {
			sum += d
		}
		b.LeaseMeanMs = ms(sum / time.Duration(len(lats)))
		b.LeaseP50Ms, b.LeaseP99Ms = ms(percentile(lats, 50)), ms(percentile(lats, 99))
	}
	if b.StepsRead > 0 {
		b.StepWaitMeanMs = ms(waited / time.Duration(b.StepsRead))
	}
	t0 = time.Now()
	if b.Plan, err = tk.Plan(ctx); err != nil {
		return fmt.Errorf("bench: GET /tasks/%s: %w", job, err)
	}
	b.PlanMs = ms(time.Since(t0))
	p := b.Plan
	if p.FeedbackRows > 0 {
		b.BytesPerRow = float64(p.LogBytes) / float64(p.FeedbackRows)
	}
	if p.StepsFull > 0 {
		b.BytesPerStep = float64(p.LogBytes) / float64(p.StepsFull)
		b.SegmentsPerStp = float64(p.Segments) / float64(p.StepsFull)
	}
	if p.Segments > 0 {
		b.RowsPerSegment = float64(p.FeedbackRows) / float64(p.Segments)
	}
	logf(cfg.Log, "brand: %d steps in %.1f s: %d leases (%.0f/s), %d prompts (%.0f/s), %d rows (%.0f/s), %d refused; lease p50 %.2f ms, p99 %.2f ms; %.3f CPU-s per 1,000 prompts; log %d bytes in %d segments, %.1f bytes a row",
		b.StepsRead, b.Seconds, b.Leases, b.LeasesPerSec, b.Prompts, b.PromptsPerSec, b.FeedbackRows, b.RowsPerSec, b.Refused,
		b.LeaseP50Ms, b.LeaseP99Ms, b.CPUPer1000, p.LogBytes, p.Segments, b.BytesPerRow)
	return nil
}

// runTaskSampler is run (2): python/bench/tasks_sampler.py over the same
// prompts, policy, generators and toy model.
func runTaskSampler(ctx context.Context, cfg TasksConfig, rep *TasksReport) error {
	given := cfg.Interpreter
	if given == "" && os.Getenv("BRAND_BENCH_PYTHON") == "" {
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			given = "/usr/bin/python3" // the system's, standard library only
		}
	}
	interp, script, err := findScript(ctx, "tasks_sampler.py", cfg.Script, given, "resource, json", "python3")
	if err != nil {
		return err
	}
	args := []string{script, "--prompts", strconv.Itoa(cfg.Prompts), "--step", strconv.Itoa(cfg.Step), "--ahead", strconv.Itoa(cfg.Ahead),
		"--policy", cfg.Policy, "--redraws", strconv.Itoa(cfg.Redraws), "--retire", strconv.Itoa(cfg.Retire),
		"--seed", strconv.FormatUint(cfg.Seed, 10), "--generators", strconv.Itoa(cfg.Gens), "--lease", strconv.Itoa(cfg.Lease),
		"--answers", strconv.Itoa(cfg.Answers), "--steps", strconv.Itoa(cfg.Steps)}
	cmd := exec.CommandContext(ctx, interp, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcAttr(cmd)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench: %s: %w\n%s", filepath.Base(script), err, lastLines(stderr.String(), 20))
	}
	var py TasksPy
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &py); err != nil {
		return fmt.Errorf("bench: %s: its output: %w", filepath.Base(script), err)
	}
	py.Interpreter = interp
	if py.Prompts > 0 {
		py.CPUPer1000 = 1000 * py.CPUSeconds / float64(py.Prompts)
	}
	rep.Python = &py
	rep.CPURatio = ratio(rep.Brand.CPUPer1000, py.CPUPer1000)
	logf(cfg.Log, "python: %d steps, %d prompts leased in %.1f s (setup %.1f s): %.3f CPU-s per 1,000 prompts; brand ÷ python %.2f",
		py.Steps, py.Prompts, py.Seconds, py.SetupSeconds, py.CPUPer1000, rep.CPURatio)
	return nil
}

// targets are the targets that this run measures: leasing rate
// on a node, and the log's size a feedback row. Re-planning after 10,000
// rows is internal/task's BenchmarkReplan.
func (rep *TasksReport) targets() {
	b := rep.Brand
	rep.Targets = []Target{
		atLeast("prompts leased a second on a node", b.PromptsPerSec, 10_000),
		atMost(fmt.Sprintf("log bytes a feedback row (all records and segments included), at most 64 + 4 × %d scores", rep.Config.Answers),
			b.BytesPerRow, float64(64+4*rep.Config.Answers)),
	}
	if rep.InProcess {
		rep.Targets[0].Note = "the gateway, the generators' and the trainer's HTTP clients and the toy model share this process and the machine's cores"
	}
}
