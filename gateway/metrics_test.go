package gateway_test

import (
	"regexp"
	"testing"

	"github.com/brandgw/brand/gateway"
)

// TestBackendMetricsOfLocalStore checks that a dataset opened from a local
// directory counts its reads in the backend metrics, as an S3 one does.
func TestBackendMetricsOfLocalStore(t *testing.T) {
	f := newFixture(t, 3, 4)
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "test", URL: f.dir}}
		c.PrefetchConcurrency = -1
	})
	if resp, body := get(t, srv.URL+"/epoch/0/batch/0"); resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	value := func(series string) float64 { return metric(t, srv.URL, series) }
	if n := value(`brand_backend_read_bytes_total`); n < float64(f.index.Chunk(0).Size) {
		t.Errorf("brand_backend_read_bytes_total %v after reading at least one chunk", n)
	}
	if n := value(`brand_backend_requests_total{op="get",result="ok"}`); n < 1 {
		t.Errorf("%v get requests counted", n)
	}
	if n := value(`brand_backend_request_duration_seconds_count{op="get"}`); n < 1 {
		t.Errorf("%v get durations observed", n)
	}
}

// TestErrorsByReason: every answer with an error status is counted by its
// route and why, so that an operator tells a 503 for want of cache room
// from one for an unavailable store, and a batch over the size bound from
// a malformed request, where brand_http_requests_total has only the code.
func TestErrorsByReason(t *testing.T) {
	f := newFixture(t, 3, 4)
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "test", URL: f.dir}}
		c.PrefetchConcurrency = -1
	})
	for path, status := range map[string]int{
		"/epoch/0/batch/0?batch_size=0":        400,
		"/epoch/0/batch/0?transform=no-such":   400,
		"/epoch/0/batch/0?batch_size=4&seed=1": 200,
		"/epoch/0/batch/99999":                 404,
		"/no/such/endpoint":                    404,
	} {
		if resp, body := get(t, srv.URL+path); resp.StatusCode != status {
			t.Fatalf("%s: %d %s, want %d", path, resp.StatusCode, body, status)
		}
	}
	_, body := get(t, srv.URL+"/metrics")
	const batch = `route="/epoch/{epoch}/batch/{batch}"`
	for _, want := range []string{
		`brand_http_errors_total{reason="bad_request",` + batch + `} 1`,
		`brand_http_errors_total{reason="unknown_pipeline",` + batch + `} 1`,
		`brand_http_errors_total{reason="not_found",` + batch + `} 1`,
		`brand_http_errors_total{reason="not_found",route="unmatched"} 1`,
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(body) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^brand_http_errors_total\{`).FindAll(body, -1)); n != 4 {
		t.Errorf("%d series of brand_http_errors_total, want 4 (the 200 counts in none)", n)
	}
}
