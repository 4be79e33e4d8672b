package shuffle_test

import (
	"fmt"

	"github.com/brandgw/brand/shuffle"
)

// The epoch of the "worked-example" golden vector (docs/shuffle.md): three
// chunks of 3, 2 and 4 samples, windows of 2 chunks, 2 ranks of batch 2.
func Example() {
	e, err := shuffle.NewEpoch([]int{3, 2, 4}, 1, 0, 2)
	if err != nil {
		panic(err)
	}
	fmt.Println("chunk order:", e.ChunkOrder())
	for w := range e.NumWindows() {
		fmt.Printf("window %d: chunks %v, samples %v\n", w, e.WindowChunks(w), e.Window(w))
	}
	for m := range shuffle.NumBatches(e.NumSamples(), 2, 2, false) {
		for rank := range 2 {
			ids, err := e.Batch(m, 2, 2, rank, false)
			if err != nil {
				panic(err)
			}
			fmt.Printf("batch %d rank %d: %v\n", m, rank, ids)
		}
	}
	fmt.Println("chunks of batch 1:", e.ChunksOfRange(4, 8))
	// Output:
	// chunk order: [1 2 0]
	// window 0: chunks [1 2], samples [3 5 6 8 4 7]
	// window 1: chunks [0], samples [1 0 2]
	// batch 0 rank 0: [3 5]
	// batch 0 rank 1: [6 8]
	// batch 1 rank 0: [4 7]
	// batch 1 rank 1: [1 0]
	// batch 2 rank 0: [2]
	// batch 2 rank 1: []
	// chunks of batch 1: [1 2 0]
}

// A gateway validates a job's parameters once, when it parses the request.
func ExampleParams_Validate() {
	p := shuffle.Params{Seed: 7, Window: 8, BatchSize: 256, World: 4, Rank: 4}
	fmt.Println(p.Validate())
	// Output:
	// shuffle: invalid parameters: rank 4 out of range [0, 4) for world size 4
}
