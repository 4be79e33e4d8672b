package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// The mixture benchmark (brand-bench mix): a two-component mixture
// (mix=a:0.5,b:0.5 over two datasets of N/2 samples) against one dataset
// of N samples of the same size, each through its own fresh gateway with
// the same cache, read by the same readers over the same epochs;
// configurations alternate (single, mix, single, mix, …) so that the
// machine's noise hits both. Samples/s per epoch and store bytes per
// epoch (the gateway's brand_backend_read_bytes_total) are compared side
// by side, and store bytes with the planner's optimum for the same job
// (GET /plan on the same gateway). The gateway's CPU time per epoch says
// whether a slower configuration spent more work or waited more: the
// client, the gateway and the store (local files, read by the gateway)
// share the machine's cores.

// MixConfig describes a mixture benchmark run. Zero fields take
// DefaultMixConfig's values.
type MixConfig struct {
	Samples   int   // of the single dataset; each component has half
	MeanBytes int64 // mean sample size
	ChunkSize int64
	Seed      uint64

	BatchSize int
	Window    int
	Epochs    int // epochs 0..Epochs-1: 0 cold, the rest warm
	Readers   int // ranks reading at once (world)
	// RankLead bounds how many batches beyond the slowest rank's reads a
	// rank's reads reach, the one it reads included (rankSteps): 1 keeps
	// the ranks in lockstep, 2 (the default) lets a rank read one batch
	// ahead of the slowest, as a data-parallel job's loaders read ahead of
	// the step its ranks take together; negative lets them run free.
	RankLead int
	Pairs    int // alternations of single and mix per cache size

	CacheFractions []float64

	GatewayArgs []string
	// GatewayProfiles, if set, is a directory where every gateway run
	// writes a CPU profile of itself (brand serve --cpuprofile),
	// gateway-mix-<config>-<cache bytes>-<pair>.pprof.
	GatewayProfiles string
	ConfigTimeout   time.Duration
	Harness
}

// DefaultMixConfig: 4,096 samples of 100 KiB (400 MiB, and as much again
// in the two components) in 4 MiB chunks, batch 64, window 8, world 2,
// three epochs, caches of 25 % and 50 %, five pairs (an epoch lasts about
// half a second here, so the pairs are what averages the noise out).
func DefaultMixConfig() MixConfig {
	return MixConfig{Samples: 4096, MeanBytes: 100 << 10, ChunkSize: 4 << 20, Seed: 1,
		BatchSize: 64, Window: 8, Epochs: 3, Readers: 2, RankLead: 2, Pairs: 5,
		CacheFractions: []float64{0.25, 0.5}, ConfigTimeout: 10 * time.Minute}
}

// SmallMixConfig is DefaultMixConfig with samples of 10 KiB: ten times as
// many (40,960: the same 400 MiB of images), where the per-sample work
// dominates.
func SmallMixConfig() MixConfig {
	c := DefaultMixConfig()
	c.Samples, c.MeanBytes = 40960, 10<<10
	return c
}

// The targets of a mixture against one dataset of its size.
const (
	mixSpeedTarget = 0.90 // mix ÷ single samples/s, every epoch
	mixStoreTarget = 1.05 // store bytes ÷ the planner's optimum, over the epochs
)

func (c MixConfig) withDefaults() (MixConfig, error) {
	fillZero(&c, DefaultMixConfig())
	if err := c.check(); err != nil {
		return c, err
	}
	switch {
	case c.Samples < 2 || c.Epochs < 2 || c.BatchSize < 1 || c.Window < 1 || c.Readers < 1 || c.Pairs < 1:
		return c, fmt.Errorf("%w: samples >= 2, epochs >= 2, and batch size, window, readers and pairs >= 1", ErrConfig)
	}
	return c, checkFractions(c.CacheFractions...)
}

// The mixture's datasets and the single one, as the gateways name them;
// mixSingle and mixMixture name the two configurations in the report.
const (
	mixMixture = "mix"
	mixSingle  = "single"
	mixA       = "a"
	mixB       = "b"
	mixText    = "a:0.5,b:0.5"
)

// MixReport is a mixture benchmark's result: mix.json.
type MixReport struct {
	Header
	Samples   int      `json:"samples"`
	MeanBytes int64    `json:"mean_bytes"` // of a sample's image, as synth draws it
	Bytes     int64    `json:"bytes"`      // the single dataset's; the components' sum is within a chunk's padding of it
	MixBytes  int64    `json:"mix_bytes"`
	BatchSize int      `json:"batch_size"`
	Window    int      `json:"window"`
	Readers   int      `json:"readers"`
	RankLead  int      `json:"rank_lead"` // ≤ 0: ranks ran free
	Epochs    int      `json:"epochs"`
	Rows      []MixRow `json:"rows"`
	Targets   []Target `json:"targets"`
	Seconds   float64  `json:"seconds"`
}

// MixRow is one gateway's run: a configuration at a cache size.
type MixRow struct {
	Config        string  `json:"config"` // single or mix
	Pair          int     `json:"pair"`
	CacheFraction float64 `json:"cache_fraction"`
	CacheBytes    int64   `json:"cache_bytes"`
	// Per epoch: samples/s, and store bytes in datasets (of this
	// configuration's bytes).
	SamplesPerSec []float64 `json:"samples_per_sec"`
	StoreReads    []float64 `json:"store_reads"`
	// The gateway's CPU seconds per epoch (its store reads included: the
	// store is local files).
	GatewayCPU []float64 `json:"gateway_cpu_s"`
	// Per epoch, the largest lead a rank read with (rankSteps): 1 in
	// lockstep.
	RankLead []int `json:"rank_lead"`
	// Per epoch, the chunks a batch had to wait for because prefetch had
	// not read them (brand_cache_misses_total): the loads on the batches'
	// path.
	DemandLoads []int `json:"demand_loads"`
	// The planner's optimum for the same epochs, in datasets, and what
	// the gateway read over them all ÷ that.
	Optimal      []float64 `json:"optimal"`
	VsOptimal    float64   `json:"vs_optimal"`
	TotalStore   float64   `json:"total_store"`
	TotalOptimal float64   `json:"total_optimal"`
}

// RunMix runs the mixture benchmark. Every gateway run is bounded by
// cfg.ConfigTimeout, the whole by ctx.
func RunMix(ctx context.Context, cfg MixConfig) (*MixReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &MixReport{Header: newHeader(started, cfg.Command),
		Samples: cfg.Samples, MeanBytes: cfg.MeanBytes, BatchSize: cfg.BatchSize, Window: cfg.Window, Readers: cfg.Readers, RankLead: max(cfg.RankLead, 0), Epochs: cfg.Epochs}
	dirs := map[string]string{}
	sizes := map[string]*chunkindex.Index{}
	for _, d := range []struct {
		name    string
		samples int
		seed    uint64
	}{{mixSingle, cfg.Samples, cfg.Seed}, {mixA, cfg.Samples / 2, cfg.Seed + 1}, {mixB, cfg.Samples - cfg.Samples/2, cfg.Seed + 2}} {
		dir, ix, err := ensureMixDataset(ctx, cfg, d.name, d.samples, d.seed)
		if err != nil {
			return nil, err
		}
		dirs[d.name], sizes[d.name] = dir, ix
		logf(cfg.Log, "dataset %s: %d samples in %d chunks, %s", d.name, ix.NumSamples(), ix.NumChunks(), sizeString(ix.TotalBytes()))
	}
	rep.Bytes = sizes[mixSingle].TotalBytes()
	rep.MixBytes = sizes[mixA].TotalBytes() + sizes[mixB].TotalBytes()
	for _, frac := range cfg.CacheFractions {
		cache := int64(math.Round(frac * float64(rep.Bytes)))
		for pair := range cfg.Pairs {
			for _, config := range []string{mixSingle, mixMixture} {
				row, err := runMixOnce(ctx, cfg, dirs, config, cache, pair)
				if err != nil {
					return nil, err
				}
				row.Pair, row.CacheFraction = pair, frac
				total := rep.Bytes
				if config == mixMixture {
					total = rep.MixBytes
				}
				for i := range row.StoreReads {
					row.StoreReads[i] /= float64(total)
					row.Optimal[i] /= float64(total)
					row.TotalStore += row.StoreReads[i]
					row.TotalOptimal += row.Optimal[i]
				}
				row.VsOptimal = ratio(row.TotalStore, row.TotalOptimal)
				logf(cfg.Log, "%s, cache %s, pair %d: samples/s %v, gateway CPU %v s, store reads %v (optimum %v): %.3f× the optimum",
					config, percentString(frac), pair, roundAll(row.SamplesPerSec, 0), roundAll(row.GatewayCPU, 2), roundAll(row.StoreReads, 3), roundAll(row.Optimal, 3), row.VsOptimal)
				rep.Rows = append(rep.Rows, row)
			}
		}
	}
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// targets evaluates, per cache size, the mixture's samples/s ÷ the single
// dataset's in every epoch (each configuration's mean over the pairs) and
// each configuration's store bytes ÷ the planner's optimum (summed over
// the pairs); the notes give the range over the pairs.
func (r *MixReport) targets() []Target {
	var out []Target
	for _, frac := range r.fractions() {
		single, mix := r.rowsOf(mixSingle, frac), r.rowsOf(mixMixture, frac)
		for e := range r.Epochs {
			kind := "warm"
			if e == 0 {
				kind = "cold"
			}
			var lo, hi float64
			for i := range min(len(single), len(mix)) {
				x := ratio(mix[i].SamplesPerSec[e], single[i].SamplesPerSec[e])
				if i == 0 || x < lo {
					lo = x
				}
				hi = max(hi, x)
			}
			t := atLeast(fmt.Sprintf("mix ÷ single samples/s, cache %s, epoch %d (%s)", percentString(frac), e, kind),
				ratio(meanAt(mix, e), meanAt(single, e)), mixSpeedTarget)
			t.Note = fmt.Sprintf("pairs %.2f–%.2f", lo, hi)
			out = append(out, t)
		}
		for _, c := range []struct {
			name string
			rows []MixRow
		}{{mixSingle, single}, {mixMixture, mix}} {
			var store, opt float64
			lo, hi := math.Inf(1), 0.0
			for _, row := range c.rows {
				store, opt = store+row.TotalStore, opt+row.TotalOptimal
				lo, hi = min(lo, row.VsOptimal), max(hi, row.VsOptimal)
			}
			t := atMost(fmt.Sprintf("%s store bytes ÷ planner optimum, cache %s, epochs 0–%d", c.name, percentString(frac), r.Epochs-1),
				ratio(store, opt), mixStoreTarget)
			t.Note = fmt.Sprintf("pairs %.3f–%.3f", lo, hi)
			out = append(out, t)
		}
	}
	return out
}

// fractions returns the cache fractions of the rows, in run order.
func (r *MixReport) fractions() []float64 {
	var out []float64
	for _, row := range r.Rows {
		if len(out) == 0 || out[len(out)-1] != row.CacheFraction {
			out = append(out, row.CacheFraction)
		}
	}
	return out
}

// rowsOf returns a configuration's rows at a cache fraction, by pair.
func (r *MixReport) rowsOf(config string, frac float64) []MixRow {
	var out []MixRow
	for _, row := range r.Rows {
		if row.Config == config && row.CacheFraction == frac {
			out = append(out, row)
		}
	}
	return out
}

// meanAt is the rows' mean samples/s in epoch e.
func meanAt(rows []MixRow, e int) float64 {
	v := make([]float64, len(rows))
	for i, row := range rows {
		v[i] = row.SamplesPerSec[e]
	}
	return mean(v)
}

func roundAll(v []float64, digits int) []float64 {
	p := math.Pow(10, float64(digits))
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x*p) / p
	}
	return out
}

// ensureMixDataset packs a synthetic dataset into a directory of the work
// directory unless an earlier run did.
func ensureMixDataset(ctx context.Context, cfg MixConfig, name string, samples int, seed uint64) (string, *chunkindex.Index, error) {
	dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("mix-%s-%d-%d-%d-%d", name, samples, cfg.MeanBytes, cfg.ChunkSize, seed))
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	if ix, err := stored.ReadIndex(ctx, store); err == nil {
		return dir, ix, nil
	} else if !errors.Is(err, s3backend.ErrNotFound) {
		return "", nil, fmt.Errorf("bench: reading the index of %s: %w", name, err)
	}
	src := filepath.Join(cfg.WorkDir, "mix-src-"+name)
	if err := os.RemoveAll(src); err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(src)
	spec := synth.Spec{Samples: samples, MeanBytes: cfg.MeanBytes, Classes: 100, Seed: seed}
	if err := spec.WriteTree(src); err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: cfg.ChunkSize, Shuffle: true, Seed: seed, Parallel: 2, Name: name, Overwrite: true})
	if err != nil {
		return "", nil, fmt.Errorf("bench: packing %s: %w", name, err)
	}
	return dir, res.Index, nil
}

// runMixOnce starts a gateway for one configuration (the single dataset,
// or the two components) and reads cfg.Epochs epochs through it.
func runMixOnce(ctx context.Context, cfg MixConfig, dirs map[string]string, config string, cache int64, pair int) (MixRow, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.ConfigTimeout)
	defer cancel()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--cache-size", strconv.FormatInt(cache, 10),
		"--batch-size", strconv.Itoa(cfg.BatchSize), "--window", strconv.Itoa(cfg.Window),
		"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	job := url.Values{}
	if config == mixSingle {
		args = append(args, "--dataset", mixSingle+"=file://"+dirs[mixSingle])
		job.Set("dataset", mixSingle)
	} else {
		args = append(args, "--dataset", mixA+"=file://"+dirs[mixA], "--dataset", mixB+"=file://"+dirs[mixB])
		job.Set("mix", mixText)
	}
	args = append(args, cfg.GatewayArgs...)
	name := fmt.Sprintf("gateway-mix-%s-%d", config, cache)
	if cfg.GatewayProfiles != "" {
		args = append(args, "--cpuprofile", filepath.Join(cfg.GatewayProfiles, fmt.Sprintf("%s-%d.pprof", name, pair)))
	}
	job.Set("seed", "7")
	job.Set("window", strconv.Itoa(cfg.Window))
	job.Set("batch_size", strconv.Itoa(cfg.BatchSize))
	job.Set("world", strconv.Itoa(cfg.Readers))
	g, err := startGateway(ctx, cfg.GatewayBinary, args, gatewayEnv("", ""), filepath.Join(cfg.WorkDir, name+".log"))
	if err != nil {
		return MixRow{}, err
	}
	defer g.kill()
	row := MixRow{Config: config, CacheBytes: cache}
	// Store bytes and loads on demand so far.
	counters := func() (float64, float64, error) {
		m, err := g.metrics(ctx)
		return m["brand_backend_read_bytes_total"], m["brand_cache_misses_total"], err
	}
	hc := &http.Client{Transport: newTransport(cfg.Readers + 2)}
	defer hc.CloseIdleConnections()
	for e := range cfg.Epochs {
		var info struct {
			Batches int `json:"batches"`
			Samples int `json:"samples"`
		}
		if err := getJSON(ctx, hc, g.base+fmt.Sprintf("/epoch/%d?", e)+job.Encode()+"&rank=0", &info); err != nil {
			return MixRow{}, err
		}
		before, missesBefore, err := counters()
		if err != nil {
			return MixRow{}, err
		}
		cpu := processCPU(g.cmd.Process.Pid)
		began := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, cfg.Readers)
		samples := make([]int, cfg.Readers)
		steps := newRankSteps(cfg.Readers, cfg.RankLead)
		for r := range cfg.Readers {
			wg.Go(func() {
				defer steps.Leave(r)
				for m := range info.Batches {
					if errs[r] = steps.Wait(ctx, r, m); errs[r] != nil {
						return
					}
					n, err := readBatch(ctx, hc, g.base+fmt.Sprintf("/epoch/%d/batch/%d?", e, m)+job.Encode()+"&rank="+strconv.Itoa(r))
					if err != nil {
						errs[r] = err
						return
					}
					samples[r] += n
					steps.Done(r)
				}
			})
		}
		wg.Wait()
		row.RankLead = append(row.RankLead, steps.MaxLead())
		elapsed := time.Since(began)
		row.GatewayCPU = append(row.GatewayCPU, (processCPU(g.cmd.Process.Pid) - cpu).Seconds())
		if err := errors.Join(errs...); err != nil {
			return MixRow{}, fmt.Errorf("bench: %s epoch %d: %w", config, e, err)
		}
		after, misses, err := counters()
		if err != nil {
			return MixRow{}, err
		}
		row.DemandLoads = append(row.DemandLoads, int(misses-missesBefore))
		total := 0
		for _, n := range samples {
			total += n
		}
		row.SamplesPerSec = append(row.SamplesPerSec, float64(total)/elapsed.Seconds())
		row.StoreReads = append(row.StoreReads, after-before)
	}
	var plan planner.Plan
	q := job.Encode() + fmt.Sprintf("&cache_size=%d&epochs=%d", cache, cfg.Epochs)
	if err := getJSON(ctx, hc, g.base+"/plan?"+q, &plan); err != nil {
		return MixRow{}, err
	}
	for _, ep := range plan.Optimal.Epochs {
		row.Optimal = append(row.Optimal, float64(ep.BackendBytes))
	}
	if len(row.Optimal) != cfg.Epochs {
		return MixRow{}, fmt.Errorf("bench: the plan has %d epochs, want %d", len(row.Optimal), cfg.Epochs)
	}
	// The gateway's last /metrics and /stats are kept beside its log, to
	// read what the figures do not show (prefetch drops, waits, hits).
	for _, f := range []string{"metrics", "stats"} {
		var b bytes.Buffer
		if _, err := g.get(ctx, "/"+f, &b); err != nil {
			return MixRow{}, fmt.Errorf("bench: gateway /%s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(cfg.WorkDir, fmt.Sprintf("%s-%d.%s", name, pair, f)), b.Bytes(), 0o644); err != nil {
			return MixRow{}, err
		}
	}
	return row, g.stop(10 * time.Second)
}

// getJSON GETs u and decodes its JSON body into v.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	b, err := getBody(ctx, hc, u)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// getBody GETs u and returns its body, an error for a status other than
// 200 (naming the URL, the status and the body).
func getBody(ctx context.Context, hc *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: %s: %d %s", u, resp.StatusCode, b)
	}
	return b, nil
}

// readBatch GETs a batch, reads its body whole and returns its sample
// count (Brand-Batch-Samples).
func readBatch(ctx context.Context, hc *http.Client, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || n != resp.ContentLength {
		return 0, fmt.Errorf("%s: %d, %d of %d bytes", u, resp.StatusCode, n, resp.ContentLength)
	}
	return strconv.Atoi(resp.Header.Get("Brand-Batch-Samples"))
}

// WriteJSON writes the report as JSON.
func (r *MixReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as a markdown table, one row per gateway:
// samples/s per epoch, the mixture's ÷ the single dataset's of the same
// pair, the gateway's CPU time and store reads per epoch against the
// planner's optimum; then the targets.
func (r *MixReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	steps := "running free"
	if r.RankLead > 0 {
		steps = fmt.Sprintf("leading the slowest rank by at most %d batches, 1 being lockstep", r.RankLead)
	}
	fmt.Fprintf(&sb, "Mixture %s (two datasets of %d samples, %s) against one dataset of %d samples (%s), samples of mean %s, batch %d × %d readers (%s), window %d, epochs 0–%d\n\n",
		mixText, r.Samples/2, sizeString(r.MixBytes), r.Samples, sizeString(r.Bytes), sizeString(r.MeanBytes), r.BatchSize, r.Readers, steps, r.Window, r.Epochs-1)
	sb.WriteString("| cache | pair | config | samples/s per epoch | mix ÷ single | gateway CPU s per epoch | rank lead (batches) | loads on demand | store reads per epoch (datasets) | optimum (planner) | store ÷ optimum |\n")
	sb.WriteString("| --: | --: | -- | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	var single *MixRow
	for i := range r.Rows {
		row := &r.Rows[i]
		vs := ""
		if row.Config == mixSingle {
			single = row
		} else if single != nil && single.Pair == row.Pair && single.CacheFraction == row.CacheFraction {
			v := make([]float64, len(row.SamplesPerSec))
			for e := range v {
				v[e] = ratio(row.SamplesPerSec[e], single.SamplesPerSec[e])
			}
			vs = joinFloats(v, 2)
		}
		fmt.Fprintf(&sb, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.3f |\n", percentString(row.CacheFraction), row.Pair, row.Config,
			joinFloats(row.SamplesPerSec, 0), vs, joinFloats(row.GatewayCPU, 2), joinInts(row.RankLead), joinInts(row.DemandLoads),
			joinFloats(row.StoreReads, 3), joinFloats(row.Optimal, 3), row.VsOptimal)
	}
	sb.WriteString("\nStore reads are the gateway's brand_backend_read_bytes_total over each epoch (prefetch included) ÷ the configuration's bytes; loads on demand its brand_cache_misses_total, chunks a batch waited for because prefetch had not read them.\n\nTargets:\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s; %s)\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

// joinInts is v as "a / b / c".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " / ")
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(max(len(v), 1))
}

func joinFloats(v []float64, digits int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', digits, 64)
	}
	return strings.Join(parts, " / ")
}
