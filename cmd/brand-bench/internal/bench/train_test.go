package bench

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// TestTrainSplit: the cores each side of (B) gets, and the runs no
// machine can make refused before anything starts.
func TestTrainSplit(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the splits need two cores")
	}
	tests := []struct {
		cores, gateway, workers int
		wantGateway, wantWorker int
		err                     bool
	}{
		{cores: 2, wantGateway: 1, wantWorker: 2},
		{cores: 2, workers: 5, wantGateway: 1, wantWorker: 5},
		{cores: 2, gateway: 2, err: true},
		{cores: 1, err: true},
		{cores: runtime.NumCPU() + 1, err: true},
	}
	for _, tt := range tests {
		c := DefaultTrainConfig()
		c.Cores, c.GatewayCores, c.Workers = tt.cores, tt.gateway, tt.workers
		err := c.split()
		if tt.err {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%+v: %v, want ErrConfig", tt, err)
			}
			continue
		}
		if err != nil || c.GatewayCores != tt.wantGateway || c.Workers != tt.wantWorker {
			t.Errorf("%+v: gateway cores %d, workers %d, %v", tt, c.GatewayCores, c.Workers, err)
		}
	}
	// From four cores up the gateway has all but two.
	if n := runtime.NumCPU(); n >= 4 {
		c := DefaultTrainConfig()
		c.Cores = n
		if err := c.split(); err != nil || c.GatewayCores != n-2 {
			t.Errorf("%d cores: the gateway has %d, %v", n, c.GatewayCores, err)
		}
	}
	for _, bad := range []func(*TrainConfig){
		func(c *TrainConfig) { c.Feeds = []string{"folder", "webdataset"} },
		func(c *TrainConfig) { c.Classes = 1001 },
		func(c *TrainConfig) { c.Images = c.BatchSize - 1 },
		func(c *TrainConfig) { c.Side = 4 },
	} {
		c := DefaultTrainConfig()
		c.Cores = 2
		bad(&c)
		if err := c.split(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
}

// TestTrainTargets: issue 68's goals judged on a GPU's figures, N/A on a
// CPU's.
func TestTrainTargets(t *testing.T) {
	rows := []TrainRow{
		{Model: "resnet50", Feed: FeedSynthetic, ImagesPerSec: 1000},
		{Model: "resnet50", Feed: FeedBrand, ImagesPerSec: 960},
		{Model: "resnet18", Feed: FeedFolder, ImagesPerSec: 1000},
		{Model: "resnet18", Feed: FeedBrand, ImagesPerSec: 1900},
	}
	r := &TrainReport{Device: "cuda:0", Rows: rows}
	ts := r.targets()
	if len(ts) != 2 || ts[0].Status != Pass || ts[0].Ratio != 0.96 || ts[1].Status != Miss || ts[1].Ratio != 1.9 {
		t.Errorf("cuda: %+v", ts)
	}
	r.Device = "cpu"
	for _, tg := range r.targets() {
		if tg.Status != NA || tg.Note == "" {
			t.Errorf("cpu: %+v", tg)
		}
	}
	if ts := (&TrainReport{Device: "cuda", Rows: rows[2:]}).targets(); len(ts) != 1 {
		t.Errorf("ResNet-18 alone: %+v", ts)
	}
}

// TestClassChromaMatchesTrainPy: train.py reads a photo's class back with
// the same grid photos.ClassChroma colours it by, at every class count
// the flags allow up to 1,000.
func TestClassChromaMatchesTrainPy(t *testing.T) {
	python := pythontest.Need(t, "")
	script, err := findAbove(filepath.Join("python", "bench", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	type pair struct{ C, N int }
	var in []pair
	for _, n := range []int{1, 2, 4, 10, 99, 100, 101, 1000} {
		for _, c := range []int{0, 1, n / 2, n - 1} {
			in = append(in, pair{c, n})
		}
	}
	// class_chroma is plain Python: torch, which train.py imports, is
	// stood in for, so that the test costs no torch import.
	code := "import json, sys, types\nsys.modules['torch'] = types.ModuleType('torch')\nsys.path.insert(0, sys.argv[1])\nimport train\n" +
		"print(json.dumps([train.class_chroma(p['C'], p['N']) for p in json.load(open(sys.argv[2]))]))\n"
	ref := filepath.Join(t.TempDir(), "chroma.py")
	if err := os.WriteFile(ref, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(t.TempDir(), "in.json")
	b, _ := json.Marshal(in)
	if err := os.WriteFile(inputs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), python, ref, filepath.Dir(script), inputs).Output()
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	var got [][2]float64
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(in) {
		t.Fatalf("%s printed %s: %v", ref, out, err)
	}
	for i, p := range in {
		cb, cr := photos.ClassChroma(p.C, p.N)
		if math.Abs(cb-got[i][0]) > 1e-9 || math.Abs(cr-got[i][1]) > 1e-9 {
			t.Errorf("class %d of %d: Go (%v, %v), train.py %v", p.C, p.N, cb, cr, got[i])
		}
	}
}
