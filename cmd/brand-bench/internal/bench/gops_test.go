package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestGOPsReport: the GOP benchmark's summary is each configuration's
// medians, its targets the ratios of those (Brand's CPU a sample over
// PyAV's, the GOP order's and the plain clips' held to issue 93's bounds),
// and /plan against /stats is a target of every Brand pass.
func TestGOPsReport(t *testing.T) {
	r := &GOPsReport{Passes: []GOPsRow{
		{Round: 0, Config: gopsGOP, Samples: 10, CPUMsPerSample: 10, PlanGOPs: 4, StatsGOPs: 4, PlanFrames: 40, StatsFrames: 40},
		{Round: 1, Config: gopsGOP, Samples: 10, CPUMsPerSample: 30, PlanGOPs: 4, StatsGOPs: 4, PlanFrames: 40, StatsFrames: 40},
		{Round: 0, Config: gopsDefault, Samples: 10, CPUMsPerSample: 50, Reuse: 2, PlanGOPs: 8, StatsGOPs: 9, PlanFrames: 80, StatsFrames: 90},
		{Round: 0, Config: gopsPyAV, Samples: 4, CPUMsPerSample: 100},
		{Round: 0, Config: gopsPyAVAll, Samples: 4, CPUMsPerSample: 120},
		{Round: 0, Config: gopsClips, Samples: 3, CPUMsPerSample: 80, PlanFrames: 10, StatsFrames: 10},
		{Round: 0, Config: gopsPyAVClips, Samples: 3, CPUMsPerSample: 100},
	}}
	r.Summary = r.summary()
	if got := r.total(gopsGOP).CPUMsPerSample; got != 20 {
		t.Errorf("the GOP order's median %v, want 20", got)
	}
	r.Targets = r.targets()
	want := []struct {
		ratio  float64
		status string
	}{{0.2, Pass}, {0.5, NA}, {0.8, Miss}, {0.75, Miss}}
	if len(r.Targets) != len(want) {
		t.Fatalf("%d targets", len(r.Targets))
	}
	for i, w := range want {
		if tg := r.Targets[i]; tg.Ratio != w.ratio || tg.Status != w.status {
			t.Errorf("target %q: %.3f %s, want %.3f %s", tg.Name, tg.Ratio, tg.Status, w.ratio, w.status)
		}
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "| LeRobot episodes: Brand, GOP-then-sample order | 10 | 20.00 |") {
		t.Errorf("the report: %v\n%s", err, b.String())
	}
}
