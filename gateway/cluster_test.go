package gateway_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// The tests of several gateways as one cluster are gateway/clustertest's;
// the gateway's own start a cluster where its HTTP contract is a node's
// (the internal endpoints, scopes, bodies, /plan, the model's worlds),
// and where a test's fixtures are this package's (transform_cluster_test.go
// over transform_test.go's images, pace_test.go).

// clusterNode is a gatewaytest.Node under the names this package's tests
// use: one gateway of an in-process test cluster.
type clusterNode struct {
	g     *gateway.Gateway
	srv   *httptest.Server
	store *s3test.Store
}

// startCluster is gatewaytest.StartCluster over f's store.
func startCluster(t testing.TB, f *fixture, n int, handlers []http.Handler, mutate func(*gateway.Config)) []*clusterNode {
	t.Helper()
	nodes := gatewaytest.StartCluster(t, f.store, n, handlers, mutate)
	out := make([]*clusterNode, len(nodes))
	for k, n := range nodes {
		out[k] = &clusterNode{g: n.G, srv: n.Srv, store: n.Store}
	}
	return out
}

// urlsOf is the base URLs of cl's nodes.
func urlsOf(cl []*clusterNode) []string {
	urls := make([]string, len(cl))
	for k, n := range cl {
		urls[k] = n.srv.URL
	}
	return urls
}

// membershipOf is the membership of a test cluster's nodes.
func membershipOf(t *testing.T, cl []*clusterNode) *cluster.Membership {
	t.Helper()
	return gatewaytest.MembershipOf(t, urlsOf(cl))
}

// waitMembers waits until every node of cl agrees on membership version v.
func waitMembers(t *testing.T, cl []*clusterNode, v string) {
	t.Helper()
	gatewaytest.WaitMembers(t, urlsOf(cl), v)
}

// clusterReads is gatewaytest.ClusterReads.
func clusterReads(cl []*clusterNode) int {
	nodes := make([]*gatewaytest.Node, len(cl))
	for k, n := range cl {
		nodes[k] = &gatewaytest.Node{Store: n.store}
	}
	return gatewaytest.ClusterReads(nodes)
}

// readRank is gatewaytest.ReadRank.
func readRank(t testing.TB, base string, q string, epoch, batches int) [][]byte {
	t.Helper()
	return gatewaytest.ReadRank(t, base, q, epoch, batches)
}

// TestLeavingIsNotReady: a node told to leave (Leave, as SIGTERM does)
// answers /readyz 503 saying it leaves, so that its platform sends it no
// new work; a single gateway's Leave returns at once. (The hand-over:
// handover's TestWarmForALeave; the wait for the members to flip:
// membership's TestLeaveWaitsForEveryMemberToFlip and TestLeaveWithNoHeirs.)
func TestLeavingIsNotReady(t *testing.T) {
	g, srv := start(t, newFixture(t, 2, 4).store, nil)
	if err := g.Leave(context.Background()); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if resp, body := get(t, srv.URL+"/readyz"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "leaving") {
		t.Errorf("/readyz of a leaving node: %s: %s", resp.Status, body)
	}
}

// loopbacks is gatewaytest.Loopbacks.
func loopbacks(t testing.TB, n int) ([]net.Listener, []string) {
	t.Helper()
	return gatewaytest.Loopbacks(t, n)
}
