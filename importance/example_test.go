package importance_test

import (
	"fmt"

	"github.com/brandgw/brand/importance"
)

// dataset stands in for a *chunkindex.Index.
type dataset struct{}

func (dataset) ID() string      { return "0123456789abcdef" }
func (dataset) NumSamples() int { return 12 }

// A job's epoch 0 is the uniform shuffle; its losses, sealed, steer epoch 1.
func Example() {
	counts := []int{2, 3, 2, 2, 3} // samples per chunk

	// Epoch 0: the gateway gathers the trainer's feedback...
	acc, _ := importance.NewAccumulator(dataset{}, "job", 0)
	_ = acc.Add([]int{0, 1, 2, 3, 4, 5}, []float32{4, 1.5, 0.25, 0.5, 3, 2})
	_ = acc.Add([]int{6, 7, 8, 9, 10, 11}, []float32{0.125, 1, 0.75, 0, 2.5, 0.375})
	err := acc.Add([]int{12}, []float32{1})
	fmt.Println(err)

	// ...and seals it into an object it writes to the store.
	snap, _ := importance.Seal(nil, acc)
	data := snap.MarshalBinary()
	fmt.Println(snap.Key())

	// Epoch 1, on any gateway: read the snapshot the request names.
	snap, err = importance.Decode(data, dataset{})
	if err != nil {
		panic(err)
	}
	order, _ := importance.NewOrder(importance.OrderSpec{Counts: counts, Seed: 1, Epoch: 1, Window: 2, Snapshot: snap, Hot: 1})
	e := order.(*importance.Epoch)
	fmt.Println("chunks read:", e.ChunkOrder(), "draws per chunk:", e.Draws(0), e.Draws(2), e.Draws(3))
	fmt.Println("epoch length:", e.NumSamples())
	// Output:
	// importance: bad feedback: entry 0: sample ID 12 not in [0, 12)
	// _brand/importance/job/b47f1db666c440ab.brandimp
	// chunks read: [0 2 3] draws per chunk: 6 3 3
	// epoch length: 12
}
