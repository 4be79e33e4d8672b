package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// A Membership is one version of a cluster's members: a set of base URLs,
// kept sorted, named by a hash of the set. Every node that is given the
// same set — from a static list, a file or the platform's DNS, in any
// order — computes the same Membership, so nodes can tell each other
// which one they use by its Version alone, and a request can pin one.
//
// Chunk owners are rendezvous hashing over the members' IDs (MemberID),
// so a member joining or leaving moves about 1/N of the chunks wherever it
// sorts. Rank homes are positional (Home over Len): they only say where a
// rank's requests go first, and every node answers any request.
//
// A Membership is immutable.
type Membership struct {
	version string
	members []string
	ids     []uint64
}

// NewMembership returns the membership of urls: normalised as ParsePeers
// normalises them, sorted, each once. An empty list is ErrConfig.
func NewMembership(urls []string) (*Membership, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: a membership needs at least one member", ErrConfig)
	}
	if len(urls) > maxNodes {
		return nil, fmt.Errorf("%w: more than %d members", ErrConfig, maxNodes)
	}
	members := make([]string, len(urls))
	for i, u := range urls {
		n, err := normalize(u)
		if err != nil {
			return nil, err
		}
		members[i] = n
	}
	slices.Sort(members)
	members = slices.Compact(members)
	m := &Membership{members: members, ids: make([]uint64, len(members)), version: MembershipVersion(members)}
	for i, u := range members {
		m.ids[i] = MemberID(u)
	}
	return m, nil
}

// MembershipVersion names a sorted, distinct member list: the first 16
// hex digits of SHA-256 over "brand-members-v1" and each member, every
// one ended by a newline (a newline cannot occur in a URL).
func MembershipVersion(sorted []string) string {
	h := sha256.New()
	h.Write([]byte("brand-members-v1\n"))
	for _, u := range sorted {
		h.Write([]byte(u))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Version names the membership: equal versions, equal member sets.
func (m *Membership) Version() string { return m.version }

// Members returns the members, sorted; the slice must not be modified.
func (m *Membership) Members() []string { return m.members }

// IDs returns the members' IDs, by position; the slice must not be
// modified.
func (m *Membership) IDs() []uint64 { return m.ids }

// Len is the number of members.
func (m *Membership) Len() int { return len(m.members) }

// Index returns url's position among the members, or -1.
func (m *Membership) Index(url string) int {
	if i, ok := slices.BinarySearch(m.members, url); ok {
		return i
	}
	return -1
}

// Owners returns each chunk's owner, a position among the members, for
// the index whose key is key and whose chunks hold counts samples
// (BoundedOwners over the members' IDs).
func (m *Membership) Owners(key uint64, counts []int) []int {
	if len(m.ids) == 1 {
		return make([]int, len(counts)) // one member owns everything; skip hashing
	}
	return BoundedOwners(key, counts, m.ids)
}

// Moves says which chunks member gains and loses when a cluster goes from
// membership from to membership to, for the index whose key is key and
// whose chunks hold counts samples: the chunks it owns under to and did
// not under from, and the reverse, ascending. A member absent from one of
// the two owns nothing there. It is what a node joining, leaving or
// staying through a change has to load or may hand over.
func Moves(key uint64, counts []int, from, to *Membership, member string) (gained, lost []int) {
	owns := func(m *Membership) []bool {
		out := make([]bool, len(counts))
		k := m.Index(member)
		if k < 0 {
			return out
		}
		for c, o := range m.Owners(key, counts) {
			out[c] = o == k
		}
		return out
	}
	before, after := owns(from), owns(to)
	for c := range counts {
		switch {
		case after[c] && !before[c]:
			gained = append(gained, c)
		case before[c] && !after[c]:
			lost = append(lost, c)
		}
	}
	return gained, lost
}
