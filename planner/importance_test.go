package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/shuffle"
)

// importanceGoldenInput is goldenInput in importance mode: epochs 1–3
// from a clustered snapshot, hot 8.
func importanceGoldenInput(t *testing.T) PlanInput {
	in := goldenInput()
	in.Job.FirstEpoch = 1
	in.Importance = &Importance{Snapshot: clusteredSnapshot(t, in.Dataset.Counts, 2), Hot: 8}
	return in
}

// The report and the JSON carry the importance figures after the uniform
// ones; testdata/plan-importance.txt and .json pin both.
func TestImportancePlanGolden(t *testing.T) {
	p := mustPlan(t, importanceGoldenInput(t))
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan-importance.txt", b.Bytes())
	js, err := json.MarshalIndent(p.Importance, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan-importance.json", append(js, '\n'))
}

// The importance figures are those of the trace of importance.NewEpoch's
// orders, simulated by Simulate and SimulateImportance; and the uniform
// figures are the uniform plan's, unchanged by the importance mode.
func TestImportancePlanIsItsTrace(t *testing.T) {
	in := importanceGoldenInput(t)
	p := mustPlan(t, in)
	uniform := in
	uniform.Importance = nil
	u := mustPlan(t, uniform)
	p2 := *p
	p2.Importance = nil
	a, _ := json.Marshal(&p2)
	b, _ := json.Marshal(u)
	if !bytes.Equal(a, b) {
		t.Errorf("the uniform figures change in importance mode:\n%s\n%s", a, b)
	}

	// The trace, rebuilt batch by batch from each epoch's Batch.
	var trace []Access
	var weights []float64
	n := 0
	for _, k := range in.Dataset.Counts {
		n += k
	}
	first := make([]int, 0, len(in.Dataset.Counts)+1)
	sum := 0
	for _, k := range in.Dataset.Counts {
		first = append(first, sum)
		sum += k
	}
	chunkOf := func(id int) int32 {
		c := 0
		for c+1 < len(first) && first[c+1] <= id {
			c++
		}
		return int32(c)
	}
	j := in.Job
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		ep, err := importance.NewEpoch(in.Dataset.Counts, in.Importance.Snapshot, j.Seed, uint64(e), j.Window, in.Importance.Hot)
		if err != nil {
			t.Fatal(err)
		}
		if weights == nil {
			for c := range in.Dataset.Counts {
				weights = append(weights, ep.ChunkWeight(c))
			}
		}
		for m := range shuffle.NumBatches(n, j.BatchSize, j.World, j.DropLast) {
			seen := map[int32]bool{}
			start := true
			for r := range j.World {
				ids, err := ep.Batch(m, j.BatchSize, j.World, r, j.DropLast)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					if c := chunkOf(id); !seen[c] {
						seen[c] = true
						trace = append(trace, Access{Chunk: c, Epoch: int32(e), Start: start})
						start = false
					}
				}
			}
		}
	}
	same := func(name string, got, want Result) {
		t.Helper()
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("%s: the plan says\n%s\nthe trace says\n%s", name, g, w)
		}
	}
	ip := p.Importance
	same("lru", ip.LRU, Simulate(trace, in.Dataset.ChunkSizes, in.CacheBytes, LRU))
	same("belady", ip.Optimal, Simulate(trace, in.Dataset.ChunkSizes, in.CacheBytes, Belady))
	same("importance-aware", ip.Aware, simulateImportance(trace, in.Dataset.ChunkSizes, weights, in.CacheBytes))
}

// Importance input outside its range is ErrInvalid.
func TestImportancePlanInvalid(t *testing.T) {
	in := importanceGoldenInput(t)
	other, err := importance.NewSnapshot(reportIndex{7}, "x", 0, make([]float32, 7))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		imp  Importance
	}{
		{"no snapshot", Importance{}},
		{"negative hot", Importance{Snapshot: in.Importance.Snapshot, Hot: -1}},
		{"another dataset's snapshot", Importance{Snapshot: other}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := in
			in.Importance = &tt.imp
			if _, err := MakePlan(context.Background(), in); !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v; want ErrInvalid", err)
			}
		})
	}
}
