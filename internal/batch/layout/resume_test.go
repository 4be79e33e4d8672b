package layout_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// TestResumeAtAnotherWorldSize is elastic resume: a job reads 5 batches
// at world 4, then resumes from the global position it reached (offset =
// 5 × 8 × 4) at world 3, 8 and 1. Every sample of the epoch is laid out
// exactly once over both parts, with and without drop_last; the epoch's
// description says the offset; an offset at the end leaves no batch, and
// one past it is out of range, as is a batch past the end. (That the
// batch ETag covers the offset, and the statuses, are gateway's.)
func TestResumeAtAnotherWorldSize(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 10, 25) // 250 samples
	o := units.Orders(nil)
	src := layout.Source{DS: ds}
	params := func(world, rank, offset int, dropLast bool) api.Job {
		return api.Job{Params: shuffle.Params{Seed: 11, BatchSize: 8, Window: 3, World: world, Rank: rank, Offset: offset, DropLast: dropLast}}
	}
	keys := func(j api.Job, m int) []string {
		t.Helper()
		b, err := o.Layout(context.Background(), src, j, 2, uint64(m))
		if err != nil {
			t.Fatalf("batch %d of %+v: %v", m, j.Params, err)
		}
		out := make([]string, b.Len())
		for i := range out {
			_, _, in := b.Sample(i)
			out[i] = in.Key
		}
		return out
	}
	for _, dropLast := range []bool{false, true} {
		for _, world := range []int{3, 8, 1} {
			t.Run(fmt.Sprintf("world 4 to %d drop_last %t", world, dropLast), func(t *testing.T) {
				seen := map[string]int{}
				for m := range 5 {
					for r := range 4 {
						for _, k := range keys(params(4, r, 0, false), m) {
							seen[k]++
						}
					}
				}
				const offset = 5 * 8 * 4
				e, err := o.Info(src, params(world, 0, offset, dropLast), 2)
				if err != nil || e.Offset != offset || e.Samples != 250 {
					t.Fatalf("epoch info %+v, %v", e, err)
				}
				got := 0
				for m := range e.Batches {
					for r := range world {
						for _, k := range keys(params(world, r, offset, dropLast), m) {
							seen[k]++
							got++
						}
					}
				}
				rest := 250 - offset
				want := rest
				if dropLast {
					want = rest - rest%(8*world)
				}
				if got != want {
					t.Errorf("the remainder laid out %d samples, want %d", got, want)
				}
				for k, n := range seen {
					if n != 1 {
						t.Errorf("sample %s laid out %d times", k, n)
					}
				}
				if len(seen) != offset+want {
					t.Errorf("%d distinct samples, want %d", len(seen), offset+want)
				}
			})
		}
	}
	if e, err := o.Info(src, params(1, 0, 250, false), 2); err != nil || e.Batches != 0 || e.RankSamples != 0 {
		t.Errorf("offset at the end: %+v, %v; want no batches", e, err)
	}
	if _, err := o.Info(src, params(1, 0, 251, false), 2); !errors.Is(err, layout.ErrOutOfRange) {
		t.Errorf("offset past the end: %v, want ErrOutOfRange", err)
	}
	for _, off := range []int{250, 251} {
		if _, err := o.Layout(context.Background(), src, params(1, 0, off, false), 2, 0); !errors.Is(err, layout.ErrOutOfRange) {
			t.Errorf("batch 0 at offset %d: %v, want ErrOutOfRange", off, err)
		}
	}
	if o.ETag(src, params(1, 0, 0, false), 2, 0) == o.ETag(src, params(1, 0, 1, false), 2, 0) {
		t.Error("offsets 0 and 1 share a batch ETag")
	}
}
