package planner_test

import (
	"context"
	"fmt"
	"log"

	"github.com/brandgw/brand/shuffle"

	"github.com/brandgw/brand/planner"
)

// Simulate on the textbook reference string with room for three equal
// chunks: LRU faults 12 times, Belady (optimal here) 9.
func ExampleSimulate() {
	var trace []planner.Access
	for _, c := range []int32{7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1} {
		trace = append(trace, planner.Access{Chunk: c})
	}
	sizes := make([]int64, 8)
	for c := range sizes {
		sizes[c] = 64 << 20
	}
	for _, p := range []planner.Policy{planner.LRU, planner.Belady} {
		r := planner.Simulate(trace, sizes, 3*64<<20, p)
		fmt.Printf("%-6v %d hits of %d, %d MiB read\n", r.Policy, r.Hits, r.Accesses, r.BackendBytes>>20)
	}
	// Output:
	// lru    8 hits of 20, 768 MiB read
	// belady 11 hits of 20, 576 MiB read
}

// MakePlan for 100 chunks of 64 MiB, a window of 4 chunks, and a trainer
// twice as fast as the backend: a steady epoch may read only half the
// dataset, so the optimal policy must keep the other half cached.
func ExampleMakePlan() {
	d := planner.Dataset{ChunkSizes: make([]int64, 100), Counts: make([]int, 100)}
	for c := range d.Counts {
		d.ChunkSizes[c], d.Counts[c] = 64<<20, 500
	}
	p, err := planner.MakePlan(context.Background(), planner.PlanInput{
		Dataset:            d,
		Job:                planner.Job{Params: shuffle.Params{Seed: 1, Window: 4, BatchSize: 64, World: 8}, Epochs: 3},
		CacheBytes:         2 << 30,
		BackendBytesPerSec: 500 << 20,
		ConsumeBytesPerSec: 1000 << 20,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("working set %d MiB, no-stall cache %d MiB of %d MiB\n",
		p.WorkingSetBytes>>20, p.MinNoStallCacheBytes>>20, p.DatasetBytes>>20)
	fmt.Printf("cold epoch stalls: %t, steady epochs at 2 GiB stall: %t\n", p.ColdEpochStalls, p.SteadyEpochsStall)
	// Output:
	// working set 768 MiB, no-stall cache 3200 MiB of 6400 MiB
	// cold epoch stalls: true, steady epochs at 2 GiB stall: true
}
