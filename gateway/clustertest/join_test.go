package clustertest_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// TestJoinersDoNotMoveTheClusterCold: two gateways join two (2 → 4) while
// a job reads; a joiner whose warm-up waits on the store (its chunk reads
// held) keeps the cluster on the two old members — on every node, for
// as long as it warms up — and once it is warm the cluster moves to the
// four. The reproduction: a joining node reports the new membership at
// once and its vote counted, so the joiners tied the old members and the
// smaller version hash decided; the old members are picked here so that
// it is the new membership's, and the cluster moved to the four while a
// joiner still loaded its gains (membership.TestJoinersDoNotWinTheVoteCold
// has the rule).
func TestJoinersDoNotMoveTheClusterCold(t *testing.T) {
	f := gatewaytest.NewFixture(t, 24, 8)
	lns, urls, four, two, old := tiedToTheFour(t)
	var joiners []int
	for k := range 4 {
		if !slices.Contains(old, k) {
			joiners = append(joiners, k)
		}
	}
	lists := make([]*gatewaytest.MemberList, 4)
	nodes := make([]*gatewaytest.Node, 4)
	stores := make([]*s3test.Store, 4)
	gates := make([]*s3test.Gate, 4) // every chunk read held until opened
	for k := range 4 {
		lists[k] = &gatewaytest.MemberList{}
		stores[k] = s3test.Wrap(f.Store)
		gates[k] = stores[k].Gate(func(c s3test.Call) bool { return c.Op == s3backend.OpGet && strings.HasPrefix(c.Key, "chunks/") })
		if slices.Contains(old, k) {
			gates[k].Open() // only the joiners' reads are held
			lists[k].Set(two.Members()...)
		} else {
			lists[k].Set(urls...)
		}
	}
	t.Cleanup(func() {
		for _, g := range gates {
			g.Open()
		}
	})
	run := func(k int) {
		node := &gatewaytest.Node{Store: stores[k]}
		node.G, _ = gatewaytest.Start(t, stores[k], func(c *gateway.Config) {
			c.Cluster = gateway.ClusterConfig{Members: lists[k], Advertise: urls[k], MembersPoll: 20 * time.Millisecond,
				ProbeInterval: 20 * time.Millisecond, PeerTimeout: 2 * time.Second, FlipTimeout: time.Minute}
			c.PrefetchConcurrency = -1 // no cache holds the next window's chunks: the joiners read them
			// The warm-up loads the gains the jobs need within this many
			// windows: with one, every chunk of the two windows the job
			// reads soon could stay with the old members or sit in their
			// caches (window 0's, read by batches 0–3), and the joiners
			// would warm up from their peers alone without reading the
			// store (about 1 run in 64, by the ports' hash). Over the
			// whole epoch, 18 chunks no cache holds: the joiners gain one
			// unless each of the 18 stays with an old member (2^-18).
			c.PrefetchWindows = 3
			c.Defaults = gateway.Defaults{BatchSize: 8, Window: 6, Seed: 3}
		})
		node.Srv = &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: node.G}}
		node.Srv.Start()
		t.Cleanup(node.Srv.Close)
		nodes[k] = node
	}
	for _, k := range old {
		run(k)
	}
	// The joiners' listeners refuse nothing before they start; the old
	// members do not list them yet.
	oldNodes := []*gatewaytest.Node{nodes[old[0]], nodes[old[1]]}
	gatewaytest.WaitMembers(t, gatewaytest.URLs(oldNodes), two.Version())
	home := nodes[old[0]].Srv.URL
	for m := range 4 { // a job in its first window
		if resp, body := gatewaytest.Get(t, fmt.Sprintf("%s/epoch/0/batch/%d", home, m)); resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %d: %s: %s", m, resp.Status, body)
		}
	}
	for _, k := range joiners {
		run(k)
	}
	for _, k := range old {
		lists[k].Set(urls...)
	}
	// A joiner's warm-up waits on the store for a gain the job needs soon.
	var held int
	select {
	case <-gates[joiners[0]].Waiting():
		held = joiners[0]
	case <-gates[joiners[1]].Waiting():
		held = joiners[1]
	case <-time.After(30 * time.Second):
		t.Fatalf("no joiner's warm-up read a chunk from the store 30 s after they started: the test's premise; %+v", gatewaytest.ClusterView(t, home))
	}
	// A node is in service once it and its peers have seen each other up
	// (/readyz): until its first probes answer, a joiner knows only its own
	// list and takes it for agreed (a cluster starting together does), and
	// neither a load balancer nor a client sends it work. Checked before
	// it is ready, the second joiner's view failed this test about once in
	// 40 runs, 70 ms in, before it had heard from a peer.
	for _, n := range nodes {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if resp, _ := gatewaytest.Get(t, n.Srv.URL+"/readyz"); resp.StatusCode == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is not ready 30 s after the joiners started: %+v", n.Srv.URL, gatewaytest.ClusterView(t, n.Srv.URL))
			}
		}
	}
	// For a second (50 probes) every node agrees on the two old members.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for k, n := range nodes {
			if v := gatewaytest.ClusterView(t, n.Srv.URL); v.Members != two.Version() {
				t.Fatalf("node %d agrees on %s (the four: %t) while joiner %d warms up (its view: %+v); want the two old members %s",
					k, v.Members, v.Members == four.Version(), held, gatewaytest.ClusterView(t, nodes[held].Srv.URL), two.Version())
			}
		}
	}
	for _, k := range joiners {
		gates[k].Open()
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for gatewaytest.ClusterView(t, n.Srv.URL).Members != four.Version() {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not agree on the four 30 s after the joiners' reads were released: %+v", n.Srv.URL, gatewaytest.ClusterView(t, n.Srv.URL))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// tiedToTheFour listens on four loopback ports whose membership's version
// sorts before that of one of its pairs, and returns them with that pair
// (old, as member positions) and both memberships: a tie of the pair's
// votes against the four's goes to the four. Ports come at random, and
// for some sets no pair's version sorts after the four's;
// such a set is closed and another taken.
func tiedToTheFour(t *testing.T) (lns []net.Listener, urls []string, four, two *cluster.Membership, old []int) {
	t.Helper()
	for range 100 {
		lns, urls = gatewaytest.Loopbacks(t, 4)
		var err error
		if four, err = cluster.NewMembership(urls); err != nil {
			t.Fatal(err)
		}
		for a := 0; a < 4; a++ {
			for b := a + 1; b < 4; b++ {
				m, err := cluster.NewMembership([]string{urls[a], urls[b]})
				if err != nil {
					t.Fatal(err)
				}
				if m.Version() > four.Version() {
					return lns, urls, four, m, []int{a, b}
				}
			}
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Fatal("no set of four loopback ports of 100 has a pair whose membership's version sorts after the four's")
	return nil, nil, nil, nil, nil
}
