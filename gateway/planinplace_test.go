package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// GET /plan of a dataset served in place predicts what the gateway then
// reads from the store, exactly: each epoch's backend bytes under the
// optimal policy the schedule follows are the epoch's /stats backend
// bytes, and those are the bytes the store served — chunks' store
// extents, not the decoded chunks the cache holds, which are far larger
// here (a line of 20-odd bytes becomes tar members of a KiB or two).
// With columns= the plan is of the view the job reads: the same store
// extents (a .lines chunk is read whole whatever the fields), smaller
// chunks in the cache; /stats's optimum weighs them so too.
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
func TestPlanInPlacePredictsStoreBytes(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	ctx := context.Background()
	ix, err := dataset.ReadIndex(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := dataset.ReadFormat(ctx, st, ix)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := formattest.Lines{}.Open(meta)
	if err != nil {
		t.Fatal(err)
	}
	size := func(d planner.Dataset) (resident, stored int64) {
		for c := range d.ChunkSizes {
			resident += d.ChunkSizes[c]
			stored += d.StoreSizes[c]
		}
		return resident, stored
	}
	resident, stored := size(planner.DatasetInPlace(ix, dec, nil))
	txtResident, _ := size(planner.DatasetInPlace(ix, dec, format.Selection{0}))
	if stored*10 > txtResident || txtResident*3/2 > resident {
		t.Fatalf("the fixture's sizes: %d bytes resident, %d with txt alone, %d stored", resident, txtResident, stored)
	}
	defaults := gateway.Defaults{BatchSize: 8, Window: 3, Seed: 5}
	job := planner.Job{Params: shuffle.Params{Seed: 5, Window: 3, BatchSize: 8, World: 1}, Epochs: 3}
	for _, cache := range []int64{resident, txtResident + txtResident/8} {
		for _, tt := range []struct {
			columns string
			sel     format.Selection
		}{{"", nil}, {"txt", format.Selection{0}}, {"len", format.Selection{1}}, {"txt,len", nil}} {
			t.Run(fmt.Sprintf("cache=%d/columns=%s", cache, tt.columns), func(t *testing.T) {
				counted := &readCounter{Store: st}
				g, srv := start(t, counted, func(c *gateway.Config) {
					c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
					c.CacheSize = cache
					c.Defaults = defaults
					c.PrefetchConcurrency = -1 // the plan's figures are demand reads
				})
				q := ""
				if tt.columns != "" {
					q = "columns=" + tt.columns
				}
				resp, body := get(t, fmt.Sprintf("%s/plan?cache_size=%d&epochs=3&%s", srv.URL, cache, q))
				if resp.StatusCode != 200 {
					t.Fatalf("/plan: %d %s", resp.StatusCode, body)
				}
				var plan planner.Plan
				if err := json.Unmarshal(body, &plan); err != nil {
					t.Fatal(err)
				}
				d := planner.DatasetInPlace(ix, dec, tt.sel)
				want, err := planner.MakePlan(ctx, planner.PlanInput{Dataset: d, Job: job, CacheBytes: cache, BackendBytesPerSec: 1 << 30,
					PrefetchWindows: gateway.DefaultPrefetchWindows})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(&plan, want) {
					t.Errorf("GET /plan answered\n%+v\nwant the plan of the data the job reads\n%+v", plan, *want)
				}
				viewResident, _ := size(d)
				if plan.DatasetStoreBytes != stored || plan.DatasetBytes != viewResident {
					t.Errorf("the plan's dataset: %d bytes resident, %d in the store; want %d and %d", plan.DatasetBytes, plan.DatasetStoreBytes, viewResident, stored)
				}

				batches := (ix.NumSamples() + defaults.BatchSize - 1) / defaults.BatchSize
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
				if n := counted.bytes.Load(); n != total {
					t.Errorf("the store served %d bytes, /stats counts %d", n, total)
				}
			})
		}
	}
}

// GET /plan refuses columns= as a job's batches do: a field the dataset
// does not have, or any field of a tar dataset.
func TestPlanColumnsRefused(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	srv := startInPlace(t, st, formattest.Lines{})
	tar := newFixture(t, 2, 4)
	_, tsrv := start(t, tar.store, nil)
	for _, u := range []string{srv.URL + "/plan?columns=nope", srv.URL + "/plan?columns=txt,,len", tsrv.URL + "/plan?columns=jpg",
		tsrv.URL + "/plan?columns=jpg&nodes=2", srv.URL + "/plan?columns=nope&nodes_after=2"} {
		if resp, body := get(t, u); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", u, resp.StatusCode, body)
		}
	}
	if resp, body := get(t, srv.URL+"/plan?columns=len&nodes_after=2"); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "moved_chunks") {
		t.Errorf("a resize plan of a view: %d %s", resp.StatusCode, body)
	}
}
