package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
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

// GET /plan of a dataset served in place predicts what the gateway then
// reads from the store, exactly: each epoch's backend bytes under the
// optimal policy the schedule follows are the epoch's /stats backend
// bytes, and those are the bytes the store served — chunks' store
// extents, not the decoded chunks the cache holds, which are far larger
// here (a line of 20-odd bytes becomes tar members of a KiB or two).
// With columns= the plan is of the view the job reads (internal/job/plans's
// TestPlanInPlace): the same store extents, smaller chunks in the cache;
// /stats's optimum weighs them so too.
//
// Two caches: one that holds the dataset read whole, and one that holds
// the view of one field but not the dataset with both, where the whole
// dataset's later epochs load chunks again (the plan counts room in
// decoded bytes) and the views' do not. Where every chunk a job reads
// fits, or in a first epoch, which loads each chunk once, the figures
// depend on no eviction choice and are compared exactly; the later epochs
// of the dataset in the smaller cache depend on the live policy's
// choices, which follow the optimum's only approximately (as for tar:
// TestPlanPredictsSmallCacheBytes).
func TestPlanPredictsInPlaceStoreBytes(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	// The dataset's bytes in the cache, whole and of txt alone, and in the
	// store, as the plan has them (internal/job/plans's TestPlanInPlace: the
	// decoder's extents and resident bounds).
	sizes := startInPlace(t, st, formattest.Lines{})
	whole, txt := planOf(t, sizes.URL, ""), planOf(t, sizes.URL, "columns=txt")
	resident, stored, txtResident := whole.DatasetBytes, whole.DatasetStoreBytes, txt.DatasetBytes
	if stored*10 > txtResident || txtResident*3/2 > resident {
		t.Fatalf("the fixture's sizes: %d bytes resident, %d with txt alone, %d stored", resident, txtResident, stored)
	}
	defaults := gateway.Defaults{BatchSize: 8, Window: 3, Seed: 5}
	for _, cache := range []int64{resident, txtResident + txtResident/8} {
		for _, columns := range []string{"", "txt", "len", "txt,len"} {
			t.Run(fmt.Sprintf("cache=%d/columns=%s", cache, columns), func(t *testing.T) {
				counted := s3test.Wrap(st)
				g, srv := start(t, counted, func(c *gateway.Config) {
					c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
					c.CacheSize = cache
					c.Defaults = defaults
					c.PrefetchConcurrency = -1 // the plan's figures are demand reads
				})
				q := ""
				if columns != "" {
					q = "columns=" + columns
				}
				plan := planOf(t, srv.URL, fmt.Sprintf("cache_size=%d&epochs=3&%s", cache, q))
				viewResident := plan.DatasetBytes
				batches := (plan.Samples + defaults.BatchSize - 1) / defaults.BatchSize
				for e := range 3 {
					for m := range batches {
						if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", srv.URL, e, m, q)); resp.StatusCode != 200 {
							t.Fatalf("epoch %d batch %d: %d %s", e, m, resp.StatusCode, body)
						}
					}
				}
				live := map[uint64]int64{}
				for e, s := range epochStats(t, g, 3) {
					live[e] = s.BackendBytes
					// The live optimum weighs the chunks the job reads by
					// their bytes in the cache, as the plan does.
					if *s.Optimal != plan.Optimal.Epochs[e].HitRatio {
						t.Errorf("epoch %d: live optimal hit ratio %v, the plan's %v", e, *s.Optimal, plan.Optimal.Epochs[e].HitRatio)
					}
				}
				fits := viewResident <= cache
				var total int64
				for e := range 3 {
					got, predicted := live[uint64(e)], plan.Optimal.Epochs[e].BackendBytes
					t.Logf("epoch %d: the gateway read %d bytes from the store, the plan predicts %d", e, got, predicted)
					switch {
					case (fits || e == 0) && got != predicted:
						t.Errorf("epoch %d: /stats says %d bytes from the store, the plan %d", e, got, predicted)
					case e == 0 && got != stored:
						t.Errorf("epoch 0 read %d bytes from the store, want the dataset's %d", got, stored)
					case !fits && (got == 0 || predicted == 0):
						t.Errorf("epoch %d: %d bytes read, %d predicted; want chunks loaded again (%d resident bytes, a cache of %d)", e, got, predicted, viewResident, cache)
					}
					total += got
				}
				var n int64 // the bytes of the data objects (*.lines) read
				for k, c := range counted.Total() {
					if strings.HasSuffix(k, ".lines") {
						n += c.Bytes
					}
				}
				if n != total {
					t.Errorf("the store served %d bytes, /stats counts %d", n, total)
				}
			})
		}
	}
}

// planOf is GET /plan?query's plan.
func planOf(t *testing.T, base, query string) *planner.Plan {
	t.Helper()
	resp, body := get(t, base+"/plan?"+query)
	var p planner.Plan
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("/plan?%s: %d %s", query, resp.StatusCode, body)
	}
	return &p
}

// epochStats waits until g has computed the optimal hit ratio of
// wantOptimal epochs and returns its figures by epoch.
func epochStats(t *testing.T, g *gateway.Gateway, wantOptimal int) map[uint64]api.EpochStat {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := map[uint64]api.EpochStat{}
		n := 0
		for _, s := range g.EpochStats() {
			out[s.Epoch] = s
			if s.Optimal != nil {
				n++
			}
		}
		if n >= wantOptimal {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("optimal hit ratio computed for %d epochs, want %d: %+v", n, wantOptimal, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
