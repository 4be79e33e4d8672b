package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestScheduleWindows checks how a run is cut: the first After steps,
// the After steps after each switch (cut short by the next switch or the
// end), and every other step as the steady state; a step stalled when it
// loaded a chunk on demand.
func TestScheduleWindows(t *testing.T) {
	c := ScheduleConfig{Switch1: 4, Switch2: 7, Steps: 12, After: 2}
	run := SchedRun{StepLoads: make([]int, c.Steps), StepWaitMs: make([]float64, c.Steps)}
	lat := make([][]time.Duration, c.Steps)
	for i := range c.Steps {
		// Step i's batches take i+1 and i+101 ms; steps 4 and 8 load
		// 3 and 1 chunks on demand. p50 is the nearest rank's.
		lat[i] = []time.Duration{time.Duration(i+1) * time.Millisecond, time.Duration(i+101) * time.Millisecond}
		run.StepWaitMs[i] = 1
	}
	run.StepLoads[4], run.StepLoads[8] = 3, 1
	got := c.windows(run, lat)
	want := []struct {
		steps, stalled, loads int
		p50, max              float64
	}{
		{6, 0, 0, 12, 112}, // steady: steps 2, 3, 6, 9, 10, 11
		{2, 0, 0, 2, 102},  // start: 0, 1
		{2, 1, 3, 6, 106},  // after switch 1: 4, 5
		{2, 1, 1, 9, 109},  // after switch 2: 7, 8
	}
	if len(got) != len(want) {
		t.Fatalf("%d windows, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Steps != w.steps || g.StalledSteps != w.stalled || g.DemandLoads != w.loads || g.P50Ms != w.p50 || g.MaxMs != w.max || g.WaitMs != float64(w.steps) {
			t.Errorf("window %d (%s): %+v; want %+v", i, g.Name, g, w)
		}
	}
}

func TestScheduleConfigRefused(t *testing.T) {
	base := ScheduleConfig{Harness: Harness{GatewayBinary: "brand", WorkDir: "w"}}
	for _, tc := range []struct {
		name string
		edit func(*ScheduleConfig)
	}{
		{"switches out of order", func(c *ScheduleConfig) { c.Switch1, c.Switch2 = 500, 400 }},
		{"steps before the second switch", func(c *ScheduleConfig) { c.Switch1, c.Switch2, c.Steps = 100, 200, 200 }},
		{"cache above the data", func(c *ScheduleConfig) { c.CacheFraction = 1.5 }},
		{"one source", func(c *ScheduleConfig) { c.SourceCounts = []int{1} }},
		{"101 sources", func(c *ScheduleConfig) { c.SourceCounts = []int{101} }},
		{"fewer samples than sources", func(c *ScheduleConfig) { c.SourceSamples = 50 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			if _, err := c.withDefaults(); !errors.Is(err, ErrConfig) {
				t.Fatalf("withDefaults: %v; want ErrConfig", err)
			}
		})
	}
	if _, err := base.withDefaults(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
}

// TestScheduleSmoke runs the schedule benchmark on tiny datasets and
// checks the structure of its report: both gateways read every step under
// the schedule, the windows cover them, each mixture of sources was read
// and measured, the targets were evaluated, and the outputs are readable.
// It checks no performance figure.
func TestScheduleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand and starts five gateways and a MinIO")
	}
	cfg := ScheduleConfig{Samples: 256, MeanBytes: 4 << 10, ChunkSize: 64 << 10, BatchSize: 8, World: 2, Window: 2,
		Switch1: 20, Switch2: 40, Steps: 60, After: 10, StepTime: time.Millisecond,
		SourceCounts: []int{2, 3}, SourceSamples: 48, SourceSteps: 8,
		ConfigTimeout: 2 * time.Minute, Harness: Harness{GatewayBinary: cmdtest.Build(t, "brand"), WorkDir: t.TempDir(), Command: "go test -run TestScheduleSmoke"}}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunSchedule(ctx, cfg)
	if err != nil {
		t.Fatalf("RunSchedule: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(rep.Runs))
	}
	for _, run := range rep.Runs {
		if len(run.StepMs) != cfg.Steps || len(run.StepLoads) != cfg.Steps || len(run.Windows) != 4 {
			t.Fatalf("%s: %d steps, %d windows; want %d and 4", run.Config, len(run.StepMs), len(run.Windows), cfg.Steps)
		}
		n := 0
		for _, w := range run.Windows {
			n += w.Steps
		}
		// The cold cache reads the data at least once.
		if n != cfg.Steps || run.StoreBytes < float64(rep.Bytes)/2 {
			t.Errorf("%s: windows of %d steps, store %v bytes of %d", run.Config, n, run.StoreBytes, rep.Bytes)
		}
	}
	for _, f := range []string{"schedule-prefetch.metrics", "schedule-prefetch.stats", "schedule-no-prefetch.metrics"} {
		if fi, err := os.Stat(filepath.Join(cfg.WorkDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (want a non-empty file)", f, err)
		}
	}
	if len(rep.Sources) != 2 {
		t.Fatalf("%d mixtures of sources, want 2", len(rep.Sources))
	}
	for _, s := range rep.Sources {
		if s.Batches != cfg.SourceSteps || s.RSS <= 0 || s.Goroutines <= 0 || s.ReadyGoroutines <= 0 {
			t.Errorf("%d sources: %+v", s.Sources, s)
		}
		for _, f := range []string{"goroutine", "heap"} {
			if fi, err := os.Stat(filepath.Join(cfg.WorkDir, fmt.Sprintf("schedule-sources-%d.%s", s.Sources, f))); err != nil || fi.Size() == 0 {
				t.Errorf("%d sources: %s profile: %v", s.Sources, f, err)
			}
		}
	}
	if len(rep.Targets) != 2 {
		t.Errorf("%d targets, want 2", len(rep.Targets))
	}
	var text, js, chartJSON bytes.Buffer
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "after switch 2") {
		t.Errorf("WriteText: %v\n%s", err, text.String())
	}
	var back ScheduleReport
	if err := rep.WriteJSON(&js); err != nil || json.Unmarshal(js.Bytes(), &back) != nil || len(back.Runs) != 2 {
		t.Errorf("WriteJSON: %v", err)
	}
	if err := writeChart(&chartJSON, rep); err != nil || chartJSON.Len() == 0 {
		t.Errorf("chart: %v", err)
	}
}
