package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
)

// schedChartBin is the steps the chart counts stalls over.
const schedChartBin = 10

// targets evaluates the target for schedules: no batch waits on
// the store in the After steps after a switch the planner saw coming (the
// gateway as it is, with prefetch); without prefetch it is the reference
// and has no target.
func (r *ScheduleReport) targets() []Target {
	var out []Target
	for _, run := range r.Runs {
		if run.Config != schedPrefetch {
			continue
		}
		for _, w := range run.Windows[2:] {
			t := atMost(fmt.Sprintf("steps with a batch waiting on the store, %d steps %s", w.Steps, w.Name), float64(w.StalledSteps), 0)
			t.Want = "= 0"
			t.Note = fmt.Sprintf("%d chunks loaded on demand; p99 %.1f ms against %.1f ms steady, %d of %d steady steps stalled",
				w.DemandLoads, w.P99Ms, run.Windows[0].P99Ms, run.Windows[0].StalledSteps, run.Windows[0].Steps)
			out = append(out, t)
		}
	}
	return out
}

// WriteJSON writes the report as JSON.
func (r *ScheduleReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables: per configuration and
// window, batch latency and the steps that waited on the store; per
// mixture size, the gateway's memory and goroutines.
func (r *ScheduleReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Schedule %s over three sources of %d samples (%s in %d chunks, samples of mean %s) in MinIO; cold cache %s (%.0f %% of the data); batch %d × world %d, window %d, a step asked for every %.0f ms at most; steps 0–%d\n\n",
		r.Schedule, r.Samples, sizeString(r.Bytes), r.Chunks, sizeString(r.MeanBytes), sizeString(r.CacheBytes), 100*float64(r.CacheBytes)/float64(max(r.Bytes, 1)),
		r.BatchSize, r.World, r.Window, r.StepMs, r.Steps-1)
	sb.WriteString("| config | window | steps | p50 ms | p99 ms | max ms | steps stalled | loads on demand | gateway wait ms |\n")
	sb.WriteString("| -- | -- | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, run := range r.Runs {
		for _, win := range run.Windows {
			fmt.Fprintf(&sb, "| %s | %s | %d | %.1f | %.1f | %.1f | %d | %d | %.0f |\n", run.Config, win.Name, win.Steps, win.P50Ms, win.P99Ms, win.MaxMs, win.StalledSteps, win.DemandLoads, win.WaitMs)
		}
	}
	sb.WriteString("\nLatencies are every rank's batches in the window; a step stalled when a batch of it waited for a chunk prefetch had not read (the gateway's brand_cache_misses_total over the step); gateway wait is brand_job_wait_seconds_total over the window (chunks loading, prefetched or not, room, turns). The steady state is every step neither among the first steps nor among those after a switch. `no prefetch` is the gateway with --prefetch-concurrency 0; no flag turns off only prefetch's view of the phases.\n\n")
	for _, run := range r.Runs {
		fmt.Fprintf(&sb, "%s: %.1f s, store reads %s (%.2f× the data)\n", run.Config, run.Seconds, sizeString(int64(run.StoreBytes)), run.StoreBytes/float64(max(r.Bytes, 1)))
	}
	fmt.Fprintf(&sb, "\nA gateway (cache 128 MiB) serving a two-phase schedule over N sources of %d samples in all, %d batches of 64 read (world 1):\n\n", r.SourceSamples, r.SourceSteps)
	sb.WriteString("| sources | data | RSS at ready | goroutines at ready | RSS after | peak RSS | heap in use | goroutines after | samples/s |\n")
	sb.WriteString("| --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, s := range r.Sources {
		fmt.Fprintf(&sb, "| %d | %s | %s | %d | %s | %s | %s | %d | %.0f |\n", s.Sources, sizeString(s.DatasetBytes), sizeString(s.ReadyRSS), s.ReadyGoroutines,
			sizeString(s.RSS), sizeString(s.PeakRSS), sizeString(s.HeapInuse), s.Goroutines, s.SamplesPerSec)
	}
	sb.WriteString("\nTargets:\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.0f (want %s; %s)\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	fmt.Fprintf(&sb, "\nLoad average (1 min) %.1f before, %.1f after (%d CPUs)\n", r.LoadAverage[0], r.LoadAverage[1], r.Machine.CPUs)
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

// Chart is, per configuration, the steps that waited on the store
// (loaded a chunk on demand) in each bin of schedChartBin steps, with the
// switches marked: the target is none in the bins after a switch.
func (r *ScheduleReport) Chart() (*chart.Chart, error) {
	if len(r.Runs) == 0 {
		return nil, chart.ErrEmpty
	}
	c := &chart.Chart{
		Title:     fmt.Sprintf("Schedule %s over a cold cache (%.0f %% of the data)", r.Schedule, 100*float64(r.CacheBytes)/float64(max(r.Bytes, 1))),
		Width:     10 * 72,
		Height:    5 * 72,
		X:         chart.Axis{Label: fmt.Sprintf("global step (switches at %d and %d, dashed)", r.Switches[0], r.Switches[1])},
		Y:         chart.Axis{Label: fmt.Sprintf("steps that waited on the store, per %d steps", schedChartBin), Min: chart.Bound(0)},
		LegendTop: true,
	}
	colors := []string{colorBlue, colorRust}
	top := 1.0
	for k, run := range r.Runs {
		var pts [][2]float64
		for b := 0; b < len(run.StepLoads); b += schedChartBin {
			n := 0
			for _, l := range run.StepLoads[b:min(b+schedChartBin, len(run.StepLoads))] {
				if l > 0 {
					n++
				}
			}
			// Each bin drawn as a step of the line, flat over its steps.
			pts = append(pts, [2]float64{float64(b), float64(n)}, [2]float64{float64(min(b+schedChartBin, len(run.StepLoads))), float64(n)})
			top = max(top, float64(n))
		}
		c.Lines = append(c.Lines, chart.Line{Name: run.Config, Color: colors[k%len(colors)], Width: 1.5, Points: pts})
	}
	for _, s := range r.Switches {
		c.Lines = append(c.Lines, chart.Line{Color: colorBlack, Dashes: []float64{3, 3}, Points: [][2]float64{{float64(s), 0}, {float64(s), top}}})
	}
	return c, nil
}
