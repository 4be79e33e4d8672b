package bench

import (
	"strings"
	"testing"
)

// The video report's summary is each configuration's medians over the
// rounds, and its targets compare (3) with (1) and (2) as issue 55 states
// them.
func TestVideoReportTargets(t *testing.T) {
	row := func(round int, config string, cps, trainer, gateway, over float64) VideoRow {
		return VideoRow{Round: round, Config: config, ClipsPerSec: cps, TrainerMsPerClip: trainer, TrainerMsPerClipWithStart: 2 * trainer,
			GatewayMsPerClip: gateway, StoreBytesPerClip: 1000 * over, OverCovering: over, RequestsPerClip: 1}
	}
	r := &VideoReport{
		Rows: []VideoRow{
			row(0, videoWhole, 1, 200, 0, 3.2), row(0, videoRanges, 1, 100, 0, 1.6), row(0, videoBrand, 5, 4, 30, 1.0),
			row(1, videoWhole, 3, 220, 0, 3.2), row(1, videoRanges, 2, 120, 0, 1.6), row(1, videoBrand, 7, 12, 50, 1.1),
			row(2, videoWhole, 2, 210, 0, 3.2), row(2, videoRanges, 3, 110, 0, 1.6), row(2, videoBrand, 6, 8, 40, 1.4),
		},
		FirstStepAfterResume: 1.5, ResumeState: 0.25,
	}
	r.Summary = r.summary()
	r.Targets = r.targets()
	if len(r.Summary) != 3 {
		t.Fatalf("summary: %+v", r.Summary)
	}
	b := r.total(videoBrand)
	if b.ClipsPerSec != 6 || b.TrainerMsPerClip != 8 || b.GatewayMsPerClip != 40 || b.OverCovering != 1.1 {
		t.Errorf("(3)'s medians: %+v", b)
	}
	want := []struct {
		ratio  float64
		status string
	}{
		{8.0 / 210, Pass}, // trainer CPU, (3) ÷ (1)
		{1.1, Pass},       // store bytes ÷ covering
		{40.0 / 110, Pass},
		{1.5, Miss}, // first step after a resume
	}
	if len(r.Targets) != len(want) {
		t.Fatalf("targets: %+v", r.Targets)
	}
	for i, w := range want {
		if got := r.Targets[i]; got.Ratio != w.ratio || got.Status != w.status {
			t.Errorf("target %q: %v %s, want %v %s", got.Name, got.Ratio, got.Status, w.ratio, w.status)
		}
	}
	for i, note := range map[int]string{0: "the workers' start included: 0.038", 1: "(1) reads 3.20×, (2) 1.60×", 3: "the state loaded at 0.25 s"} {
		if !strings.Contains(r.Targets[i].Note, note) {
			t.Errorf("target %q's note: %q, want %q", r.Targets[i].Name, r.Targets[i].Note, note)
		}
	}
	var sb strings.Builder
	if err := r.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{videoLabels[videoWhole], videoLabels[videoRanges], videoLabels[videoBrand], "| 6.0 | 8.00 | 16.00 | 40.00 |", "1.50 s"} {
		if !strings.Contains(sb.String(), s) {
			t.Errorf("the text report lacks %q:\n%s", s, sb.String())
		}
	}
}
