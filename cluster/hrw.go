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
func IndexKey(indexID string) uint64 { return fnv64a(indexID) }

// MemberID is a member's part of every ownership score: the 64-bit FNV-1a
// hash of its URL as the membership spells it (normalised, see
// NewMembership). A member keeps its ID wherever it sits in a sorted list,
// so a join or a leave moves only the chunks whose ranking it tops or
// topped (and the few the load bound moves), not those of every member
// after it.
func MemberID(url string) uint64 { return fnv64a(url) }

func fnv64a(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Positions returns the IDs of n nodes named by their positions 0..n-1:
// the IDs the planner predicts an n-node cluster with, and the golden
// vectors' rankings use. A running cluster names its members by MemberID.
func Positions(n int) []uint64 {
	ids := make([]uint64, n)
	for k := range ids {
		ids[k] = uint64(k)
	}
	return ids
}

// score is the rendezvous weight of the member whose ID is id for chunk c
// of the index whose key is key: the SplitMix64 finalizer, the bijection
// the shuffle's seed derivation uses too, chained over the inputs.
func score(key uint64, c int, id uint64) uint64 {
	mix := seeded.Mix64
	return mix(mix(mix(domainOwner^key)^uint64(c)) ^ id)
}

// Owner returns the position in ids of the member that owns chunk c: the
// one with the highest score, the lowest position on a tie. ids must not
// be empty.
func Owner(key uint64, c int, ids []uint64) int {
	best, bestScore := 0, score(key, c, ids[0])
	for k := 1; k < len(ids); k++ {
		if s := score(key, c, ids[k]); s > bestScore {
			best, bestScore = k, s
		}
	}
	return best
}

// Ranking appends to dst the positions in ids in chunk c's failover order:
// by score, highest first, ties to the lower position. Its first element
// is Owner(key, c, ids).
func Ranking(dst []int, key uint64, c int, ids []uint64) []int {
	start := len(dst)
	for k := range ids {
		// Insertion sort: member counts are small, and this runs only
		// when a member is down or over its bound.
		s := score(key, c, ids[k])
		i := len(dst)
		dst = append(dst, k)
		for i > start && score(key, c, ids[dst[i-1]]) < s {
			dst[i] = dst[i-1]
			i--
		}
		dst[i] = k
	}
	return dst
}
