package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
)

// WriteJSON writes the report as indented JSON: jobs.json.
func (rep *JobsReport) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText writes the table of configurations and the targets: jobs.txt,
// and the markdown of docs/benchmarks.md (the table is valid markdown).
func (rep *JobsReport) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d samples in %d chunks (%s), batch %d, window %d, %d epochs per job; %s\n\n",
		rep.Dataset.Samples, rep.Dataset.Chunks, sizeString(rep.Dataset.Bytes), rep.BatchSize, rep.Window, rep.Epochs, rep.Command)
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| jobs\t| cache\t| speeds\t| next-use\t| ÷ optimum\t| optimum\t| lru (live)\t| lru (planner)\t| partitioned\t| samples/s next-use\t| samples/s lru\t| job seconds, next-use\t| turn waits\t|")
	fmt.Fprintln(tw, "| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --\t| --:\t|")
	for _, r := range rep.Rows {
		js := r.NextUse.JobSeconds
		spread := "—"
		if len(js) > 0 {
			spread = fmt.Sprintf("%.2f–%.2f", js[0], js[len(js)-1])
		}
		fmt.Fprintf(tw, "| %d\t| %s\t| %s\t| %.3f\t| %.2f\t| %.3f\t| %.3f\t| %.3f\t| %.3f\t| %.0f\t| %.0f\t| %s\t| %.2f s\t|\n",
			r.Jobs, percentString(r.CacheFraction), r.Speeds, r.NextUse.Reads, r.Ratio, r.Optimal, r.LRU.Reads, r.PlannerLRU, r.Partitioned,
			r.NextUse.SamplesPerSec, r.LRU.SamplesPerSec, spread, r.NextUse.TurnWaitSeconds)
	}
	tw.Flush()
	b.WriteString("\nStore reads are datasets per job-epoch (the gateway's chunk loads over the run, prefetch included, ÷ dataset bytes ÷ jobs × epochs).\n\nTargets:\n")
	for _, t := range rep.Targets {
		fmt.Fprintf(&b, "  %-4s %s: %.3f (want %s) %s\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Chart is store reads per job-epoch for every configuration: the
// next-use policy, LRU and the planner's optimum side by side.
func (rep *JobsReport) Chart() (*chart.Chart, error) {
	if len(rep.Rows) == 0 {
		return nil, chart.ErrEmpty
	}
	n := len(rep.Rows)
	c := &chart.Chart{
		Title:      fmt.Sprintf("Jobs sharing one gateway: store reads per job-epoch (%d chunks, window %d)", rep.Dataset.Chunks, rep.Window),
		Width:      float64(n)*34 + 2*72,
		Height:     6 * 72,
		X:          chart.Axis{TickRotation: 0.9, TickXAlign: -1},
		Y:          chart.Axis{Label: "datasets read per job-epoch (lower is better)", Min: chart.Bound(0)},
		Categories: make([]string, n),
		LegendTop:  true,
	}
	series := []struct {
		name  string
		color string
		value func(JobsRow) float64
	}{
		{"next-use (live)", colorBlue, func(r JobsRow) float64 { return r.NextUse.Reads }},
		{"optimum (planner)", colorGreen, func(r JobsRow) float64 { return r.Optimal }},
		{"lru (live)", colorPurple, func(r JobsRow) float64 { return r.LRU.Reads }},
	}
	const width = 7
	for k, s := range series {
		vals := make([]float64, n)
		for i, r := range rep.Rows {
			vals[i] = s.value(r)
			c.Categories[i] = fmt.Sprintf("J=%d %s %s", r.Jobs, percentString(r.CacheFraction), r.Speeds)
		}
		c.Bars = append(c.Bars, chart.Bars{Name: s.name, Color: s.color, Width: width, Values: vals, Offset: float64(k-1) * width})
	}
	return c, nil
}
