package planner

import (
	"math/rand/v2"
	"testing"
)

// epochs builds a trace of single-chunk batches: epochs[e] are epoch e's
// chunks in order.
func epochs(epochs ...[]int32) []Access {
	var t []Access
	for e, cs := range epochs {
		for _, c := range cs {
			t = append(t, Access{Chunk: c, Epoch: int32(e), Start: true})
		}
	}
	return t
}

// The importance-aware policy on traces small enough to work by hand.
// Every chunk is one unit and the cache holds two unless said otherwise.
func TestSimulateImportanceByHand(t *testing.T) {
	ones := func(n int) []int64 {
		s := make([]int64, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	tests := []struct {
		name    string
		trace   []Access
		sizes   []int64
		weights []float64
		cache   int64
		// hits per epoch under importance-aware, LRU and Belady
		aware, lru, belady []int
		awareBytes         []int64 // backend bytes per epoch, importance-aware
	}{
		{
			// e0: 1 0 2 | e1: 1. At the miss on 2 nothing is needed again
			// this epoch: the lighter 0 goes, and the heavy 1 hits in e1.
			// LRU evicts 1, the least recently used.
			name:    "heaviest kept across the epoch",
			trace:   epochs([]int32{1, 0, 2}, []int32{1}),
			sizes:   ones(3),
			weights: []float64{1, 4, 2},
			cache:   2,
			aware:   []int{0, 1}, lru: []int{0, 0}, belady: []int{0, 1},
			awareBytes: []int64{3, 0},
		},
		{
			// e0: 1 0 2 | e1: 0. The same choice misses when the next
			// epoch wants the light chunk, which only the offline optimum
			// knows.
			name:    "the next epoch is unknown",
			trace:   epochs([]int32{1, 0, 2}, []int32{0}),
			sizes:   ones(3),
			weights: []float64{1, 4, 2},
			cache:   2,
			aware:   []int{0, 0}, lru: []int{0, 1}, belady: []int{0, 1},
			awareBytes: []int64{3, 1},
		},
		{
			// e0: 0 1 2 0. At the miss on 2, chunk 1 (heavy) is not needed
			// again this epoch and chunk 0 (light) is: needed chunks stay,
			// whatever their weight, so 1 goes and 0 hits.
			name:    "needed before weight",
			trace:   epochs([]int32{0, 1, 2, 0}),
			sizes:   ones(3),
			weights: []float64{1, 8, 1},
			cache:   2,
			aware:   []int{1}, lru: []int{0}, belady: []int{1},
			awareBytes: []int64{3},
		},
		{
			// e0: 0 1 2 3 1 2 3 with room for three: at the miss on 3 the
			// unneeded 0 goes, the heaviest though it is; 1, 2, 3 then hit.
			name:    "unneeded goes, whatever its weight",
			trace:   epochs([]int32{0, 1, 2, 3, 1, 2, 3}),
			sizes:   ones(4),
			weights: []float64{9, 1, 5, 1},
			cache:   3,
			aware:   []int{3}, lru: []int{3}, belady: []int{3},
			awareBytes: []int64{4},
		},
		{
			// e0: 0 1 2 3 1 2 with room for two: at the miss on 2, 0 is
			// not needed and goes; at the miss on 3, 1 (next use 4) and 2
			// (next use 5) are needed and 2, the furthest, goes, heavier
			// though it is. 1 hits, 2 misses.
			name:    "furthest needed goes, whatever its weight",
			trace:   epochs([]int32{0, 1, 2, 3, 1, 2}),
			sizes:   ones(4),
			weights: []float64{1, 1, 9, 1},
			cache:   2,
			aware:   []int{1}, lru: []int{0}, belady: []int{1},
			awareBytes: []int64{5},
		},
		{
			// e0: 0 1 | e1: 2 0. Released in e0, chunk 0's next use is in
			// e1, so it is weighed, and lighter than 1. When e1 begins it
			// becomes needed: the miss on 2 evicts the heavy 1, and 0 hits.
			// LRU evicts 0, the least recently used.
			name:    "the new epoch's uses count once it starts",
			trace:   epochs([]int32{0, 1}, []int32{2, 0}),
			sizes:   ones(3),
			weights: []float64{1, 8, 1},
			cache:   2,
			aware:   []int{0, 1}, lru: []int{0, 0}, belady: []int{0, 1},
			awareBytes: []int64{2, 1},
		},
		{
			// Equal weights: among chunks not needed the least recently
			// used goes. e0: 0 1 2 | e1: 1 — at the miss on 2, 0 (used
			// first) goes and 1 stays.
			name:    "equal weights: least recently used first",
			trace:   epochs([]int32{0, 1, 2}, []int32{1}),
			sizes:   ones(3),
			weights: []float64{1, 1, 1},
			cache:   2,
			aware:   []int{0, 1}, lru: []int{0, 1}, belady: []int{0, 1},
			awareBytes: []int64{3, 0},
		},
		{
			// Bytes: chunk 2 is two units. e0: 0 1 2 | e1: 1 0, cache 3.
			// The miss on 2 frees one unit: 0, the lighter of the two
			// chunks not needed this epoch, goes. e1 begins; 1 is needed
			// and hits; the miss on 0 evicts 2, lighter than 1 and no
			// longer needed.
			name:    "bytes",
			trace:   epochs([]int32{0, 1, 2}, []int32{1, 0}),
			sizes:   []int64{1, 1, 2},
			weights: []float64{1, 4, 1},
			cache:   3,
			aware:   []int{0, 1}, lru: []int{0, 1}, belady: []int{0, 1},
			awareBytes: []int64{4, 1},
		},
		{
			// Weight 0 (an empty chunk in the gateway's terms) is never
			// needed and goes before any weighed chunk.
			name:    "weightless first",
			trace:   epochs([]int32{1, 0, 2}, []int32{1}),
			sizes:   ones(3),
			weights: []float64{0, 0.001, 1},
			cache:   2,
			aware:   []int{0, 1}, lru: []int{0, 0}, belady: []int{0, 1},
			awareBytes: []int64{3, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(name string, r Result, want []int) {
				t.Helper()
				if len(r.Epochs) != len(want) {
					t.Fatalf("%s: %d epochs, want %d", name, len(r.Epochs), len(want))
				}
				for e, w := range want {
					if r.Epochs[e].Hits != w {
						t.Errorf("%s: epoch %d hits %d, want %d", name, e, r.Epochs[e].Hits, w)
					}
				}
			}
			aware := simulateImportance(tt.trace, tt.sizes, tt.weights, tt.cache)
			check("importance-aware", aware, tt.aware)
			check("lru", Simulate(tt.trace, tt.sizes, tt.cache, LRU), tt.lru)
			check("belady", Simulate(tt.trace, tt.sizes, tt.cache, Belady), tt.belady)
			for e, w := range tt.awareBytes {
				if got := aware.Epochs[e].BackendBytes; got != w {
					t.Errorf("importance-aware: epoch %d read %d bytes, want %d", e, got, w)
				}
			}
			if aware.Policy != ImportanceAware {
				t.Errorf("policy %v", aware.Policy)
			}
		})
	}
}

// farKeys orders chunks as the gateway's use table does: lighter first,
// weight 0 before all, and weights over the mean in 1/65536 steps.
func TestFarKeys(t *testing.T) {
	far := farKeys([]float64{0, 1, 2, 3, 2})
	if far[0] != never64 {
		t.Errorf("weight 0: key %d, want never", far[0])
	}
	for c := 1; c < 3; c++ {
		if far[c] <= far[c+1] {
			t.Errorf("chunk %d (weight %d) key %d not above chunk %d's %d", c, c, far[c], c+1, far[c+1])
		}
	}
	if far[2] != far[4] {
		t.Errorf("equal weights, keys %d and %d", far[2], far[4])
	}
	// mean 1.6: chunk 3 weighs 1.875 of it, 122880/65536.
	if want := int64(never64 - 1 - 122880); far[3] != want {
		t.Errorf("chunk 3 key %d, want %d", far[3], want)
	}
	for c, k := range farKeys([]float64{0, 0}) {
		if k != never64 {
			t.Errorf("all weights 0: chunk %d key %d, want never", c, k)
		}
	}
}

// With equal sizes and one access at a time, Belady's MIN is optimal:
// importance-aware never hits more. And a cache holding every chunk leaves
// only the first reads as misses under every policy.
func TestSimulateImportanceBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		chunks := 2 + r.IntN(8)
		sizes := make([]int64, chunks)
		weights := make([]float64, chunks)
		for c := range sizes {
			sizes[c] = 1
			weights[c] = float64(r.IntN(4))
		}
		var trace []Access
		for e := range 1 + r.IntN(3) {
			for range 1 + r.IntN(20) {
				trace = append(trace, Access{Chunk: int32(r.IntN(chunks)), Epoch: int32(e)})
			}
		}
		cache := int64(1 + r.IntN(chunks))
		aware := simulateImportance(trace, sizes, weights, cache)
		opt := Simulate(trace, sizes, cache, Belady)
		if aware.Hits > opt.Hits {
			t.Fatalf("trial %d: importance-aware %d hits, more than Belady's %d", trial, aware.Hits, opt.Hits)
		}
		if aware.Accesses != len(trace) {
			t.Fatalf("trial %d: %d accesses, trace has %d", trial, aware.Accesses, len(trace))
		}
		full := simulateImportance(trace, sizes, weights, int64(chunks))
		seen := map[int32]bool{}
		for _, a := range trace {
			seen[a.Chunk] = true
		}
		if misses := full.Accesses - full.Hits; misses != len(seen) {
			t.Fatalf("trial %d: a cache of every chunk missed %d times, want %d first reads", trial, misses, len(seen))
		}
	}
}
