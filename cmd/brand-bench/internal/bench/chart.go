package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"github.com/dustin/go-humanize"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// barColors gives each kind of configuration its bar colour; the labels
// name the configurations, so the chart needs no legend.
var barColors = []struct {
	kind  string
	color color.RGBA
}{
	{GroupLimits, color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}},
	{GroupBaselines, color.RGBA{R: 0xe0, G: 0x8a, B: 0x2c, A: 0xff}},
	{"schedule", color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff}},
	{"lru", color.RGBA{R: 0x7a, G: 0x4f, B: 0xa8, A: 0xff}},
	{GroupPython, color.RGBA{R: 0x3a, G: 0x9a, B: 0x5b, A: 0xff}},
}

// barKind is the colour key of a row: its group, or for Brand its policy.
func barKind(r Row) string {
	if r.Config == ConfigBrand || r.Config == ConfigBrandAhead {
		return r.Policy
	}
	return r.Group
}

// WriteChart draws throughput (samples/s) per configuration as a PNG bar
// chart: one bar per row, coloured by group, the first row at the top.
func (rep *Report) WriteChart(w io.Writer) error {
	rows := rep.Rows
	if len(rows) == 0 {
		return fmt.Errorf("bench: no results to chart")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput per configuration (%d samples of mean %s, batch %d)",
		rep.Dataset.Samples, sizeString(rep.Config.MeanBytes), rep.Config.BatchSize)
	p.X.Label.Text = "samples/s (higher is better)"
	p.X.Min = 0
	n := len(rows)
	labels := make([]string, n)
	for i, r := range rows {
		labels[n-1-i] = r.Label
	}
	for _, k := range barColors {
		vals := make(plotter.Values, n)
		found := false
		for i, r := range rows {
			if barKind(r) == k.kind {
				vals[n-1-i] = r.SamplesPerSec
				found = true
			}
		}
		if !found {
			continue
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(11))
		if err != nil {
			return fmt.Errorf("bench: chart: %w", err)
		}
		bars.Horizontal = true
		bars.Color = k.color
		bars.LineStyle.Width = 0
		p.Add(bars)
	}
	// Each bar's value at its end, and room on the right for the labels
	// and the legend.
	var xys plotter.XYs
	var texts []string
	top := 0.0
	for i, r := range rows {
		xys = append(xys, plotter.XY{X: r.SamplesPerSec, Y: float64(n - 1 - i)})
		texts = append(texts, " "+humanize.Commaf(math.Round(r.SamplesPerSec)))
		top = max(top, r.SamplesPerSec)
	}
	values, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	for i := range values.TextStyle {
		values.TextStyle[i].YAlign = -0.5
	}
	p.Add(values)
	p.X.Max = 1.15 * top
	p.X.Tick.Marker = commaTicks{}
	p.NominalY(labels...)
	p.Add(plotter.NewGrid())
	height := vg.Length(n)*vg.Points(16) + 1.5*vg.Inch
	wt, err := p.WriterTo(10*vg.Inch, height, "png")
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("bench: writing the chart: %w", err)
	}
	return nil
}

// commaTicks are the default ticks labelled as whole numbers with thousands
// separators.
type commaTicks struct{}

func (commaTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = humanize.Commaf(math.Round(ticks[i].Value))
		}
	}
	return ticks
}
