package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// referenceAppendedTrace is the trace of j with its append record the
// slow, obvious way, from docs/shuffle.md §15: an epoch before the
// record's is the old chunks' shuffle alone; the record's epoch keeps
// the old order's windows up to the one holding From, then takes each
// next window of the old order's rest or of the new chunks' own shuffle
// (IDs after the old ones) with a PCG of (seed, epoch ^ "append") drawing
// below the old side's windows left; a later epoch is the whole
// dataset's shuffle. The global batches are cut from each epoch's order
// by a plain count, each batch's distinct chunks found by a set.
func referenceAppendedTrace(t *testing.T, d Dataset, j Job) []Access {
	t.Helper()
	var out []Access
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		out = append(out, referenceCut(t, d, j, e, referenceAppendedOrder(t, d, j, e))...)
	}
	return out
}

// referenceAppendedOrder is epoch e's order of j's append record, as
// referenceAppendedTrace lays it out.
func referenceAppendedOrder(t *testing.T, d Dataset, j Job, e int) []int {
	t.Helper()
	a := j.Edit
	// windows is an epoch's order over counts, window by window, its
	// sample IDs shifted by base.
	windows := func(counts []int, e, base int) [][]int {
		ep, err := shuffle.NewEpoch(counts, j.Seed, uint64(e), j.Window)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]int
		for w := range ep.NumWindows() {
			end := ep.NumSamples()
			if w+1 < ep.NumWindows() {
				end = ep.WindowStart(w + 1)
			}
			win := ep.AppendRange(nil, ep.WindowStart(w), end)
			for i := range win {
				win[i] += base
			}
			out = append(out, win)
		}
		return out
	}
	oldSamples := 0
	for _, k := range d.Counts[:a.Chunks] {
		oldSamples += k
	}
	switch {
	case e < a.Epoch:
		return slices.Concat(windows(d.Counts[:a.Chunks], e, 0)...)
	case e > a.Epoch:
		return slices.Concat(windows(d.Counts, e, 0)...)
	}
	var order []int
	old, added := windows(d.Counts[:a.Chunks], e, 0), windows(d.Counts[a.Chunks:], e, oldSamples)
	pos := 0
	for len(old) > 0 {
		// The old windows up to and including the one holding From.
		order = append(order, old[0]...)
		old, pos = old[1:], pos+len(old[0])
		if pos > a.From {
			break
		}
	}
	r := rand.New(rand.NewPCG(j.Seed, uint64(e)^0x617070656e64))
	for len(old)+len(added) > 0 {
		if r.IntN(len(old)+len(added)) < len(old) {
			order, old = append(order, old[0]...), old[1:]
		} else {
			order, added = append(order, added[0]...), added[1:]
		}
	}
	return order
}

// TestTraceWithAppend: a job's trace under an append record is the
// reference's (the old chunks' order before the record's epoch, the
// merge of the old windows left with the new chunks' in it, the whole
// dataset's order after), at several cuts, windows and first positions;
// the new chunks are read in no epoch before the record's, and (unless
// drop_last drops them) in every one from it.
func TestTraceWithAppend(t *testing.T) {
	d := Dataset{ChunkSizes: equalSizes(14, 100), Counts: []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 7, 10, 10, 3}}
	for _, c := range []struct {
		batch, world, window int
		drop                 bool
		old, epoch, from     int
	}{
		{4, 1, 3, false, 10, 0, 0},
		{4, 2, 3, false, 10, 1, 37},
		{5, 3, 2, true, 12, 1, 60},
		{7, 1, 14, false, 10, 2, 99},
		{3, 2, 1, true, 13, 0, 120},
		{6, 1, 4, false, 10, 1, 100}, // past every old sample: the new windows at the end
	} {
		t.Run(fmt.Sprintf("b%d/w%d/window%d/drop%t/old%d/from%d.%d", c.batch, c.world, c.window, c.drop, c.old, c.epoch, c.from), func(t *testing.T) {
			j := Job{Params: shuffle.Params{Seed: 3, Window: c.window, BatchSize: c.batch, World: c.world, DropLast: c.drop},
				FirstEpoch: 0, Epochs: 4, Edit: &Edit{Version: "v", Chunks: c.old, Epoch: c.epoch, From: c.from}}
			got, err := Trace(d, j)
			if err != nil {
				t.Fatal(err)
			}
			if want := referenceAppendedTrace(t, d, j); !slices.Equal(got, want) {
				t.Fatalf("trace %v\nwant %v", got, want)
			}
			read := map[int32]bool{} // epochs that read a new chunk
			for _, a := range got {
				if int(a.Chunk) >= c.old {
					read[a.Epoch] = true
				}
			}
			for e := range int32(4) {
				// (drop_last may drop a new chunk's samples at an epoch's end.)
				if read[e] != (int(e) >= c.epoch) && !(c.drop && !read[e]) {
					t.Fatalf("epoch %d reads a new chunk: %t; the record is of epoch %d", e, read[e], c.epoch)
				}
			}
		})
	}
}

// TestPlanWithAppend: from a cold cache that holds the dataset, the
// epoch before the record's reads the old chunks' bytes, the record's
// epoch the new chunks' alone (the old ones are cached), and the next
// none, on one gateway and on a cluster; the plan's job names the
// record. A record over more chunks than the dataset's is refused.
func TestPlanWithAppend(t *testing.T) {
	d := Dataset{ChunkSizes: []int64{100, 200, 300, 400, 500, 600, 700, 800}, Counts: []int{10, 10, 10, 10, 10, 10, 10, 10}}
	j := Job{Params: shuffle.Params{Seed: 3, Window: 2, BatchSize: 4, World: 1}, Epochs: 3, Edit: &Edit{Version: "v", Chunks: 6, Epoch: 1, From: 28}}
	p, err := MakePlan(context.Background(), PlanInput{Dataset: d, Job: j, CacheBytes: 3600, BackendBytesPerSec: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		name string
		res  Result
	}{{"lru", p.LRU}, {"optimal", p.Optimal}} {
		if got := []int64{r.res.Epochs[0].BackendBytes, r.res.Epochs[1].BackendBytes, r.res.Epochs[2].BackendBytes}; !slices.Equal(got, []int64{2100, 1500, 0}) {
			t.Errorf("%s: the epochs read %v bytes; want the old chunks' 2100, the new ones' 1500, then none", r.name, got)
		}
	}
	if p.Job.Edit == nil || p.Job.Edit.Version != "v" || p.Samples != 80 {
		t.Errorf("the plan's job %+v, %d samples; want the record v and the new size 80", p.Job, p.Samples)
	}
	// A cluster of 3 nodes with the same room reads the same bytes from
	// the store, each node its own chunks, at world 2.
	cj := j
	cj.World = 2
	cp, err := MakeClusterPlan(context.Background(), ClusterInput{Dataset: d, Job: cj, IndexKey: 7, Nodes: 3, NodeCacheBytes: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if got := []int64{cp.Epochs[0].StoreBytes, cp.Epochs[1].StoreBytes, cp.Epochs[2].StoreBytes}; !slices.Equal(got, []int64{2100, 1500, 0}) {
		t.Errorf("3 nodes: the epochs read %v bytes; want 2100, 1500, then none", got)
	}
	for _, bad := range []Job{
		{Params: j.Params, Epochs: 2, Edit: &Edit{Chunks: 9}},
	} {
		if _, err := MakePlan(context.Background(), PlanInput{Dataset: d, Job: bad, CacheBytes: 3600, BackendBytesPerSec: 1 << 30}); err == nil {
			t.Errorf("a plan of %+v: no error", bad)
		}
	}
}
