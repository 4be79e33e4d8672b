package promtest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

func TestRead(t *testing.T) {
	text := `# HELP brand_cache_hits_total Chunk lookups served from the cache.
# TYPE brand_cache_hits_total counter
brand_cache_hits_total 1234
brand_backend_read_bytes_total 2.147483648e+09
brand_http_requests_total{code="200",route="/epoch/{epoch}/batch/{batch}"} 79

go_gc_duration_seconds{quantile="0.5"} 3.2e-05
`
	got, err := Read(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := Scrape{
		"brand_cache_hits_total":         1234,
		"brand_backend_read_bytes_total": 2147483648,
		`brand_http_requests_total{code="200",route="/epoch/{epoch}/batch/{batch}"}`: 79,
		`go_gc_duration_seconds{quantile="0.5"}`:                                     3.2e-05,
	}
	if len(got) != len(want) {
		t.Errorf("parsed %d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := Read(strings.NewReader("brand_cache_hits_total many\n")); err == nil {
		t.Error("a non-numeric value parsed")
	}
}

// TestReadsRegistry: what client_golang writes — counters, gauges,
// histograms and summaries with labels, a value that needs escaping —
// reads back under the names the exposition gives, and Sum adds a
// metric's series by label.
func TestReadsRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_locality_bytes_total", Help: "h"}, []string{"source", "kind"})
	c.WithLabelValues("home", "a").Add(3)
	c.WithLabelValues("peer", "a").Add(4)
	c.WithLabelValues("home", "b\"q\\,").Add(5)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "brand_cache_bytes", Help: "h"})
	g.Set(1 << 20)
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "brand_fetch_seconds", Help: "h", Buckets: []float64{0.005, 1}}, []string{"op"})
	h.WithLabelValues("get").Observe(0.5)
	h.WithLabelValues("get").Observe(2)
	q := prometheus.NewSummary(prometheus.SummaryOpts{Name: "brand_wait_seconds", Help: "h", Objectives: map[float64]float64{0.5: 0.05}})
	q.Observe(3)
	reg.MustRegister(c, g, h, q)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&text, f); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Read(strings.NewReader(text.String()))
	if err != nil {
		t.Fatal(err)
	}
	// Every sample line of the exposition is a series of the scrape, by
	// the same name.
	lines := 0
	for _, line := range strings.Split(text.String(), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		lines++
		name := line[:strings.LastIndexByte(line, ' ')]
		if _, ok := s[name]; !ok {
			t.Errorf("no series %s in %v", name, s)
		}
	}
	if lines != len(s) {
		t.Errorf("%d series of %d lines", len(s), lines)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"brand_locality_bytes_total", nil, 12},
		{"brand_locality_bytes_total", []string{`source="home"`}, 8},
		{"brand_locality_bytes_total", []string{`kind="a"`, `source="home"`}, 3},
		{"brand_locality_bytes_total", []string{`source="nowhere"`}, 0},
		{"brand_cache_bytes", nil, 1 << 20},
		{"brand_fetch_seconds_count", []string{`op="get"`}, 2},
		{"brand_fetch_seconds_bucket", []string{`le="1"`}, 1},
		{"brand_wait_seconds_sum", nil, 3},
	} {
		if got := s.Sum(tc.name, tc.labels...); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
