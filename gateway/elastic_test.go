package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
)

// memberList is a member source a test changes at runtime, as an operator
// changes a file or Kubernetes a Service's records.
type memberList struct {
	mu   sync.Mutex
	urls []string
}

func (l *memberList) set(urls ...string) {
	l.mu.Lock()
	l.urls = slices.Clone(urls)
	l.mu.Unlock()
}

func (l *memberList) List(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.urls), nil
}

// startElastic runs a gateway over f's store for each of lns, node k
// listing its members from lists[k] and known as urls[k].
func startElastic(t *testing.T, f *fixture, lns []net.Listener, urls []string, lists []*memberList) []*clusterNode {
	t.Helper()
	nodes := make([]*clusterNode, len(lns))
	for k := range lns {
		node := &clusterNode{store: newCountingStore(f.store)}
		node.g, _ = start(t, node.store, func(c *gateway.Config) {
			c.Cluster = gateway.ClusterConfig{Members: lists[k], Advertise: urls[k], MembersPoll: 10 * time.Millisecond,
				ProbeInterval: 20 * time.Millisecond, PeerTimeout: 2 * time.Second}
			c.PrefetchConcurrency = -1
		})
		node.srv = &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: node.g}}
		node.srv.Start()
		t.Cleanup(node.srv.Close)
		nodes[k] = node
	}
	return nodes
}

// clusterView is a node's GET /cluster.
func clusterView(t *testing.T, base string) api.Cluster {
	t.Helper()
	resp, body := get(t, base+"/cluster")
	var c api.Cluster
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &c) != nil {
		t.Fatalf("/cluster: %s: %s", resp.Status, body)
	}
	return c
}

// waitMembers waits until every node of cl agrees on membership version v.
func waitMembers(t *testing.T, cl []*clusterNode, v string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range cl {
		for clusterView(t, n.srv.URL).Members != v {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not agree on membership %s after 10 s: %+v", n.srv.URL, v, clusterView(t, n.srv.URL))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestClusterMembershipVersions: nodes whose member lists disagree for a
// while agree on the version most of them list; a request without
// members= is laid out under the agreed version and names it
// (Brand-Members), one that pins a version is laid out under it on any
// node — one that never listed it asks its peers — and one that pins a
// version no node knows is answered 409 naming the current one. Every
// version serves the same samples in each global step; the ETag names
// the version only when the assignment depends on it.
func TestClusterMembershipVersions(t *testing.T) {
	f := newFixture(t, 24, 10)
	lns, urls := loopbacks(t, 4)
	three, _ := cluster.NewMembership(urls[:3])
	two, _ := cluster.NewMembership(urls[:2])
	lists := make([]*memberList, 4)
	for k := range lists {
		lists[k] = &memberList{}
		lists[k].set(urls[:3]...)
	}
	lists[3].set(urls[:2]...) // node 3 starts later, listing only the two
	cl := startElastic(t, f, lns[:3], urls[:3], lists[:3])
	waitMembers(t, cl, three.Version())

	const job = "seed=3&batch_size=4&window=8"
	batch := func(base, extra string, world, r int) (*http.Response, []byte) {
		t.Helper()
		return get(t, fmt.Sprintf("%s/epoch/0/batch/2?%s&world=%d&rank=%d%s", base, job, world, r, extra))
	}
	ranks := func(base, extra string) (keys [][]string, etags []string) {
		t.Helper()
		for r := range 3 {
			resp, body := batch(base, extra+"&format=json", 3, r)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("rank %d from %s (%s): %s: %s", r, base, extra, resp.Status, body)
			}
			var m api.Manifest
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			var ks []string
			for _, s := range m.Samples {
				ks = append(ks, s.Key)
			}
			keys, etags = append(keys, ks), append(etags, m.ETag)
		}
		return keys, etags
	}
	underThree, etagsThree := ranks(cl[2].srv.URL, "")
	resp, _ := batch(cl[2].srv.URL, "", 3, 0)
	if got := resp.Header.Get(api.HeaderMembers); got != three.Version() {
		t.Fatalf("Brand-Members %q, want the agreed %s", got, three.Version())
	}
	resp, _ = batch(cl[2].srv.URL, "", 1, 0)
	_, single := start(t, f.store, nil)
	sresp, _ := batch(single.URL, "", 1, 0)
	if resp.Header.Get("ETag") != sresp.Header.Get("ETag") {
		t.Errorf("world=1 on a cluster: ETag %s, a single gateway's %s; nothing of the cluster enters it", resp.Header.Get("ETag"), sresp.Header.Get("ETag"))
	}

	// Node 0 alone lists two members: the others still list three, and
	// so do the requests node 0 lays out.
	lists[0].set(urls[:2]...)
	deadline := time.Now().Add(10 * time.Second)
	for clusterView(t, cl[0].srv.URL).Reported != two.Version() {
		if time.Now().After(deadline) {
			t.Fatal("node 0 does not report its new list")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := clusterView(t, cl[0].srv.URL); v.Members != three.Version() {
		t.Errorf("one node of three lists another membership, and it agrees on %s, not the majority's %s", v.Members, three.Version())
	}
	// Node 1 follows: two of three now list two members, and every node
	// agrees on it, node 2 too, though it lists three.
	lists[1].set(urls[:2]...)
	waitMembers(t, cl, two.Version())
	underTwo, etagsTwo := ranks(cl[2].srv.URL, "")
	for r := range 3 {
		if etagsTwo[r] == etagsThree[r] {
			t.Errorf("rank %d: the same ETag under two memberships whose assignments differ", r)
		}
	}
	union := func(ks [][]string) []string {
		var all []string
		for _, k := range ks {
			all = append(all, k...)
		}
		slices.Sort(all)
		return all
	}
	if !slices.Equal(union(underTwo), union(underThree)) {
		t.Errorf("the global step holds other samples under another membership:\n%v\n%v", union(underTwo), union(underThree))
	}

	// A job that pinned the old version is served it, on any node.
	for k, n := range cl {
		got, etags := ranks(n.srv.URL, "&members="+three.Version())
		if !slices.EqualFunc(got, underThree, slices.Equal) || !slices.Equal(etags, etagsThree) {
			t.Errorf("node %d, members=%s: not the batches laid out under it", k, three.Version())
		}
	}
	// A node that never listed it asks its peers.
	cl = append(cl, startElastic(t, f, lns[3:], urls[3:], lists[3:])...)
	got, _ := ranks(cl[3].srv.URL, "&members="+three.Version())
	if !slices.EqualFunc(got, underThree, slices.Equal) {
		t.Errorf("a node that never listed membership %s lays it out otherwise", three.Version())
	}
	// A version no node knows: 409, naming the current one.
	resp, body := batch(cl[2].srv.URL, "&members=00000000deadbeef", 3, 0)
	if resp.StatusCode != http.StatusConflict || resp.Header.Get(api.HeaderMembers) != two.Version() || !strings.Contains(string(body), two.Version()) {
		t.Errorf("an unknown membership: %s, Brand-Members %q: %s; want 409 naming %s", resp.Status, resp.Header.Get(api.HeaderMembers), body, two.Version())
	}
	// /metrics shows the versions and the agreed members.
	if v := metric(t, cl[2].srv.URL, fmt.Sprintf(`brand_membership_members{kind="agreed",version=%q}`, two.Version())); v != 2 {
		t.Errorf("brand_membership_members of the agreed version: %v, want 2", v)
	}
	if v := metric(t, cl[2].srv.URL, fmt.Sprintf(`brand_membership_member{member=%q}`, urls[1])); v != 1 {
		t.Errorf("brand_membership_member of %s: %v, want 1", urls[1], v)
	}
}
