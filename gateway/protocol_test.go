package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// TestMethods checks that only GET and HEAD are served, on /metrics too,
// and that every 405 says so in an Allow header.
func TestMethods(t *testing.T) {
	f := newFixture(t, 2, 4)
	g, _ := start(t, f.store, nil)
	tests := []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/metrics", 200},
		{http.MethodHead, "/metrics", 200},
		{http.MethodPost, "/metrics", 405},
		{http.MethodPut, "/metrics", 405},
		{http.MethodDelete, "/metrics", 405},
		{http.MethodPatch, "/metrics", 405},
		{"PROPFIND", "/metrics", 405},
		{http.MethodHead, "/epoch/0/batch/0", 200},
		{http.MethodPost, "/epoch/0/batch/0", 405},
		{http.MethodPut, "/samples/class0/sample00000", 405},
		{http.MethodDelete, "/datasets", 405},
		{http.MethodOptions, "/readyz", 405},
		{http.MethodPut, "/plan", 405},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			allow := w.Header().Get("Allow")
			if tt.status == 405 {
				want := "GET, HEAD"
				if tt.path == "/plan" {
					want = "GET, HEAD, POST" // one job, several jobs
				}
				if allow != want {
					t.Fatalf("405 with Allow %q, want %q", allow, want)
				}
				var e struct{ Status int }
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Status != 405 {
					t.Fatalf("405 body %q is not a JSON error with status 405", w.Body)
				}
			}
		})
	}
}

// TestHeadSampleReadsNothing checks that HEAD /samples/{key} answers from
// the index, with the length GET serves, without reading the chunk.
func TestHeadSampleReadsNothing(t *testing.T) {
	f := newFixture(t, 2, 4)
	cs := s3test.Wrap(f.store)
	_, srv := start(t, cs, func(c *gateway.Config) { c.PrefetchConcurrency = -1 })
	url := srv.URL + "/samples/class1/sample00001"
	resp, err := http.Head(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if reads := cs.Total().Under("chunks/").Sum().Reads; reads != 0 || resp.StatusCode != 200 {
		t.Fatalf("HEAD: status %d after %d chunk reads, want 200 after none", resp.StatusCode, reads)
	}
	gresp, body := get(t, url)
	if gresp.StatusCode != 200 || resp.ContentLength != int64(len(body)) || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("HEAD: length %d type %q; GET: %d, %d bytes", resp.ContentLength, resp.Header.Get("Content-Type"), gresp.StatusCode, len(body))
	}
	resp, err = http.Head(srv.URL + "/samples/no/such/key")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("HEAD of an unknown sample: %d, want 404", resp.StatusCode)
	}
}

// hookWriter is a log destination that keeps every line and calls hook,
// outside its lock, on the first line containing trigger.
type hookWriter struct {
	trigger string
	hook    func()

	mu    sync.Mutex
	lines bytes.Buffer
	fired bool
}

func (w *hookWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.lines.Write(p)
	fire := !w.fired && w.trigger != "" && bytes.Contains(p, []byte(w.trigger))
	w.fired = w.fired || fire
	w.mu.Unlock()
	if fire {
		w.hook()
	}
	return len(p), nil
}

func (w *hookWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines.String()
}

// TestNotReadyUntilLoaded: before Load every request but /healthz is a
// 503 with Retry-After saying what the gateway is doing — reading the
// indexes, then allocating the cache — and served once loaded. So is a
// node of a cluster asked which of some chunks it holds (a peer's
// hand-back, as it hears from the node starting), which the asker takes
// for a node starting; it answered 400, a body too large for a question
// bounded by no dataset yet, which the asker took for a refusal (seen in
// a soak round's logs: "request body too large: this endpoint takes no
// request body").
func TestNotReadyUntilLoaded(t *testing.T) {
	f := newFixture(t, 2, 4)
	type request struct {
		method, path string
		body         []byte
	}
	needed := request{http.MethodPost, transport.NeededPath + "?dataset=d&index=" + f.index.ID() + "&held=true", gatewaytest.SampleList([]int{0, 1})}
	for _, tc := range []struct {
		name     string
		cluster  gateway.ClusterConfig
		requests []request // each 503 before Load; the first served after
	}{
		{"a gateway", gateway.ClusterConfig{}, []request{{"GET", "/readyz", nil}, {"GET", "/epoch/0/batch/0", nil}, {"GET", "/datasets", nil}}},
		{"a node of a cluster", gateway.ClusterConfig{Peers: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"},
			ProbeInterval: time.Hour, PeerTimeout: time.Second}, []request{needed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g *gateway.Gateway
			serve := func(r request) *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				g.ServeHTTP(w, httptest.NewRequest(r.method, r.path, bytes.NewReader(r.body)))
				return w
			}
			// Load logs that it starts allocating: ask /readyz at that moment.
			var during *httptest.ResponseRecorder
			logs := &hookWriter{trigger: "allocating chunk cache memory", hook: func() { during = serve(request{"GET", "/readyz", nil}) }}
			g, err := gateway.New(gateway.Config{Datasets: []gateway.DatasetSpec{{Name: "d", Store: f.store}}, CacheSize: 8 << 20,
				Cluster: tc.cluster, Logger: zerolog.New(logs).Level(zerolog.InfoLevel)})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			for _, r := range tc.requests {
				if w := serve(r); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" ||
					!strings.Contains(w.Body.String(), "not ready: dataset indexes are still loading") {
					t.Fatalf("%s %s before Load: %d (Retry-After %q) %s; want 503 with Retry-After, saying why", r.method, r.path, w.Code, w.Header().Get("Retry-After"), w.Body)
				}
			}
			if err := g.Load(context.Background()); err != nil {
				t.Fatal(err)
			}
			if during == nil || during.Code != 503 || !strings.Contains(during.Body.String(), "not ready: allocating the chunk cache's memory (up to 8.0 MiB)") {
				t.Fatalf("during preallocation: %v\nlogs:\n%s", during, logs)
			}
			if w := serve(tc.requests[0]); w.Code != http.StatusOK {
				t.Fatalf("%s %s after Load: %d %s", tc.requests[0].method, tc.requests[0].path, w.Code, w.Body)
			}
		})
	}
}

// TestAccessLog checks that a request's log line carries a bounded prefix
// of its path with the full length, and its duration in milliseconds.
func TestAccessLog(t *testing.T) {
	f := newFixture(t, 1, 2)
	logs := &hookWriter{}
	g, _ := start(t, f.store, func(c *gateway.Config) { c.Logger = zerolog.New(logs) })
	long := "/epoch/0/batch/0?seed=" + strings.Repeat("9", 700<<10)
	for _, path := range []string{"/epoch/0/batch/0?seed=1", long} {
		g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	var got []map[string]any
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %.200s", line)
		}
		if m["message"] == "request" {
			if len(line) > 2<<10 {
				t.Errorf("log line of %d bytes", len(line))
			}
			got = append(got, m)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d request lines, want 2:\n%.2000s", len(got), logs)
	}
	if got[0]["path"] != "/epoch/0/batch/0?seed=1" || got[0]["path_bytes"] != nil {
		t.Errorf("short path logged as %v (path_bytes %v)", got[0]["path"], got[0]["path_bytes"])
	}
	if p, _ := got[1]["path"].(string); !strings.HasPrefix(long, strings.TrimSuffix(p, "…")) || len(p) > 1100 || got[1]["path_bytes"] != float64(len(long)) {
		t.Errorf("long path logged as %d bytes with path_bytes %v, want a prefix and %d", len(p), got[1]["path_bytes"], len(long))
	}
	for _, m := range got {
		if _, ok := m["duration_ms"].(float64); !ok || m["duration"] != nil {
			t.Errorf("request line without a duration_ms number: %v", m)
		}
	}
}
