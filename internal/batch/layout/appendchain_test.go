package layout_test

import (
	"context"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// TestAppendChainLayout: a job with two records in one epoch and one in
// the next lays each batch out under the newest record that changes it,
// over that record's version: a batch before the first record's From is
// the parent's (its samples and ETag), one before the second's is the
// first record's, as it was served before the second was made; each
// epoch serves every sample of its order's version once.
func TestAppendChainLayout(t *testing.T) {
	const per = 10
	v0, v1, v2, v3 := catalogtest.Dataset(t, "d", 6, per), catalogtest.Dataset(t, "d", 8, per), catalogtest.Dataset(t, "d", 10, per), catalogtest.Dataset(t, "d", 12, per)
	a1 := mustAppend(t, "a1", v0.ID(), v1.ID(), 6, 0, 20, nil)
	a2 := mustAppend(t, "a2", v1.ID(), v2.ID(), 8, 0, 50, a1)
	a3 := mustAppend(t, "a3", v2.ID(), v3.ID(), 10, 1, 30, a2)
	o := units.Orders(nil)
	o.Edits().Add(a3)
	job := api.Job{Name: "run", Params: shuffle.Params{Seed: 3, Window: 2, BatchSize: 10, World: 1}}
	under := func(a *layout.Edit, grown ...*layout.Source) (layout.Source, api.Job) {
		j := job
		j.Edit = a.Version
		src := layout.Source{Edit: a, Versions: []*catalog.Dataset{v0}}
		for _, g := range grown {
			src.Versions = append(src.Versions, g.DS)
		}
		src.DS = src.Versions[len(src.Versions)-1]
		return src, j
	}
	s1, s2, s3 := &layout.Source{DS: v1}, &layout.Source{DS: v2}, &layout.Source{DS: v3}
	at := func(src layout.Source, j api.Job, epoch, m uint64) ([]int, string) {
		t.Helper()
		b, err := o.Layout(context.Background(), src, j, epoch, m)
		if err != nil {
			t.Fatal(err)
		}
		return b.Parts[0].Samples.IDs, b.ETag
	}
	src, j := under(a3, s1, s2, s3)
	first, firstJob := under(a1, s1)
	second, secondJob := under(a2, s1, s2)
	for _, tc := range []struct {
		epoch   uint64
		batches int
		samples int
	}{{0, 10, 100}, {1, 12, 120}, {2, 12, 120}} {
		n, samples, err := o.Extent(src, j, tc.epoch)
		if err != nil || n != tc.batches || samples != tc.samples {
			t.Fatalf("epoch %d: %d batches of %d samples, %v; want %d of %d", tc.epoch, n, samples, err, tc.batches, tc.samples)
		}
		var all []int
		for m := range uint64(n) {
			ids, etag := at(src, j, tc.epoch, m)
			all = append(all, ids...)
			var wantIDs []int
			var wantETag string
			switch {
			case tc.epoch == 0 && m < 2:
				wantIDs, wantETag = at(layout.Source{DS: v0}, job, 0, m)
			case tc.epoch == 0 && m < 5:
				wantIDs, wantETag = at(first, firstJob, 0, m)
			case tc.epoch == 0 || tc.epoch == 1 && m < 3:
				wantIDs, wantETag = at(second, secondJob, tc.epoch, m)
			default:
				continue
			}
			if !slices.Equal(ids, wantIDs) || etag != wantETag {
				t.Fatalf("epoch %d batch %d: %v %s; want %v %s as laid out before the later records", tc.epoch, m, ids, etag, wantIDs, wantETag)
			}
		}
		exactlyOnceIDs(t, all, tc.samples)
	}
}
