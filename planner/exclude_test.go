package planner

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// referenceExcludedTrace is the trace of j with its exclusion the slow,
// obvious way: each epoch's order as shuffle lays it out, the list's
// samples removed from position From of its epoch on (every position of
// a later one), the global batches cut from what is left by a plain
// count, each batch's distinct chunks by a set.
func referenceExcludedTrace(t *testing.T, d Dataset, j Job) []Access {
	t.Helper()
	var out []Access
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		out = append(out, referenceCut(t, d, j, e, referenceExcludedOrder(t, d, j, e))...)
	}
	return out
}

// referenceExcludedOrder is epoch e's order of j's exclusions, as
// referenceExcludedTrace lays it out.
func referenceExcludedOrder(t *testing.T, d Dataset, j Job, e int) []int {
	t.Helper()
	var links []*Edit // first first
	for x := j.Edit; x != nil; x = x.Previous {
		links = append([]*Edit{x}, links...)
	}
	ep, err := shuffle.NewEpoch(d.Counts, j.Seed, uint64(e), j.Window)
	if err != nil {
		t.Fatal(err)
	}
	order := ep.AppendRange(nil, 0, ep.NumSamples())
	// Each version: its previous one's order up to its position, and
	// without its samples from there.
	for _, x := range links {
		from := len(order)
		switch {
		case e > x.Epoch:
			from = 0
		case e == x.Epoch:
			from = min(x.From, len(order))
		}
		next := slices.Clone(order[:from])
		for _, id := range order[from:] {
			if x.Drop[id/64]&(1<<(id%64)) == 0 {
				next = append(next, id)
			}
		}
		order = next
	}
	return order
}

// referenceCut is the accesses of epoch e's order cut into j's global
// batches by a plain count, each batch's distinct chunks by a set.
func referenceCut(t *testing.T, d Dataset, j Job, e int, order []int) []Access {
	t.Helper()
	chunkOf := func(id int) int32 {
		first := 0
		for c, k := range d.Counts {
			if id < first+k {
				return int32(c)
			}
			first += k
		}
		t.Fatalf("sample %d beyond the dataset", id)
		return -1
	}
	var out []Access
	g := j.BatchSize * j.World
	for start := 0; start < len(order); start += g {
		end := min(start+g, len(order))
		if end-start < g && j.DropLast {
			break
		}
		seen := map[int32]bool{}
		for _, id := range order[start:end] {
			if c := chunkOf(id); !seen[c] {
				out = append(out, Access{Chunk: c, Epoch: int32(e), Start: len(seen) == 0})
				seen[c] = true
			}
		}
	}
	return out
}

// testExclusion drops every sample of chunks empty and each other sample
// of d with probability 1/5 (seeded by its position).
func testExclusion(d Dataset, empty []int, epoch, from int) *Edit {
	n := 0
	for _, k := range d.Counts {
		n += k
	}
	x := &Edit{Version: "v", Epoch: epoch, From: from, Drop: make([]uint64, (n+63)/64)}
	r := rand.New(rand.NewPCG(uint64(epoch)<<32|uint64(from), uint64(len(empty))))
	first := 0
	for c, k := range d.Counts {
		for id := first; id < first+k; id++ {
			if slices.Contains(empty, c) || r.IntN(5) == 0 {
				x.Drop[id/64] |= 1 << (id % 64)
				x.Samples++
			}
		}
		first += k
	}
	return x
}

// TestTraceWithExclusion: a job's trace under an exclusion list is the
// reference's (the order without the list's samples from its position
// on, the batches cut from what is left), at several cuts and from
// several positions; a chunk the list empties is in no batch after it.
func TestTraceWithExclusion(t *testing.T) {
	d := Dataset{ChunkSizes: equalSizes(12, 100), Counts: []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}}
	for _, c := range []struct {
		batch, world, window int
		drop                 bool
		epoch, from          int
	}{
		{4, 1, 3, false, 0, 0},
		{4, 2, 3, false, 1, 37},
		{5, 3, 2, true, 1, 60},
		{7, 1, 12, false, 2, 119},
		{3, 2, 1, true, 0, 120},
	} {
		t.Run(fmt.Sprintf("b%d/w%d/window%d/drop%t/from%d.%d", c.batch, c.world, c.window, c.drop, c.epoch, c.from), func(t *testing.T) {
			j := Job{Params: shuffle.Params{Seed: 3, Window: c.window, BatchSize: c.batch, World: c.world, DropLast: c.drop},
				FirstEpoch: 0, Epochs: 4, Edit: testExclusion(d, []int{2, 9}, c.epoch, c.from)}
			got, err := Trace(d, j)
			if err != nil {
				t.Fatal(err)
			}
			if want := referenceExcludedTrace(t, d, j); !slices.Equal(got, want) {
				t.Fatalf("trace %v\nwant %v", got, want)
			}
			for _, a := range got {
				if (a.Chunk == 2 || a.Chunk == 9) && int(a.Epoch) > c.epoch {
					t.Fatalf("chunk %d, which the list empties, read in epoch %d", a.Chunk, a.Epoch)
				}
			}
		})
	}
}

// TestTraceWithAnExtendedExclusion: the trace of a job whose list was
// extended, twice, is the reference's: each version its previous one's
// order up to its position, without both's samples from there.
func TestTraceWithAnExtendedExclusion(t *testing.T) {
	d := Dataset{ChunkSizes: equalSizes(12, 100), Counts: []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}}
	union := func(x, y *Edit) *Edit {
		z := &Edit{Version: y.Version, Epoch: y.Epoch, From: y.From, Drop: make([]uint64, len(x.Drop)), Previous: x}
		for i := range z.Drop {
			z.Drop[i] = x.Drop[i] | y.Drop[i]
			z.Samples += bits.OnesCount64(z.Drop[i])
		}
		return z
	}
	for _, c := range []struct {
		window, batch, world int
		links                [][2]int // epoch, from
	}{
		{3, 4, 1, [][2]int{{0, 20}, {0, 55}}},
		{2, 5, 2, [][2]int{{0, 30}, {1, 17}, {1, 40}}},
		{12, 3, 1, [][2]int{{1, 0}, {1, 0}}},
		{1, 7, 1, [][2]int{{1, 60}, {2, 3}}},
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			var x *Edit
			for k, l := range c.links {
				y := testExclusion(d, []int{2 + 3*k}, l[0], l[1])
				y.Version = fmt.Sprint("v", k+1)
				if x != nil {
					y = union(x, y)
				}
				x = y
			}
			j := Job{Params: shuffle.Params{Seed: 5, Window: c.window, BatchSize: c.batch, World: c.world}, Epochs: 4, Edit: x}
			got, err := Trace(d, j)
			if err != nil {
				t.Fatal(err)
			}
			if want := referenceExcludedTrace(t, d, j); !slices.Equal(got, want) {
				t.Fatalf("trace %v\nwant %v", got, want)
			}
		})
	}
}

// TestPlanWithExclusion: from a cold cache that holds the dataset, an
// epoch after the list's reads every chunk the job reads once: the
// dataset's bytes less those of the chunks the list empties, which the
// plan without the list reads.
func TestPlanWithExclusion(t *testing.T) {
	d := Dataset{ChunkSizes: []int64{100, 200, 300, 400, 500, 600, 700, 800}, Counts: []int{10, 10, 10, 10, 10, 10, 10, 10}}
	j := Job{Params: shuffle.Params{Seed: 3, Window: 2, BatchSize: 4, World: 1}, FirstEpoch: 1, Epochs: 2}
	plan := func(x *Edit) *Plan {
		j := j
		j.Edit = x
		p, err := MakePlan(context.Background(), PlanInput{Dataset: d, Job: j, CacheBytes: 3600, BackendBytesPerSec: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	without, with := plan(nil), plan(testExclusion(d, []int{1, 6}, 0, 40))
	for _, r := range []struct {
		name          string
		without, with Result
	}{{"lru", without.LRU, with.LRU}, {"optimal", without.Optimal, with.Optimal}} {
		if r.without.Epochs[0].BackendBytes != 3600 || r.with.Epochs[0].BackendBytes != 3600-200-700 {
			t.Errorf("%s: epoch 1 reads %d bytes with the list, %d without; want 2700 and 3600", r.name, r.with.Epochs[0].BackendBytes, r.without.Epochs[0].BackendBytes)
		}
		if r.without.Epochs[1].BackendBytes != 0 || r.with.Epochs[1].BackendBytes != 0 {
			t.Errorf("%s: epoch 2 reads %d and %d bytes; the cache holds the dataset", r.name, r.with.Epochs[1].BackendBytes, r.without.Epochs[1].BackendBytes)
		}
	}
	if with.Job.Edit == nil || with.Job.Edit.Version != "v" {
		t.Errorf("the plan's job does not name its list: %+v", with.Job)
	}
}
