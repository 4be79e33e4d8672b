package runs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/runs"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/shuffle"
)

// dataset is a dataset of chunks of counts samples, sample i of chunk c
// keyed d/c/i.
func dataset(t *testing.T, counts ...int) *catalog.Dataset {
	t.Helper()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c, n := range counts {
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%04d.tar", c), Size: int64(n) * 512, ETag: fmt.Sprint(c), Samples: n})
		for i := range n {
			ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("d/%d/%d", c, i), Chunk: c, Offset: int64(i) * 512, Length: 512})
		}
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset("d", "", nil, ix)
}

// served is every run an epoch of job serves, in the order of its global
// batches and, within each, of its ranks (the plain cut): each run its
// records' IDs.
func served(t *testing.T, o *layout.Orders, ds *catalog.Dataset, job api.Job, epoch uint64) [][]int {
	t.Helper()
	src := layout.Source{DS: ds}
	batches, n, err := o.Extent(src, job, epoch)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int
	for m := range uint64(batches) {
		for r := range job.World {
			jr := job
			jr.Rank = r
			b, err := o.Layout(context.Background(), src, jr, epoch, m)
			if err != nil {
				t.Fatal(err)
			}
			if b.EpochSamples != n || b.Len()%job.Run.Len != 0 {
				t.Fatalf("batch %d rank %d: %d records of an epoch of %d runs", m, r, b.Len(), n)
			}
			for i := 0; i < b.Len(); i += job.Run.Len {
				var run []int
				for k := range job.Run.Len {
					_, id, _ := b.Sample(i + k)
					run = append(run, id)
				}
				out = append(out, run)
			}
		}
	}
	return out
}

// TestRuns: an epoch of a run job serves every run of K consecutive
// records of a chunk once, and none of a chunk's last n mod K records;
// its order is the base order's with each run at its first record's
// place (read here from the base order alone); the same at world 1, 2
// and 3, and from an offset.
func TestRuns(t *testing.T) {
	counts := []int{10, 7, 2, 12, 5, 9}
	ds := dataset(t, counts...)
	o := units.Orders(nil)
	const k = 3
	base := api.Job{Dataset: "d", Params: shuffle.Params{Seed: 7, Window: 2, BatchSize: 2, World: 1}, Run: api.Runs{Len: k}}
	for epoch := range uint64(2) {
		// The expected order: the epoch's samples in the base order,
		// each run's first record standing for it.
		e, err := o.Epoch(layout.StreamOf(ds, base), epoch)
		if err != nil {
			t.Fatal(err)
		}
		order := o.Base().AppendRange(nil, layout.StreamOf(ds, base), e, epoch, 0, e.NumSamples())
		var want [][]int
		for _, id := range order {
			c := ds.Index.ChunkOf(id)
			lo, _ := ds.Index.ChunkRange(c)
			if j := id - lo; j%k == 0 && j+k <= counts[c] {
				want = append(want, []int{id, id + 1, id + 2})
			}
		}
		runs := 0
		for _, n := range counts {
			runs += n / k
		}
		if len(want) != runs {
			t.Fatalf("the base order holds %d runs, the chunks %d", len(want), runs)
		}
		for _, world := range []int{1, 2, 3} {
			job := base
			job.World = world
			got := served(t, o, ds, job, epoch)
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("epoch %d world %d: runs %v, want %v", epoch, world, got, want)
			}
			job.Offset = 4 // resumed after four runs, at another world
			if got := served(t, o, ds, job, epoch); !slices.EqualFunc(got, want[4:], slices.Equal) {
				t.Fatalf("epoch %d world %d from offset 4: runs %v, want %v", epoch, world, got, want[4:])
			}
		}
	}
}

// TestRunsSeam: a run job is laid out by its unit, which the table's
// features choose (features.Runs), names its run length in the ETag, and
// refuses a run no chunk holds.
func TestRunsSeam(t *testing.T) {
	ds := dataset(t, 10, 7)
	o := units.Orders(nil)
	job := api.Job{Dataset: "d", Params: shuffle.Params{Seed: 7, Window: 2, BatchSize: 2, World: 1}, Run: api.Runs{Len: 3}}
	if f := features.Requested(job); f.Unit() != features.Runs || o.UnitOf(f).Feature() != features.Runs {
		t.Fatalf("the unit of run=3: %s", f.Unit())
	}
	src := layout.Source{DS: ds}
	samples := job
	samples.Run = api.Runs{}
	four := job
	four.Run.Len = 4
	if e3, e0, e4 := o.ETag(src, job, 0, 0), o.ETag(src, samples, 0, 0), o.ETag(src, four, 0, 0); e3 == e0 || e3 == e4 {
		t.Fatalf("ETags of run=3 %s, of samples %s, of run=4 %s: a run job's names its run", e3, e0, e4)
	}
	long := job
	long.Run.Len = 11
	if _, _, err := o.Extent(src, long, 0); !errors.Is(err, runs.ErrRuns) {
		t.Fatalf("run=11 over chunks of 10 and 7: %v, want ErrRuns", err)
	}
}
