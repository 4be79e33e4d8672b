package planner

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// uniformDataset is chunks chunks of count samples and size bytes each.
func uniformDataset(chunks, count int, size int64) Dataset {
	d := Dataset{Counts: make([]int, chunks), ChunkSizes: make([]int64, chunks)}
	for c := range chunks {
		d.Counts[c], d.ChunkSizes[c] = count, size
	}
	return d
}

// TestSchedulePlanPerPhase: a plan of a schedule gives each phase the
// working set of its batches — the largest of which is the plan's — and
// says which phases a cache below it stalls in; both policies' figures
// are split by phase, the parts summing to the totals, and with a cache
// that holds the data each phase reads from the store the chunks first
// read in its steps.
func TestSchedulePlanPerPhase(t *testing.T) {
	const size = 1000
	m := Mix{Components: []MixComponent{
		{Name: "a", Weight: 6, Dataset: uniformDataset(24, 8, size)},
		{Name: "b", Weight: 3, Dataset: uniformDataset(24, 8, size)},
		{Name: "c", Weight: 1, Dataset: uniformDataset(24, 8, size)},
	}}
	j := Job{Params: shuffle.Params{Seed: 5, Window: 8, BatchSize: 8, World: 2}, Epochs: 3}
	// Epochs of 576 samples are 36 steps of 16: the switch is in epoch 1.
	m.Phases = []shuffle.SchedulePhase{{Weights: []uint64{6, 3, 1}}, {Step: 50, Weights: []uint64{1, 1, 8}}}
	plan := func(cache int64) *Plan {
		t.Helper()
		p, err := MakePlan(context.Background(), PlanInput{Mix: &m, Job: j, CacheBytes: cache, BackendBytesPerSec: 1e9})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := plan(72 * size)
	// The reference: the trace's batches in order, epoch e's batch b at
	// step 36e+b (a step is a global batch of 16), each chunk's first
	// access counted in its phase.
	trace, err := mixTrace(m, j)
	if err != nil {
		t.Fatal(err)
	}
	var firstReads [2]int64
	seen := map[int32]bool{}
	batch := -1
	for _, a := range trace {
		if a.Start {
			batch++
		}
		if step := batch; !seen[a.Chunk] {
			seen[a.Chunk] = true
			firstReads[min(1, step/50)]++
		}
	}
	if firstReads[1] == 0 {
		t.Fatalf("every chunk is first read before the switch: the test needs some after")
	}
	ph := p.Mix.Phases
	if len(ph) != 2 || ph[0].Steps != 50 || ph[1].Steps != 3*36-50 {
		t.Fatalf("phases %+v", ph)
	}
	most := max(ph[0].WorkingSetBytes, ph[1].WorkingSetBytes)
	if most != p.WorkingSetBytes || ph[0].WorkingSetBytes == 0 || ph[1].WorkingSetBytes == 0 {
		t.Fatalf("phase working sets %d, %d; the plan's %d", ph[0].WorkingSetBytes, ph[1].WorkingSetBytes, p.WorkingSetBytes)
	}
	if ph[0].Stalls || ph[1].Stalls {
		t.Fatalf("a cache of the whole data stalls: %+v", ph)
	}
	for _, r := range []Result{p.LRU, p.Optimal} {
		if len(r.Phases) != 2 {
			t.Fatalf("%s: %d phase results", r.Policy, len(r.Phases))
		}
		var acc, hits int
		var back int64
		for _, x := range r.Phases {
			acc, hits, back = acc+x.Accesses, hits+x.Hits, back+x.BackendBytes
		}
		if acc != r.Accesses || hits != r.Hits || back != r.BackendBytes {
			t.Fatalf("%s: phases sum to %d accesses, %d hits, %d B; the run %d, %d, %d B", r.Policy, acc, hits, back, r.Accesses, r.Hits, r.BackendBytes)
		}
		// The data fits: a chunk is read from the store once, in the
		// phase of the step that first reads it.
		for n := range 2 {
			if r.Phases[n].BackendBytes != firstReads[n]*size {
				t.Fatalf("%s: phase results %+v; chunks first read in each phase %v", r.Policy, r.Phases, firstReads)
			}
		}
	}
	// A cache between the two phases' working sets stalls in the larger's
	// phase only.
	lo, hi := min(ph[0].WorkingSetBytes, ph[1].WorkingSetBytes), most
	if lo == hi {
		t.Fatalf("both phases' working sets are %d: the test needs them apart", lo)
	}
	q := plan(lo)
	for n, x := range q.Mix.Phases {
		if want := x.WorkingSetBytes > lo; x.Stalls != want || x.WorkingSetBytes != ph[n].WorkingSetBytes {
			t.Fatalf("at a cache of %d: phase %d %+v", lo, n, x)
		}
	}
	var b bytes.Buffer
	if err := q.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "stalls") || !strings.Contains(b.String(), "1:1:8") {
		t.Fatalf("the report has no phase table:\n%s", b.String())
	}
	t.Logf("working sets %d, %d; the report's phases at %d B:\n%s", ph[0].WorkingSetBytes, ph[1].WorkingSetBytes, lo, b.String()[strings.Index(b.String(), "phase "):])
}
