package catalog

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brandgw/brand/internal/server/stopper"
)

// TestReload: a dataset re-packed in its store is swapped in when the
// catalog looks — asked (SIGHUP, Gateway.Reload), on its poll's tick, or
// poked (a chunk found changed) — as version 2 with the new index's ID
// and ETag, counted in brand_index_reloads_total, the version it replaced
// still held; an index unchanged is not reloaded. (gateway's
// TestReloadIndex keeps what a client sees of it: /datasets, the batch's
// ETag, Brand-Index and bytes.) In a synctest bubble, so that the poll's
// interval passes at once.
func TestReload(t *testing.T) {
	const poll = 30 * time.Second
	tests := []struct {
		name   string
		repack bool
		how    string // "asked", "polled" or "poked"
	}{
		{"unchanged, asked", false, "asked"},
		{"unchanged, polled", false, "polled"},
		{"re-packed, asked", true, "asked"},
		{"re-packed, polled", true, "polled"},
		{"re-packed, poked", true, "poked"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				local := packedStore(t, 2, 3)
				ds, cat := loadCatalog(t, local)
				part := stopper.New().Group("poll")
				defer part.Stop()
				if tc.how != "asked" {
					cat.Poll(part, poll)
				}
				if tc.repack {
					packChunks(t, local, 3, 5)
				}
				var reloaded []string
				var err error
				switch tc.how {
				case "asked":
					if reloaded, err = cat.Reload(context.Background()); err != nil {
						t.Fatal(err)
					}
				case "polled":
					time.Sleep(poll + time.Second)
				case "poked":
					cat.Poke()
				}
				synctest.Wait() // the poller's check done
				cur, err := cat.Get("test")
				if err != nil {
					t.Fatal(err)
				}
				if !tc.repack {
					if cur != ds || len(reloaded) != 0 {
						t.Fatalf("an unchanged index: version %d, Reload = %v; want version 1, nothing", cur.Version, reloaded)
					}
					return
				}
				if tc.how == "asked" && !slices.Equal(reloaded, []string{"test"}) {
					t.Errorf("Reload = %v, want [test]", reloaded)
				}
				if cur.Version != 2 || cur.ID() == ds.ID() || cur.IndexETag == ds.IndexETag || cur.Index.NumSamples() != 15 {
					t.Errorf("after the re-pack: version %d, ID %s (was %s), index ETag %s (was %s), %d samples; want version 2 of the new index's 15",
						cur.Version, cur.ID(), ds.ID(), cur.IndexETag, ds.IndexETag, cur.Index.NumSamples())
				}
				if old, err := cat.Version("test", ds.ID()); old != ds || err != nil {
					t.Errorf("the replaced version: %v, %v; want it still held", old, err)
				}
				if got := testutil.ToFloat64(cat.metrics.indexReloads.WithLabelValues("test")); got != 1 {
					t.Errorf("brand_index_reloads_total = %v, want 1", got)
				}
			})
		})
	}
}
