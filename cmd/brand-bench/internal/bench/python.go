package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// The python group measures what a PyTorch user runs: a DataLoader over a
// map-style Dataset that GETs each sample with boto3, the same DataLoader
// over brand.torch.BrandDataset, and the Python client beside the Go client
// on one gateway. The loaders are python/bench/loaders.py, run once per
// measurement as processes of their own (with their DataLoader workers);
// they report their own figures and CPU time as JSON.

// Row identifiers of the python group.
const (
	ConfigPyObjects = "py-per-object" // (p)
	ConfigPyBrand   = "py-brand"      // DataLoader over BrandDataset
	ConfigPyClient  = "py-client"     // brand.Client, warm, beside ConfigGoClient
	ConfigGoClient  = "go-client"     // client.Epoch on the same gateway
)

// Python describes the python group.
type Python struct {
	// Interpreter runs the loaders; it must import torch and boto3. Empty:
	// $BRAND_BENCH_PYTHON, else the first of python3 and /usr/bin/python3
	// that imports both. Without one the group is skipped, with the reason
	// in the report.
	Interpreter string
	// Script is python/bench/loaders.py; empty: found from the working
	// directory upwards.
	Script string
	// Workers are the DataLoader worker counts tried for (p); it reports
	// its best.
	Workers []int
	// BrandWorkers are the worker counts tried for BrandDataset's warm
	// epochs (one warm epoch each); it reports its best. 0 is the
	// DataLoader reading in the trainer's process: brand.Client already
	// fetches ahead on threads, and no worker pickles the samples over a
	// pipe.
	BrandWorkers []int
	// ColdWorkers are the workers of Brand's cold epoch, read once per
	// gateway.
	ColdWorkers int
	// CacheFractions are the gateways' cache sizes, as fractions of the
	// dataset; each gets a fresh gateway, so its epoch 0 is cold.
	CacheFractions []float64
	// ObjectSamples bounds what (p) reads at each worker count: that many
	// samples of its shuffled epoch (0: the whole epoch). Its rate is
	// steady, and a whole epoch of one GET per sample takes minutes.
	ObjectSamples int
	// ClientRounds is how many warm epochs each of the Go and the Python
	// client reads, alternately, from the gateway whose cache holds the
	// dataset.
	ClientRounds int
}

// SkippedGroup is a selected group the run could not measure.
type SkippedGroup struct {
	Group  string `json:"group"`
	Reason string `json:"reason"`
}

// pyResult is what loaders.py prints.
type pyResult struct {
	Mode       string    `json:"mode"`
	Samples    int64     `json:"samples"`
	Bytes      int64     `json:"bytes"`
	Seconds    float64   `json:"seconds"`
	CPUSeconds float64   `json:"cpu_seconds"`
	WaitsMs    []float64 `json:"waits_ms"`
	Workers    int       `json:"workers"`
}

// findPython returns the interpreter and script of the python group, or
// why there are none.
func (c *Config) findPython(ctx context.Context) (interp, script string, err error) {
	script = c.Python.Script
	if script == "" {
		if script, err = findAbove(filepath.Join("python", "bench", "loaders.py")); err != nil {
			return "", "", err
		}
	}
	interp, err = findInterpreter(ctx, c.Python.Interpreter, "torch, boto3", "python3-torch python3-boto3")
	return interp, script, err
}

// findInterpreter returns the Python given, or else the first of
// $BRAND_BENCH_PYTHON, python3 and /usr/bin/python3 that imports modules
// (comma-separated); the error names what each lacked and the Debian
// packages that bring them.
func findInterpreter(ctx context.Context, given, modules, packages string) (string, error) {
	candidates := []string{given}
	if given == "" {
		candidates = []string{os.Getenv("BRAND_BENCH_PYTHON"), "python3", "/usr/bin/python3"}
	}
	var tried []string
	for _, p := range candidates {
		if p == "" {
			continue
		}
		path, err := exec.LookPath(p)
		if err != nil {
			tried = append(tried, p+": not found")
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		out, err := exec.CommandContext(ctx, path, "-c", "import "+modules).CombinedOutput()
		cancel()
		if err == nil {
			return path, nil
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		tried = append(tried, p+": "+lines[len(lines)-1])
	}
	return "", fmt.Errorf("no Python that imports %s (%s); on Debian: apt-get install %s", modules, strings.Join(tried, "; "), packages)
}

// runPythonGroup measures (p), BrandDataset at each cache fraction, and the
// Python client beside the Go client.
func (r *runner) runPythonGroup(ctx context.Context) error {
	interp, script, err := r.cfg.findPython(ctx)
	if err != nil {
		r.logf("python: skipped: %v", err)
		r.rep.Skipped = append(r.rep.Skipped, SkippedGroup{Group: GroupPython, Reason: err.Error()})
		return nil
	}
	r.logf("python: %s %s", interp, script)
	py := pyLoader{r: r, interp: interp, script: script}
	if err := r.measured(ctx, py.perObject); err != nil {
		return fmt.Errorf("python (p): %w", err)
	}
	for _, f := range r.cfg.Python.CacheFractions {
		if err := r.measured(ctx, func(ctx context.Context) error { return py.brand(ctx, f) }); err != nil {
			return fmt.Errorf("python, Brand at cache %s: %w", percentString(f), err)
		}
	}
	return nil
}

type pyLoader struct {
	r              *runner
	interp, script string
}

// run runs loaders.py once and measures the gateway (gatewayPid, 0 for
// none) and the store around it. The loader's figures and CPU are its own,
// over its measured pass; the gateway's and the store's are over the whole
// process, whose start (imports) they sit idle through.
func (py pyLoader) run(ctx context.Context, gatewayPid int, args ...string) (pyResult, CPUUse, error) {
	cm := py.r.cpuMeter(gatewayPid)
	mark := cm.mark()
	cmd := exec.CommandContext(ctx, py.interp, append([]string{py.script}, args...)...)
	cmd.Env = gatewayEnv(py.r.tb.srv.AccessKey, py.r.tb.srv.SecretKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcAttr(cmd)
	err := cmd.Run()
	use := cm.since(mark)
	if err != nil {
		return pyResult{}, use, fmt.Errorf("%s %s: %w\n%s", filepath.Base(py.script), strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	var res pyResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		return pyResult{}, use, fmt.Errorf("%s %s: its output: %w", filepath.Base(py.script), strings.Join(args, " "), err)
	}
	use.Harness = res.CPUSeconds
	use.Busy = use.Total() / (res.Seconds * float64(runtime.NumCPU()))
	return res, use, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// pass converts a loader's result.
func (res pyResult) pass(use CPUUse) pass {
	p := pass{samples: res.Samples, bytes: res.Bytes, elapsed: time.Duration(res.Seconds * float64(time.Second)), cpu: use}
	for _, w := range res.WaitsMs {
		p.waits = append(p.waits, time.Duration(w*float64(time.Millisecond)))
	}
	return p
}

// perObject measures (p) at each worker count.
func (py pyLoader) perObject(ctx context.Context) error {
	r := py.r
	keys := filepath.Join(r.cfg.WorkDir, "python-keys-"+r.tb.objectPrefix+".txt")
	var b strings.Builder
	for _, o := range r.tb.objects {
		b.WriteString(o.key + "\n")
	}
	if err := os.WriteFile(keys, []byte(b.String()), 0o644); err != nil {
		return err
	}
	n := len(r.tb.objects)
	if r.cfg.Python.ObjectSamples > 0 {
		n = min(n, r.cfg.Python.ObjectSamples)
	}
	r.logf("python (p): DataLoader, one boto3 get_object per sample, %d of %d samples, workers %v", n, len(r.tb.objects), r.cfg.Python.Workers)
	var best pass
	var bestLevel int
	var points []SweepPoint
	for _, w := range r.cfg.Python.Workers {
		res, use, err := py.run(ctx, 0, "per-object", "--endpoint", r.tb.srv.URL(), "--bucket", r.cfg.Bucket, "--keys-file", keys,
			"--limit", strconv.Itoa(n), "--batch-size", strconv.Itoa(r.cfg.Job.BatchSize), "--seed", strconv.FormatUint(r.cfg.Job.Seed, 10),
			"--workers", strconv.Itoa(w))
		if err != nil {
			return err
		}
		p := res.pass(use)
		p.backendBytes = p.bytes
		sps := float64(p.samples) / p.elapsed.Seconds()
		points = append(points, SweepPoint{Concurrency: w, SamplesPerSec: sps, MBPerSec: float64(p.bytes) / p.elapsed.Seconds() / 1e6})
		r.logf("  %d workers: %.0f samples/s", w, sps)
		if bestLevel == 0 || sps > float64(best.samples)/best.elapsed.Seconds() {
			best, bestLevel = p, w
		}
	}
	row := newRow(ConfigPyObjects, GroupPython, "(p) PyTorch DataLoader, boto3 GET per sample", best)
	row.Concurrency, row.Sweep = bestLevel, points
	r.add(row)
	return nil
}

// brand measures BrandDataset through a fresh gateway: the cold epoch, a
// warm epoch at each worker count, and, when the cache holds the dataset,
// the Python and Go clients alternately.
func (py pyLoader) brand(ctx context.Context, fraction float64) error {
	r := py.r
	cfg := r.cfg.Python
	r.logf("python: Brand at cache %s, DataLoader over BrandDataset", percentString(fraction))
	g, err := r.startBrandGateway(ctx, fraction, "next-use", brandOpts{tag: "python-"})
	if err != nil {
		return err
	}
	defer g.kill()
	pid := g.cmd.Process.Pid
	job := []string{"--url", g.base, "--dataset", gatewayDataset, "--batch-size", strconv.Itoa(r.cfg.Job.BatchSize),
		"--seed", strconv.FormatUint(r.cfg.Job.Seed, 10), "--window", strconv.Itoa(r.cfg.Job.Window)}
	at := "cache " + percentString(fraction)
	add := func(label string, epoch int, res pyResult, use CPUUse, st func(int) int64, workers int, sweep []SweepPoint) {
		p := res.pass(use)
		p.backendBytes = st(epoch)
		row := newRow(ConfigPyBrand, GroupPython, label, p)
		// BrandDataset's bytes are the samples' payload, without the tar
		// framing the gateway's count includes: no read amplification.
		row.ReadAmplification = 0
		row.CacheFraction, row.CacheBytes, row.Policy = fraction, r.cacheBytes(fraction), "next-use"
		e := epoch
		row.Epoch = &e
		row.Concurrency, row.Sweep = workers, sweep
		if sweep == nil {
			row.Sweep = []SweepPoint{{Concurrency: workers, SamplesPerSec: row.SamplesPerSec, MBPerSec: row.MBPerSec}}
		}
		r.add(row)
	}
	var stats gatewayStats
	backend := func(e int) int64 { return stats.epoch(e).BackendBytes }

	type measured struct {
		epoch int
		res   pyResult
		use   CPUUse
	}
	var cold measured
	cold.res, cold.use, err = py.run(ctx, pid, append([]string{"brand", "--epoch", "0", "--workers", strconv.Itoa(cfg.ColdWorkers)}, job...)...)
	if err != nil {
		return err
	}
	r.logf("  cold epoch, %d workers: %.0f samples/s", cfg.ColdWorkers, float64(cold.res.Samples)/cold.res.Seconds)
	var warm []measured
	epoch := 1
	for _, w := range cfg.BrandWorkers {
		res, use, err := py.run(ctx, pid, append([]string{"brand", "--epoch", strconv.Itoa(epoch), "--workers", strconv.Itoa(w)}, job...)...)
		if err != nil {
			return err
		}
		r.logf("  warm epoch %d, %d workers: %.0f samples/s", epoch, w, float64(res.Samples)/res.Seconds)
		warm = append(warm, measured{epoch, res, use})
		epoch++
	}
	var goEpochs, pyEpochs []measured
	var goRuns []brandEpoch
	if fraction >= 1 {
		c, ct, err := r.brandClient(g.base, r.cfg.Brand.Ahead)
		if err != nil {
			return err
		}
		for range cfg.ClientRounds {
			ep, err := r.brandEpoch(ctx, g, c, ct, epoch, pprof.Labels("config", ConfigGoClient, "epoch", strconv.Itoa(epoch)))
			if err != nil {
				return err
			}
			goRuns = append(goRuns, ep)
			goEpochs = append(goEpochs, measured{epoch: epoch})
			epoch++
			res, use, err := py.run(ctx, pid, append([]string{"client", "--epoch", strconv.Itoa(epoch), "--warmup", "1", "--ahead", strconv.Itoa(r.cfg.Brand.Ahead)}, job...)...)
			if err != nil {
				return err
			}
			pyEpochs = append(pyEpochs, measured{epoch, res, use})
			r.logf("  epoch %d Go client %.0f samples/s, epoch %d Python client %.0f samples/s",
				epoch-1, float64(ep.samples)/ep.elapsed.Seconds(), epoch, float64(res.Samples)/res.Seconds)
			epoch++
		}
	}
	if stats, err = g.stats(ctx); err != nil {
		return err
	}
	if err := g.stop(15 * time.Second); err != nil {
		return err
	}

	add("Brand, PyTorch DataLoader, "+at+", epoch 0", 0, cold.res, cold.use, backend, cfg.ColdWorkers, nil)
	best := 0
	var points []SweepPoint
	for i, m := range warm {
		points = append(points, SweepPoint{Concurrency: cfg.BrandWorkers[i], SamplesPerSec: float64(m.res.Samples) / m.res.Seconds, MBPerSec: float64(m.res.Bytes) / m.res.Seconds / 1e6})
		if points[i].SamplesPerSec > points[best].SamplesPerSec {
			best = i
		}
	}
	m := warm[best]
	add("Brand, PyTorch DataLoader, "+at+", warm, best workers", m.epoch, m.res, m.use, backend, cfg.BrandWorkers[best], points)

	if len(goRuns) > 0 {
		// The rounds together, as one row each: samples and seconds summed.
		var gp, pp pass
		for i, ep := range goRuns {
			gp.samples += ep.samples
			gp.bytes += ep.bytes
			gp.elapsed += ep.elapsed
			gp.waits = append(gp.waits, ep.waits...)
			gp.backendBytes += stats.epoch(goEpochs[i].epoch).BackendBytes
			gp.cpu = addCPU(gp.cpu, ep.cpu)
		}
		for _, m := range pyEpochs {
			q := m.res.pass(m.use)
			pp.samples += q.samples
			pp.bytes += q.bytes
			pp.elapsed += q.elapsed
			pp.waits = append(pp.waits, q.waits...)
			pp.backendBytes += stats.epoch(m.epoch).BackendBytes
			pp.cpu = addCPU(pp.cpu, q.cpu)
		}
		for _, c := range []struct {
			config, label string
			p             pass
		}{
			{ConfigGoClient, fmt.Sprintf("Go client, %s, warm (%d epochs)", at, len(goRuns)), gp},
			{ConfigPyClient, fmt.Sprintf("Python client, %s, warm (%d epochs)", at, len(pyEpochs)), pp},
		} {
			row := newRow(c.config, GroupPython, c.label, c.p)
			row.CacheFraction, row.CacheBytes, row.Policy = fraction, r.cacheBytes(fraction), "next-use"
			row.Concurrency = r.cfg.Brand.Ahead
			row.Sweep = []SweepPoint{{Concurrency: row.Concurrency, SamplesPerSec: row.SamplesPerSec, MBPerSec: row.MBPerSec}}
			r.add(row)
		}
	}
	return nil
}

// addCPU sums two measurements' CPU; busy becomes their mean.
func addCPU(a, b CPUUse) CPUUse {
	busy := b.Busy
	if a.Total() > 0 {
		busy = (a.Busy + b.Busy) / 2
	}
	return CPUUse{Harness: a.Harness + b.Harness, Gateway: a.Gateway + b.Gateway, Store: a.Store + b.Store, Busy: busy}
}
