// Package evict holds what a cache that evicts by a known future needs,
// shared by the gateway's next-use policy and the planner's simulations of
// it: an indexed max-heap of the resident chunks by eviction key, and the
// importance-aware key of a chunk no order needs.
//
// # Why
//
// The planner predicts the gateway's hit ratio exactly, access by access;
// that holds only while both order their victims by the same rule. With a
// heap and a far-key formula in each, the rule was kept in sync by a
// comment ("exactly as the gateway computes it"), and the copies could
// drift unnoticed: a weight rounded differently, a tie broken the other
// way. One Heap and one FarKey, called by both, make the agreement a
// matter of construction.
//
// # The order
//
// Heap orders entries by key, the largest first, then by seq, the smallest
// first. The gateway keys a chunk by its next-use distance and uses seq
// for its last touch, so the furthest-needed chunk goes first and the
// least recently used among equals; Belady's rule keys by next access.
// Never, the largest key, is a chunk nothing needs.
//
// Of the chunks no order needs in the current epoch, an importance job
// keeps the heaviest, since they will be drawn early in the next one:
// FarKey(q) is Never less a step per 1/65536 of the chunk's weight over
// the mean (RelativeWeights), so the lightest go first, yet every such
// chunk still goes before any chunk an order needs, whose key is a
// distance far below. The weights are compared as float32 over their mean
// so that the gateway, which keeps them so per stream, and the planner,
// which is given float64 weights, rank chunks identically.
//
// # Costs
//
// Push, Update, SetKey, Remove and Pop cost O(log n) for n entries, Contains and
// Len O(1), Rekey O(n); walking the first k victims (Victims) costs
// O(k log k) and leaves the heap as it was. A Heap holds 24 bytes an entry
// and 4 bytes per ID of its range.
//
// # Concurrency
//
// A Heap is not safe for concurrent use; its owner serialises access (the
// gateway's cache calls its policy under the cache's lock). The functions
// are pure.
package evict
