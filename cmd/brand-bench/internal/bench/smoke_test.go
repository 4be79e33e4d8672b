package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
)

// TestSmoke runs every configuration on a tiny dataset against a real
// MinIO and checks the structure of the results: every configuration
// produced figures that add up, every target was evaluated, and the JSON,
// text and PNG outputs are written and readable. It checks no performance
// figure: those are for a full run on a quiet machine.
func TestSmoke(t *testing.T) {
	srv := miniotest.ForTest(t)
	cfg := SmokeConfig()
	cfg.Server = srv
	cfg.Bucket = srv.NewBucket(t)
	cfg.Processes.GatewayBinary = cmdtest.Build(t, "brand")
	cfg.Processes.LimitBinary = cmdtest.Build(t, "brand-bench")
	cfg.WorkDir = t.TempDir()
	cfg.Command = "go test -run TestSmoke"
	rep := runForTest(t, cfg)

	d := rep.Dataset
	if d.Samples != cfg.Dataset.Samples || d.Chunks < 2*cfg.Job.Window || d.Bytes <= d.SampleBytes || d.WorkingSetBytes <= 0 {
		t.Fatalf("dataset %+v: want %d samples in at least %d chunks", d, cfg.Dataset.Samples, 2*cfg.Job.Window)
	}
	batches := (d.Samples + cfg.Job.BatchSize - 1) / cfg.Job.BatchSize
	count := map[string]int{}
	for _, r := range rep.Rows {
		count[r.Config]++
		if r.Samples != int64(d.Samples) || r.Seconds <= 0 || r.SamplesPerSec <= 0 || r.MBPerSec <= 0 || r.Batches != batches || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			t.Errorf("%s: %d samples in %d batches, %.3fs, %.0f samples/s, %.1f MB/s, p50 %.2f p99 %.2f ms; want every sample once in %d batches",
				r.Label, r.Samples, r.Batches, r.Seconds, r.SamplesPerSec, r.MBPerSec, r.P50Ms, r.P99Ms, batches)
		}
		var wantBytes int64
		switch r.Config {
		case ConfigProxy, ConfigProxyInProcess, ConfigStoreForward, ConfigStoreVerify, ConfigMemory, ConfigWebDataset:
			wantBytes = d.Bytes // whole chunks
		case ConfigMemoryShuffled:
			wantBytes = d.SampleBytes + int64(batches)*1024 // every sample once, in batches, each closing its tar
		case ConfigBrand, ConfigBrandAhead, ConfigBrandDisk, ConfigBrandRestart:
			wantBytes = d.SampleBytes + int64(batches)*1024 // each batch closes its tar
			if r.HitRatio == nil || *r.HitRatio < 0 || *r.HitRatio > 1 {
				t.Errorf("%s: hit ratio %v, want one in [0, 1]", r.Label, r.HitRatio)
			}
			if r.RequestP50Ms <= 0 || r.RequestP99Ms < r.RequestP50Ms {
				t.Errorf("%s: request latency p50 %.2f p99 %.2f ms", r.Label, r.RequestP50Ms, r.RequestP99Ms)
			}
			if runtime.GOOS == "linux" && r.PeakRSS <= 0 {
				t.Errorf("%s: no peak RSS", r.Label)
			}
		}
		if r.Config == ConfigMemoryBatches {
			// Every sample once, each slice closed by 1024 zero bytes: at
			// least one slice a chunk, at most one more per batch.
			tail := r.Bytes - d.SampleBytes
			if n := tail / 1024; tail%1024 != 0 || n < int64(d.Chunks) || n > int64(d.Chunks+batches) {
				t.Errorf("%s: %d bytes delivered for %d of samples: not every sample once in closed slices", r.Label, r.Bytes, d.SampleBytes)
			}
		}
		if wantBytes != 0 && r.Bytes != wantBytes {
			t.Errorf("%s: %d bytes delivered, want %d", r.Label, r.Bytes, wantBytes)
		}
		if r.Config == ConfigBrandAhead && r.BackendBytes != 0 {
			t.Errorf("%s: %d backend bytes; want none, the cache holds the dataset", r.Label, r.BackendBytes)
		}
		// With a disk tier holding the dataset, only the first epoch of
		// the first gateway reads the store.
		if (r.Config == ConfigBrandDisk && *r.Epoch > 0 || r.Config == ConfigBrandRestart) && r.BackendBytes > d.Bytes/100 {
			t.Errorf("%s: %d backend bytes; want at most a hundredth of the dataset's %d, the disk holds it", r.Label, r.BackendBytes, d.Bytes)
		}
		if !slices.Contains([]string{ConfigMemory, ConfigMemoryBatches, ConfigMemoryShuffled, ConfigBrand, ConfigBrandAhead, ConfigBrandDisk, ConfigBrandRestart}, r.Config) && r.BackendBytes != r.Bytes {
			t.Errorf("%s: %d backend bytes for %d delivered, want them equal", r.Label, r.BackendBytes, r.Bytes)
		}
		if r.Config == ConfigBrandAhead && (len(r.Sweep) != len(cfg.Brand.AheadLevels) || !slices.Contains(cfg.Brand.AheadLevels, r.Concurrency) || r.CacheFraction != 1) {
			t.Errorf("%s: cache %g, best ahead %d of %v; want the sweep of %v at 100 %%", r.Label, r.CacheFraction, r.Concurrency, r.Sweep, cfg.Brand.AheadLevels)
		}
		if (r.Config == ConfigBrand || r.Config == ConfigBrandDisk || r.Config == ConfigBrandRestart) == (r.Concurrency > 0) || (r.Concurrency > 0 && len(r.Sweep) == 0) {
			t.Errorf("%s: concurrency %d with sweep %v", r.Label, r.Concurrency, r.Sweep)
		}
	}
	// Each limit server ran as a process of its own and logged its start.
	for _, kind := range LimitKinds {
		log, err := os.ReadFile(filepath.Join(cfg.WorkDir, "limit-"+kind+".log"))
		if err != nil || !strings.Contains(string(log), `"message":"ready"`) {
			t.Errorf("limit %s: log %q, %v; want its ready line", kind, log, err)
		}
	}
	wantBrand := len(cfg.Brand.CacheFractions)*cfg.Brand.Epochs + (cfg.Policy.Epochs + 1) + // the lru run
		max(0, cfg.Policy.Epochs+1-cfg.Brand.Epochs) // the next-use run at the policy fraction reads the extra epochs
	for config, want := range map[string]int{ConfigProxy: 1, ConfigProxyInProcess: 1, ConfigStoreForward: 1, ConfigStoreVerify: 1, ConfigMemory: 1, ConfigMemoryBatches: 1, ConfigMemoryShuffled: 1, ConfigObjects: 1, ConfigWebDataset: 1, ConfigBrand: wantBrand, ConfigBrandAhead: 1,
		ConfigBrandDisk: len(cfg.Disk.CacheFractions) * cfg.Brand.Epochs, ConfigBrandRestart: len(cfg.Disk.CacheFractions)} {
		if count[config] != want {
			t.Errorf("%d rows of %s, want %d", count[config], config, want)
		}
	}

	p := rep.Policy
	if p == nil || len(p.Epochs) != cfg.Policy.Epochs || len(p.Boundaries) != 2*cfg.Policy.Epochs {
		t.Fatalf("policy report %+v: want %d epochs and boundaries for both policies", p, cfg.Policy.Epochs)
	}
	for _, e := range p.Epochs {
		// The gateway sees exactly the demand trace the planner simulates.
		if e.LRUAccesses != int64(e.SimAccesses) || e.NextUseAccesses != int64(e.SimAccesses) || e.SimAccesses == 0 {
			t.Errorf("epoch %d: chunk accesses lru %d, next-use %d, simulated %d; want them equal", e.Epoch, e.LRUAccesses, e.NextUseAccesses, e.SimAccesses)
		}
		if e.OptimalBytes > e.SimLRUBytes {
			t.Errorf("epoch %d: the optimum reads %d bytes, simulated LRU %d", e.Epoch, e.OptimalBytes, e.SimLRUBytes)
		}
	}

	names := map[string]bool{}
	for _, tg := range rep.Targets {
		if tg.Status != Pass && tg.Status != Miss && tg.Status != NA {
			t.Errorf("target %q: status %q", tg.Name, tg.Status)
		}
		names[strings.SplitN(tg.Name, ",", 2)[0]] = true
	}
	for _, want := range []string{
		"cold epoch ÷ limit (a) reverse proxy", "warm epochs ÷ limit (b) memory server", "warm epoch at best ahead ÷ limit (b) memory server", "cold epoch ÷ per-object (c)",
		"warm epochs ÷ WebDataset (d)", "cold epoch ÷ WebDataset (d)", "read amplification", "gateway peak RSS ÷ (1.25 × cache + 200 MiB)",
		"next-use backend bytes ÷ planner optimum", "next-use backend bytes ÷ lru", "epoch boundary p99 (10 batch requests) ÷ epoch median",
		"|live − simulated hit ratio| in points",
	} {
		if !names[want] {
			t.Errorf("no target %q among %v", want, names)
		}
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("the JSON report does not parse: %v", err)
	}
	if len(back.Rows) != len(rep.Rows) || len(back.Targets) != len(rep.Targets) || back.Policy == nil {
		t.Errorf("the JSON report has %d rows and %d targets, want %d and %d", len(back.Rows), len(back.Targets), len(rep.Rows), len(rep.Targets))
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if !strings.Contains(text.String(), r.Label) {
			t.Errorf("the text report lacks %q", r.Label)
		}
	}
	c, err := rep.Chart()
	if err != nil {
		t.Fatal(err)
	}
	// 400 × 200 pixels at the 96 dpi brand-chart draws at.
	if c.Width < 300 || c.Height < 150 || len(c.Categories) != len(rep.Rows) {
		t.Errorf("chart of %g × %g pt with %d bars for %d rows, want a readable size and a bar a row", c.Width, c.Height, len(c.Categories), len(rep.Rows))
	}
}

// runForTest runs the harness with cfg, bounded to 3 minutes, and fails the
// test with the harness's log if the run fails.
func runForTest(t *testing.T, cfg Config) *Report {
	t.Helper()
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
	}
	return rep
}
