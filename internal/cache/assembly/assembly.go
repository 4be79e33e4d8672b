// Package assembly holds the rule by which a read whose chunks do not fit
// in the cache together is assembled in parts: which chunks are pinned
// together, group after group. The reader assembles such reads by it
// (internal/batch/reader) and the planner simulates them by it (package
// planner), so that a plan's hits and store reads for batches larger than
// the cache are the gateway's by construction, as internal/cache/evict made the
// eviction order one.
//
// # The rule
//
// A read's distinct chunks, in first-use order, are cut into groups of
// consecutive chunks, each group as many as fit in half the cache
// together, and at least one: a chunk larger than half the cache is a
// group of its own (and one larger than the whole cache is read through,
// which is the reader's business). Half, because two reads may assemble
// at once (the reader's Assemblers), and both must be able to pin a group
// beside each other.
//
// # Costs and concurrency
//
// Groups costs O(n) over the read's n chunks and holds nothing. It is a
// pure function, safe for concurrent use.
package assembly

import "iter"

// A Group is chunks [From, To) of a read's chunks, pinned together; Bytes
// is their sizes summed.
type Group struct {
	From, To int
	Bytes    int64
}

// Limit is the most bytes a group of more than one chunk holds in a cache
// of capacity bytes: half of it, at least 1.
func Limit(capacity int64) int64 { return max(capacity/2, 1) }

// Groups yields the groups of a read of n chunks, chunk i of size(i)
// bytes, in a cache of capacity bytes, in order: each as many consecutive
// chunks as fit in Limit(capacity) together, at least one.
func Groups(n int, size func(i int) int64, capacity int64) iter.Seq[Group] {
	limit := Limit(capacity)
	return func(yield func(Group) bool) {
		for from := 0; from < n; {
			g := Group{From: from, To: from}
			for g.To < n && (g.To == from || g.Bytes+size(g.To) <= limit) {
				g.Bytes += size(g.To)
				g.To++
			}
			if !yield(g) {
				return
			}
			from = g.To
		}
	}
}
