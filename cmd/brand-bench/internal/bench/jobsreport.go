package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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
	fmt.Fprintln(tw, "| jobs\t| cache\t| speeds\t| schedule\t| ÷ optimum\t| optimum\t| lru (live)\t| lru (planner)\t| partitioned\t| samples/s schedule\t| samples/s lru\t| job seconds, schedule\t| turn waits\t|")
	fmt.Fprintln(tw, "| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --\t| --:\t|")
	for _, r := range rep.Rows {
		js := r.Schedule.JobSeconds
		spread := "—"
		if len(js) > 0 {
			spread = fmt.Sprintf("%.2f–%.2f", js[0], js[len(js)-1])
		}
		fmt.Fprintf(tw, "| %d\t| %s\t| %s\t| %.3f\t| %.2f\t| %.3f\t| %.3f\t| %.3f\t| %.3f\t| %.0f\t| %.0f\t| %s\t| %.2f s\t|\n",
			r.Jobs, percentString(r.CacheFraction), r.Speeds, r.Schedule.Reads, r.Ratio, r.Optimal, r.LRU.Reads, r.PlannerLRU, r.Partitioned,
			r.Schedule.SamplesPerSec, r.LRU.SamplesPerSec, spread, r.Schedule.TurnWaitSeconds)
	}
	tw.Flush()
	b.WriteString("\nStore reads are datasets per job-epoch (the gateway's chunk loads over the run, prefetch included, ÷ dataset bytes ÷ jobs × epochs).\n\nTargets:\n")
	for _, t := range rep.Targets {
		fmt.Fprintf(&b, "  %-4s %s: %.3f (want %s) %s\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteChart draws store reads per job-epoch for every configuration:
// the schedule policy, LRU and the planner's optimum side by side.
func (rep *JobsReport) WriteChart(w io.Writer) error {
	if len(rep.Rows) == 0 {
		return fmt.Errorf("bench: no results to chart")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Jobs sharing one gateway: store reads per job-epoch (%d chunks, window %d)", rep.Dataset.Chunks, rep.Window)
	p.Y.Label.Text = "datasets read per job-epoch (lower is better)"
	p.Y.Min = 0
	n := len(rep.Rows)
	labels := make([]string, n)
	series := []struct {
		name  string
		color color.RGBA
		value func(JobsRow) float64
	}{
		{"schedule (live)", color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff}, func(r JobsRow) float64 { return r.Schedule.Reads }},
		{"optimum (planner)", color.RGBA{R: 0x3a, G: 0x9a, B: 0x5b, A: 0xff}, func(r JobsRow) float64 { return r.Optimal }},
		{"lru (live)", color.RGBA{R: 0x7a, G: 0x4f, B: 0xa8, A: 0xff}, func(r JobsRow) float64 { return r.LRU.Reads }},
	}
	width := vg.Points(7)
	for k, s := range series {
		vals := make(plotter.Values, n)
		for i, r := range rep.Rows {
			vals[i] = s.value(r)
			labels[i] = fmt.Sprintf("J=%d %s %s", r.Jobs, percentString(r.CacheFraction), r.Speeds)
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return fmt.Errorf("bench: chart: %w", err)
		}
		bars.Color = s.color
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(k-1) * width
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.Legend.Top = true
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.9
	p.X.Tick.Label.XAlign = -1
	p.Add(plotter.NewGrid())
	wt, err := p.WriterTo(vg.Length(n)*vg.Points(34)+2*vg.Inch, 6*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("bench: writing the chart: %w", err)
	}
	return nil
}
