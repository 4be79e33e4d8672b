package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestConcurrencySmall runs the small concurrency benchmark through a
// brand binary and checks what it measured: both shapes at every
// concurrency, batches read at each, no error and, for the ranks of one
// job (96 of them, past the 64 batches a job had before admission knew
// its width), no refusal; the gateway's RSS and goroutines read; a
// cluster of three whose killed node's ranks fail over without an
// error; every target evaluated; the text and JSON written. It checks no performance
// figure: those are for a full run.
func TestConcurrencySmall(t *testing.T) {
	cfg := SmallConcurrencyConfig()
	cfg.GatewayBinary = cmdtest.Build(t, "brand")
	cfg.WorkDir = t.TempDir()
	cfg.Command = "go test -run TestConcurrencySmall"
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := RunConcurrency(ctx, cfg)
	if err != nil {
		t.Fatalf("RunConcurrency: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Points) != 2*len(cfg.Streams) {
		t.Fatalf("%d points, want %d", len(rep.Points), 2*len(cfg.Streams))
	}
	for i, p := range rep.Points {
		shape := []string{ShapeOneJob, ShapeManyJob}[i/len(cfg.Streams)]
		if p.Shape != shape || p.Streams != cfg.Streams[i%len(cfg.Streams)] {
			t.Errorf("point %d: %s at %d streams, want %s at %d", i, p.Shape, p.Streams, shape, cfg.Streams[i%len(cfg.Streams)])
		}
		if p.Batches < int64(p.Streams) || p.BatchesPerSec <= 0 || p.P50Ms <= 0 || p.P99Ms < p.P50Ms || p.MaxMs < p.P99Ms || p.Goroutines < p.Streams {
			t.Errorf("%s at %d streams: %+v; want a batch a stream at least, ordered latencies, a goroutine a connection", p.Shape, p.Streams, p)
		}
		if p.Errors != 0 || p.Shape == ShapeOneJob && p.Refused != 0 {
			t.Errorf("%s at %d streams: %d refused, %d errors (%s)", p.Shape, p.Streams, p.Refused, p.Errors, p.FirstError)
		}
		if runtime.GOOS == "linux" && (p.RSS <= 0 || p.CPUPerBatchUs <= 0) {
			t.Errorf("%s at %d streams: RSS %d, %.0f µs of CPU a batch", p.Shape, p.Streams, p.RSS, p.CPUPerBatchUs)
		}
	}
	if runtime.GOOS == "linux" && (rep.PeakRSS <= 0 || rep.ReadyRSS <= 0) {
		t.Errorf("peak RSS %d, at ready %d", rep.PeakRSS, rep.ReadyRSS)
	}
	if rep.StoreBytes != 0 {
		t.Errorf("%d bytes read from the store during the points; the cache was warmed to hold the dataset", rep.StoreBytes)
	}
	cl := rep.Cluster
	if cl == nil {
		t.Fatal("no cluster run")
	}
	if cl.Nodes != 3 || cl.Streams != cfg.ClusterStreams || cl.KilledAfterS <= 0 || cl.Before.Batches < int64(cl.Streams) || cl.After.Batches < int64(cl.Streams) {
		t.Errorf("cluster %+v: want batches of every rank before and after a node is killed", cl)
	}
	if cl.Errors != 0 || cl.FailedOver < 1 {
		t.Errorf("cluster: %d errors (%s), %d failed over; want none, and the killed node's ranks failed over", cl.Errors, cl.FirstError, cl.FailedOver)
	}
	if len(rep.Targets) != 10 {
		t.Errorf("%d targets, want 10: %+v", len(rep.Targets), rep.Targets)
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	var back ConcurrencyReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Points) != len(rep.Points) {
		t.Fatalf("the JSON does not read back: %v", err)
	}
	for _, want := range []string{"| 96\t", "one job", "as many jobs", "Targets:"} {
		if !strings.Contains(strings.ReplaceAll(text.String(), " ", "\t"), strings.ReplaceAll(want, " ", "\t")) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestConcurrencyTargets: each shape's throughput at the most streams is
// held to the best, p99 to p50 at the best; errors fail, refusals fail
// only the ranks of one job; the peak RSS is held to the memory limit.
func TestConcurrencyTargets(t *testing.T) {
	pt := func(shape string, streams int, bps, p50, p99 float64, refused, errs int64) ConcurrencyPoint {
		return ConcurrencyPoint{Shape: shape, Streams: streams, BatchesPerSec: bps, P50Ms: p50, P99Ms: p99, Refused: refused, Errors: errs}
	}
	tests := []struct {
		name   string
		points []ConcurrencyPoint
		peak   int64
		miss   []string // the targets missed, by a part of their names
	}{
		{name: "all met", peak: 3 << 30, points: []ConcurrencyPoint{
			pt(ShapeOneJob, 8, 1000, 1, 5, 0, 0), pt(ShapeOneJob, 1024, 900, 100, 300, 0, 0),
			pt(ShapeManyJob, 8, 1000, 1, 5, 0, 0), pt(ShapeManyJob, 1024, 800, 100, 300, 3, 0)}},
		{name: "slow at the widest, a tail, refusals, errors, memory", peak: 5 << 30, points: []ConcurrencyPoint{
			pt(ShapeOneJob, 8, 1000, 1, 11, 0, 0), pt(ShapeOneJob, 1024, 700, 100, 300, 2, 0),
			pt(ShapeManyJob, 8, 1000, 1, 5, 0, 1), pt(ShapeManyJob, 1024, 900, 100, 300, 0, 0)},
			miss: []string{"one job: batches/s", "one job: p99", "one job: refusals", "as many jobs: errors", "peak RSS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &ConcurrencyReport{Points: tt.points, PeakRSS: tt.peak, MemoryLimit: 4 << 30}
			var missed []string
			for _, tg := range rep.targets() {
				if tg.Status == Miss {
					missed = append(missed, tg.Name)
				}
			}
			if len(missed) != len(tt.miss) {
				t.Fatalf("missed %q, want those naming %q", missed, tt.miss)
			}
			for i, m := range tt.miss {
				if !strings.HasPrefix(missed[i], m) && !strings.Contains(missed[i], m) {
					t.Errorf("missed %q, want one naming %q", missed[i], m)
				}
			}
		})
	}
}
