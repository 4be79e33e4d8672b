package plans_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// stagesPlan wires a node's stages over the dataset served in place on
// st (the gateway's planner computing /stats's optima) and the maker of
// /plan's answers over their resolver, with the gateway's plan defaults
// for a cache of cache bytes (no disk tier, prefetch of one window).
func stagesPlan(t *testing.T, st s3backend.Store, cache int64, defaults query.Defaults) (*stagetest.Stages, *plans.Maker) {
	t.Helper()
	s := stagetest.New(t, stagetest.Config{Datasets: []stagetest.Spec{{Name: "test", URL: "file:///test", Store: st,
		Formats: []format.Format{formattest.Lines{}}}}, CacheSize: cache, Defaults: defaults, Optimum: planner.ForGateway{}})
	m := plans.New(plans.Config{Planner: planner.ForGateway{}, Jobs: s.Jobs, Epochs: s.Jobs.Orders(),
		Defaults: s.Jobs.Defaults(), Limits: s.Jobs.Limits(),
		Options: api.PlanOptions{CacheBytes: cache, Epochs: plans.DefaultEpochs, BackendBytesPerSec: 1 << 30, PrefetchWindows: 1}})
	return s, m
}

// planOf is /plan?raw's plan of a single dataset.
func planOf(t *testing.T, m *plans.Maker, raw string) *planner.Plan {
	t.Helper()
	p, err := m.Plan(context.Background(), raw)
	if err != nil {
		t.Fatalf("/plan?%s: %v", raw, err)
	}
	plan, ok := p.(*planner.Plan)
	if !ok {
		t.Fatalf("/plan?%s: a %T", raw, p)
	}
	return plan
}

// TestPlanPredictsInPlaceStoreBytes: the plan of a dataset served in
// place predicts what a node's stages then read from the store, exactly:
// each epoch's backend bytes under the optimal policy the use table
// follows are the epoch's /stats backend bytes, and those are the bytes
// the store served — chunks' store extents, not the decoded chunks the
// cache holds, which are far larger here (a line of 20-odd bytes becomes
// tar members of a KiB or two). With columns= the plan is of the view
// the job reads (TestPlanInPlace): the same store extents, smaller
// chunks in the cache; /stats's optimum weighs them so too.
//
// Two caches: one that holds the dataset read whole, and one that holds
// the view of one field but not the dataset with both, where the whole
// dataset's later epochs load chunks again (the plan counts room in
// decoded bytes) and the views' do not. Where every chunk a job reads
// fits, or in a first epoch, which loads each chunk once, the figures
// depend on no eviction choice and are compared exactly; the later epochs
// of the dataset in the smaller cache depend on the live policy's
// choices, which follow the optimum's only approximately.
func TestPlanPredictsInPlaceStoreBytes(t *testing.T) {
	st, _ := inPlaceStore(t)
	// The dataset's bytes in the cache, whole and of txt alone, and in the
	// store, as the plan has them (TestPlanInPlace: the decoder's extents
	// and resident bounds).
	_, sizes := stagesPlan(t, st, 64<<20, query.Defaults{})
	whole, txt := planOf(t, sizes, ""), planOf(t, sizes, "columns=txt")
	resident, stored, txtResident := whole.DatasetBytes, whole.DatasetStoreBytes, txt.DatasetBytes
	if stored*10 > txtResident || txtResident*3/2 > resident {
		t.Fatalf("the fixture's sizes: %d bytes resident, %d with txt alone, %d stored", resident, txtResident, stored)
	}
	defaults := query.Defaults{BatchSize: 8, Window: 3, Seed: 5}
	for _, cache := range []int64{resident, txtResident + txtResident/8} {
		for _, columns := range []string{"", "txt", "len", "txt,len"} {
			t.Run(fmt.Sprintf("cache=%d/columns=%s", cache, columns), func(t *testing.T) {
				counted := s3test.Wrap(st)
				s, m := stagesPlan(t, counted, cache, defaults)
				q := ""
				if columns != "" {
					q = "columns=" + columns
				}
				plan := planOf(t, m, fmt.Sprintf("cache_size=%d&epochs=3&%s", cache, q))
				viewResident := plan.DatasetBytes
				batches := (plan.Samples + defaults.BatchSize - 1) / defaults.BatchSize
				for e := range uint64(3) {
					for b := range uint64(batches) {
						if _, _, err := s.Batch(context.Background(), q, e, b); err != nil {
							t.Fatalf("epoch %d batch %d: %v", e, b, err)
						}
					}
				}
				live := map[uint64]int64{}
				for e, st := range optima(t, s, 3) {
					live[e] = st.BackendBytes
					// The live optimum weighs the chunks the job reads by
					// their bytes in the cache, as the plan does.
					if *st.Optimal != plan.Optimal.Epochs[e].HitRatio {
						t.Errorf("epoch %d: live optimal hit ratio %v, the plan's %v", e, *st.Optimal, plan.Optimal.Epochs[e].HitRatio)
					}
				}
				fits := viewResident <= cache
				var total int64
				for e := range 3 {
					got, predicted := live[uint64(e)], plan.Optimal.Epochs[e].BackendBytes
					t.Logf("epoch %d: the stages read %d bytes from the store, the plan predicts %d", e, got, predicted)
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

// optima waits until the stages' statistics have the optimal hit ratio
// of want epochs and returns each epoch's figures.
func optima(t *testing.T, s *stagetest.Stages, want int) map[uint64]api.EpochStat {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := map[uint64]api.EpochStat{}
		n := 0
		for _, st := range s.Stats.Snapshot() {
			out[st.Epoch] = st
			if st.Optimal != nil {
				n++
			}
		}
		if n >= want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("optimal hit ratio computed for %d epochs, want %d: %+v", n, want, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
