// Package promtest reads a /metrics body — Prometheus's text exposition
// format — with github.com/prometheus/common/expfmt, the parser
// Prometheus itself uses: the one way the module's tests, its integration
// tests and the benchmark harness read metrics, rather than each cutting
// lines at their last space.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package promtest

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is each series of an exposition, named as the exposition names
// it, to its value: `name` or `name{label="value",...}`, the labels in
// order of their names (as client_golang writes them), a histogram's le
// and a summary's quantile last, their _sum and _count series apart.
type Scrape map[string]float64

// Read reads an exposition.
func Read(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	s := Scrape{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := m.GetLabel()
			switch {
			case m.Counter != nil:
				s[series(name, labels)] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s[series(name, labels)] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s[series(name, labels)] = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					s[bounded(name+"_bucket", labels, "le", b.GetUpperBound())] = float64(b.GetCumulativeCount())
				}
				s[bounded(name+"_bucket", labels, "le", math.Inf(1))] = float64(h.GetSampleCount())
				s[series(name+"_sum", labels)] = h.GetSampleSum()
				s[series(name+"_count", labels)] = float64(h.GetSampleCount())
			case m.Summary != nil:
				q := m.GetSummary()
				for _, x := range q.GetQuantile() {
					s[bounded(name, labels, "quantile", x.GetQuantile())] = x.GetValue()
				}
				s[series(name+"_sum", labels)] = q.GetSampleSum()
				s[series(name+"_count", labels)] = float64(q.GetSampleCount())
			}
		}
	}
	return s, nil
}

// series names a series: name and its labels, by name.
func series(name string, labels []*dto.LabelPair) string {
	return join(name, pairs(labels))
}

// bounded is series with a bucket's or a quantile's bound last.
func bounded(name string, labels []*dto.LabelPair, bound string, v float64) string {
	f := strconv.FormatFloat(v, 'g', -1, 64)
	if math.IsInf(v, 1) {
		f = "+Inf"
	}
	return join(name, append(pairs(labels), bound+`="`+f+`"`))
}

func pairs(labels []*dto.LabelPair) []string {
	out := make([]string, 0, len(labels)+1)
	for _, l := range labels {
		out = append(out, l.GetName()+`="`+escape(l.GetValue())+`"`)
	}
	slices.Sort(out)
	return out
}

func join(name string, pairs []string) string {
	if len(pairs) == 0 {
		return name
	}
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// escape escapes a label value as the exposition does.
func escape(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(v)
}

// Sum adds up the series of metric name that carry every one of labels,
// each written as in the exposition (`source="home"`); every series of
// the metric with none given.
func (s Scrape) Sum(name string, labels ...string) float64 {
	var sum float64
	for k, v := range s {
		n, rest, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		rest = "{" + rest
		carries := true
		for _, l := range labels {
			if !strings.Contains(rest, "{"+l+",") && !strings.Contains(rest, "{"+l+"}") &&
				!strings.Contains(rest, ","+l+",") && !strings.Contains(rest, ","+l+"}") {
				carries = false
			}
		}
		if carries {
			sum += v
		}
	}
	return sum
}
