package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// The /plan endpoint's HTTP contract: GET and POST answer a plan as JSON
// (200), the plan of this gateway's dataset with its defaults — its cache,
// its disk tier — and a request it cannot plan as an api.Error with the
// status internal/server/httperr gives (400 the client's, 404 a dataset not
// served, 409 an index not held, 501 no planner). What a plan holds for
// each parameter is internal/job/plans's tests.
func TestPlanHTTP(t *testing.T) {
	f := newFixture(t, 24, 10)
	disk := f.index.TotalBytes() / 2
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{t.TempDir()}, Size: disk}
	})
	_, none := start(t, f.store, func(c *gateway.Config) { c.Planner = nil })
	cache := f.index.TotalBytes() / 4
	// start's defaults: seed 42, window 2, batch size 8; world 1.
	want, err := planner.MakePlan(context.Background(), planner.PlanInput{Dataset: planner.WithGETs(planner.DatasetOf(f.index), f.store.Requests),
		Job: planner.Job{Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: 8, World: 1}, Epochs: 3}, CacheBytes: cache, DiskCacheBytes: disk,
		BackendBytesPerSec: 1 << 30, PrefetchWindows: gateway.DefaultPrefetchWindows})
	if err != nil {
		t.Fatal(err)
	}
	resp, b := get(t, fmt.Sprintf("%s/plan?cache_size=%d", srv.URL, cache))
	var got planner.Plan
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &got) != nil {
		t.Fatalf("GET /plan: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("GET /plan answered\n%+v\nwant the plan with the gateway's disk\n%+v", got, *want)
	}
	resp, b = do(t, http.MethodPost, srv.URL+"/plan", []byte(`{"jobs": [{}]}`), "Content-Type", "application/json")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"lru_reads_per_job_epoch"`) {
		t.Errorf("POST /plan: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}

	for _, tt := range []struct {
		method, url, body string
		status            int
		want              string
	}{
		{"GET", srv.URL + "/plan?disk_cache_size=-1", "", 400, `disk_cache_size must be a size of at least 0`},
		{"GET", srv.URL + "/plan?dataset=books", "", 404, `"books"`},
		{"GET", srv.URL + "/plan?index=0123456789abcdef", "", 409, "0123456789abcdef"},
		{"GET", none.URL + "/plan", "", 501, "without a planner"},
		{"POST", srv.URL + "/plan", `{"jobs": [{"epochs": 1}]}`, 400, "epochs must be between 2 and 20"},
		{"POST", srv.URL + "/plan", `{"jobs": [{}], "dataset": "` + strings.Repeat("d", api.MaxSharedPlanBodyBytes) + `"}`, 400, "over 65536 bytes"},
		{"POST", srv.URL + "/plan", `{"dataset": "nope", "jobs": [{}]}`, 404, "nope"},
		{"POST", srv.URL + "/plan", `{"index": "0123456789abcdef", "jobs": [{}]}`, 409, "0123456789abcdef"},
		{"POST", none.URL + "/plan", `{"jobs": [{}]}`, 501, "without a planner"},
	} {
		t.Run(tt.method+" "+strings.TrimPrefix(strings.TrimPrefix(tt.url, srv.URL), none.URL), func(t *testing.T) {
			resp, b := do(t, tt.method, tt.url, []byte(tt.body))
			var e api.Error
			if resp.StatusCode != tt.status || json.Unmarshal(b, &e) != nil || e.Status != tt.status {
				t.Fatalf("status %d, want %d: %.300s", resp.StatusCode, tt.status, b)
			}
			if !strings.Contains(e.Error, tt.want) {
				t.Errorf("error %q; want it to say %q", e.Error, tt.want)
			}
		})
	}
}

// GET /plan?nodes_after=N on a node of a cluster plans the resize from the
// membership the cluster agrees on (internal/job/plans's TestPlan has the
// figures for a given membership).
func TestPlanResizeFromTheAgreedMembers(t *testing.T) {
	f := newFixture(t, 24, 10)
	cl := startCluster(t, f, 2, nil, nil)
	ms := membershipOf(t, cl)
	waitMembers(t, cl, ms.Version())
	want, err := planner.MakeResizePlan(planner.ResizeInput{Dataset: planner.DatasetOf(f.index), IndexKey: cluster.IndexKey(f.index.ID()),
		Job:  planner.Job{Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: 8, World: 1}, FirstEpoch: 1, Epochs: 1},
		From: ms, To: planner.ResizedMembers(ms, 3), PrefetchWindows: 1, NodeCacheBytes: 64 << 20,
		StoreBytesPerSec: 1 << 30, PeerBytesPerSec: planner.DefaultPeerBytesPerSec})
	if err != nil {
		t.Fatal(err)
	}
	resp, b := get(t, cl[0].srv.URL+"/plan?nodes_after=3&first_epoch=1")
	var got planner.ResizePlan
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil {
		t.Fatalf("%s: %s", resp.Status, b)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("/plan?nodes_after=3:\n got %+v\nwant %+v", got, *want)
	}
}
