// Package chart describes the harness's charts as data. A benchmark's
// report says what its chart shows (bars, lines, labels, axes) as a Chart;
// brand-bench writes it beside the report as NAME.chart.json, and the
// brand-chart tool (tools/brand-chart, a Go module of its own) draws it as
// NAME.png.
//
// # Why data and not a picture
//
// A plotting library brings fonts, a LaTeX renderer, a PDF writer and
// image codecs with it. Drawn here, they were requirements of the product's
// module (go.mod, go.sum, `go mod graph`) although the server links none of
// them. As data the chart costs the module nothing, a test can read what
// a chart shows without decoding pixels, and the tool that draws it keeps
// its libraries in a module of its own.
//
// The JSON form is the contract between the two modules: the harness's
// tests write a golden chart of every report into
// cmd/brand-bench/internal/bench/testdata/charts, and brand-chart's tests
// draw each of them, refusing a field they do not know.
package chart

import (
	"encoding/json"
	"github.com/brandgw/brand/internal/errkind"
	"io"
)

// ErrEmpty reports a chart with nothing to draw: a report with no rows.
var ErrEmpty = errkind.New(errkind.Invalid, "chart: no results to chart")

// Ext is the file extension of a chart written as data.
const Ext = ".chart.json"

// Chart is one chart. Sizes are in points (1/72 inch).
type Chart struct {
	Title  string  `json:"title"`
	Width  float64 `json:"width_pt"`
	Height float64 `json:"height_pt"`
	X      Axis    `json:"x"`
	Y      Axis    `json:"y"`
	// Categories name the positions 0, 1, … of the nominal axis: the Y
	// axis, bottom to top, when Horizontal; else the X axis, left to
	// right. Charts of lines alone have none.
	Categories []string `json:"categories,omitempty"`
	// Horizontal draws bars along X from the Y axis's categories.
	Horizontal bool `json:"horizontal,omitempty"`
	// Bars are series of bars, one value per category (0 draws no bar).
	Bars []Bars `json:"bars,omitempty"`
	// Lines are polylines in data coordinates.
	Lines []Line `json:"lines,omitempty"`
	// Labels are texts placed at data coordinates: a bar's value at its
	// end, drawn just above the point.
	Labels []Label `json:"labels,omitempty"`
	// LegendTop puts the legend (the series that have names) at the top.
	LegendTop bool `json:"legend_top,omitempty"`
}

// Axis is one axis of a chart.
type Axis struct {
	Label string `json:"label,omitempty"`
	// Min and Max bound the axis; nil lets the data decide.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// CommaTicks labels ticks as whole numbers with thousands separators.
	CommaTicks bool `json:"comma_ticks,omitempty"`
	// TickRotation turns the tick labels (radians); TickXAlign aligns
	// them (0 centred, -1 starting at the tick).
	TickRotation float64 `json:"tick_rotation,omitempty"`
	TickXAlign   float64 `json:"tick_x_align,omitempty"`
}

// Bars is one series of bars.
type Bars struct {
	// Name is the series' legend entry; "" leaves it out of the legend.
	Name   string    `json:"name,omitempty"`
	Color  string    `json:"color"` // #rrggbb
	Width  float64   `json:"width_pt"`
	Values []float64 `json:"values"`
	// Offset shifts the series along the nominal axis (points), so that
	// several series stand side by side.
	Offset float64 `json:"offset_pt,omitempty"`
}

// Line is one polyline.
type Line struct {
	Name   string       `json:"name,omitempty"` // legend entry, if any
	Color  string       `json:"color"`          // #rrggbb
	Width  float64      `json:"width_pt,omitempty"`
	Dashes []float64    `json:"dashes_pt,omitempty"`
	Points [][2]float64 `json:"points"`
}

// Label is a text at a point.
type Label struct {
	X    float64 `json:"x"`
	Y    float64 `json:"y"`
	Text string  `json:"text"`
}

// Bound returns v as an axis bound.
func Bound(v float64) *float64 { return &v }

// WriteJSON writes c as its JSON form, indented.
func (c *Chart) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}
