package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway"
)

// TestErrors: a request the gateway cannot serve is answered with the
// status that says why and a JSON error naming it. (A method not served,
// 405 with Allow, is TestMethods'.)
func TestErrors(t *testing.T) {
	f := newFixture(t, 4, 10) // 40 samples; batch 8 -> 5 batches
	_, srv := start(t, f.store, nil)
	tests := []struct {
		name, path string
		status     int
		contains   string
	}{
		{"epoch not a number", "/epoch/x/batch/0", 400, "epoch must be a non-negative integer"},
		{"negative epoch", "/epoch/-1/batch/0", 400, "epoch must be a non-negative integer"},
		{"negative batch", "/epoch/0/batch/-2", 400, "batch must be a non-negative integer"},
		{"batch out of range", "/epoch/0/batch/5", 404, "valid batch numbers are 0..4"},
		{"batch out of range, drop_last", "/epoch/0/batch/4?batch_size=9&drop_last=true", 404, "0..3"},
		{"epoch out of range", "/epoch/99999999999/batch/0", 404, "valid epoch numbers are 0.."},
		{"rank out of range", "/epoch/0/batch/0?world=2&rank=2", 404, "rank must be 0..1"},
		{"world zero", "/epoch/0/batch/0?world=0", 400, "world must be between 1 and"},
		{"batch size zero", "/epoch/0/batch/0?batch_size=0", 400, "batch_size must be between 1 and"},
		{"batch size huge", "/epoch/0/batch/0?batch_size=1000000", 400, "batch_size must be between 1 and 65536"},
		{"window zero", "/epoch/0/batch/0?window=0", 400, "window must be between 1 and"},
		{"seed not a number", "/epoch/0/batch/0?seed=abc", 400, "seed must be"},
		{"drop_last not bool", "/epoch/0/batch/0?drop_last=maybe", 400, "drop_last must be true or false"},
		{"unknown parameter", "/epoch/0/batch/0?batchsize=4", 400, `unknown query parameter "batchsize"`},
		{"unknown dataset", "/epoch/0/batch/0?dataset=nope", 404, `unknown dataset "nope"`},
		{"unknown format", "/epoch/0/batch/0?format=xml", 400, "format must be tar or json"},
		{"unknown sample", "/samples/no/such/key", 404, `no sample with key "no/such/key"`},
		{"unknown endpoint", "/epochs", 404, "no such endpoint"},
		{"epoch info, bad epoch", "/epoch/abc", 400, "epoch must be"},
		// Past 10,000 parameters url.ParseQuery returns none: the invalid
		// rank must not be dropped with the rest and a default batch served.
		{"too many parameters", "/epoch/0/batch/0?world=2&rank=5" + strings.Repeat("&seed=1", 9999), 400, "query string: number of URL query parameters exceeded limit"},
		{"too many parameters, manifest", "/epoch/0/batch/0/manifest?" + strings.Repeat("seed=1&", 10001), 400, "exceeded limit"},
		{"too many parameters, sample", "/samples/class0/sample00000?" + strings.Repeat("dataset=test&", 10001), 400, "exceeded limit"},
		{"bad escape in query", "/epoch/0/batch/0?seed=%zz", 400, "query string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, srv.URL+tt.path)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q, want application/json", ct)
			}
			var e struct {
				Error  string
				Status int
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body is not JSON: %s", body)
			}
			if e.Status != tt.status || !strings.Contains(e.Error, tt.contains) {
				t.Fatalf("error %+v, want status %d and message containing %q", e, tt.status, tt.contains)
			}
		})
	}
}

func TestBatchIsDeterministicAcrossGateways(t *testing.T) {
	f := newFixture(t, 5, 9)
	_, a := start(t, f.store, nil)
	_, b := start(t, f.store, func(c *gateway.Config) { c.CachePolicy = "lru"; c.CacheSize = 1 << 20 })
	for _, path := range []string{"/epoch/3/batch/2?seed=7", "/epoch/0/batch/0", "/epoch/1/batch/1?world=2&rank=1&window=1"} {
		ra, ba := get(t, a.URL+path)
		rb, bb := get(t, b.URL+path)
		if ra.StatusCode != 200 || !bytes.Equal(ba, bb) {
			t.Fatalf("%s: two gateways served different bytes", path)
		}
		if ra.Header.Get("ETag") == "" || ra.Header.Get("ETag") != rb.Header.Get("ETag") {
			t.Fatalf("%s: ETags %q and %q", path, ra.Header.Get("ETag"), rb.Header.Get("ETag"))
		}
		// Conditional request: no body, no chunk reads.
		rc, bc := get(t, a.URL+path, "If-None-Match", ra.Header.Get("ETag"))
		if rc.StatusCode != http.StatusNotModified || len(bc) != 0 {
			t.Fatalf("If-None-Match: status %d, %d bytes", rc.StatusCode, len(bc))
		}
	}
	// HEAD answers the same headers from the index alone.
	req, _ := http.NewRequest(http.MethodHead, a.URL+"/epoch/0/batch/1", nil)
	hresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	gresp, gbody := get(t, a.URL+"/epoch/0/batch/1")
	if hresp.StatusCode != 200 || hresp.ContentLength != int64(len(gbody)) || hresp.Header.Get("ETag") != gresp.Header.Get("ETag") {
		t.Fatalf("HEAD: status %d length %d etag %q; GET: %d bytes etag %q", hresp.StatusCode, hresp.ContentLength, hresp.Header.Get("ETag"), len(gbody), gresp.Header.Get("ETag"))
	}
	r1, _ := get(t, a.URL+"/epoch/0/batch/0?seed=1")
	r2, _ := get(t, a.URL+"/epoch/0/batch/0?seed=2")
	if r1.Header.Get("ETag") == r2.Header.Get("ETag") {
		t.Fatal("different seeds share an ETag")
	}
}

func TestManifestAndInfoEndpoints(t *testing.T) {
	f := newFixture(t, 3, 4)
	_, srv := start(t, f.store, nil)
	resp, body := get(t, srv.URL+"/epoch/0/batch/1?format=json")
	var m struct {
		Samples []struct {
			Key    string
			Chunk  string
			Length int64
		}
		Bytes int64
	}
	if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("manifest: %d %s", resp.StatusCode, body)
	}
	tresp, tarBody := get(t, srv.URL+"/epoch/0/batch/1")
	samples := readTar(t, tarBody)
	if len(m.Samples) != len(samples) || int64(len(tarBody)) != m.Bytes {
		t.Fatalf("manifest lists %d samples/%d bytes, batch holds %d/%d", len(m.Samples), m.Bytes, len(samples), len(tarBody))
	}
	// A batch's headers say what its tar holds (12 samples in batches of 8:
	// 4 in batch 1), and the epoch's batches.
	if h := tresp.Header; h.Get("Content-Type") != "application/x-tar" || h.Get("Content-Length") != strconv.Itoa(len(tarBody)) ||
		h.Get("Brand-Batch-Samples") != "4" || len(samples) != 4 || h.Get("Brand-Epoch-Batches") != "2" {
		t.Fatalf("batch headers %v for %d samples in %d bytes", h, len(samples), len(tarBody))
	}
	eresp, ebody := get(t, srv.URL+"/epoch/1?world=2&batch_size=5") // ceil(12/10)
	var info struct{ Batches, Samples int }
	if err := json.Unmarshal(ebody, &info); err != nil || eresp.StatusCode != 200 || info.Samples != 12 || info.Batches != 2 {
		t.Fatalf("/epoch/1: %d %s, want 12 samples in 2 batches", eresp.StatusCode, ebody)
	}
	for i := range samples {
		if m.Samples[i].Key != samples[i].key || !strings.HasPrefix(m.Samples[i].Chunk, "chunks/") {
			t.Fatalf("manifest sample %d = %+v, batch has %s", i, m.Samples[i], samples[i].key)
		}
	}
	_, body2 := get(t, srv.URL+"/epoch/0/batch/1/manifest")
	if !bytes.Equal(body, body2) {
		t.Fatal("/manifest and ?format=json differ")
	}
	resp, body = get(t, srv.URL+"/datasets")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"samples": 12`) || !strings.Contains(string(body), `"default": true`) {
		t.Fatalf("/datasets: %s", body)
	}
	resp, body = get(t, srv.URL+"/samples/class1/sample00004")
	got := readTar(t, body)
	if resp.StatusCode != 200 || len(got) != 1 || !bytes.Equal(got[0].files["jpg"], f.content["class1/sample00004"]["jpg"]) {
		t.Fatalf("/samples: %d, %d samples", resp.StatusCode, len(got))
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, body := get(t, srv.URL+p); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
	resp, body = get(t, srv.URL+"/metrics")
	for _, name := range []string{"brand_cache_hits_total", "brand_cache_misses_total", "brand_cache_evictions_total",
		"brand_served_bytes_total", "brand_backend_read_bytes_total", "brand_cache_bytes", "brand_http_requests_total",
		"brand_chunk_fetch_duration_seconds"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestStatsCachePolicy: /stats names the policy a gateway evicts by, and
// "schedule", next-use's old name, is still read as next-use.
func TestStatsCachePolicy(t *testing.T) {
	f := newFixture(t, 2, 3)
	for _, tc := range []struct{ set, want string }{
		{"", gateway.PolicyNextUse}, {"schedule", gateway.PolicyNextUse}, {gateway.PolicyLRU, gateway.PolicyLRU},
	} {
		_, srv := start(t, f.store, func(c *gateway.Config) { c.CachePolicy = tc.set })
		_, body := get(t, srv.URL+"/stats")
		var st struct {
			CachePolicy string `json:"cache_policy"`
		}
		if err := json.Unmarshal(body, &st); err != nil || st.CachePolicy != tc.want {
			t.Errorf("CachePolicy %q: /stats cache_policy %q (%v), want %q", tc.set, st.CachePolicy, err, tc.want)
		}
	}
}
