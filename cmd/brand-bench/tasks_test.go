package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

// TestTasksSmall runs `brand-bench tasks` small (3,000 prompts, 6 steps of
// 32) through its in-process gateway and the Python sampler: the trainer
// read every step, the report has the plan's log figures and both CPU
// figures, and the targets it measures.
func TestTasksSmall(t *testing.T) {
	out, work := t.TempDir(), t.TempDir()
	code, stdout, stderr := brandBench(t, "tasks", "--small", "--prompts", "3000", "--step", "32", "--steps", "6", "--out", out, "--work-dir", work)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, s := range []string{"prompts leased/s (a node)", "log bytes a feedback row", "CPU-s per 1,000 prompts leased, Brand", "lease latency mean / p50 / p99"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("the report has no %q:\n%s", s, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.TasksReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	br, p := rep.Brand, rep.Brand.Plan
	if !rep.InProcess || br.StepsRead != 6 || p.Prompts != 3000 || p.StepsFull < 6 || p.Trainer < 6 || p.Segments == 0 || p.LogBytes == 0 {
		t.Fatalf("brand: %+v", br)
	}
	if br.Leases == 0 || br.Prompts < 6*32 || br.LeaseP99Ms < br.LeaseP50Ms || br.BytesPerRow <= 0 || br.CPUPer1000 <= 0 {
		t.Errorf("figures: %+v", br)
	}
	if py := rep.Python; py == nil {
		t.Logf("the Python sampler was skipped: %s", rep.PySkipped)
	} else if py.Steps < 6 || py.Prompts < 6*32 || py.CPUSeconds <= 0 || rep.CPURatio <= 0 {
		t.Errorf("python: %+v, ratio %v", py, rep.CPURatio)
	}
	if len(rep.Targets) != 2 {
		t.Errorf("targets: %+v", rep.Targets)
	}
}

// TestParseTasks: --small under flags given explicitly.
func TestParseTasks(t *testing.T) {
	env := &cli.Env{Stdout: io.Discard, Stderr: io.Discard}
	o, err := tasksBenchmark().parse(env, []string{"--steps", "3", "--small", "--policy", "uniform"})
	if err != nil {
		t.Fatal(err)
	}
	want := bench.SmallTasksConfig()
	want.Steps, want.Policy = 3, "uniform"
	if !reflect.DeepEqual(o.cfg, want) || !o.small {
		t.Errorf("got %+v\nwant %+v", o.cfg, want)
	}
}
