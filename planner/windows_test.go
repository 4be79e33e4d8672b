package planner

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
)

// The use table a trace's batches are read under: rebuilt when the
// stream's origin (its oldest batch in flight's window) moves, holding
// hot the windows from the origin's to the leading edge's at that
// rebuild. A batch that straddles into the next window is read under the
// table of the one it began in; the next epoch's first batch under a
// table of its own epoch.
func TestWindowTraceTables(t *testing.T) {
	order := func(epoch int) api.PlanOrder {
		return api.PlanOrder{Epoch: epoch, Samples: 6, WindowStarts: []int{0, 2, 4}, ChunkWindows: []int32{0, 1, 2}}
	}
	batch := func(epoch, start, end int) api.PlanBatch {
		return api.PlanBatch{Epoch: epoch, Start: start, End: end, Chunks: []int32{0}}
	}
	tr := api.PlanTrace{
		Batches: []api.PlanBatch{batch(0, 0, 1), batch(0, 1, 3), batch(0, 3, 4), batch(0, 4, 6), batch(1, 0, 2), batch(1, 2, 5)},
		Orders:  []api.PlanOrder{order(0), order(1), order(2)},
	}
	w, err := newWindowTrace(tr, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []windowTable{{0, 0, 0}, {0, 0, 0}, {0, 1, 1}, {0, 2, 2}, {1, 0, 1}, {1, 1, 1}}
	if !slices.Equal(w.tables, want) {
		t.Errorf("tables %v, want %v", w.tables, want)
	}
	// Under table {0, 1, 1}: chunk 1 is hot, chunk 2 keyed by its window's
	// start, chunk 0 by the next epoch's window 0 (6 samples on).
	for c, k := range []int64{6, hot, 4} {
		if got := w.key(windowTable{0, 1, 1}, int32(c)); got != k {
			t.Errorf("chunk %d: key %d, want %d", c, got, k)
		}
	}
	for _, bad := range []api.PlanTrace{
		{Batches: tr.Batches, Orders: tr.Orders[:1]},                                 // no order after epoch 0
		{Batches: tr.Batches, Orders: []api.PlanOrder{order(0), order(2), order(3)}}, // not consecutive
		{Batches: []api.PlanBatch{batch(0, 4, 7)}, Orders: tr.Orders},                // past the epoch's end
		{Batches: tr.Batches[:1], Orders: []api.PlanOrder{{Epoch: 0, Samples: 6, WindowStarts: []int{0, 2}, ChunkWindows: []int32{0, 1, 2}}, order(1)}},
	} {
		if _, err := newWindowTrace(bad, 3); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// The gateway's policy keeps no order among the chunks of the window a
// job is in: in a cache of two chunks, the third chunk of a window
// evicts the one released first, though the window's next batch needs
// it, which Belady's rule keeps.
func TestTracePlanSchedule(t *testing.T) {
	tr := api.PlanTrace{
		Orders: []api.PlanOrder{
			{Epoch: 0, Samples: 4, WindowStarts: []int{0}, ChunkWindows: []int32{0, 0, 0}},
			{Epoch: 1, Samples: 4, WindowStarts: []int{0}, ChunkWindows: []int32{0, 0, 0}},
		},
	}
	for i, c := range []int32{0, 1, 2, 0} {
		tr.Batches = append(tr.Batches, api.PlanBatch{Epoch: 0, Start: i, End: i + 1, Chunks: []int32{c}})
	}
	d := api.PlanDataset{Counts: []int{1, 1, 1}, Sizes: []int64{10, 10, 10}, StoreSizes: []int64{3, 5, 7}}
	out, err := ForGateway{}.TracePlan(context.Background(), d, tr, api.PlanOptions{CacheBytes: 20})
	if err != nil {
		t.Fatal(err)
	}
	res := out.(map[string]Result)
	for _, c := range []struct {
		name string
		want int64
	}{{"policy", 3 + 5 + 7 + 3}, {"optimal", 3 + 5 + 7}, {"lru", 3 + 5 + 7 + 3}} {
		if got := res[c.name].BackendBytes; got != c.want {
			t.Errorf("%s: %d store bytes, want %d", c.name, got, c.want)
		}
	}
	if p := res["policy"].Policy; p != NextUse {
		t.Errorf("policy %v, want schedule", p)
	}
	// Without orders the trace is planned by Belady's rule.
	out, err = ForGateway{}.TracePlan(context.Background(), d, api.PlanTrace{Batches: tr.Batches}, api.PlanOptions{CacheBytes: 20})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(map[string]Result)["policy"].BackendBytes; got != 3+5+7 {
		t.Errorf("without orders: %d store bytes, want Belady's %d", got, 3+5+7)
	}
}
