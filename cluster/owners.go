package cluster

// A node may own up to 1/16 more than an even share of the samples under
// BoundedOwners.
const slackNum, slackDen = 17, 16

// BoundedOwners returns each chunk's owner under rendezvous hashing with
// bounded loads. Plain rendezvous ownership is balanced only on average:
// with 64 chunks over 4 nodes one node often owns 20 and another 12, and
// since every node's ranks take the same share of each batch, the
// surplus of the first crosses nodes however the batch is assigned. So
// chunks, taken in ascending ID, each go to the first node of their
// ranking (Ranking) whose load — the samples of the chunks it owns so far
// — stays within ⌈17·total/(16·nodes)⌉ with the chunk added; a chunk
// that fits nowhere goes to the least-loaded node (the lowest-numbered on
// a tie). counts[c] is chunk c's sample count.
//
// Most chunks keep their plain rendezvous owner, and a node that joins
// or leaves still moves only a few chunks beyond its own share; the
// tests of this package measure how many. ids are the members' IDs
// (MemberID, or Positions); the owners returned are positions in ids.
func BoundedOwners(key uint64, counts []int, ids []uint64) []int {
	nodes := len(ids)
	total := 0
	for _, n := range counts {
		total += n
	}
	limit := (slackNum*total + slackDen*nodes - 1) / (slackDen * nodes)
	load := make([]int, nodes)
	out := make([]int, len(counts))
	rank := make([]int, 0, nodes)
	for c, n := range counts {
		best := -1
		if o := Owner(key, c, ids); load[o]+n <= limit {
			best = o // the common case, without sorting the ranking
		} else {
			rank = Ranking(rank[:0], key, c, ids)
			for _, k := range rank {
				if load[k]+n <= limit {
					best = k
					break
				}
			}
		}
		if best < 0 {
			best = 0
			for k := range load {
				if load[k] < load[best] {
					best = k
				}
			}
		}
		out[c] = best
		load[best] += n
	}
	return out
}
