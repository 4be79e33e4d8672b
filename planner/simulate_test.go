package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// accesses builds a trace of one epoch from chunk IDs.
func accesses(epoch int32, chunks ...int32) []Access {
	tr := make([]Access, len(chunks))
	for i, c := range chunks {
		tr[i] = Access{Chunk: c, Epoch: epoch}
	}
	return tr
}

// batched builds a trace of one epoch from batches of chunk IDs.
func batched(epoch int32, batches ...[]int32) []Access {
	var tr []Access
	for _, b := range batches {
		for i, c := range b {
			tr = append(tr, Access{Chunk: c, Epoch: epoch, Start: i == 0})
		}
	}
	return tr
}

func equalSizes(chunks int, size int64) []int64 {
	sizes := make([]int64, chunks)
	for c := range sizes {
		sizes[c] = size
	}
	return sizes
}

// classic is the reference string of the textbook page-replacement example
// (Silberschatz et al., Operating System Concepts), split into two epochs of
// ten accesses. With three frames OPT faults 9 times and LRU 12; the hand
// traces below give the split per epoch.
var classic = append(
	accesses(0, 7, 0, 1, 2, 0, 3, 0, 4, 2, 3),
	accesses(1, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1)...)

func TestSimulateHandChecked(t *testing.T) {
	tests := []struct {
		name   string
		trace  []Access
		sizes  []int64
		cache  int64
		policy Policy
		hits   []int   // per epoch
		bytes  []int64 // per epoch
	}{
		// OPT, 3 frames: misses at accesses 1-4, 6, 8 | 11, 14, 18.
		{"classic/belady", classic, equalSizes(8, 10), 30, Belady, []int{4, 7}, []int64{60, 30}},
		// LRU, 3 frames: misses at 1-4, 6, 8-10 | 11, 14, 16, 18.
		{"classic/lru", classic, equalSizes(8, 10), 30, LRU, []int{2, 6}, []int64{80, 40}},
		// A cache of 3.5 chunks behaves as one of 3.
		{"classic/belady/partial", classic, equalSizes(8, 10), 35, Belady, []int{4, 7}, []int64{60, 30}},
		{"classic/lru/partial", classic, equalSizes(8, 10), 39, LRU, []int{2, 6}, []int64{80, 40}},
		// Two frames, 0 1 2 0: Belady evicts 1, never used again, and hits
		// on 0; LRU evicts 0, the oldest, and misses.
		{"never-first/belady", accesses(0, 0, 1, 2, 0), equalSizes(3, 1), 2, Belady, []int{1}, []int64{3}},
		{"never-first/lru", accesses(0, 0, 1, 2, 0), equalSizes(3, 1), 2, LRU, []int{0}, []int64{4}},
		// Sizes 5, 2, 2, 8 in a cache of 6: chunk 1 evicts 0; 2 joins 1;
		// 3 is bigger than the cache, read and not admitted; 1 and 2 hit; 0
		// must evict both (2 first: never used again); 1 evicts 0.
		{"sizes/belady", accesses(0, 0, 1, 2, 3, 1, 2, 0, 1), []int64{5, 2, 2, 8}, 6, Belady, []int{2}, []int64{24}},
		// LRU: the same, evicting 1 then 2 for 0 (oldest first).
		{"sizes/lru", accesses(0, 0, 1, 2, 3, 1, 2, 0, 1), []int64{5, 2, 2, 8}, 6, LRU, []int{2}, []int64{24}},
		// At 7 bytes 0 and 1 fit together; 2 evicts 0 (next used later
		// than 1); 3 is not admitted; 1, 2 hit; 0 evicts 2 (never used
		// again) and 1 hits.
		{"sizes/belady/7", accesses(0, 0, 1, 2, 3, 1, 2, 0, 1), []int64{5, 2, 2, 8}, 7, Belady, []int{3}, []int64{22}},
		// LRU at 7: 0 evicts 1 (the oldest), so 1 misses at the end.
		{"sizes/lru/7", accesses(0, 0, 1, 2, 3, 1, 2, 0, 1), []int64{5, 2, 2, 8}, 7, LRU, []int{2}, []int64{24}},
		// At 9 bytes 3 fits and, demand paging, must be admitted: it
		// evicts everything, then 1 evicts it. Only the last 1 hits.
		{"sizes/belady/9", accesses(0, 0, 1, 2, 3, 1, 2, 0, 1), []int64{5, 2, 2, 8}, 9, Belady, []int{1}, []int64{26}},
		{"sizes/lru/9", accesses(0, 0, 1, 2, 3, 1, 2, 0, 1), []int64{5, 2, 2, 8}, 9, LRU, []int{1}, []int64{26}},
		// Batches pin their chunks. Two frames; batches [0] [1] [2 0]: one
		// access at a time, LRU lets 2 evict 0 and then 0 misses; the
		// gateway pins 0 (a hit) before it makes room for 2, which evicts 1.
		{"batch/lru", batched(0, []int32{0}, []int32{1}, []int32{2, 0}), equalSizes(3, 1), 2, LRU, []int{1}, []int64{3}},
		{"unbatched/lru", accesses(0, 0, 1, 2, 0), equalSizes(3, 1), 2, LRU, []int{0}, []int64{4}},
		// Belady, two frames, batches [0 1] [2 0] [1]: 0 is pinned by the
		// second batch, so 2 must evict 1 although 0's next use (none) is
		// further; then 1 misses. One access at a time, 2 evicts 0 (used
		// once more), 0 then evicts 2 (never again) and 1 hits.
		{"batch/belady", batched(0, []int32{0, 1}, []int32{2, 0}, []int32{1}), equalSizes(3, 1), 2, Belady, []int{1}, []int64{4}},
		// A batch whose chunks exceed the cache is served a group at a
		// time, each at most half the cache (here one chunk), as the
		// gateway does: LRU then evicts what the batch's next group needs
		// in the next batch, and every access misses.
		{"batch/too-large", batched(0, []int32{0, 1, 2}, []int32{0, 1, 2}), equalSizes(3, 1), 2, LRU, []int{0}, []int64{6}},
		{"batch/too-large/belady", batched(0, []int32{0, 1, 2}, []int32{0, 1, 2}), equalSizes(3, 1), 2, Belady, []int{2}, []int64{4}},
		// Zero and negative caches admit nothing of positive size.
		{"zero", accesses(0, 0, 0, 1, 1), []int64{1, 1}, 0, Belady, []int{0}, []int64{4}},
		{"negative", accesses(0, 0, 0, 1, 1), []int64{1, 1}, -5, LRU, []int{0}, []int64{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Simulate(tt.trace, tt.sizes, tt.cache, tt.policy)
			if r.Policy != tt.policy {
				t.Errorf("Policy = %v, want %v", r.Policy, tt.policy)
			}
			if len(r.Epochs) != len(tt.hits) {
				t.Fatalf("%d epochs, want %d: %+v", len(r.Epochs), len(tt.hits), r.Epochs)
			}
			var hits, n int
			var bytes int64
			for i, e := range r.Epochs {
				if e.Epoch != i || e.Hits != tt.hits[i] || e.BackendBytes != tt.bytes[i] {
					t.Errorf("epoch %d: got epoch %d, %d hits, %d bytes; want %d hits, %d bytes",
						i, e.Epoch, e.Hits, e.BackendBytes, tt.hits[i], tt.bytes[i])
				}
				if want := float64(e.Hits) / float64(e.Accesses); e.HitRatio != want {
					t.Errorf("epoch %d: HitRatio %v, want %v", i, e.HitRatio, want)
				}
				hits, n, bytes = hits+e.Hits, n+e.Accesses, bytes+e.BackendBytes
			}
			if r.Hits != hits || r.Accesses != n || r.Accesses != len(tt.trace) || r.BackendBytes != bytes {
				t.Errorf("totals %d hits / %d accesses / %d bytes; epochs sum to %d / %d / %d, trace has %d",
					r.Hits, r.Accesses, r.BackendBytes, hits, n, bytes, len(tt.trace))
			}
			if want := float64(hits) / float64(n); r.HitRatio != want {
				t.Errorf("HitRatio %v, want %v", r.HitRatio, want)
			}
		})
	}
}

func TestSimulateEmpty(t *testing.T) {
	for _, p := range []Policy{LRU, Belady} {
		r := Simulate(nil, []int64{1}, 10, p)
		if len(r.Epochs) != 0 || r.Accesses != 0 || r.HitRatio != 0 || r.BackendBytes != 0 {
			t.Errorf("%v on an empty trace: %+v", p, r)
		}
	}
}

// TestSimulateEpochOrder feeds a trace that interleaves epochs, as the
// gateway's recorded trace may: figures go to the right epoch, and epochs
// are reported ascending.
func TestSimulateEpochOrder(t *testing.T) {
	tr := []Access{{Chunk: 0, Epoch: 5}, {Chunk: 1, Epoch: 5}, {Chunk: 0, Epoch: 2}, {Chunk: 0, Epoch: 5}, {Chunk: 2, Epoch: 9}, {Chunk: 1, Epoch: 2}}
	r := Simulate(tr, equalSizes(3, 1), 10, LRU)
	want := []EpochResult{
		{Epoch: 2, Accesses: 2, Hits: 2, HitRatio: 1, BackendBytes: 0},
		{Epoch: 5, Accesses: 3, Hits: 1, HitRatio: 1.0 / 3, BackendBytes: 2, StoreReads: 2},
		{Epoch: 9, Accesses: 1, Hits: 0, HitRatio: 0, BackendBytes: 1, StoreReads: 1},
	}
	if !slices.Equal(r.Epochs, want) {
		t.Errorf("Epochs = %+v, want %+v", r.Epochs, want)
	}
}

func TestSimulateChunkLargerThanCache(t *testing.T) {
	// Every chunk is bigger than the cache: every access misses and reads
	// its chunk, epoch after epoch.
	tr := append(accesses(0, 0, 1, 2, 0, 1, 2), accesses(1, 2, 2, 1, 0)...)
	sizes := []int64{10, 20, 30}
	for _, p := range []Policy{LRU, Belady} {
		r := Simulate(tr, sizes, 9, p)
		if r.Hits != 0 || r.BackendBytes != 60+60+30+30+20+10 {
			t.Errorf("%v: %d hits, %d backend bytes; want 0 and 210", p, r.Hits, r.BackendBytes)
		}
	}
}

func randomTrace(rng *rand.Rand, length, chunks, epochs int) []Access {
	tr := make([]Access, length)
	for i := range tr {
		tr[i] = Access{Chunk: int32(rng.IntN(chunks)), Epoch: int32(i * epochs / length)}
	}
	return tr
}

// TestBeladyBeatsLRU: with equal sizes MIN is optimal, so it can never hit
// less often than LRU.
func TestBeladyBeatsLRU(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		chunks := 2 + rng.IntN(30)
		tr := randomTrace(rng, 1+rng.IntN(400), chunks, 1+rng.IntN(3))
		sizes := equalSizes(chunks, 7)
		cache := int64(rng.IntN(chunks+1)) * 7
		b, l := Simulate(tr, sizes, cache, Belady), Simulate(tr, sizes, cache, LRU)
		if b.Hits < l.Hits {
			t.Fatalf("case %d (%d chunks, cache %d): Belady %d hits < LRU %d", i, chunks, cache, b.Hits, l.Hits)
		}
		if b.BackendBytes != int64(b.Accesses-b.Hits)*7 {
			t.Fatalf("case %d: Belady backend bytes %d for %d misses of 7 bytes", i, b.BackendBytes, b.Accesses-b.Hits)
		}
	}
}

// TestBeladyStack checks the inclusion property MinNoStallCacheBytes relies
// on: with equal sizes, a larger cache never hits less, in any epoch.
func TestBeladyStack(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 100 {
		chunks := 2 + rng.IntN(20)
		tr := randomTrace(rng, 1+rng.IntN(300), chunks, 3)
		sizes := equalSizes(chunks, 3)
		prev := Simulate(tr, sizes, 0, Belady)
		for k := 1; k <= chunks; k++ {
			r := Simulate(tr, sizes, int64(k)*3, Belady)
			for e := range r.Epochs {
				if r.Epochs[e].Hits < prev.Epochs[e].Hits {
					t.Fatalf("case %d: epoch %d hits fell from %d to %d going from %d to %d chunks of cache",
						i, e, prev.Epochs[e].Hits, r.Epochs[e].Hits, k-1, k)
				}
			}
			prev = r
		}
	}
}

// optimalHits is the brute-force optimum for demand paging with equal sizes
// and k frames: every access must be resident after it, and at every miss
// with a full cache every choice of victim is tried.
func optimalHits(tr []Access, k int) int {
	type state struct {
		i        int
		resident uint32
	}
	memo := map[state]int{}
	var best func(i int, resident uint32) int
	best = func(i int, resident uint32) int {
		if i == len(tr) {
			return 0
		}
		st := state{i, resident}
		if v, ok := memo[st]; ok {
			return v
		}
		bit := uint32(1) << tr[i].Chunk
		var v int
		switch {
		case resident&bit != 0:
			v = 1 + best(i+1, resident)
		case k == 0:
			v = best(i+1, resident)
		case popcount(resident) < k:
			v = best(i+1, resident|bit)
		default:
			v = -1
			for r := resident; r != 0; r &= r - 1 {
				victim := r & -r
				v = max(v, best(i+1, resident&^victim|bit))
			}
		}
		memo[st] = v
		return v
	}
	return best(0, 0)
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func TestBeladyIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 400 {
		chunks := 4 + rng.IntN(2)
		tr := randomTrace(rng, 1+rng.IntN(12), chunks, 1)
		k := 2 + rng.IntN(2)
		got := Simulate(tr, equalSizes(chunks, 4), int64(k)*4, Belady).Hits
		if want := optimalHits(tr, k); got != want {
			t.Fatalf("case %d: trace %v, %d frames: Belady %d hits, optimum %d", i, tr, k, got, want)
		}
	}
	// The classic example too: 11 hits with three frames.
	if got := optimalHits(classic, 3); got != 11 {
		t.Errorf("brute force on the classic example: %d hits, want 11", got)
	}
}

func TestSimulatePanics(t *testing.T) {
	tests := []struct {
		name  string
		trace []Access
		sizes []int64
		p     Policy
	}{
		{"unknown policy", accesses(0, 0), []int64{1}, Policy(7)},
		{"chunk outside sizes", accesses(0, 2), []int64{1, 1}, LRU},
		{"negative chunk", accesses(0, -1), []int64{1}, Belady},
		{"negative size", accesses(0, 0), []int64{-1}, LRU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Simulate did not panic")
				}
			}()
			Simulate(tt.trace, tt.sizes, 10, tt.p)
		})
	}
}

func TestPolicyText(t *testing.T) {
	for _, p := range []Policy{LRU, Belady, ImportanceAware, NextUse} {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q Policy
		if err := json.Unmarshal(b, &q); err != nil || q != p {
			t.Errorf("%v: round trip through %s gave %v, %v", p, b, q, err)
		}
	}
	if got := fmt.Sprint(LRU, Belady); got != "lru belady" {
		t.Errorf("String: %q", got)
	}
	var q Policy
	if err := q.UnmarshalText([]byte("optimal")); err != nil || q != Belady {
		t.Errorf(`UnmarshalText("optimal") = %v, %v`, q, err)
	}
	if err := q.UnmarshalText([]byte("schedule")); err != nil || q != NextUse {
		t.Errorf(`UnmarshalText("schedule"), next-use's old name, = %v, %v`, q, err)
	}
	if err := q.UnmarshalText([]byte("fifo")); !errors.Is(err, ErrInvalid) {
		t.Errorf(`UnmarshalText("fifo") error %v, want ErrInvalid`, err)
	}
	if _, err := Policy(9).MarshalText(); !errors.Is(err, ErrInvalid) {
		t.Errorf("MarshalText(9) error %v, want ErrInvalid", err)
	}
}
