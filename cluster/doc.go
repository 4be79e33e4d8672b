// Package cluster is the layout of a Brand cluster: its membership, which
// member owns each chunk, which member is each rank's home, and which
// rank of a global batch receives which sample. Every function here is
// pure: given the same membership, index and job every replica computes
// the same layout, after restarts and under failures. Liveness decides
// only where bytes are read from (the gateway walks a chunk's ranking past
// members that are down); it never changes what a batch holds. Nothing
// here changes which samples a global batch holds: the epoch's order is
// the single gateway's on a cluster of any size.
//
// # Membership
//
// A Membership is a set of members' base URLs, sorted, named by a hash of
// the set (its version): nodes that read the same set from a static list,
// a watched file or the platform's DNS agree on it without talking, and
// tell each other which version they use by its name.
//
// # Ownership
//
// Chunk c of an index is owned by the member with the highest rendezvous
// (highest-random-weight) score for (index, c) — a 64-bit hash of the
// index's ID, the chunk and the member's ID (MemberID, a hash of its URL)
// — unless that member already owns its bounded share of the samples, in
// which case the next member of the chunk's ranking takes it (BoundedOwners:
// rendezvous hashing with bounded loads). Plain rendezvous ownership is
// balanced only on average, and every member's surplus would cross nodes
// in every batch. A chunk's ranking is its failover order: when the owner
// is down, the next live member of the ranking reads the chunk from the
// store. A member joining or leaving moves about 1/N of the chunks (Moves
// says which), wherever its URL sorts: IDs, not positions, are scored.
//
// # Homes and assignment
//
// Rank r of a world of W ranks lives on member ⌊r·N/W⌋ of the sorted list
// (contiguous blocks, the torchrun layout when N is the number of training
// nodes). Assign gives
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
