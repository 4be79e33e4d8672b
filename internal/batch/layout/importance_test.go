package layout_test

import (
	"context"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// oneSnapshot is Snapshots holding one snapshot.
type oneSnapshot struct{ snap *importance.Snapshot }

func (o oneSnapshot) Get(_ *catalog.Dataset, job, version string) (*importance.Snapshot, bool) {
	return o.snap, o.snap.Job() == job && o.snap.Version() == version
}

// skewed is a snapshot of job over ds whose first quarter of samples
// scores high, so that an importance epoch repeats some samples and
// skips others.
func skewed(t *testing.T, ds *catalog.Dataset, job string) *importance.Snapshot {
	t.Helper()
	n := ds.Index.NumSamples()
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = 0.01 + float32((n-i)%97)/1000
		if i < n/4 {
			scores[i] += 2
		}
	}
	s, err := importance.NewSnapshot(ds.Index, job, 0, scores)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keysOf lays out every batch of an epoch for rank r of job and returns
// each batch's sample keys.
func keysOf(t *testing.T, o *layout.Orders, src layout.Source, job api.Job, epoch uint64) [][]string {
	t.Helper()
	batches, _, err := o.Extent(src, job, epoch)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for m := range uint64(batches) {
		b, err := o.Layout(context.Background(), src, job, epoch, m)
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, b.Len())
		for i := range keys {
			_, _, in := b.Sample(i)
			keys[i] = in.Key
		}
		out = append(out, keys)
	}
	return out
}

// TestImportanceOnAClusterNeverRepeatsInARow: locality-aware assignment
// takes a subsequence of each global batch for a rank; in importance mode
// that must not put a sample next to itself (a WebDataset reader would
// merge the two), and the ranks together still carry the epoch's length.
func TestImportanceOnAClusterNeverRepeatsInARow(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 32, 16) // 512 samples
	snap := skewed(t, ds, "cl")
	o := units.Orders(oneSnapshot{snap})
	ms, err := cluster.NewMembership([]string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"})
	if err != nil {
		t.Fatal(err)
	}
	src := layout.Source{DS: ds, Members: ms}
	total, seen := 0, map[string]bool{}
	for r := range 4 {
		job := api.Job{Params: shuffle.Params{Seed: 2, Window: 4, BatchSize: 32, World: 4, Rank: r},
			Importance: api.Importance{Job: "cl", Version: snap.Version()}}
		if !src.Assigns(job) {
			t.Fatal("the job's batches are not assigned by locality")
		}
		for m, keys := range keysOf(t, o, src, job, 1) {
			for i := 1; i < len(keys); i++ {
				if keys[i-1] == keys[i] {
					t.Fatalf("rank %d batch %d: %s twice in a row", r, m, keys[i])
				}
			}
			total += len(keys)
			for _, k := range keys {
				seen[k] = true
			}
		}
	}
	if len(seen) >= total {
		t.Fatalf("the epoch drew no sample twice (%d of %d distinct): nothing could repeat in a row", len(seen), total)
	}
	if total != ds.Index.NumSamples() {
		t.Fatalf("the ranks carried %d samples, want the epoch's %d", total, ds.Index.NumSamples())
	}
}

// TestImportanceWithoutASnapshot: an importance epoch drawn from a
// skewed snapshot repeats some samples and skips others, the same on any
// Orders (a replica, a restarted one); without a version importance mode
// is the uniform order.
func TestImportanceWithoutASnapshot(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 32, 16)
	snap := skewed(t, ds, "train-1")
	src := layout.Source{DS: ds}
	uniform := api.Job{Params: shuffle.Params{Seed: 4, Window: 4, BatchSize: 16, World: 1}}
	drawn := uniform
	drawn.Importance = api.Importance{Job: "train-1", Version: snap.Version(), Hot: 2}
	a, b := keysOf(t, units.Orders(oneSnapshot{snap}), src, drawn, 1), keysOf(t, units.Orders(oneSnapshot{snap}), src, drawn, 1)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Fatal("two Orders lay out the importance epoch differently")
	}
	distinct := map[string]bool{}
	for _, keys := range a {
		for _, k := range keys {
			distinct[k] = true
		}
	}
	if len(distinct) >= ds.Index.NumSamples() {
		t.Errorf("the importance epoch drew %d distinct samples of %d: with skewed scores it should repeat some and skip others", len(distinct), ds.Index.NumSamples())
	}
	named := uniform
	named.Importance = api.Importance{Job: "train-1"}
	if got, want := keysOf(t, units.Orders(oneSnapshot{snap}), src, named, 1), keysOf(t, units.Orders(nil), src, uniform, 1); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("importance mode without a snapshot differs from the uniform order: %d and %d batches", len(got), len(want))
	}
}
