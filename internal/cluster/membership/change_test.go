package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/nodestate"
)

// list is a member source a test changes, as an operator edits a file or
// Kubernetes a Service's records.
type list struct {
	mu   sync.Mutex
	urls []string
}

func (l *list) set(urls ...string) {
	l.mu.Lock()
	l.urls = slices.Clone(urls)
	l.mu.Unlock()
}

func (l *list) List(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.urls), nil
}

// warmer stands in for the hand-over: it announces loading and says it
// moved what moved.
type warmer struct{ moved api.MembershipChange }

func (w warmer) Warm(_ context.Context, _, _ *cluster.Membership, loading func()) (api.MembershipChange, error) {
	loading()
	return w.moved, nil
}

// waitView polls m's view until ok holds, for at most 10 s (the bound only
// ends a failing run).
func waitView(t *testing.T, m *Tracker, what string, ok func(v *view) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(m.view.Load()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
}

// TestFlipWaitsForAWarmingGainer: a node whose list grows from two members
// to three warms up (the hand-over), then keeps reporting the two while
// the joining member says it warms up for the three, and reports the
// three once it is warm; with a short flip timeout it reports them anyway
// and says so (the change's FlipTimedOut, and a count on /metrics). The
// change's figures are the warm-up's, on /cluster (LastChange) and on
// /metrics alike.
func TestFlipWaitsForAWarmingGainer(t *testing.T) {
	urls := []string{"http://node0.invalid", "http://node1.invalid", "http://node2.invalid"}
	two, _ := cluster.NewMembership(urls[:2])
	three, _ := cluster.NewMembership(urls)
	moved := api.MembershipChange{Chunks: 3, PeerBytes: 3 << 10, StoreBytes: 1 << 10}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{{"until warm", time.Hour}, {"until the timeout", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNodes(urls[0])
			src := &list{}
			src.set(urls[:2]...)
			ns.set(urls[1], true, &nodestate.State{Self: 1, Ready: true, Members: two.Version(), MemberList: two.Members()})
			m := New(Config{Self: urls[0], Members: src, Peers: ns, Probe: 4 * time.Millisecond, Warm: warmer{moved}, FlipTimeout: tc.timeout,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer m.Close()
			m.Start()
			waitView(t, m, "the node does not report the two members it lists", func(v *view) bool { return v.reported.Version() == two.Version() })

			// Node 2 joins: it warms up for the three, and the list names it.
			joiner := &nodestate.State{Self: 2, Ready: true, Members: three.Version(), MemberList: three.Members(), Warming: three.Version()}
			ns.set(urls[2], true, joiner)
			m.Changed(ns.Slot(urls[2]), nil, joiner)
			src.set(urls...)
			if tc.timeout < time.Hour {
				waitView(t, m, "the three members not reported past the flip timeout", func(v *view) bool { return v.reported.Version() == three.Version() })
				c := m.change.Load()
				if c == nil || c.To != three.Version() || !c.FlipTimedOut || testutil.ToFloat64(m.metrics.flipTimeouts) != 1 {
					t.Errorf("reported past the flip timeout: change %+v, %v timeouts counted; want FlipTimedOut and 1", c, testutil.ToFloat64(m.metrics.flipTimeouts))
				}
				return
			}
			waitView(t, m, "the node does not warm up for the three", func(v *view) bool { return v.warmed == three.Version() })
			time.Sleep(50 * time.Millisecond) // a dozen waits of the flip: it must not report meanwhile
			if v := m.View(0, nil); v.Reported != two.Version() || v.Local != three.Version() {
				t.Fatalf("while a gainer warms up: reports %s and lists %s; want %s and %s", v.Reported, v.Local, two.Version(), three.Version())
			}
			warm := *joiner
			warm.Warming = ""
			ns.set(urls[2], true, &warm)
			m.Changed(ns.Slot(urls[2]), joiner, &warm)
			waitView(t, m, "the three members not reported once the gainer is warm", func(v *view) bool { return v.reported.Version() == three.Version() })
			c := m.View(0, nil).LastChange
			if c == nil || c.FlipTimedOut || c.From != two.Version() || c.To != three.Version() || c.FlipSeconds < c.WarmSeconds ||
				c.Chunks != moved.Chunks || c.PeerBytes != moved.PeerBytes || c.StoreBytes != moved.StoreBytes {
				t.Errorf("the change: %+v; want the warm-up's figures, from %s to %s, reported once the gainer was warm", c, two.Version(), three.Version())
			}
			if got := testutil.ToFloat64(m.metrics.movedBytes.WithLabelValues("peer")); got != float64(moved.PeerBytes) {
				t.Errorf("brand_membership_moved_bytes_total{source=\"peer\"} = %v, the change says %d", got, moved.PeerBytes)
			}
			if got := testutil.ToFloat64(m.metrics.flipTimeouts); got != 0 {
				t.Errorf("%v flip timeouts counted", got)
			}
		})
	}
}

// TestLeaveWithNoHeirs: a node leaving when no other member is up and
// staying — the cluster stopped one node at a time, the others gone —
// returns at once, without waiting for its bound; one with a member
// staying that still reads by a membership with it waits. The
// reproduction: the last node of four stopped in turn went back to the
// list of every member, waited out --leave-timeout, and its platform
// killed it.
func TestLeaveWithNoHeirs(t *testing.T) {
	urls := []string{"http://node0.invalid", "http://node1.invalid", "http://node2.invalid"}
	all, _ := cluster.NewMembership(urls)
	tests := []struct {
		name    string
		up      []bool // the other members
		leaving []bool
		returns bool
	}{
		{"the others gone", []bool{false, false}, []bool{false, false}, true},
		{"the others leaving too", []bool{true, true}, []bool{true, true}, true},
		{"one gone, the other leaving", []bool{false, true}, []bool{false, true}, true},
		{"one staying", []bool{true, true}, []bool{true, false}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNodes(urls[0])
			for i := range tc.up {
				ns.set(urls[i+1], tc.up[i], &nodestate.State{Self: i + 1, Ready: true, Members: all.Version(), MemberList: all.Members(),
					Agreed: all.Version(), Leaving: tc.leaving[i]})
			}
			m := New(Config{Self: urls[0], Members: Static(urls), Peers: ns, Probe: 4 * time.Millisecond, FlipTimeout: time.Hour,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer m.Close()
			m.Start()
			done := make(chan error, 1)
			go func() { done <- m.Leave(context.Background()) }()
			leaveReturns(t, m, done, tc.returns)
		})
	}

	// The heirs are gone after this node's view agreed without it: the
	// view flipped while it waited for the member staying, and that
	// member went down. The reproduction: Leave looked for heirs only
	// while its view still agreed on a membership with this node, so one
	// whose view flipped first — the change's goroutine reporting the
	// members without it before Leave's first look, in about one run in
	// fifteen of "one gone, the other leaving" — waited for the member
	// leaving too, up to the flip timeout.
	t.Run("the last heir lost once the view agreed without this node", func(t *testing.T) {
		without, _ := cluster.NewMembership(urls[1:2])
		ns := newNodes(urls[0])
		staying := &nodestate.State{Self: 1, Ready: true, Members: all.Version(), MemberList: all.Members(), Agreed: all.Version()}
		leaving := &nodestate.State{Self: 2, Ready: true, Members: all.Version(), MemberList: all.Members(), Agreed: all.Version(), Leaving: true}
		ns.set(urls[1], true, staying)
		ns.set(urls[2], true, leaving)
		m := New(Config{Self: urls[0], Members: Static(urls), Peers: ns, Probe: 4 * time.Millisecond, FlipTimeout: time.Hour,
			Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
		defer m.Close()
		m.Start()
		done := make(chan error, 1)
		go func() { done <- m.Leave(context.Background()) }()
		// Node 1 flips to the members without this node: this node's
		// view follows, and Leave waits for node 2, which still reads by
		// all three.
		flipped := *staying
		flipped.Members, flipped.MemberList, flipped.Agreed = without.Version(), without.Members(), without.Version()
		ns.set(urls[1], true, &flipped)
		m.Changed(1, staying, &flipped)
		waitView(t, m, "this node's view does not agree on the members without it", func(v *view) bool { return v.agreed.Index(urls[0]) < 0 })
		leaveReturns(t, m, done, false)
		ns.set(urls[1], false, &flipped) // the last member staying is gone
		m.Changed(1, &flipped, &flipped)
		leaveReturns(t, m, done, true)
	})
}

// TestAgreedMembership: the membership a cluster agrees on is the one
// most live nodes report, the smallest version on a tie; a node counts
// only for a version it is a member of, and a node down does not count.
// A request that pins no version is laid out under it; one that pins
// another is laid out under that one, found here or asked of a peer; one
// that no node knows is an UnknownMembersError naming the agreed one.
// /metrics shows the agreed version's size and its members.
func TestAgreedMembership(t *testing.T) {
	urls := []string{"http://node0.invalid", "http://node1.invalid", "http://node2.invalid", "http://node3.invalid"}
	ms := func(k ...int) *cluster.Membership {
		var us []string
		for _, i := range k {
			us = append(us, urls[i])
		}
		m, _ := cluster.NewMembership(us)
		return m
	}
	four, three, two := ms(0, 1, 2, 3), ms(0, 1, 2), ms(0, 1)
	type node struct {
		reports *cluster.Membership // nil: no state yet
		up      bool
	}
	tests := []struct {
		name  string
		peers []node // nodes 1, 2, 3; this node lists and reports the four
		want  *cluster.Membership
	}{
		{"all report one", []node{{four, true}, {four, true}, {four, true}}, four},
		{"most live nodes report another", []node{{three, true}, {three, true}, {nil, false}}, three},
		{"a node down does not count", []node{{three, true}, {three, false}, {four, true}}, four},
		{"no state yet does not count", []node{{three, true}, {nil, true}, {four, true}}, four},
		{"a node counts only for a version it is in", []node{{three, true}, {four, true}, {three, true}}, four},
		{"a tie: the smaller version", []node{{three, true}, {nil, false}, {nil, false}}, min2(three, four)},
		{"a membership without this node", []node{{ms(1, 2), true}, {ms(1, 2), true}, {nil, false}}, ms(1, 2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNodes(urls[0])
			for i, p := range tc.peers {
				var st *nodestate.State
				if p.reports != nil {
					st = &nodestate.State{Self: i + 1, Ready: true, URL: urls[i+1], Members: p.reports.Version(), MemberList: p.reports.Members()}
				}
				ns.set(urls[i+1], p.up, st)
			}
			reg := prometheus.NewRegistry()
			m := New(Config{Self: urls[0], Members: Static(urls), Peers: ns, Probe: time.Second, Registry: reg, Log: zerolog.Nop()})
			defer m.Close()
			for i := range tc.peers {
				k := ns.Slot(urls[i+1])
				m.Changed(k, nil, ns.State(k))
			}
			v := m.View(0, nil)
			if v.Members != tc.want.Version() {
				t.Fatalf("agreed on %s, want %s", v.Members, tc.want.Version())
			}
			// /cluster lists the agreed members, then this node if it is
			// not one.
			shown := tc.want.Members()
			if tc.want.Index(urls[0]) < 0 {
				shown = append(shown, urls[0])
			}
			var got []string
			for _, n := range v.Nodes {
				got = append(got, n.URL)
			}
			if !slices.Equal(got, shown) || v.Self != slices.Index(shown, urls[0]) {
				t.Errorf("/cluster lists %v, this node at %d; want %v", got, v.Self, shown)
			}
			if got, err := m.Members(context.Background(), ""); err != nil || got.Version() != tc.want.Version() {
				t.Errorf("a request pinning nothing is laid out under %v (%v), want %s", got, err, tc.want.Version())
			}
			if n, _ := testutil.GatherAndCount(reg, "brand_membership_member"); n != tc.want.Len() {
				t.Errorf("brand_membership_member has %d series, want one per agreed member (%d)", n, tc.want.Len())
			}
			if v := testutil.ToFloat64(m.metrics.versions.WithLabelValues("agreed", tc.want.Version())); v != float64(tc.want.Len()) {
				t.Errorf("brand_membership_members{kind=\"agreed\"} = %v, want %d", v, tc.want.Len())
			}
		})
	}

	t.Run("a member that says it leaves", func(t *testing.T) {
		ns := newNodes(urls[0])
		staying := &nodestate.State{Self: 3, Ready: true, URL: urls[3], Members: four.Version(), MemberList: four.Members()}
		for k := 1; k <= 3; k++ {
			ns.set(urls[k], true, staying)
		}
		m := New(Config{Self: urls[0], Members: Static(urls), Peers: ns, Probe: time.Second, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
		defer m.Close()
		leaving := *staying
		leaving.Leaving = true
		ns.set(urls[3], true, &leaving)
		m.Changed(3, staying, &leaving)
		if v := m.View(0, nil); v.Local != three.Version() {
			t.Errorf("a member leaving: this node lists %s, want the members without it, %s", v.Local, three.Version())
		}
	})

	t.Run("pinned versions", func(t *testing.T) {
		ns := newNodes(urls[0])
		ns.set(urls[1], true, &nodestate.State{Self: 1, Ready: true, Members: two.Version(), MemberList: two.Members()})
		asked := ms(0, 1, 3) // a version only node 1 keeps
		ns.lists[asked.Version()] = asked
		m := New(Config{Self: urls[0], Members: Static(two.Members()), Peers: ns, Probe: time.Second, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
		defer m.Close()
		m.Changed(1, nil, ns.State(1))
		if got, err := m.Members(context.Background(), two.Version()); err != nil || got.Version() != two.Version() {
			t.Errorf("the agreed version pinned: %v, %v", got, err)
		}
		if got, err := m.Members(context.Background(), asked.Version()); err != nil || got.Version() != asked.Version() {
			t.Errorf("a version a peer keeps: %v, %v", got, err)
		}
		ns.set(urls[1], false, ns.State(1))
		if got, err := m.Members(context.Background(), asked.Version()); err != nil || got.Version() != asked.Version() {
			t.Errorf("a version asked of a peer is not kept for the next request, the peer gone: %v, %v", got, err)
		}
		var unknown *UnknownMembersError
		if _, err := m.Members(context.Background(), "00000000deadbeef"); !errors.As(err, &unknown) || unknown.Current != two.Version() {
			t.Errorf("a version no node knows: %v; want an UnknownMembersError naming %s", err, two.Version())
		}
	})
}

// min2 is the one of a and b with the smaller version.
func min2(a, b *cluster.Membership) *cluster.Membership {
	if a.Version() < b.Version() {
		return a
	}
	return b
}

// TestJoinersDoNotWinTheVoteCold: members joining a cluster count for the
// new membership only once they are warm. A joining node reports the new
// membership at once (so that it never counts for itself alone) and
// warms up meanwhile; the old members report it once the joiners are
// warm. The reproduction: with as many joiners as old members (2 → 4)
// the vote was a tie, which went to the smaller version hash — in about
// half of the clusters the new membership, while the joiners still
// loaded their gains — and with more joiners than old members (2 → 5)
// the joiners outvoted them. (A cluster of one growing is not covered:
// its node, alone, is taken for one starting.) The URLs are picked so that the new
// membership's version is the smaller: the tie goes its way.
func TestJoinersDoNotWinTheVoteCold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		old, join int
	}{{"2 → 4: a tie", 2, 2}, {"2 → 5: the joiners outnumber the old members", 2, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			urls, before, after := smallerAfter(t, tc.old, tc.join)
			oldState := func(k int) *nodestate.State {
				return &nodestate.State{Self: k, Ready: true, URL: urls[k], Members: before.Version(), MemberList: before.Members(), Agreed: before.Version()}
			}
			joiner := func(k int, joining bool, warming string) *nodestate.State {
				return &nodestate.State{Self: k, Ready: true, URL: urls[k], Members: after.Version(), MemberList: after.Members(),
					Joining: joining, Warming: warming}
			}
			// Seen from each node of the cluster: an old member (node 0),
			// which lists every member and waits for the joiners' warm-up
			// before it reports them, and a joiner (the last node).
			for _, self := range []int{0, len(urls) - 1} {
				ns := newNodes(urls[self])
				src := &list{}
				src.set(before.Members()...)
				if self != 0 {
					src.set(urls...)
				}
				for k := range urls {
					if k == self {
						continue
					}
					if k < tc.old {
						ns.set(urls[k], true, oldState(k))
					} else {
						ns.set(urls[k], true, joiner(k, true, ""))
					}
				}
				hold := make(chan struct{})
				m := New(Config{Self: urls[self], Members: src, Peers: ns, Probe: 4 * time.Millisecond, FlipTimeout: time.Hour,
					Warm: heldWarmer{hold}, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
				changed := func() { // as each peer's probe tells this node its state
					for k := range urls {
						if k != self {
							m.Changed(ns.Slot(urls[k]), nil, ns.State(ns.Slot(urls[k])))
						}
					}
				}
				changed()
				m.Start()
				if self == 0 {
					waitView(t, m, "the old member does not report the old membership", func(v *view) bool { return v.reported.Version() == before.Version() })
					src.set(urls...) // the list names the joiners
					waitView(t, m, "the old member does not warm up for the new membership", func(v *view) bool { return v.warming == after.Version() })
				} else {
					waitView(t, m, "the joiner does not warm up", func(v *view) bool { return v.warming == after.Version() })
				}
				// Every joiner joining, then warming up: the old membership
				// holds.
				for _, warming := range []string{"", after.Version()} {
					for k := tc.old; k < len(urls); k++ {
						if k != self {
							ns.set(urls[k], true, joiner(k, warming == "", warming))
						}
					}
					changed()
					if v := m.view.Load(); v.agreed.Version() != before.Version() {
						t.Errorf("node %d (%s), the joiners %s: agrees on %v; want the old members %v until the joiners are warm",
							self, map[bool]string{true: "old", false: "joiner"}[self == 0], map[string]string{"": "joining", after.Version(): "warming up"}[warming],
							v.agreed.Members(), before.Members())
					}
				}
				// Warm: the old members report the new membership, and
				// the cluster agrees on it.
				close(hold)
				for k := range urls {
					switch {
					case k == self:
					case k < tc.old:
						st := oldState(k)
						st.Members, st.MemberList = after.Version(), after.Members()
						ns.set(urls[k], true, st)
					default:
						ns.set(urls[k], true, joiner(k, false, ""))
					}
				}
				changed()
				waitView(t, m, "the cluster does not agree on the new membership once every joiner is warm", func(v *view) bool {
					changed()
					return v.agreed.Version() == after.Version()
				})
				m.Close()
			}
		})
	}
}

// heldWarmer warms up until hold is closed.
type heldWarmer struct{ hold <-chan struct{} }

func (w heldWarmer) Warm(ctx context.Context, _, _ *cluster.Membership, loading func()) (api.MembershipChange, error) {
	loading()
	select {
	case <-w.hold:
	case <-ctx.Done():
	}
	return api.MembershipChange{}, ctx.Err()
}

// smallerAfter returns the URLs of a cluster of old members and then
// joiners, the old membership and the new one, whose version is the
// smaller: a tie of the vote goes to it.
func smallerAfter(t *testing.T, old, join int) (urls []string, before, after *cluster.Membership) {
	t.Helper()
	for try := range 1000 {
		urls = urls[:0]
		for k := range old + join {
			urls = append(urls, fmt.Sprintf("http://node%d-%d.invalid", k, try))
		}
		before, _ = cluster.NewMembership(urls[:old])
		after, _ = cluster.NewMembership(urls)
		if after.Version() < before.Version() {
			return urls, before, after
		}
	}
	t.Fatal("no cluster whose new membership's version is the smaller in 1,000 tries")
	return nil, nil, nil
}
