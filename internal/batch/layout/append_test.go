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

// cutAll is every sample of an epoch of job over ds, batch by batch and
// rank by rank, as the job's ranks read them.
func cutAll(t *testing.T, o *layout.Orders, ds *catalog.Dataset, j api.Job, epoch uint64) []int {
	t.Helper()
	n, _, err := o.Extent(layout.Source{DS: ds}, j, epoch)
	if err != nil {
		t.Fatal(err)
	}
	var cut []int
	for m := range n {
		for r := range j.World {
			j.Rank = r
			b, err := o.Layout(context.Background(), layout.Source{DS: ds}, j, epoch, uint64(m))
			if err != nil {
				t.Fatal(err)
			}
			cut = append(cut, b.Parts[0].Samples.IDs...)
		}
	}
	return cut
}

// TestAppendedOrder holds an append record's rule: epochs before the
// record's are the old chunks' order; the record's epoch keeps the old
// order's windows up to the one holding From (so every position before
// From), then serves every old sample not read yet and every new one,
// each once; later epochs are the plain order of the whole dataset. At
// worlds 1, 3 and 4 the batches tile each epoch, and a resume from From
// at another world size reads the same rest.
func TestAppendedOrder(t *testing.T) {
	for _, tc := range []struct {
		name        string
		old, added  int // chunks
		window      int
		from        int
		interleaved bool // new samples read before the last old one
	}{
		{"mid-epoch", 10, 4, 2, 37, true},
		{"from 0", 6, 6, 1, 0, true},
		{"in the last window", 8, 3, 3, 75, false},
		{"window of one chunk", 12, 5, 1, 55, true},
		{"one new chunk", 5, 1, 2, 11, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const per = 10
			ds := catalogtest.Dataset(t, "d", tc.old+tc.added, per)
			parent := catalogtest.Dataset(t, "d", tc.old, per)
			a := mustAppend(t, "a1", parent.ID(), ds.ID(), tc.old, 1, tc.from, nil)
			o := units.Orders(nil)
			o.Edits().Add(a)
			s := layout.Stream{DS: ds, Seed: 3, Window: tc.window, Edit: "a1"}
			for epoch := range uint64(3) {
				e, err := o.Epoch(s, epoch)
				if err != nil {
					t.Fatal(err)
				}
				got := o.Base().AppendRange(nil, s, e, epoch, 0, e.NumSamples())
				ps := layout.Stream{DS: parent, Seed: 3, Window: tc.window}
				pe, _ := o.Epoch(ps, epoch)
				old := o.Base().AppendRange(nil, ps, pe, epoch, 0, pe.NumSamples())
				ws := layout.Stream{DS: ds, Seed: 3, Window: tc.window}
				we, _ := o.Epoch(ws, epoch)
				whole := o.Base().AppendRange(nil, ws, we, epoch, 0, we.NumSamples())
				switch {
				case epoch < a.Epoch:
					if !slices.Equal(got, old) {
						t.Fatalf("epoch %d is not the old order:\n got %v\nwant %v", epoch, got, old)
					}
					for c := tc.old; c < len(ds.Counts); c++ {
						if e.ChunkWindow[c] != -1 {
							t.Fatalf("epoch %d: new chunk %d in window %d", epoch, c, e.ChunkWindow[c])
						}
					}
				case epoch == a.Epoch:
					if !slices.Equal(got[:tc.from], old[:tc.from]) {
						t.Fatalf("epoch %d: the positions before %d changed:\n got %v\nwant %v", epoch, tc.from, got[:tc.from], old[:tc.from])
					}
					if w := pe.WindowOf(tc.from); !slices.Equal(got[:pe.WindowStart(w+1)], old[:pe.WindowStart(w+1)]) {
						t.Fatalf("epoch %d: the window holding %d changed", epoch, tc.from)
					}
					exactlyOnceIDs(t, got, len(ds.Counts)*per)
					firstNew := slices.IndexFunc(got, func(id int) bool { return id >= tc.old*per })
					lastOld := slices.IndexFunc(got, func(id int) bool { return id == old[len(old)-1] })
					if firstNew < tc.from || (firstNew < lastOld) != tc.interleaved {
						t.Errorf("epoch %d: first new sample at %d (from %d), the last old one at %d: interleaved %t, want %t", epoch, firstNew, tc.from, lastOld, firstNew < lastOld, tc.interleaved)
					}
				default:
					if !slices.Equal(got, whole) {
						t.Fatalf("epoch %d is not the plain order of the whole dataset", epoch)
					}
				}
				for w := range e.NumWindows() {
					win := e.Window(w)
					if e.WindowStart(w+1)-e.WindowStart(w) != len(win) {
						t.Fatalf("epoch %d window %d: starts %d..%d for %d samples", epoch, w, e.WindowStart(w), e.WindowStart(w+1), len(win))
					}
					for _, id := range win {
						if c := ds.Index.ChunkOf(id); !slices.Contains(e.WindowChunks(w), c) || e.ChunkWindow[c] != int32(w) {
							t.Fatalf("epoch %d window %d: sample %d's chunk %d not named (%v, chunk's window %d)", epoch, w, id, c, e.WindowChunks(w), e.ChunkWindow[c])
						}
					}
					for i := range win {
						if got := e.WindowOf(e.WindowStart(w) + i); got != w {
							t.Fatalf("epoch %d: WindowOf(%d) = %d, want %d", epoch, e.WindowStart(w)+i, got, w)
						}
					}
				}
				for _, world := range []int{1, 3, 4} {
					j := api.Job{Edit: "a1", Params: shuffle.Params{Seed: 3, Window: tc.window, BatchSize: 2, World: world}}
					if cut := cutAll(t, o, ds, j, epoch); !slices.Equal(cut, got) {
						t.Fatalf("epoch %d world %d: batches %v\nwant %v", epoch, world, cut, got)
					}
				}
				if epoch == a.Epoch {
					// A resume at position From (offset=) at another world
					// size reads the rest, as a fresh Orders computes it.
					o2 := units.Orders(nil)
					o2.Edits().Add(a)
					j := api.Job{Edit: "a1", Params: shuffle.Params{Seed: 3, Window: tc.window, BatchSize: 3, World: 5, Offset: tc.from}}
					if rest := cutAll(t, o2, ds, j, epoch); !slices.Equal(rest, got[tc.from:]) {
						t.Fatalf("resume at %d, world 5: %v\nwant %v", tc.from, rest, got[tc.from:])
					}
				}
			}
		})
	}
}

// exactlyOnceIDs checks ids are 0..n-1, each once.
func exactlyOnceIDs(t *testing.T, ids []int, n int) {
	t.Helper()
	seen := make([]int, n)
	for _, id := range ids {
		if id < 0 || id >= n {
			t.Fatalf("sample %d of %d", id, n)
		}
		seen[id]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("sample %d read %d times (%d samples, %d read)", id, k, n, len(ids))
		}
	}
}

// TestAppendETag: a batch wholly before the record's first position,
// or of an earlier epoch, has the ETag it had on the old version; one
// from it on names the record, and the epoch's size and index are
// reported as the job sees them.
func TestAppendETag(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 8, 10)
	parent := catalogtest.Dataset(t, "d", 6, 10)
	a := mustAppend(t, "a1", parent.ID(), ds.ID(), 6, 1, 20, nil)
	o := units.Orders(nil)
	o.Edits().Add(a)
	plain := job(5, 2, 0) // steps of 10
	with := plain
	with.Edit = "a1"
	for _, c := range []struct {
		epoch, m uint64
		same     bool
	}{{0, 0, true}, {0, 5, true}, {1, 0, true}, {1, 1, true}, {1, 2, false}, {2, 0, false}} {
		old := o.ETag(layout.Source{DS: parent}, plain, c.epoch, c.m)
		if same := old == o.ETag(layout.Source{DS: ds}, with, c.epoch, c.m); same != c.same {
			t.Errorf("epoch %d batch %d: ETag unchanged %t, want %t", c.epoch, c.m, same, c.same)
		}
	}
	// With the parent at hand (as a gateway gives it), a batch before the
	// record is laid out over it: its source and stream are the parent's.
	both := layout.Source{DS: ds, Edit: a, Versions: []*catalog.Dataset{parent, ds}}
	for _, c := range []struct {
		epoch, m uint64
		parent   bool
	}{{0, 3, true}, {1, 1, true}, {1, 2, false}, {2, 0, false}} {
		b, err := o.Layout(context.Background(), both, with, c.epoch, c.m)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Source.DS == parent && b.Parts[0].Stream.Edit == ""; got != c.parent || b.ETag != o.ETag(both, with, c.epoch, c.m) {
			t.Errorf("epoch %d batch %d: laid out over the parent %t, want %t (ETag %s, ETag() %s)", c.epoch, c.m, got, c.parent, b.ETag, o.ETag(both, with, c.epoch, c.m))
		}
		if c.parent && b.ETag != o.ETag(layout.Source{DS: parent}, plain, c.epoch, c.m) {
			t.Errorf("epoch %d batch %d: not the parent's ETag", c.epoch, c.m)
		}
		// The epoch's extent is the job's, whatever the batch is laid
		// out over: 6 batches of 10 before the record's epoch, 8 from it.
		if n, samples, err := o.Extent(both, with, c.epoch); err != nil || b.Batches != n || b.EpochSamples != samples || n != map[bool]int{true: 6, false: 8}[c.epoch < 1] {
			t.Errorf("epoch %d batch %d: %d batches of %d samples, Extent %d of %d (%v)", c.epoch, c.m, b.Batches, b.EpochSamples, n, samples, err)
		}
	}
	for epoch, want := range []int{60, 80, 80} {
		info, err := o.Info(layout.Source{DS: ds}, with, uint64(epoch))
		if err != nil {
			t.Fatal(err)
		}
		if info.Samples != want || info.IndexID != parent.ID() {
			t.Errorf("epoch %d: %d samples, index %s; want %d, %s", epoch, info.Samples, info.IndexID, want, parent.ID())
		}
	}
	if _, err := o.Epoch(layout.Stream{DS: ds, Seed: 1, Window: 2, Edit: "nope"}, 0); err == nil {
		t.Error("a record not registered laid an order out")
	}
}

// mustAppend is NewAppend's edit.
func mustAppend(t testing.TB, version, over, index string, chunks int, epoch uint64, from int, prev *layout.Edit) *layout.Edit {
	t.Helper()
	a, err := layout.NewAppend(version, over, index, chunks, epoch, from, prev)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
