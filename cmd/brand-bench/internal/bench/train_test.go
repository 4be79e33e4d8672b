package bench

import (
	"errors"
	"runtime"
	"testing"
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
	bad := DefaultTrainConfig()
	bad.Cores, bad.Feeds = 2, []string{"folder", "webdataset"}
	if err := bad.split(); !errors.Is(err, ErrConfig) {
		t.Errorf("an unknown feed: %v", err)
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
