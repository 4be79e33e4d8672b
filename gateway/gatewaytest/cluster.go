package gatewaytest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// Node is one gateway of an in-process test cluster.
type Node struct {
	G     *gateway.Gateway // nil where a handler stands in for the gateway
	Srv   *httptest.Server
	Store *s3test.Store // the node's store reads, counted
}

// StartCluster runs n gateways over store, each behind its own loopback
// server and counting its own store reads, configured as one cluster
// (probes every 50 ms, a peer timeout of 2 s, no prefetch: store reads
// are counted on demand only) before mutate (if not nil) changes each
// node's configuration. handlers, if not nil, replaces node k's gateway
// with handlers[k] when that is not nil (a misbehaving peer).
func StartCluster(t testing.TB, store s3backend.Store, n int, handlers []http.Handler, mutate func(*gateway.Config)) []*Node {
	t.Helper()
	return StartClusterOf(t, n, func(int) s3backend.Store { return store }, handlers, nil, mutate)
}

// StartClusterWrapped is StartCluster whose node k's server serves
// wrap(k, its gateway) (a fault between the nodes).
func StartClusterWrapped(t testing.TB, store s3backend.Store, n int, wrap func(k int, h http.Handler) http.Handler, mutate func(*gateway.Config)) []*Node {
	t.Helper()
	return StartClusterOf(t, n, func(int) s3backend.Store { return store }, nil, wrap, mutate)
}

// StartClusterOf is StartCluster whose node k serves store(k) and, if
// wrap is not nil, whose server serves wrap(k, its gateway).
func StartClusterOf(t testing.TB, n int, store func(k int) s3backend.Store, handlers []http.Handler, wrap func(k int, h http.Handler) http.Handler, mutate func(*gateway.Config)) []*Node {
	t.Helper()
	lns, urls := Loopbacks(t, n)
	nodes := make([]*Node, n)
	for k := range n {
		node := &Node{}
		var h http.Handler
		if k < len(handlers) && handlers[k] != nil {
			h = handlers[k]
		} else {
			node.Store = s3test.Wrap(store(k))
			node.G, _ = Start(t, node.Store, func(c *gateway.Config) {
				c.Cluster = gateway.ClusterConfig{Peers: urls, Self: k, ProbeInterval: 50 * time.Millisecond, PeerTimeout: 2 * time.Second}
				c.PrefetchConcurrency = -1 // store reads counted on demand only
				if mutate != nil {
					mutate(c)
				}
			})
			h = node.G
		}
		if wrap != nil {
			h = wrap(k, h)
		}
		node.Srv = &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: h}}
		node.Srv.Start()
		t.Cleanup(node.Srv.Close)
		nodes[k] = node
	}
	return nodes
}

// Loopbacks listens on n loopback ports, for a cluster's nodes, and
// returns the listeners and their base URLs, sorted by URL as a
// membership sorts its members: node k of a test cluster is member k, so
// cluster.Home and owners' positions index it directly.
func Loopbacks(t testing.TB, n int) ([]net.Listener, []string) {
	t.Helper()
	lns := make([]net.Listener, n)
	urls := make([]string, n)
	for k := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[k], urls[k] = ln, "http://"+ln.Addr().String()
	}
	idx := make([]int, n)
	for k := range idx {
		idx[k] = k
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(urls[a], urls[b]) })
	sl, su := make([]net.Listener, n), make([]string, n)
	for i, k := range idx {
		sl[i], su[i] = lns[k], urls[k]
	}
	return sl, su
}

// URLs is the base URLs of a test cluster's nodes, in node order.
func URLs(cl []*Node) []string {
	urls := make([]string, len(cl))
	for k, n := range cl {
		urls[k] = n.Srv.URL
	}
	return urls
}

// MembershipOf is the membership of the nodes at urls.
func MembershipOf(t testing.TB, urls []string) *cluster.Membership {
	t.Helper()
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// ClusterReads is the chunk reads from the store of every node of cl.
func ClusterReads(cl []*Node) (reads int) {
	for _, n := range cl {
		if n.Store != nil {
			reads += n.Store.Total().Under("chunks/").Sum().Reads
		}
	}
	return reads
}

// ClusterView is a node's GET /cluster.
func ClusterView(t testing.TB, base string) api.Cluster {
	t.Helper()
	resp, body := Get(t, base+"/cluster")
	var c api.Cluster
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &c) != nil {
		t.Fatalf("/cluster: %s: %s", resp.Status, body)
	}
	return c
}

// WaitMembers waits until every node at urls agrees on membership
// version v.
func WaitMembers(t testing.TB, urls []string, v string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, u := range urls {
		for ClusterView(t, u).Members != v {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not agree on membership %s after 10 s: %+v", u, v, ClusterView(t, u))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
