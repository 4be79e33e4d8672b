package bench

import (
	"fmt"
	"math"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
)

// The charts' colours.
const (
	colorGrey   = "#999999"
	colorOrange = "#e08a2c"
	colorBlue   = "#2b6cb0"
	colorPurple = "#7a4fa8"
	colorGreen  = "#3a9a5b"
	colorRust   = "#c05a2b"
	colorBlack  = "#000000"
)

// barColors gives each kind of configuration its bar colour; the labels
// name the configurations, so the chart needs no legend.
var barColors = []struct {
	kind  string
	color string
}{
	{GroupLimits, colorGrey},
	{GroupBaselines, colorOrange},
	{"next-use", colorBlue},
	{"lru", colorPurple},
	{GroupPython, colorGreen},
}

// barKind is the colour key of a row: its group, or for Brand its policy.
func barKind(r Row) string {
	if r.Config == ConfigBrand || r.Config == ConfigBrandAhead {
		return r.Policy
	}
	return r.Group
}

// Chart is throughput (samples/s) per configuration as a bar chart: one
// bar per row, coloured by group, the first row at the top.
func (rep *Report) Chart() (*chart.Chart, error) {
	rows := rep.Rows
	if len(rows) == 0 {
		return nil, chart.ErrEmpty
	}
	n := len(rows)
	c := &chart.Chart{
		Title: fmt.Sprintf("Throughput per configuration (%d samples of mean %s, batch %d)",
			rep.Dataset.Samples, sizeString(rep.Config.MeanBytes), rep.Config.BatchSize),
		Width:      10 * 72,
		Height:     float64(n)*16 + 1.5*72,
		X:          chart.Axis{Label: "samples/s (higher is better)", Min: chart.Bound(0), CommaTicks: true},
		Categories: make([]string, n),
		Horizontal: true,
	}
	for i, r := range rows {
		c.Categories[n-1-i] = r.Label
	}
	for _, k := range barColors {
		vals := make([]float64, n)
		found := false
		for i, r := range rows {
			if barKind(r) == k.kind {
				vals[n-1-i] = r.SamplesPerSec
				found = true
			}
		}
		if found {
			c.Bars = append(c.Bars, chart.Bars{Color: k.color, Width: 11, Values: vals})
		}
	}
	// Each bar's value at its end, and room on the right for the labels.
	top := 0.0
	for i, r := range rows {
		c.Labels = append(c.Labels, chart.Label{X: r.SamplesPerSec, Y: float64(n - 1 - i), Text: " " + humanize.Commaf(math.Round(r.SamplesPerSec))})
		top = max(top, r.SamplesPerSec)
	}
	c.X.Max = chart.Bound(1.15 * top)
	return c, nil
}
