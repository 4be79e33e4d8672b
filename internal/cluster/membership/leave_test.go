package membership

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/nodestate"
)

// TestLeaveWaitsForEveryMemberToFlip: a node leaving keeps serving until
// every live member reads chunks by a membership without it, not only
// until its own view agrees on one: a member still reading by the old
// membership would find it gone and read its chunks along the old
// ranking, from a node that lacks them. A member down, or of a build
// that does not report what it reads by, is not waited for; a member
// that never flips holds it at most the flip timeout.
func TestLeaveWaitsForEveryMemberToFlip(t *testing.T) {
	urls := []string{"http://node0.invalid", "http://node1.invalid", "http://node2.invalid", "http://node3.invalid"}
	before, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	after, err := cluster.NewMembership(urls[1:])
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		agreed  []string // per other member: what it reads by; "-": down
		flip    int      // the member that flips while Leave waits; 0: none
		timeout time.Duration
		returns bool // Leave returns before the test's deadline
	}{
		{"every member has flipped", []string{after.Version(), after.Version(), after.Version()}, 0, time.Hour, true},
		{"one member has not: Leave waits until it flips", []string{after.Version(), before.Version(), after.Version()}, 2, time.Hour, true},
		{"one member never flips: Leave waits", []string{after.Version(), before.Version(), after.Version()}, 0, time.Hour, false},
		{"one member never flips: at most the flip timeout", []string{after.Version(), before.Version(), after.Version()}, 0, 50 * time.Millisecond, true},
		{"a member down is not waited for", []string{after.Version(), "-", after.Version()}, 0, time.Hour, true},
		{"a member that does not say is not waited for", []string{after.Version(), "", after.Version()}, 0, time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNodes(urls[0])
			m := New(Config{Self: urls[0], Members: Static(urls), Peers: ns, Probe: 4 * time.Millisecond, FlipTimeout: tc.timeout,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer m.Close()
			state := func(k int, agreed string) *nodestate.State {
				return &nodestate.State{Self: k - 1, Ready: true, URL: urls[k], Members: after.Version(), MemberList: after.Members(), Agreed: agreed}
			}
			for i, a := range tc.agreed {
				k := ns.Slot(urls[i+1])
				st := state(k, a)
				ns.set(urls[k], a != "-", st)
				m.Changed(k, nil, st)
			}
			if v := m.view.Load(); v.agreed.Version() != after.Version() {
				t.Fatalf("this node's view agrees on %s, want %s", v.agreed.Version(), after.Version())
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel() // a Leave still waiting ends with the case
			done := make(chan error, 1)
			go func() { done <- m.Leave(ctx) }()
			if tc.flip != 0 {
				select {
				case err := <-done:
					t.Fatalf("Leave returned (%v) while member %d read by the old membership", err, tc.flip)
				case <-time.After(100 * time.Millisecond):
				}
				st := state(tc.flip, after.Version())
				ns.set(urls[tc.flip], true, st)
				m.Changed(tc.flip, nil, st)
			}
			leaveReturns(t, m, done, tc.returns)
		})
	}
}

// leaveReturns checks that Leave, whose result done carries, returns
// when it must — within a few polls: the 10 s bound only ends a failing
// run — and otherwise still waits after 300 ms. A failure says what m's
// view was, and so what Leave waited for.
func leaveReturns(t *testing.T, m *Tracker, done <-chan error, returns bool) {
	t.Helper()
	bound := 300 * time.Millisecond
	if returns {
		bound = 10 * time.Second
	}
	select {
	case err := <-done:
		if !returns {
			t.Fatalf("Leave returned (%v) while a member staying read by a membership with this node; %s", err, describe(m))
		}
		if err != nil {
			t.Fatalf("Leave: %v", err)
		}
	case <-time.After(bound):
		if returns {
			t.Fatalf("Leave has not returned after %v; %s", bound, describe(m))
		}
	}
}

// describe says what m's view is and what each other node last said:
// what a failing test needs to tell which wait held it.
func describe(m *Tracker) string {
	v := m.view.Load()
	var b strings.Builder
	fmt.Fprintf(&b, "this node lists %v, reports %v, agrees on %v", v.local.Members(), v.reported.Members(), v.agreed.Members())
	for _, k := range v.probed {
		st := m.peers.State(k)
		fmt.Fprintf(&b, "; %s up %t", m.peers.URL(k), m.peers.Up(k))
		if st != nil {
			fmt.Fprintf(&b, " reports %s reads by %s leaving %t warming %q joining %t", st.Members, st.Agreed, st.Leaving, st.Warming, st.Joining)
		}
	}
	return b.String()
}
