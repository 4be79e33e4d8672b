package layout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// TestExcludedOrder holds an exclusion's order to a reference: the base
// order with the excluded samples removed at positions from From on
// (every position of a later epoch, none of an earlier one), each window
// naming exactly the chunks its kept samples are in, and batches cut
// from it at any world size tiling it.
func TestExcludedOrder(t *testing.T) {
	for _, tc := range []struct {
		name             string
		chunks, perChunk int
		window           int
		from             int
		exclude          func(id int) bool
	}{
		{"scattered", 12, 10, 2, 30, func(id int) bool { return id%7 == 3 }},
		{"whole chunks", 12, 10, 3, 25, func(id int) bool { return id/10 == 4 || id/10 == 9 }},
		{"from 0", 9, 8, 2, 0, func(id int) bool { return id%5 == 0 || id/8 == 2 }},
		{"a window emptied", 8, 5, 1, 5, func(id int) bool { return id/5 == 6 }},
		{"everything after from", 6, 5, 2, 12, func(int) bool { return true }},
		{"nothing", 6, 5, 2, 12, func(int) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := catalogtest.Dataset(t, "d", tc.chunks, tc.perChunk)
			var ids []int
			for id := range tc.chunks * tc.perChunk {
				if tc.exclude(id) {
					ids = append(ids, id)
				}
			}
			x, err := layout.NewExclusion("v1", ds, 1, tc.from, ids, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := units.Orders(nil)
			o.Edits().Add(x)
			s := layout.Stream{DS: ds, Seed: 3, Window: tc.window, Edit: "v1"}
			base := s
			base.Edit = ""
			for epoch := range uint64(3) {
				be, err := o.Epoch(base, epoch)
				if err != nil {
					t.Fatal(err)
				}
				e, err := o.Epoch(s, epoch)
				if err != nil {
					t.Fatal(err)
				}
				from := 0
				switch {
				case epoch < x.Epoch:
					from = be.NumSamples()
				case epoch == x.Epoch:
					from = tc.from
				}
				whole := o.Base().AppendRange(nil, base, be, epoch, 0, be.NumSamples())
				var want []int
				for pos, id := range whole {
					if pos < from || !x.Drop.Dropped(id) {
						want = append(want, id)
					}
				}
				got := o.Base().AppendRange(nil, s, e, epoch, 0, e.NumSamples())
				if !slices.Equal(got, want) {
					t.Fatalf("epoch %d: order %v\nwant %v", epoch, got, want)
				}
				for w := range e.NumWindows() {
					win := e.Window(w)
					if e.WindowStart(w+1)-e.WindowStart(w) != len(win) {
						t.Fatalf("epoch %d window %d: starts %d..%d for %d samples", epoch, w, e.WindowStart(w), e.WindowStart(w+1), len(win))
					}
					var chunks []int
					for _, c := range be.WindowChunks(w) {
						if slices.ContainsFunc(win, func(id int) bool { return ds.Index.ChunkOf(id) == c }) {
							chunks = append(chunks, c)
						}
					}
					if !slices.Equal(e.WindowChunks(w), chunks) {
						t.Fatalf("epoch %d window %d names chunks %v; its samples are in %v", epoch, w, e.WindowChunks(w), chunks)
					}
					for i := range win {
						if got := e.WindowOf(e.WindowStart(w) + i); got != w {
							t.Fatalf("epoch %d: WindowOf(%d) = %d, want %d", epoch, e.WindowStart(w)+i, got, w)
						}
					}
				}
				for c := range ds.Counts {
					w := e.ChunkWindow[c]
					if w >= 0 != slices.ContainsFunc(want, func(id int) bool { return ds.Index.ChunkOf(id) == c }) {
						t.Fatalf("epoch %d: chunk %d in window %d; read: %t", epoch, c, w, w >= 0)
					}
				}
				// Batches at worlds 1, 3 and 4 tile the order.
				for _, world := range []int{1, 3, 4} {
					var cut []int
					j := api.Job{Edit: "v1", Params: shuffle.Params{Seed: 3, Window: tc.window, BatchSize: 2, World: world}}
					n, _, err := o.Extent(layout.Source{DS: ds}, j, epoch)
					if err != nil {
						t.Fatal(err)
					}
					for m := range n {
						for r := range world {
							j.Rank = r
							b, err := o.Layout(context.Background(), layout.Source{DS: ds}, j, epoch, uint64(m))
							if err != nil {
								t.Fatal(err)
							}
							cut = append(cut, b.Parts[0].Samples.IDs...)
						}
					}
					if !slices.Equal(cut, want) {
						t.Fatalf("epoch %d world %d: batches %v\nwant %v", epoch, world, cut, want)
					}
				}
			}
		})
	}
}

// TestNewExclusion: an exclusion's samples, their count per chunk and
// the chunks it empties are those of its IDs, repeats counted once, on
// chunks whose samples straddle the bitset's words.
func TestNewExclusion(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 9, 37)
	r := rand.New(rand.NewPCG(3, 4))
	ids := []int{37, 38, 39} // and the rest of chunk 1: it is emptied
	for i := 40; i < 74; i++ {
		ids = append(ids, i)
	}
	for range 120 {
		ids = append(ids, r.IntN(ds.Index.NumSamples()))
	}
	x, err := layout.NewExclusion("v", ds, 0, 0, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(ids))
	want = slices.Compact(want)
	if got := slices.Collect(x.Drop.IDs()); !slices.Equal(got, want) || x.Drop.Len() != len(want) {
		t.Fatalf("IDs %v (Len %d); want %v", got, x.Drop.Len(), want)
	}
	empty := 0
	for c := range ds.Counts {
		k := 0
		for _, id := range want {
			if ds.Index.ChunkOf(id) == c {
				k++
			}
		}
		if x.Drop.InChunk(c) != k {
			t.Errorf("chunk %d: %d excluded, want %d", c, x.Drop.InChunk(c), k)
		}
		if k == ds.Counts[c] {
			empty++
		}
	}
	if empty == 0 || x.Drop.EmptyChunks(ds.Counts) != empty {
		t.Errorf("EmptyChunks %d, want %d (at least chunk 1)", x.Drop.EmptyChunks(ds.Counts), empty)
	}
	if _, err := layout.NewExclusion("v", ds, 0, 0, []int{ds.Index.NumSamples()}, nil); err == nil {
		t.Error("an ID past the dataset's samples was taken")
	}
}

// TestExtendedOrder holds a list extended to the rule (docs/shuffle.md
// §14): version 2's order is version 1's up to its position, and version
// 1's order without both lists' samples from there; a third version
// likewise of the second. Windows name exactly the chunks their samples
// are in; batches at worlds 1 and 3 tile the order; a batch wholly
// before a version's position keeps its previous version's ETag, one
// after names its own.
func TestExtendedOrder(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 12, 10)
	type link struct {
		epoch uint64
		from  int
		drop  func(id int) bool
	}
	for _, tc := range []struct {
		name  string
		links []link
	}{
		{"the same epoch", []link{{1, 20, func(id int) bool { return id%7 == 3 }}, {1, 45, func(id int) bool { return id/10 == 4 || id%11 == 0 }}}},
		{"a later epoch", []link{{0, 30, func(id int) bool { return id/10 == 2 }}, {1, 17, func(id int) bool { return id%5 == 1 || id/10 == 8 }}}},
		{"at the previous position", []link{{1, 40, func(id int) bool { return id%3 == 0 }}, {1, 40, func(id int) bool { return id%3 == 1 }}}},
		{"three versions", []link{{0, 10, func(id int) bool { return id%9 == 2 }}, {0, 50, func(id int) bool { return id/10 == 6 }}, {2, 5, func(id int) bool { return id%4 == 0 }}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := units.Orders(nil)
			var xs []*layout.Edit
			for k, l := range tc.links {
				var ids []int
				for id := range ds.Index.NumSamples() {
					if l.drop(id) {
						ids = append(ids, id)
					}
				}
				v := fmt.Sprint("v", k+1)
				var x *layout.Edit
				var err error
				if k == 0 {
					x, err = layout.NewExclusion(v, ds, l.epoch, l.from, ids, nil)
				} else {
					x, err = layout.NewExclusion(v, ds, l.epoch, l.from, ids, xs[k-1])
				}
				if err != nil {
					t.Fatal(err)
				}
				xs = append(xs, x)
			}
			o.Edits().Add(xs[len(xs)-1]) // registers the chain
			for epoch := range uint64(4) {
				base := layout.Stream{DS: ds, Seed: 3, Window: 2}
				be, err := o.Epoch(base, epoch)
				if err != nil {
					t.Fatal(err)
				}
				want := o.Base().AppendRange(nil, base, be, epoch, 0, be.NumSamples())
				for k, l := range tc.links {
					from := 0
					switch {
					case epoch < l.epoch:
						from = len(want)
					case epoch == l.epoch:
						from = min(l.from, len(want))
					}
					prev := want
					want = slices.Clone(prev[:from])
					for _, id := range prev[from:] {
						if !xs[k].Drop.Dropped(id) {
							want = append(want, id)
						}
					}
					s := layout.Stream{DS: ds, Seed: 3, Window: 2, Edit: xs[k].Version}
					e, err := o.Epoch(s, epoch)
					if err != nil {
						t.Fatal(err)
					}
					if got := o.Base().AppendRange(nil, s, e, epoch, 0, e.NumSamples()); !slices.Equal(got, want) {
						t.Fatalf("epoch %d, version %d: order %v\nwant %v", epoch, k+1, got, want)
					}
					for w := range e.NumWindows() {
						win := e.Window(w)
						var chunks []int
						for _, c := range be.WindowChunks(w) {
							if slices.ContainsFunc(win, func(id int) bool { return ds.Index.ChunkOf(id) == c }) {
								chunks = append(chunks, c)
							}
						}
						if e.WindowStart(w+1)-e.WindowStart(w) != len(win) || !slices.Equal(e.WindowChunks(w), chunks) {
							t.Fatalf("epoch %d, version %d, window %d: %d..%d for %d samples, chunks %v; its samples are in %v",
								epoch, k+1, w, e.WindowStart(w), e.WindowStart(w+1), len(win), e.WindowChunks(w), chunks)
						}
					}
					for _, world := range []int{1, 3} {
						var cut []int
						j := api.Job{Edit: xs[k].Version, Params: shuffle.Params{Seed: 3, Window: 2, BatchSize: 2, World: world}}
						n, _, err := o.Extent(layout.Source{DS: ds}, j, epoch)
						if err != nil {
							t.Fatal(err)
						}
						for m := range n {
							j.Rank = 0
							// The ETag: the previous version's (the base order's
							// before the first) for a batch wholly before this
							// version's position, its own after.
							_, end, _ := j.GlobalBatch(len(want), m)
							pj := j
							pj.Edit = ""
							if k > 0 {
								pj.Edit = xs[k-1].Version
							}
							got, prevTag := o.ETag(layout.Source{DS: ds}, j, epoch, uint64(m)), o.ETag(layout.Source{DS: ds}, pj, epoch, uint64(m))
							if affects := xs[k].Affects(epoch, end); (got == prevTag) == affects {
								t.Fatalf("epoch %d, version %d, batch %d (ending at %d): ETag %s, the previous version's %s; want them equal: %t", epoch, k+1, m, end, got, prevTag, !affects)
							}
							for r := range world {
								j.Rank = r
								b, err := o.Layout(context.Background(), layout.Source{DS: ds}, j, epoch, uint64(m))
								if err != nil {
									t.Fatal(err)
								}
								cut = append(cut, b.Parts[0].Samples.IDs...)
							}
						}
						if !slices.Equal(cut, want) {
							t.Fatalf("epoch %d, version %d, world %d: batches %v\nwant %v", epoch, k+1, world, cut, want)
						}
					}
				}
			}
		})
	}
	if _, err := func() (*layout.Edit, error) {
		x, _ := layout.NewExclusion("v1", ds, 1, 30, []int{1}, nil)
		return layout.NewExclusion("v2", ds, 1, 29, []int{2}, x)
	}(); !errors.Is(err, layout.ErrBeforePrevious) {
		t.Errorf("an extension before its list's position: %v", err)
	}
}

// TestExclusionETag: a batch wholly before the list's first position
// keeps its ETag; one from it on names the list.
func TestExclusionETag(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 6, 10)
	x, err := layout.NewExclusion("v1", ds, 0, 20, []int{1, 2, 33}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := units.Orders(nil)
	o.Edits().Add(x)
	plain := job(5, 2, 0) // steps of 10
	with := plain
	with.Edit = "v1"
	src := layout.Source{DS: ds}
	for _, c := range []struct {
		epoch, m uint64
		same     bool
	}{{0, 0, true}, {0, 1, true}, {0, 2, false}, {1, 0, false}} {
		if same := o.ETag(src, plain, c.epoch, c.m) == o.ETag(src, with, c.epoch, c.m); same != c.same {
			t.Errorf("epoch %d batch %d: ETag unchanged %t, want %t", c.epoch, c.m, same, c.same)
		}
	}
}

// BenchmarkExclusionOfAMillionKeys applies a list of 1,000,000 samples
// of a 2,000,000-sample dataset: the list made (NewExclusion) and the
// next epoch's order without them (its windows, O(chunks)), as a request
// after POST /jobs/NAME/exclude pays. It writes the seconds an
// application takes (s/apply); the keys' lookup in the index is
// internal/job/chain's BenchmarkMakeAMillionKeys.
func BenchmarkExclusionOfAMillionKeys(b *testing.B) {
	ds := catalogtest.Dataset(b, "d", 2000, 1000)
	r := rand.New(rand.NewPCG(1, 2))
	ids := r.Perm(ds.Index.NumSamples())[:1_000_000]
	var last time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		x, err := layout.NewExclusion(fmt.Sprint("v", i), ds, 0, 0, ids, nil)
		if err != nil {
			b.Fatal(err)
		}
		o := units.Orders(nil)
		o.Edits().Add(x)
		if _, err := o.Epoch(layout.Stream{DS: ds, Seed: 1, Window: 8, Edit: x.Version}, 1); err != nil {
			b.Fatal(err)
		}
		last = time.Since(t0)
	}
	b.ReportMetric(last.Seconds(), "s/apply")
}
