package gateway_test

import (
	"regexp"
	"strconv"
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
	_, body := get(t, srv.URL+"/metrics")
	value := func(re string) float64 {
		m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in /metrics:\n%s", re, body)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	if n := value(`brand_backend_read_bytes_total`); n < float64(f.index.Chunk(0).Size) {
		t.Errorf("brand_backend_read_bytes_total %v after reading at least one chunk", n)
	}
	if n := value(`brand_backend_requests_total\{op="get",result="ok"\}`); n < 1 {
		t.Errorf("%v get requests counted", n)
	}
	if n := value(`brand_backend_request_duration_seconds_count\{op="get"\}`); n < 1 {
		t.Errorf("%v get durations observed", n)
	}
}
