package seqpack_test

import (
	"fmt"
	"strings"

	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
)

// The worked example of docs/shuffle.md §12.4: the shuffle's worked
// example (§9) read as documents of tokens, packed into sequences of 8 by
// best fit, served as batches of 2 sequences to 2 ranks.
func Example() {
	order, err := shuffle.NewEpoch([]int{3, 2, 4}, 1, 0, 2)
	if err != nil {
		panic(err)
	}
	tokens := []int{5, 3, 9, 2, 7, 4, 1, 6, 3} // per document
	e, err := seqpack.NewPacking(order, func(d int) int { return tokens[d] }, seqpack.Spec{Seq: 8, Mode: seqpack.BestFit}, 1, 0)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d sequences, fill %d/%d\n", e.NumSequences(), e.NumTokens(), e.NumSequences()*8)
	p := shuffle.Params{Window: 2, BatchSize: 2, World: 2}
	for m := range p.NumBatches(e.NumSequences()) {
		for r := range p.World {
			p.Rank = r
			batch, err := e.Batch(p, m)
			if err != nil {
				panic(err)
			}
			fmt.Printf("batch %d rank %d:", m, r)
			for _, s := range batch {
				fmt.Print(" ", format(s))
			}
			fmt.Println()
		}
	}
	fmt.Println(e.AppendRange(nil, 0, 1)[0].AppendPositions(nil))
	// Output:
	// 6 sequences, fill 40/48
	// batch 0 rank 0: [5:0+4 8:0+3 pad 1] [7:0+6 3:0+2]
	// batch 0 rank 1: [4:0+7 6:0+1] [2:8+1 pad 7]
	// batch 1 rank 0: [0:0+5 1:0+3] [2:0+8]
	// batch 1 rank 1:
	// [0 1 2 3 0 1 2 0]
}

// format writes a sequence as its pieces, document:offset+length, and its
// pad.
func format(s seqpack.Sequence) string {
	var parts []string
	for _, p := range s.Pieces {
		parts = append(parts, fmt.Sprintf("%d:%d+%d", p.Doc, p.Offset, p.Len))
	}
	if s.Pad > 0 {
		parts = append(parts, fmt.Sprintf("pad %d", s.Pad))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
