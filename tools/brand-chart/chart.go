package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// chart is the JSON form of a chart that brand-bench writes; its fields
// and their meaning are package chart's of the harness
// (cmd/brand-bench/internal/chart), which this module cannot import: the
// harness's golden charts in testdata, drawn by TestGoldenCharts, hold the
// two to one form.
type chart struct {
	Title      string   `json:"title"`
	Width      float64  `json:"width_pt"`
	Height     float64  `json:"height_pt"`
	X          axis     `json:"x"`
	Y          axis     `json:"y"`
	Categories []string `json:"categories"`
	Horizontal bool     `json:"horizontal"`
	Bars       []bars   `json:"bars"`
	Lines      []line   `json:"lines"`
	Labels     []label  `json:"labels"`
	LegendTop  bool     `json:"legend_top"`
}

type axis struct {
	Label        string   `json:"label"`
	Min          *float64 `json:"min"`
	Max          *float64 `json:"max"`
	CommaTicks   bool     `json:"comma_ticks"`
	TickRotation float64  `json:"tick_rotation"`
	TickXAlign   float64  `json:"tick_x_align"`
}

type bars struct {
	Name   string    `json:"name"`
	Color  string    `json:"color"`
	Width  float64   `json:"width_pt"`
	Values []float64 `json:"values"`
	Offset float64   `json:"offset_pt"`
}

type line struct {
	Name   string       `json:"name"`
	Color  string       `json:"color"`
	Width  float64      `json:"width_pt"`
	Dashes []float64    `json:"dashes_pt"`
	Points [][2]float64 `json:"points"`
}

type label struct {
	X    float64 `json:"x"`
	Y    float64 `json:"y"`
	Text string  `json:"text"`
}

// errEmpty reports a chart with nothing to draw.
var errEmpty = errors.New("nothing to draw")

// decode reads a chart, refusing fields it does not know: a chart the
// harness describes in a form this tool does not draw is an error, not a
// picture with something missing.
func decode(r io.Reader) (*chart, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var c chart
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if c.Width <= 0 || c.Height <= 0 {
		return nil, fmt.Errorf("size %g × %g pt: want both positive", c.Width, c.Height)
	}
	if len(c.Bars) == 0 && len(c.Lines) == 0 {
		return nil, errEmpty
	}
	for _, b := range c.Bars {
		if len(b.Values) != len(c.Categories) {
			return nil, fmt.Errorf("bars %q: %d values for %d categories", b.Name, len(b.Values), len(c.Categories))
		}
	}
	return &c, nil
}

// draw writes c as a PNG.
func (c *chart) draw(w io.Writer) error {
	p := plot.New()
	p.Title.Text = c.Title
	for _, b := range c.Bars {
		col, err := parseColor(b.Color)
		if err != nil {
			return err
		}
		bc, err := plotter.NewBarChart(plotter.Values(b.Values), vg.Points(b.Width))
		if err != nil {
			return fmt.Errorf("bars %q: %w", b.Name, err)
		}
		bc.Horizontal = c.Horizontal
		bc.Color = col
		bc.LineStyle.Width = 0
		bc.Offset = vg.Points(b.Offset)
		p.Add(bc)
		if b.Name != "" {
			p.Legend.Add(b.Name, bc)
		}
	}
	for _, l := range c.Lines {
		col, err := parseColor(l.Color)
		if err != nil {
			return err
		}
		pts := make(plotter.XYs, len(l.Points))
		for i, pt := range l.Points {
			pts[i] = plotter.XY{X: pt[0], Y: pt[1]}
		}
		pl, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("line %q: %w", l.Name, err)
		}
		pl.Color = col
		if l.Width > 0 {
			pl.Width = vg.Points(l.Width)
		}
		for _, d := range l.Dashes {
			pl.Dashes = append(pl.Dashes, vg.Points(d))
		}
		p.Add(pl)
		if l.Name != "" {
			p.Legend.Add(l.Name, pl)
		}
	}
	if len(c.Labels) > 0 {
		xys := make(plotter.XYs, len(c.Labels))
		texts := make([]string, len(c.Labels))
		for i, l := range c.Labels {
			xys[i], texts[i] = plotter.XY{X: l.X, Y: l.Y}, l.Text
		}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
		if err != nil {
			return fmt.Errorf("labels: %w", err)
		}
		// Just above the point: a bar's value beside its end.
		for i := range labels.TextStyle {
			labels.TextStyle[i].YAlign = -0.5
		}
		p.Add(labels)
	}
	// After the plotters, which widen the axes to their data: a bound
	// given is the bound drawn.
	c.X.apply(&p.X)
	c.Y.apply(&p.Y)
	p.Legend.Top = c.LegendTop
	if len(c.Categories) > 0 {
		if c.Horizontal {
			p.NominalY(c.Categories...)
		} else {
			p.NominalX(c.Categories...)
		}
	}
	if c.X.TickRotation != 0 || c.X.TickXAlign != 0 {
		p.X.Tick.Label.Rotation = c.X.TickRotation
		p.X.Tick.Label.XAlign = text.XAlignment(c.X.TickXAlign)
	}
	p.Add(plotter.NewGrid())
	wt, err := p.WriterTo(vg.Points(c.Width), vg.Points(c.Height), "png")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// apply sets a plot axis from a.
func (a axis) apply(to *plot.Axis) {
	to.Label.Text = a.Label
	if a.Min != nil {
		to.Min = *a.Min
	}
	if a.Max != nil {
		to.Max = *a.Max
	}
	if a.CommaTicks {
		to.Tick.Marker = commaTicks{}
	}
}

// parseColor reads #rrggbb.
func parseColor(s string) (color.RGBA, error) {
	h, ok := strings.CutPrefix(s, "#")
	v, err := strconv.ParseUint(h, 16, 32)
	if !ok || len(h) != 6 || err != nil {
		return color.RGBA{}, fmt.Errorf("colour %q: want #rrggbb", s)
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}, nil
}

// commaTicks are the default ticks labelled as whole numbers with
// thousands separators.
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
