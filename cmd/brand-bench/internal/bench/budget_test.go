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

// TestBudgetSmoke runs the budget benchmark on a tiny dataset and checks
// the structure of its report: the three runs read the job, the front
// throttled none of the unthrottled run's GETs, the paced run's nodes
// paced, every target was evaluated, and the JSON and text outputs are
// readable. It checks no performance figure.
func TestBudgetSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand and starts six gateways and a MinIO")
	}
	cfg := BudgetConfig{Samples: 2000, MeanBytes: 1 << 10, ChunkSize: 8 << 10, Nodes: 2, World: 8, BatchSize: 8, Epochs: 1, NodeCache: 0.1,
		ConfigTimeout: 2 * time.Minute, Harness: Harness{GatewayBinary: cmdtest.Build(t, "brand"), WorkDir: t.TempDir(), Command: "go test -run TestBudgetSmoke"}}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunBudget(ctx, cfg)
	if err != nil {
		t.Fatalf("RunBudget: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Runs) != 3 || rep.Budget <= 0 {
		t.Fatalf("%d runs, budget %d; want 3 and a budget", len(rep.Runs), rep.Budget)
	}
	for i, want := range []string{budgetFree, budgetRetries, budgetPaced} {
		run := rep.Runs[i]
		if run.Name != want || run.Batches == 0 || run.GETs < int64(rep.Chunks)/2 || run.Rate <= 0 || run.P99 < run.P50 {
			t.Errorf("run %d: %+v; want %s, the job read", i, run, want)
		}
	}
	if free := rep.Runs[0]; free.Throttled != 0 || free.Limit != 0 || free.Budget != 0 {
		t.Errorf("the unthrottled run: %+v", free)
	}
	if paced := rep.Runs[2]; paced.Budget != rep.Budget || paced.Limit != rep.Budget || paced.PacedWaits == 0 {
		t.Errorf("the paced run: %+v; want the budget %d, paced waits", paced, rep.Budget)
	}
	if len(rep.Targets) != 4 {
		t.Errorf("%d targets, want 4", len(rep.Targets))
	}
	for _, tg := range rep.Targets {
		if tg.Status != Pass && tg.Status != Miss {
			t.Errorf("target %+v not evaluated", tg)
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back BudgetReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Runs) != 3 {
		t.Fatalf("the JSON report does not read back: %v", err)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| retries only | 0 |", "| paced | 0 |", "paced: GETs answered a second ÷ the budget", cfg.Command} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("the text report does not say %q:\n%s", s, text.String())
		}
	}
}
