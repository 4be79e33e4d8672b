package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/s3backend"
)

// TestPaceShareHoldsRises: the budget's share falls at once when a node
// lists more members, and rises only after the hold: a node starting
// takes 1/64 of its share until then, a leave's members take the larger
// share once the hold after the cluster agrees without the leaver.
func TestPaceShareHoldsRises(t *testing.T) {
	members := func(n int) *cluster.Membership { return membersFrom(t, 0, n) }
	p := s3backend.NewPacer(s3backend.Budget{GETs: 1000}, nil)
	var due []func()
	s := newPaceShare(p, members(1).Members()[0], 3*time.Second)
	s.after = func(d time.Duration, f func()) {
		if d != 3*time.Second {
			t.Errorf("held %v, want the hold", d)
		}
		due = append(due, f)
	}
	fire := func() {
		fs := due
		due = nil
		for _, f := range fs {
			f()
		}
	}
	want := func(step string, share float64) {
		t.Helper()
		if got := p.Stats().Share; got != share {
			t.Errorf("%s: share %v, want %v", step, got, share)
		}
	}
	s.Follow(members(1), nil, "") // a node starting knows itself alone
	want("started", 1.0/64)
	s.FollowList(members(3), true)
	want("listed three, held", 1.0/64)
	s.Follow(members(3), nil, "")
	fire()
	want("after the hold", 1.0/3)
	s.FollowList(members(4), true) // a joiner listed at this node's poll
	want("a joiner listed", 1.0/4)
	s.Follow(members(4), nil, "")
	if len(due) != 0 {
		t.Errorf("a fall scheduled %d rises", len(due))
	}
	s.FollowList(members(3), true) // a member leaves: listed without it
	want("a leaver listed, the cluster still of four", 1.0/4)
	s.Follow(members(3), nil, "") // the cluster agrees without it
	want("agreed without the leaver, held", 1.0/4)
	s.FollowList(members(5), true) // and a joiner is listed before the hold ends
	want("a joiner listed during the hold", 1.0/5)
	fire()
	want("the hold ends with five listed", 1.0/5)
	s.FollowList(members(3), true)
	s.Follow(members(3), nil, "")
	s.Follow(members(3), nil, "")
	if len(due) != 1 {
		t.Fatalf("%d rises scheduled, want one", len(due))
	}
	fire()
	want("the hold ends with three", 1.0/3)
	s.FollowList(membersFrom(t, 1, 5), true) // this node listed out
	want("listed out", 1.0/(5*64))

	// A joiner: the members it lists do not all list it yet.
	j := s3backend.NewPacer(s3backend.Budget{GETs: 1000}, nil)
	js := newPaceShare(j, membersFrom(t, 3, 1).Members()[0], 3*time.Second)
	js.after = s.after
	js.Follow(membersFrom(t, 3, 1), nil, "")
	js.FollowList(members(4), false)
	js.Follow(members(3), nil, "") // it learns the cluster of three
	fire()
	if got := j.Stats().Share; got != 1.0/(4*64) {
		t.Errorf("a joiner not yet listed by every member: share %v, want %v", got, 1.0/(4*64))
	}
	js.FollowList(members(4), true)
	if got := j.Stats().Share; got != 1.0/(4*64) {
		t.Errorf("a joiner listed, held: share %v, want %v", got, 1.0/(4*64))
	}
	fire()
	if got := j.Stats().Share; got != 1.0/4 {
		t.Errorf("a joiner listed by every member after the hold: share %v, want 1/4", got)
	}
}

// membersFrom is a membership of n loopback URLs from the from-th.
func membersFrom(t *testing.T, from, n int) *cluster.Membership {
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d", 9000+from+i)
	}
	m, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
