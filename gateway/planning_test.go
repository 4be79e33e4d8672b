package gateway_test

import (
	"bytes"
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

// GET /plan?disk_cache_size=D adds a disk tier of D bytes below the cache
// to the plan (each node's with nodes=N): the plan MakePlan makes with
// that disk. Without the parameter, or with 0, the plan has no disk
// figures; a size that does not parse, a negative one included, is the
// client's error.
func TestPlanDiskCacheSize(t *testing.T) {
	f := newFixture(t, 24, 10)
	_, srv := start(t, f.store, nil)
	cache, disk := f.index.TotalBytes()/4, f.index.TotalBytes()/2
	// start's defaults: seed 42, window 2, batch size 8; world 1.
	job := planner.Job{Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: 8, World: 1}, Epochs: 3}
	in := planner.PlanInput{Dataset: planner.DatasetOf(f.index), Job: job, CacheBytes: cache, BackendBytesPerSec: 1 << 30}

	withDisk := in
	withDisk.DiskCacheBytes = disk
	want, err := planner.MakePlan(context.Background(), withDisk)
	if err != nil {
		t.Fatal(err)
	}
	resp, b := get(t, fmt.Sprintf("%s/plan?cache_size=%d&disk_cache_size=%d", srv.URL, cache, disk))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /plan: %d %s", resp.StatusCode, b)
	}
	var got planner.Plan
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("GET /plan with a disk answered\n%+v\nwant\n%+v", got, *want)
	}
	if got.Disk == nil || got.Disk.DiskCacheBytes != disk || got.Disk.Optimal.DiskBytes == 0 {
		t.Errorf("disk section %+v", got.Disk)
	}

	// No disk: no disk figures, the plan as before.
	alone, err := planner.MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "&disk_cache_size=", "&disk_cache_size=0"} {
		resp, b := get(t, fmt.Sprintf("%s/plan?cache_size=%d%s", srv.URL, cache, q))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /plan%s: %d %s", q, resp.StatusCode, b)
		}
		var got planner.Plan
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(`"disk`)) || !reflect.DeepEqual(&got, alone) {
			t.Errorf("GET /plan?cache_size=%d%s: want the plan without a disk, got %s", cache, q, b)
		}
	}

	// A cluster: each node's disk.
	resp, b = get(t, fmt.Sprintf("%s/plan?nodes=2&world=2&cache_size=%d&disk_cache_size=%d", srv.URL, cache/2, disk))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /plan?nodes=2: %d %s", resp.StatusCode, b)
	}
	var cp planner.ClusterPlan
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.NodeDiskCacheBytes != disk {
		t.Errorf("cluster plan's node disk %d, want %d", cp.NodeDiskCacheBytes, disk)
	}

	for _, tt := range []struct{ value, want string }{
		{"-1", `disk_cache_size must be a size of at least 0 such as 100GiB (0: no disk tier), got "-1"`},
		{"-1GiB", `got "-1GiB"`},
		{"lots", `got "lots"`},
		{"1e9", `got "1e9"`},
		{"8EiB", `got "8EiB"`},
	} {
		t.Run(tt.value, func(t *testing.T) {
			resp, b := get(t, srv.URL+"/plan?disk_cache_size="+tt.value)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
			}
			var e api.Error
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(e.Error, tt.want) {
				t.Errorf("error %q; want it to say %q", e.Error, tt.want)
			}
		})
	}
}

// A gateway with a disk tier plans for its own disk unless told another
// size (0: none), as it plans for its own cache size.
func TestPlanDefaultsToTheGatewaysDisk(t *testing.T) {
	f := newFixture(t, 24, 10)
	disk := f.index.TotalBytes() / 2
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{t.TempDir()}, Size: disk}
	})
	for q, want := range map[string]int64{"": disk, "&disk_cache_size=0": 0, "&disk_cache_size=1000": 1000} {
		resp, b := get(t, fmt.Sprintf("%s/plan?cache_size=%d%s", srv.URL, f.index.TotalBytes()/4, q))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /plan%s: %d %s", q, resp.StatusCode, b)
		}
		var got planner.Plan
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if (got.Disk == nil) != (want == 0) || got.Disk != nil && got.Disk.DiskCacheBytes != want {
			t.Errorf("GET /plan%s: disk section %+v, want a disk of %d bytes", q, got.Disk, want)
		}
	}
}

// GET /plan?mix=… plans the mixture of the datasets it names, each the
// version the gateway serves: the plan MakePlan makes of them (the
// weights' ratios, the block batch_size × world unless mix_block says
// otherwise, mix_samples the epoch's length), and with nodes=N the
// cluster's prediction, each component owned by its own index's key. A
// mixture that names a dataset the gateway does not serve, or does not
// parse, is refused.
func TestPlanMix(t *testing.T) {
	web := newFixtureNamed(t, t.TempDir(), "web-", 12, 25, 0)
	code := newFixtureNamed(t, t.TempDir(), "code-", 6, 20, 0)
	_, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{
			{Name: "web", URL: "file:///web", Store: web.store},
			{Name: "code", URL: "file:///code", Store: code.store},
		}
	})
	cache := (web.index.TotalBytes() + code.index.TotalBytes()) / 4
	// start's defaults: seed 42, window 2, batch size 8; world 1.
	job := planner.Job{Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: 8, World: 1}, Epochs: 3}
	mix := func(block, samples int) *planner.Mix {
		return &planner.Mix{Block: block, Samples: samples, Components: []planner.MixComponent{
			{Name: "web", Weight: 7, Dataset: planner.DatasetOf(web.index), IndexKey: cluster.IndexKey(web.index.ID())},
			{Name: "code", Weight: 3, Dataset: planner.DatasetOf(code.index), IndexKey: cluster.IndexKey(code.index.ID())},
		}}
	}
	plan := func(m *planner.Mix) any {
		p, err := planner.MakePlan(context.Background(), planner.PlanInput{Mix: m, Job: job, CacheBytes: cache, BackendBytesPerSec: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	clusterJob := job
	clusterJob.World = 2
	clustered, err := planner.MakeClusterPlan(context.Background(), planner.ClusterInput{Mix: mix(0, 0), Job: clusterJob, Nodes: 2, NodeCacheBytes: cache / 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		query string
		want  any
	}{
		{fmt.Sprintf("mix=web:0.7,code:0.3&cache_size=%d", cache), plan(mix(0, 0))},
		{fmt.Sprintf("mix=web:0.7,code:0.3&cache_size=%d&mix_block=5&mix_samples=300", cache), plan(mix(5, 300))},
		{fmt.Sprintf("mix=web:0.7,code:0.3&cache_size=%d&nodes=2&world=2", cache/2), clustered},
	} {
		t.Run(tt.query, func(t *testing.T) {
			resp, b := get(t, srv.URL+"/plan?"+tt.query)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /plan: %d %s", resp.StatusCode, b)
			}
			got := reflect.New(reflect.TypeOf(tt.want).Elem()).Interface()
			if err := json.Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GET /plan?%s answered\n%+v\nwant\n%+v", tt.query, got, tt.want)
			}
			var shape struct {
				Mix *planner.MixPlan `json:"mix"`
			}
			if err := json.Unmarshal(b, &shape); err != nil || shape.Mix == nil || len(shape.Mix.Components) != 2 {
				t.Errorf("no mixture in the plan (%v): %s", err, b)
			}
		})
	}

	for _, tt := range []struct {
		query, want string
		status      int
	}{
		{"mix=web:0.7,books:0.3", `"books"`, http.StatusNotFound},
		{"mix=web", "each component is dataset:weight", http.StatusBadRequest},
		{"mix=web:1&dataset=web", "give mix= or dataset=, not both", http.StatusBadRequest},
		{"mix_block=4", "mix_block and mix_samples apply only with mix=", http.StatusBadRequest},
		{"mix=web:1,code:1&epochs=1", "epochs", http.StatusBadRequest},
	} {
		t.Run(tt.query, func(t *testing.T) {
			resp, b := get(t, srv.URL+"/plan?"+tt.query)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			var e api.Error
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(e.Error, tt.want) {
				t.Errorf("error %q; want it to say %q", e.Error, tt.want)
			}
		})
	}
}

// TestPlanResize: GET /plan?nodes_after=N is the cost of resizing to N
// nodes: on a node of a cluster from the membership the cluster agrees
// on, on a single gateway from nodes= planned ones; the figures are
// MakeResizePlan's (worked out by hand in planner's tests).
func TestPlanResize(t *testing.T) {
	f := newFixture(t, 24, 10)
	cl := startCluster(t, f, 2, nil, nil)
	ms := membershipOf(t, cl)
	waitMembers(t, cl, ms.Version())
	_, single := start(t, f.store, nil)
	job := planner.Job{Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: 8, World: 1}, FirstEpoch: 1, Epochs: 1}
	for _, tc := range []struct {
		name, base string
		from       *cluster.Membership
	}{{"a node of a cluster", cl[0].srv.URL, ms}, {"a single gateway", single.URL, planner.PlannedMembers(2)}} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := planner.MakeResizePlan(planner.ResizeInput{Dataset: planner.DatasetOf(f.index), IndexKey: cluster.IndexKey(f.index.ID()),
				Job: job, From: tc.from, To: planner.ResizedMembers(tc.from, 3), Ahead: 1, NodeCacheBytes: 64 << 20,
				StoreBytesPerSec: 1 << 30, PeerBytesPerSec: planner.DefaultPeerBytesPerSec})
			if err != nil {
				t.Fatal(err)
			}
			resp, b := get(t, tc.base+"/plan?nodes=2&nodes_after=3&first_epoch=1")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %s", resp.Status, b)
			}
			var got planner.ResizePlan
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&got, want) {
				t.Errorf("/plan?nodes_after=3:\n got %+v\nwant %+v", got, *want)
			}
			// Warm caches that hold the dataset: every moved chunk comes
			// from a peer (which of them the job needs next depends on how
			// the loopback URLs hash).
			if !got.Held || got.MovedChunks == 0 || got.PeerBytes != got.MovedBytes || got.StoreBytes != 0 || got.WarmSeconds <= 0 {
				t.Errorf("a resize of a warm 2-node cluster to 3: %+v", got)
			}
		})
	}
	if resp, b := get(t, single.URL+"/plan?nodes_after=0"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("nodes_after=0: %s: %s", resp.Status, b)
	}
}

// TestPlanResizeOfOneDatasetOnly: nodes_after plans the resize of a job
// of one dataset and the uniform shuffle; with mix= or importance
// sampling it is 400, as docs/http-api.md says. The reproduction:
// /plan?nodes_after=2&mix=… answered 200 with an ordinary mixture plan.
func TestPlanResizeOfOneDatasetOnly(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	defer srv.close()
	for _, q := range []string{"nodes_after=2&mix=web:1,code:1", "mix=web:1,code:1&nodes_after=3&nodes=2",
		"dataset=web&nodes_after=2&sampling=importance&job=j"} {
		resp, b := get(t, srv.url+"/plan?"+q)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "nodes_after") {
			t.Errorf("/plan?%s: %s: %.200s; want 400 naming nodes_after", q, resp.Status, b)
		}
	}
	if resp, b := get(t, srv.url+"/plan?dataset=web&nodes_after=2"); resp.StatusCode != http.StatusOK {
		t.Errorf("a resize of one dataset: %s: %.200s", resp.Status, b)
	}
}
