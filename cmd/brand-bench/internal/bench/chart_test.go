package bench

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
)

var update = flag.Bool("update", false, "rewrite the golden charts in testdata/charts")

// charted is what every report with a chart has.
type charted interface {
	Chart() (*chart.Chart, error)
}

// goldenReports are a report of each kind with a chart, with fixed
// figures.
func goldenReports() map[string]charted {
	r := fakeRun(950, 1800, 1, 1200<<20, 1.0)

	jobs := &JobsReport{Window: 8}
	jobs.Dataset.Chunks = 40
	for _, j := range []int{1, 4} {
		jobs.Rows = append(jobs.Rows, JobsRow{Jobs: j, CacheFraction: 0.5, Speeds: SpeedsEqual,
			NextUse: JobsLive{Reads: 0.6 + 0.1*float64(j)}, LRU: JobsLive{Reads: 0.9 + 0.05*float64(j)}, Optimal: 0.55 + 0.1*float64(j)})
	}

	sched := &ScheduleReport{Schedule: "a:1,b:1 @150 ...", CacheBytes: 1 << 20, Bytes: 4 << 20, Switches: []int{15, 30}}
	for k, config := range []string{"schedule", "lru"} {
		run := SchedRun{Config: config}
		for s := range 45 {
			run.StepLoads = append(run.StepLoads, (s+k)%4)
		}
		sched.Runs = append(sched.Runs, run)
	}

	formats := &FormatsReport{MeanBytes: 110 << 10}
	formats.Config.Images = 1000
	for _, loader := range []string{loaderGo, loaderTorch} {
		for _, cold := range []bool{true, false} {
			for i, f := range formatOrder {
				sps := 1000 * float64(i+1)
				formats.Summary = append(formats.Summary, FormatTotal{Format: f, Loader: loader, Cold: cold,
					SamplesPerSec: [3]float64{sps, sps * 0.9, sps * 1.1}, VsTar: [3]float64{float64(i + 1), 1, 1}})
			}
		}
	}

	tensors := &TensorsReport{Images: 64, MeanBytes: 100 << 10, BatchSize: 16}
	for i, c := range []string{tensorsS3, tensorsBytes, tensorsTensors, tensorsTensors0} {
		v := 100 * float64(i+1)
		tensors.Summary = append(tensors.Summary, TensorsTotal{Config: c, ImagesPerSec: [3]float64{v / 2, v / 3, v}, ImagesPerTrainerCoreSec: [3]float64{v, v, v}})
	}

	tokens := &TokensReport{TrainerSeq: 2048, Jobs: []TokensJob{{TokensPerCoreSec: 40e6}, {TokensPerCoreSec: 55e6}}}
	for i, l := range []string{tokLoaderGo, tokLoaderDS, tokLoaderPy, tokLoaderViews, tokLoaderMemmap, tokLoaderPack} {
		tokens.Trainer = append(tokens.Trainer, TokensTrainer{Loader: l, NsPerToken: 0.5 * float64(i+1)})
	}

	return map[string]charted{"throughput": r.rep, "jobs": jobs, "schedule": sched, "formats": formats, "tensors": tensors, "tokens": tokens}
}

// TestGoldenCharts holds every report's chart to its golden JSON form in
// testdata/charts, which brand-chart's tests (tools/brand-chart) draw:
// the two modules agree on the form through these files. go test -update
// rewrites them.
func TestGoldenCharts(t *testing.T) {
	for name, rep := range goldenReports() {
		t.Run(name, func(t *testing.T) {
			c, err := rep.Chart()
			if err != nil {
				t.Fatal(err)
			}
			if c.Title == "" || c.Width <= 0 || c.Height <= 0 || len(c.Bars)+len(c.Lines) == 0 {
				t.Errorf("chart %q of %g × %g pt with %d bars and %d lines: want a title, a size and something drawn",
					c.Title, c.Width, c.Height, len(c.Bars), len(c.Lines))
			}
			for _, b := range c.Bars {
				if len(b.Values) != len(c.Categories) {
					t.Errorf("bars %q: %d values for %d categories", b.Name, len(b.Values), len(c.Categories))
				}
			}
			var got bytes.Buffer
			if err := c.WriteJSON(&got); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "charts", name+chart.Ext)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("the chart differs from %s (go test -update rewrites it):\n%s", path, got.String())
			}
		})
	}
}

// TestEmptyReportsHaveNoChart: a report with no results has nothing to
// chart, and says so rather than drawing empty axes.
func TestEmptyReportsHaveNoChart(t *testing.T) {
	for name, rep := range map[string]charted{"throughput": &Report{}, "jobs": &JobsReport{}, "schedule": &ScheduleReport{},
		"formats": &FormatsReport{}, "tensors": &TensorsReport{}, "tokens": &TokensReport{}} {
		if c, err := rep.Chart(); !errors.Is(err, chart.ErrEmpty) {
			t.Errorf("%s: an empty report charted (%+v, %v)", name, c, err)
		}
	}
}

// writeChart writes rep's chart as JSON.
func writeChart(w *bytes.Buffer, rep charted) error {
	c, err := rep.Chart()
	if err != nil {
		return err
	}
	return c.WriteJSON(w)
}
