package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// TestTrainSmoke runs `brand-bench train --small` as CI does, on the CPU:
// ResNet-18 fed by each of the feeds for one step and two measured
// (about 20 s on two cores) — (G) only where the test's build (its tags:
// brand_turbojpeg) gives a gateway that cuts JPEGs, said skipped
// otherwise. The report has every column, and every step's shapes and
// labels were checked in every feed. It needs two cores,
// taskset and a Python with torch, torchvision and PIL (scripts/test.sh
// installs Debian's); with CI=true a missing one fails the test.
func TestTrainSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a ResNet-18 three times")
	}
	if runtime.NumCPU() < 2 {
		need(t, "brand-bench train needs two cores, one for each node")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		need(t, "no taskset (util-linux), which pins the training and data nodes")
	}
	python := pythontest.Need(t, "scripts/test.sh", "torch", "torchvision", "PIL")
	out, work := t.TempDir(), t.TempDir()
	code, stdout, stderr := brandBench(t, "train", "--small", "--python", python, "--gateway-binary", cmdtest.Build(t, "brand"),
		"--out", out, "--work-dir", work)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, column := range []string{"images/s", "÷ (S)", "device busy", "trainer CPU-s per 1,000 images", "gateway CPU-s per 1,000 images", "steps checked", "label errors"} {
		if !strings.Contains(stdout, column) {
			t.Errorf("the table has no column %q:\n%s", column, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "train.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.TrainReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	// The columns as JSON keys, each row holding every one.
	var raw struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	small := bench.SmokeTrainConfig()
	steps := small.Warmup + small.Steps
	feeds := bench.TrainFeeds
	if rep.Decoder != "turbojpeg" {
		feeds = feeds[:len(feeds)-1]
		if len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "brand_turbojpeg") || !strings.Contains(stdout, "(G) skipped") {
			t.Errorf("a gateway decoding with %q: skipped %q", rep.Decoder, rep.Skipped)
		}
	}
	if len(rep.Rows) != len(feeds) || rep.Device != "cpu" {
		t.Fatalf("%d rows on %q; want one per feed on the CPU:\n%s", len(rep.Rows), rep.Device, b)
	}
	for i, row := range rep.Rows {
		for _, key := range []string{"images_per_s", "of_synthetic", "device_busy", "trainer_cpu_s_per_1000", "gateway_cpu_s_per_1000", "steps_checked", "label_errors"} {
			if _, ok := raw.Rows[i][key]; !ok {
				t.Errorf("%s: no %s", row.Feed, key)
			}
		}
		if row.Feed != feeds[i] || row.Model != "resnet18" {
			t.Errorf("row %d: %s fed by %s", i, row.Model, row.Feed)
		}
		if row.StepsChecked != steps || row.ImagesChecked != steps*small.BatchSize || row.LabelErrors != 0 {
			t.Errorf("%s: %d steps and %d images checked, %d label errors; want %d, %d, 0", row.Feed, row.StepsChecked, row.ImagesChecked, row.LabelErrors, steps, steps*small.BatchSize)
		}
		if row.Images != small.Steps*small.BatchSize || row.ImagesPerSec <= 0 || row.OfSynthetic <= 0 || row.Busy <= 0 || row.Busy > 1.01 || row.TrainerCPUPer1000 <= 0 {
			t.Errorf("%s: %+v", row.Feed, row)
		}
	}
	if b := rep.Rows[2]; b.Cores != "0" || b.GatewayCores != "1" || rep.Rows[1].Cores != "0-1" {
		t.Errorf("cores: (P) on %s, (B) the trainer on %s and the gateway on %s; want 0-1, 0 and 1", rep.Rows[1].Cores, b.Cores, b.GatewayCores)
	}
	if len(rep.Targets) != 1 || rep.Targets[0].Status != bench.NA {
		t.Errorf("targets on the CPU: %+v; want ResNet-18's (B) ÷ (P), N/A", rep.Targets)
	}
}

// need skips a test for want of a tool or of cores, or fails it in CI,
// where the machine has them.
func need(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (CI=true: failing)")
	}
	t.Skip(why)
}

// TestParseTrain: --small is the CI smoke run under the flags given
// explicitly; a list flag replaces its default.
func TestParseTrain(t *testing.T) {
	env := &cli.Env{Stdout: io.Discard, Stderr: io.Discard}
	o, err := trainBenchmark().parse(env, []string{"--models", "resnet50, resnet18", "--small", "--steps", "7"})
	if err != nil {
		t.Fatal(err)
	}
	want := bench.SmokeTrainConfig()
	want.Models, want.Steps = []string{"resnet50", "resnet18"}, 7
	if !reflect.DeepEqual(o.cfg, want) || !o.small {
		t.Errorf("got %+v\nwant %+v", o.cfg, want)
	}
	if o, err = trainBenchmark().parse(env, []string{"--feeds", "brand"}); err != nil || !reflect.DeepEqual(o.cfg.Feeds, []string{"brand"}) || o.cfg.Images != bench.DefaultTrainConfig().Images {
		t.Errorf("--feeds brand: %+v, %v", o.cfg, err)
	}
	if _, err := trainBenchmark().parse(env, []string{"--models", " , "}); err == nil {
		t.Error("--models naming nothing parsed")
	}
}
