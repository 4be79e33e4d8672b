// Package importance steers what a training job reads by what it learns
// from: per-sample losses reported by the trainer become importance scores,
// and an epoch draws important samples more often and reads the chunks that
// hold them first, so that a cache much smaller than the dataset serves
// more of the epoch and the store serves less. It is SHADE's idea (Khan et
// al., FAST '23) at the granularity of Brand's chunks, deterministic and
// with no state outside the store.
//
// # The pieces
//
//   - Accumulator: the losses of one epoch of one job, 4 bytes a sample,
//     gathered from feedback batches (Add) and from other nodes (Merge).
//   - Snapshot: the sealed scores (Seal), an immutable, checksummed object
//     whose Version is the hash of its bytes (MarshalBinary, Decode). It is
//     stored beside the dataset at ObjectKey(job, version); a request for
//     the next epoch names the version, so every gateway, a restarted one
//     included, computes the same order.
//   - Epoch: the order of an epoch computed from a snapshot (NewEpoch), in
//     the shape of shuffle.Epoch: windows of chunks, a permutation of each
//     window's samples. ChunkWeight is the importance a cache evicts by.
//   - NewOrder: the one chooser of an epoch's order, the gateway's and the
//     planner's: by importance with a snapshot, else the uniform shuffle,
//     on one gateway and on a cluster of any size alike.
//
// # The order, in short
//
// Samples weigh by the rank of their score (Floor keeps the least
// important at a tenth of the most important). Chunks weigh the sum of
// their samples' weights. Up to hot of the heaviest chunks come first;
// the rest follow in the order of Efraimidis–Spirakis keys (weighted random
// order without replacement). The epoch's n draws are allotted to chunks
// along that order, each chunk about K times its sample count where K is
// the largest sample weight over the mean one (1 when all scores are equal,
// about 2 when they differ), so the epoch keeps its length and reads about
// 1/K of the chunks, each at most once; the chunks past the budget are not
// read this epoch. Within a chunk the draws are with replacement, weighted
// by sample weight; within a window they are shuffled. docs/importance.md
// specifies every step exactly, and testdata/golden.json pins it.
//
// # What it gives up
//
// Exactly-once epochs: a sample may be drawn several times in an epoch and
// not at all in another. With the floor and the random chunk keys, every
// sample keeps a chance every epoch.
//
// # Stability
//
// The order is a cross-language specification like the uniform shuffle's:
// seeded PCG streams derived as in docs/shuffle.md with this package's own
// domain constants, and float64 arithmetic spelled out operation by
// operation, including the logarithm (logSpec), so that any implementation
// computes the same bits. Changing a constant changes every importance
// epoch of every job.
//
// # Concurrency
//
// Accumulators are safe for concurrent use and lock-free. Snapshots and
// Epochs are immutable. The package holds no mutable state.
package importance
