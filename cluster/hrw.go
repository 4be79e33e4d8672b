package cluster

import (
	"hash/fnv"

	"github.com/brandgw/brand/internal/seeded"
)

// domainOwner separates ownership scores from every other stream derived
// from the same inputs: the ASCII bytes "brandown" read big-endian.
const domainOwner uint64 = 0x6272616e646f776e

// IndexKey is the 64-bit FNV-1a hash of an index's ID, the part of every
// ownership score that names the dataset version.
func IndexKey(indexID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(indexID))
	return h.Sum64()
}

// score is node k's rendezvous weight for chunk c of the index whose key
// is key: the SplitMix64 finalizer, the bijection the shuffle's seed
// derivation uses too, chained over the inputs.
func score(key uint64, c, k int) uint64 {
	mix := seeded.Mix64
	return mix(mix(mix(domainOwner^key)^uint64(c)) ^ uint64(k))
}

// Owner returns the node, in [0, nodes), that owns chunk c: the one with the
// highest score, the lowest-numbered on a tie.
func Owner(key uint64, c, nodes int) int {
	best, bestScore := 0, score(key, c, 0)
	for k := 1; k < nodes; k++ {
		if s := score(key, c, k); s > bestScore {
			best, bestScore = k, s
		}
	}
	return best
}

// Ranking appends to dst the nodes in chunk c's failover order: by score,
// highest first, ties to the lower-numbered node. Its first element is
// Owner(key, c, nodes).
func Ranking(dst []int, key uint64, c, nodes int) []int {
	start := len(dst)
	for k := range nodes {
		// Insertion sort: node counts are small, and this runs only when
		// a node is down.
		s := score(key, c, k)
		i := len(dst)
		dst = append(dst, k)
		for i > start && score(key, c, dst[i-1]) < s {
			dst[i] = dst[i-1]
			i--
		}
		dst[i] = k
	}
	return dst
}
