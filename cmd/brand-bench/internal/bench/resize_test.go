package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestResizeSmoke runs the resize benchmark on a tiny dataset and checks
// the structure of its report: both clusters read every epoch, the
// resized one went through its three changes and the fixed one through
// its kill, every target was evaluated, and the JSON and text outputs are
// readable. It checks no performance figure.
func TestResizeSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand and starts nine gateways and a MinIO")
	}
	cfg := ResizeConfig{Samples: 1024, MeanBytes: 4 << 10, ChunkSize: 64 << 10, BatchSize: 16, Window: 8, World: 8, Epochs: 3, Pairs: 1,
		ConfigTimeout: 2 * time.Minute, Harness: Harness{GatewayBinary: cmdtest.Build(t, "brand"), WorkDir: t.TempDir(), Command: "go test -run TestResizeSmoke"}}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunResize(ctx, cfg)
	if err != nil {
		t.Fatalf("RunResize: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Runs) != 2 || rep.Steps != 8 {
		t.Fatalf("%d runs of %d steps an epoch; want 2 of 8", len(rep.Runs), rep.Steps)
	}
	for _, run := range rep.Runs {
		want := map[string][]string{resizeFixed: {"4", "4", "4 → 3"}, resizeResized: {"3 → 5", "5 → 4", "4 → 3"}}[run.Scenario]
		if len(run.Epochs) != len(want) {
			t.Fatalf("%s: %d epochs", run.Scenario, len(run.Epochs))
		}
		for e, ep := range run.Epochs {
			if ep.Nodes != want[e] || ep.DeliveredBytes < float64(rep.Bytes)/2 || ep.P99 < ep.P50 || ep.P50 <= 0 {
				t.Errorf("%s epoch %d: %+v; want nodes %s, the dataset delivered", run.Scenario, e, ep, want[e])
			}
		}
		if run.Epochs[0].StoreBytes < float64(rep.Bytes)*0.9 || run.Epochs[0].StoreGets < float64(rep.Chunks) {
			t.Errorf("%s: a cold epoch read %.0f bytes in %.0f GETs of a dataset of %d bytes in %d chunks", run.Scenario,
				run.Epochs[0].StoreBytes, run.Epochs[0].StoreGets, rep.Bytes, rep.Chunks)
		}
		if len(run.Changes) != len(want)-2*boolInt(run.Scenario == resizeFixed) {
			t.Errorf("%s: %d changes", run.Scenario, len(run.Changes))
		}
		for _, ch := range run.Changes {
			if ch.Seconds <= 0 || ch.Batches == 0 || ch.P99 <= 0 {
				t.Errorf("%s: change %+v", run.Scenario, ch)
			}
		}
	}
	if len(rep.Targets) != 5 {
		t.Errorf("%d targets, want 5 (three changes, store bytes and GETs)", len(rep.Targets))
	}
	for _, tg := range rep.Targets {
		if tg.Status != Pass && tg.Status != Miss || tg.Ratio <= 0 {
			t.Errorf("target %+v not evaluated", tg)
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back ResizeReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Runs) != 2 {
		t.Fatalf("the JSON report does not read back: %v", err)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| 0 | 3 → 5 → 4 | 0 | 3 → 5 |", "5 → 4 (planned leave)", "store bytes, epochs 0–1", cfg.Command} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("the text report does not say %q:\n%s", s, text.String())
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
