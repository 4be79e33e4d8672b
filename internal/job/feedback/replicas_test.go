package feedback

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/shuffle"
)

// TestAnotherNodeReadsTheSeal: what one node seals, another node over the
// same store — a replica, or one started afresh, with nothing in memory —
// finds: the version sealed for the epoch (an epoch not sealed is
// unknown), the snapshot with the same scores, and so the same
// importance epoch laid out sample for sample; and the next epoch's
// seal there, onto that snapshot, is a version of its own.
func TestAnotherNodeReadsTheSeal(t *testing.T) {
	ctx := context.Background()
	ds := storedDataset(t, 512)
	a, b := newTestState(Limits{}, newClock()), newTestState(Limits{}, newClock())
	const job = "train-1"
	feedAll(t, a, ds, job, 0)
	s := sealWith(t, a, ds, job, 0, "")
	if s.Reported != ds.Index.NumSamples() || len(s.Version) != 16 {
		t.Fatalf("seal = %+v, want every sample reported and a version", s)
	}
	if v, err := b.SealedVersion(ctx, ds, job, 0); err != nil || v != s.Version {
		t.Fatalf("the other node's epoch 0: %q, %v; want %s", v, err, s.Version)
	}
	if _, err := b.SealedVersion(ctx, ds, job, 1); !errors.Is(err, catalog.ErrUnknown) {
		t.Fatalf("an epoch not sealed: %v, want ErrUnknown", err)
	}
	sa, err := a.Snapshot(ctx, ds, job, s.Version)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Get(ds, job, s.Version); ok {
		t.Fatal("the other node holds the snapshot before reading it")
	}
	sb, err := b.Snapshot(ctx, ds, job, s.Version)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ds.Index.NumSamples() {
		if sa.Score(i) != sb.Score(i) {
			t.Fatalf("sample %d scores %v on the sealing node, %v on the other", i, sa.Score(i), sb.Score(i))
		}
	}
	j := api.Job{Params: shuffle.Params{Seed: 4, Window: 4, BatchSize: 16, World: 1},
		Importance: api.Importance{Job: job, Version: s.Version, Hot: 2}}
	keysOf := func(o *layout.Orders) string {
		t.Helper()
		batches, _, err := o.Extent(layout.Source{DS: ds}, j, 1)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for m := range uint64(batches) {
			bt, err := o.Layout(ctx, layout.Source{DS: ds}, j, 1, m)
			if err != nil {
				t.Fatal(err)
			}
			for i := range bt.Len() {
				_, _, in := bt.Sample(i)
				keys = append(keys, in.Key)
			}
		}
		return fmt.Sprint(keys)
	}
	if keysOf(units.Orders(a)) != keysOf(units.Orders(b)) {
		t.Fatal("the importance epoch differs between the sealing node and the other")
	}
	feedAll(t, b, ds, job, 1)
	if s2 := sealWith(t, b, ds, job, 1, s.Version); s2.Version == s.Version {
		t.Error("sealing epoch 1 onto epoch 0's snapshot gave the same version")
	}
}
