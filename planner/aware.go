package planner

import (
	"fmt"
	"math"

	"github.com/brandgw/brand/internal/cache/evict"
)

// simulateImportance is Simulate under the ImportanceAware policy, the
// gateway's eviction for a job reading by importance (internal/cache/usetable's
// use table, whose keys internal/cache/evict computes for both). weights[c] is chunk c's
// importance weight (importance.Epoch.ChunkWeight; any positive scale, it
// is taken over its mean as the gateway does). On a miss it evicts, until
// the new chunk fits:
//
//  1. first the chunks not needed again in the current epoch (the next
//     epoch's order is unknown to the gateway until its snapshot is
//     sealed), lightest weight first, the least recently used first among
//     equal weights (weights are compared as the gateway compares them,
//     by evict.FarKey: over their mean, as float32, in steps of 1/65536);
//  2. then the chunks needed again this epoch, furthest next use first
//     (Belady on the epoch's remaining uses).
//
// When the trace enters another epoch the chunks it needs become "needed"
// from its first access on, as the gateway's use table does once a stream
// asks for the new epoch. It panics, as Simulate does, on a negative size,
// an access outside sizes, or weights not one per chunk, finite and >= 0.
func simulateImportance(trace []Access, sizes []int64, weights []float64, cacheBytes int64) Result {
	if len(weights) != len(sizes) {
		panic(fmt.Sprintf("planner: %d chunk weights for %d chunks", len(weights), len(sizes)))
	}
	for c, w := range weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			panic(fmt.Sprintf("planner: chunk %d weight %v; must be finite and >= 0", c, w))
		}
	}
	// Without a meter nothing stops a run.
	r, _ := newSimulator(trace, sizes, nil, nil).runAware(max(cacheBytes, 0), 0, weights)
	return r
}

// runAware simulates ImportanceAware with a cache of cacheBytes and a disk
// of diskBytes below it (0: none), the disk ranking its chunks by the
// cache's keys. Its error is the meter's.
func (s *simulator) runAware(cacheBytes, diskBytes int64, weights []float64) (Result, error) {
	cc := newAwareCache(s, cacheBytes, weights)
	return s.serve(cc, cacheBytes, s.disk(diskBytes, ImportanceAware, cc.far), ImportanceAware)
}

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
	far     []int64 // per chunk: its key when not needed this epoch (evict.FarKey)
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

// farKeys returns, per chunk, its eviction key when it is not needed in
// the current epoch: evict.FarKey of its weight over the mean, the key the
// gateway's use table gives it.
func farKeys(weights []float64) []int64 {
	far := make([]int64, len(weights))
	for c, q := range evict.RelativeWeights(weights) {
		far[c] = evict.FarKey(q)
	}
	return far
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
	a.heap.Rekey(func(c int) int64 { return a.key(int32(c)) })
}

// release makes c evictable again, keyed by the use after access i.
func (a *awareCache) release(i int, c int32) {
	a.nextUse[c] = a.next[i]
	a.clock++
	a.heap.Push(int(c), a.key(c), a.clock)
}
