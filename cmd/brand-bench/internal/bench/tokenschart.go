package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var tokensLoaderShort = map[string]string{
	tokLoaderGo:     "Brand, Go client (Sequences)",
	tokLoaderDS:     "Brand, BrandDataset(seq=)",
	tokLoaderPy:     "Brand, Python client → tensors",
	tokLoaderViews:  "Brand, Python client, bodies viewed",
	tokLoaderMemmap: "nanoGPT memmap, no documents",
	tokLoaderPack:   "Python best-fit, trainer-side",
}

// WriteChart draws the trainer's CPU per token of each loader as a PNG bar
// chart, with the gateway's warm tokens per core-second in the title.
func (r *TokensReport) WriteChart(w io.Writer) error {
	if len(r.Trainer) == 0 {
		return fmt.Errorf("bench: no results to chart")
	}
	p := plot.New()
	lo, hi := math.Inf(1), 0.0
	for _, j := range r.Jobs {
		lo, hi = min(lo, j.TokensPerCoreSec), max(hi, j.TokensPerCoreSec)
	}
	p.Title.Text = fmt.Sprintf("The trainer's CPU per token, seq %d (the gateway: %.0f–%.0f M tokens per core-second, warm)", r.TrainerSeq, lo/1e6, hi/1e6)
	p.X.Label.Text = "trainer CPU ns per token (lower is better)"
	n := len(r.Trainer)
	labels := make([]string, n)
	vals := make(plotter.Values, n)
	var xys plotter.XYs
	var texts []string
	top := 0.0
	for i, t := range r.Trainer {
		y := n - 1 - i
		labels[y] = tokensLoaderShort[t.Loader]
		vals[y] = t.NsPerToken
		xys = append(xys, plotter.XY{X: vals[y], Y: float64(y)})
		texts = append(texts, fmt.Sprintf(" %.2f ns", vals[y]))
		top = max(top, vals[y])
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff}
	bars.LineStyle.Width = 0
	p.Add(bars)
	values, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	for i := range values.TextStyle {
		values.TextStyle[i].YAlign = -0.5
	}
	p.Add(values)
	p.X.Min, p.X.Max = 0, 1.3*top
	p.NominalY(labels...)
	p.Add(plotter.NewGrid())
	wt, err := p.WriterTo(10*vg.Inch, vg.Length(n)*vg.Points(22)+1.5*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("bench: writing the chart: %w", err)
	}
	return nil
}
