package planner

import (
	"container/heap"
	"fmt"
	"math"
)

// SimulateImportance is Simulate under the ImportanceAware policy, the
// gateway's eviction for a job reading by importance
// (gateway/schedule.go, useTable.distance). weights[c] is chunk c's
// importance weight (importance.Epoch.ChunkWeight; any positive scale, it
// is taken over its mean as the gateway does). On a miss it evicts, until
// the new chunk fits:
//
//  1. first the chunks not needed again in the current epoch (the next
//     epoch's order is unknown to the gateway until its snapshot is
//     sealed), lightest weight first, the least recently used first among
//     equal weights (weights are compared as the gateway compares them:
//     over their mean, as float32, in steps of 1/65536);
//  2. then the chunks needed again this epoch, furthest next use first
//     (Belady on the epoch's remaining uses).
//
// When the trace enters another epoch the chunks it needs become "needed"
// from its first access on, as the gateway's use table does once a stream
// asks for the new epoch. It panics, as Simulate does, on a negative size,
// an access outside sizes, or weights not one per chunk, finite and >= 0.
func SimulateImportance(trace []Access, sizes []int64, weights []float64, cacheBytes int64) Result {
	if len(weights) != len(sizes) {
		panic(fmt.Sprintf("planner: %d chunk weights for %d chunks", len(weights), len(sizes)))
	}
	for c, w := range weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			panic(fmt.Sprintf("planner: chunk %d weight %v; must be finite and >= 0", c, w))
		}
	}
	s := newSimulator(trace, sizes)
	cacheBytes = max(cacheBytes, 0)
	return s.serve(newAwareCache(s, cacheBytes, weights), cacheBytes, ImportanceAware)
}

// farKeys returns, per chunk, its eviction key when it is not needed in
// the current epoch, exactly as the gateway computes it: never, less one
// and the chunk's weight over the mean in 1/65536 steps (float32, capped
// at 2^20), so that the lightest has the largest key and goes first; a
// chunk of weight 0 keeps never.
func farKeys(weights []float64) []int64 {
	var sum float64
	for _, w := range weights {
		sum += w
	}
	mean := sum / float64(len(weights))
	far := make([]int64, len(weights))
	for c, w := range weights {
		far[c] = never64
		if sum == 0 {
			continue
		}
		if q := float32(w / mean); q > 0 {
			far[c] -= 1 + int64(min(q, 1<<20)*(1<<16))
		}
	}
	return far
}

// never64 is the key of a chunk needed by nothing and weighing nothing:
// the largest, evicted first.
const never64 = math.MaxInt64

// awareCache simulates ImportanceAware. Resident, unpinned chunks sit in a
// max-heap keyed by their eviction key (next use this epoch, or far[c]),
// ties broken by the least recently released, as the gateway breaks them
// by the least recently touched. Keys change only when the epoch does, so
// startEpoch re-keys the heap in O(resident chunks) and every other step
// costs O(log resident chunks).
//
// It is a beladyCache (pinning and admission are the same) whose release
// keys a chunk otherwise.
type awareCache struct {
	*beladyCache
	trace   []Access
	far     []int64 // per chunk: its key when not needed this epoch
	nextUse []int   // per chunk: its next access after its last release
	epoch   int32   // the epoch being served
	clock   uint64
}

func newAwareCache(s *simulator, capacity int64, weights []float64) *awareCache {
	return &awareCache{
		beladyCache: newBeladyCache(s.sizes, capacity, s.nextUses()),
		trace:       s.trace,
		far:         farKeys(weights),
		nextUse:     make([]int, len(s.sizes)),
	}
}

// key is c's eviction key in the current epoch: its next use if that is in
// this epoch, else its weight's far key.
func (a *awareCache) key(c int32) int64 {
	if u := a.nextUse[c]; u != never && a.trace[u].Epoch == a.epoch {
		return int64(u)
	}
	return a.far[c]
}

func (a *awareCache) startEpoch(i int) {
	a.epoch = a.trace[i].Epoch
	for k := range a.heap.entries {
		e := &a.heap.entries[k]
		e.key = a.key(e.chunk)
	}
	heap.Init(&a.heap)
}

// release makes c evictable again, keyed by the use after access i.
func (a *awareCache) release(i int, c int32) {
	a.nextUse[c] = a.next[i]
	a.clock++
	a.heap.push(heapEntry{key: a.key(c), seq: a.clock, chunk: c})
}
