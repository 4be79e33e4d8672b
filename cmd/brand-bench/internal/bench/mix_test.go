package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestMixSmoke runs the mixture benchmark on a tiny dataset (a few MB)
// and checks the structure of its report: every gateway read every epoch,
// the planner answered for the mixture, every target was evaluated, and
// the JSON and text outputs are written and readable. It checks no
// performance figure.
func TestMixSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand and starts four gateways")
	}
	cfg := MixConfig{Samples: 512, MeanBytes: 4 << 10, ChunkSize: 64 << 10, BatchSize: 16, Window: 4, Epochs: 2, Pairs: 1,
		CacheFractions: []float64{0.25, 0.5}, GatewayProfiles: t.TempDir(), ConfigTimeout: time.Minute,
		Harness: Harness{GatewayBinary: cmdtest.Build(t, "brand"), WorkDir: t.TempDir(), Command: "go test -run TestMixSmoke"}}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunMix(ctx, cfg)
	if err != nil {
		t.Fatalf("RunMix: %v\nlog:\n%s", err, log.String())
	}

	if rep.Bytes <= 0 || rep.MixBytes <= 0 || len(rep.Rows) != 4 {
		t.Fatalf("%d and %d bytes, %d rows; want both datasets and 4 rows", rep.Bytes, rep.MixBytes, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if len(r.SamplesPerSec) != cfg.Epochs || len(r.StoreReads) != cfg.Epochs || len(r.Optimal) != cfg.Epochs || len(r.GatewayCPU) != cfg.Epochs || len(r.DemandLoads) != cfg.Epochs {
			t.Fatalf("%s at %v: %d, %d, %d, %d, %d figures; want %d epochs of each", r.Config, r.CacheFraction,
				len(r.SamplesPerSec), len(r.StoreReads), len(r.Optimal), len(r.GatewayCPU), len(r.DemandLoads), cfg.Epochs)
		}
		// Every gateway run left a CPU profile, and its last /metrics and
		// /stats beside its log.
		name := fmt.Sprintf("gateway-mix-%s-%d-%d", r.Config, r.CacheBytes, r.Pair)
		for _, f := range []string{filepath.Join(cfg.GatewayProfiles, name+".pprof"), filepath.Join(cfg.WorkDir, name+".metrics"), filepath.Join(cfg.WorkDir, name+".stats")} {
			if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
				t.Errorf("%s at %v: %s: %v (want a non-empty file)", r.Config, r.CacheFraction, f, err)
			}
		}
		// The cold epoch reads every chunk it serves from the store, and so
		// does the planner's optimum.
		if r.SamplesPerSec[0] <= 0 || r.StoreReads[0] < 0.99 || r.Optimal[0] < 0.99 || r.VsOptimal <= 0 {
			t.Errorf("%s at %v: %v samples/s, store %v, optimum %v", r.Config, r.CacheFraction, r.SamplesPerSec, r.StoreReads, r.Optimal)
		}
	}
	// Per cache size: one speed target per epoch, one store target per
	// configuration.
	if want := len(cfg.CacheFractions) * (cfg.Epochs + 2); len(rep.Targets) != want {
		t.Errorf("%d targets, want %d", len(rep.Targets), want)
	}
	for _, tg := range rep.Targets {
		if tg.Status != Pass && tg.Status != Miss || tg.Ratio <= 0 {
			t.Errorf("target %q: %s at %v", tg.Name, tg.Status, tg.Ratio)
		}
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back MixReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rows) != len(rep.Rows) || len(back.Targets) != len(rep.Targets) {
		t.Errorf("the JSON report: %v, %d rows, %d targets", err, len(back.Rows), len(back.Targets))
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 25 % | 0 | single |", "| 50 % | 0 | mix |", "store bytes ÷ planner optimum"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
}
