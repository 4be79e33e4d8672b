package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
)

// TestPythonGroup runs the python group on the smoke test's tiny dataset
// (tens of seconds: a Python with torch starts for every measurement; not
// part of TestSmoke, which CI runs):
// each loader once, through python/bench/loaders.py. It is skipped where
// no Python imports torch and boto3, and with -short.
func TestPythonGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Python with torch for every measurement")
	}
	cfg := SmokeConfig()
	cfg.Groups = []string{GroupPython}
	if _, _, err := cfg.findPython(context.Background()); err != nil {
		t.Skip(err)
	}
	srv := miniotest.ForTest(t)
	cfg.Server = srv
	cfg.Bucket = srv.NewBucket(t)
	cfg.Processes.GatewayBinary = cmdtest.Build(t, "brand")
	cfg.WorkDir = t.TempDir()
	rep := runForTest(t, cfg)
	if len(rep.Skipped) > 0 {
		t.Fatalf("skipped: %+v", rep.Skipped)
	}
	count := map[string]int{}
	for _, r := range rep.Rows {
		count[r.Config]++
		// CPU is read from /proc in clock ticks (10 ms): a smoke-sized
		// epoch may take less than one, so 0 is a valid measurement, and
		// a row whose processes used no tick at all has none (a warm Go
		// client's 400 samples take about 10 ms).
		measured := r.CPU != nil || r.SamplesPerSec > 0 && float64(r.Samples)/r.SamplesPerSec < 0.1
		if r.Samples != int64(cfg.Dataset.Samples) || r.SamplesPerSec <= 0 || !measured || r.CPU != nil && r.CPU.Harness < 0 || len(r.Sweep) == 0 {
			t.Errorf("%s: %d samples at %.0f samples/s, CPU %+v, concurrency %d; want every sample, measured", r.Label, r.Samples, r.SamplesPerSec, r.CPU, r.Concurrency)
		}
	}
	for config, want := range map[string]int{ConfigPyObjects: 1, ConfigPyBrand: 2, ConfigGoClient: 1, ConfigPyClient: 1} {
		if count[config] != want {
			t.Errorf("%d rows of %s, want %d", count[config], config, want)
		}
	}
	var names []string
	for _, tg := range rep.Targets {
		names = append(names, tg.Name)
	}
	all := strings.Join(names, "\n")
	for _, want := range []string{"PyTorch: Brand cold epoch ÷ (p)", "PyTorch: Brand warm epoch ÷ (p)", "Python client warm ÷ Go client"} {
		if !strings.Contains(all, want) {
			t.Errorf("no target %q among\n%s", want, all)
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "python group:") {
		t.Errorf("the report does not explain the python rows:\n%s", text.String())
	}
}
