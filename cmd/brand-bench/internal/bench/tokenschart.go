package bench

import (
	"fmt"
	"math"

	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
)

var tokensLoaderShort = map[string]string{
	tokLoaderGo:     "Brand, Go client (Sequences)",
	tokLoaderDS:     "Brand, BrandDataset(seq=)",
	tokLoaderPy:     "Brand, Python client → tensors",
	tokLoaderViews:  "Brand, Python client, bodies viewed",
	tokLoaderMemmap: "nanoGPT memmap, no documents",
	tokLoaderPack:   "Python best-fit, trainer-side",
}

// Chart is the trainer's CPU per token of each loader as a bar chart,
// with the gateway's warm tokens per core-second in the title.
func (r *TokensReport) Chart() (*chart.Chart, error) {
	if len(r.Trainer) == 0 {
		return nil, chart.ErrEmpty
	}
	lo, hi := math.Inf(1), 0.0
	for _, j := range r.Jobs {
		lo, hi = min(lo, j.TokensPerCoreSec), max(hi, j.TokensPerCoreSec)
	}
	n := len(r.Trainer)
	c := &chart.Chart{
		Title:      fmt.Sprintf("The trainer's CPU per token, seq %d (the gateway: %.0f–%.0f M tokens per core-second, warm)", r.TrainerSeq, lo/1e6, hi/1e6),
		Width:      10 * 72,
		Height:     float64(n)*22 + 1.5*72,
		X:          chart.Axis{Label: "trainer CPU ns per token (lower is better)"},
		Categories: make([]string, n),
		Horizontal: true,
	}
	vals := make([]float64, n)
	top := 0.0
	for i, t := range r.Trainer {
		y := n - 1 - i
		c.Categories[y] = tokensLoaderShort[t.Loader]
		vals[y] = t.NsPerToken
		c.Labels = append(c.Labels, chart.Label{X: vals[y], Y: float64(y), Text: fmt.Sprintf(" %.2f ns", vals[y])})
		top = max(top, vals[y])
	}
	c.Bars = []chart.Bars{{Color: colorBlue, Width: 14, Values: vals}}
	c.X.Min, c.X.Max = chart.Bound(0), chart.Bound(1.3*top)
	return c, nil
}
