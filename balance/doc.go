// Package balance decides which rank of a global batch takes which of its
// samples so that the ranks' costs are as equal as the batch allows: a
// pure function of the samples' costs and the ranks' shares, the same on
// every node and in every language that implements docs/shuffle.md §13.
//
// # Why
//
// A step of data-parallel training takes as long as its slowest rank.
// With packed sequences every rank gets the same number of tokens, but
// attention costs the sum of the squares of its documents' lengths, so a
// rank that draws the step's long documents sets the step's time while
// the others wait; a vision encoder's work differs by image in the same
// way. A sampler inside the trainer sees one rank's buffer. The gateway
// lays out the whole global batch before any rank asks for it, so it can
// hand each rank a share of the batch's cost rather than a share of its
// positions.
//
// # What it keeps
//
// Only which rank takes which sample changes. Each rank takes exactly the
// number of samples the plain cut gives it (docs/shuffle.md §6: the
// tensors keep their shapes), the global batch holds the same samples,
// and a rank's samples keep their order in the batch. An epoch resumed at
// another world size (an offset) is cut into the same global batches as
// before: balancing moves samples within a global batch, never across.
//
// # The rule
//
// Assign sorts the samples by cost, largest first (ties: the earlier
// position), and gives each in turn to the rank with the least cost so
// far among those not yet full (ties: the lower rank) — longest
// processing time first, with each rank's share as its capacity. It then
// improves the result by swaps: while the costliest rank and some other
// rank can swap a pair of samples so that both end below the costliest
// rank's cost, it makes the swap that brings the two nearest their mean,
// trying the other ranks from the cheapest. Each swap lowers the sum of
// the squares of the ranks' costs, so the loop ends; it is also bounded
// (MaxSwaps). docs/shuffle.md §13 specifies every tie.
//
// # Costs
//
// Assign takes O(G log G) to sort a batch of G samples, O(G log R) to
// place them over R ranks, and O(B log B) per swap for ranks of B
// samples; it allocates O(G). The layout calls it once per global batch
// and memoises the answer for the batch's other ranks.
//
// # Concurrency
//
// Assign is a pure function: it keeps no state and is safe to call from
// any number of goroutines.
package balance
