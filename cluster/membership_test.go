package cluster

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestNewMembership(t *testing.T) {
	a, err := NewMembership([]string{"http://b:1", "http://a:1/", "http://b:1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMembership([]string{"http://a:1", "http://b:1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Version() != b.Version() || !slices.Equal(a.Members(), []string{"http://a:1", "http://b:1"}) {
		t.Errorf("memberships of one set differ: %s %v, %s %v", a.Version(), a.Members(), b.Version(), b.Members())
	}
	c, _ := NewMembership([]string{"http://a:1", "http://b:1", "http://c:1"})
	if c.Version() == a.Version() {
		t.Error("a member more leaves the version unchanged")
	}
	if a.Index("http://b:1") != 1 || a.Index("http://c:1") != -1 {
		t.Errorf("Index: %d, %d", a.Index("http://b:1"), a.Index("http://c:1"))
	}
	for _, bad := range [][]string{nil, {"ftp://x"}, {"http://a:1?x=1"}} {
		if _, err := NewMembership(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("NewMembership(%q) = %v, want ErrConfig", bad, err)
		}
	}
}

// members names n StatefulSet pods, brand-0 … brand-(n-1).
func members(n int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = fmt.Sprintf("http://brand-%d.brand.ns.svc.cluster.local:8080", k)
	}
	return out
}

// TestMembershipJoinMovesItsShare measures what a join and a leave move
// under ownership by member IDs: about 1/(N+1) of the chunks, to the new
// member, plus the few the load bound moves — wherever the member sorts
// (brand-10 sorts between brand-1 and brand-2, where positional
// ownership would have renamed every member after it). Moves names the
// same chunks from each member's side.
func TestMembershipJoinMovesItsShare(t *testing.T) {
	counts := make([]int, 4096)
	for c := range counts {
		counts[c] = 90 + c%21
	}
	key := IndexKey("3a6958a385d5afc5")
	for _, n := range []int{2, 4, 10, 16} {
		before, _ := NewMembership(members(n))
		after, _ := NewMembership(members(n + 1))
		joiner := members(n + 1)[n]
		ob, oa := before.Owners(key, counts), after.Owners(key, counts)
		moved, toJoiner := 0, 0
		for c := range counts {
			from, to := before.Members()[ob[c]], after.Members()[oa[c]]
			if from != to {
				moved++
				if to == joiner {
					toJoiner++
				}
			}
		}
		share := float64(len(counts)) / float64(n+1)
		t.Logf("%d → %d members (%s joins at position %d): %d chunks moved, %d to the joiner (its share %.0f)",
			n, n+1, joiner, after.Index(joiner), moved, toJoiner, share)
		if float64(toJoiner) < 0.8*share || float64(moved) > 1.6*share {
			t.Errorf("%d → %d: %d chunks moved, %d to the joiner; want about its share %.0f (at most 1.6×)", n, n+1, moved, toJoiner, share)
		}
		// Moves, from every member's side, accounts for exactly the moved chunks.
		gainedAll, lostAll := 0, 0
		for _, m := range after.Members() {
			gained, lost := Moves(key, counts, before, after, m)
			gainedAll += len(gained)
			lostAll += len(lost)
			for _, c := range gained {
				if after.Members()[oa[c]] != m || before.Members()[ob[c]] == m {
					t.Fatalf("Moves says %s gains chunk %d, owned by %s before and %s after", m, c, before.Members()[ob[c]], after.Members()[oa[c]])
				}
			}
		}
		if gainedAll != moved || lostAll != moved {
			t.Errorf("Moves: %d gained and %d lost over all members, %d chunks moved", gainedAll, lostAll, moved)
		}
		// A leave is the join reversed.
		if g, l := Moves(key, counts, after, before, joiner); len(g) != 0 || len(l) != toJoiner {
			t.Errorf("the joiner leaving gains %d and loses %d chunks, want 0 and %d", len(g), len(l), toJoiner)
		}
	}
}
