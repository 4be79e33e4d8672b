// Package cluster is the layout of a Brand cluster: which node owns each
// chunk, which node is each rank's home, and which rank of a global batch
// receives which sample. Every function here is pure: given the same
// configuration (the number of nodes, the index, the job) every replica
// computes the same layout, after restarts and under failures. Liveness
// decides only where bytes are read from (the gateway walks a chunk's
// ranking past nodes that are down); it never changes what a batch holds.
//
// # Ownership
//
// Chunk c of an index is owned by the node with the highest rendezvous
// (highest-random-weight) score for (index, c) — a 64-bit hash of the
// index's ID, the chunk and the node's position in the peer list — unless
// that node already owns its bounded share of the samples, in which case
// the next node of the chunk's ranking takes it (Balanced: rendezvous
// hashing with bounded loads). Plain rendezvous ownership is balanced only
// on average, and every node's surplus would cross nodes in every batch.
// A chunk's ranking is its failover order: when the owner is down, the
// next live node of the ranking reads the chunk from the store. Adding an
// N+1st node moves about 1/(N+1) of the chunks. Nodes are named by their
// position in the list, not their address, so moving a node to a new
// address moves no chunk.
//
// # Homes and assignment
//
// Rank r of a world of W ranks lives on node ⌊r·N/W⌋ (contiguous blocks, the
// torchrun layout when N is the number of training nodes). Assign gives
// each rank of a global batch first the samples whose chunks its home node
// owns, then balances the batch so every rank receives exactly its share,
// moving the surplus of the fullest nodes to the emptiest (the two-heap
// scheme of locality-aware loading). Only which rank receives which sample
// changes: the global batch holds the same samples, and every sample of an
// epoch is still delivered exactly once.
//
// docs/shuffle.md §7 specifies all of it precisely enough to reimplement;
// testdata/golden.json pins its outputs.
package cluster
