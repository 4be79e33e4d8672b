package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
)

// clusterNode is one gateway of an in-process test cluster.
type clusterNode struct {
	g     *gateway.Gateway
	srv   *httptest.Server
	store *s3test.Store
}

// startCluster runs n gateways over f's store, each behind its own
// loopback server and counting its own store reads, configured as one
// cluster. handlers, if not nil, replaces node k's gateway with
// handlers[k] when that is not nil (a misbehaving peer).
func startCluster(t testing.TB, f *fixture, n int, handlers []http.Handler, mutate func(*gateway.Config)) []*clusterNode {
	t.Helper()
	return startClusterOf(t, n, func(int) *fixture { return f }, handlers, nil, mutate)
}

// startClusterWrapped is startCluster whose node k's server serves
// wrap(k, its gateway) (a fault between the nodes).
func startClusterWrapped(t testing.TB, f *fixture, n int, wrap func(k int, h http.Handler) http.Handler, mutate func(*gateway.Config)) []*clusterNode {
	t.Helper()
	return startClusterOf(t, n, func(int) *fixture { return f }, nil, wrap, mutate)
}

// startClusterOf is startCluster whose node k serves fixture(k)'s store
// and, if wrap is not nil, whose server serves wrap(k, its gateway).
func startClusterOf(t testing.TB, n int, fixture func(k int) *fixture, handlers []http.Handler, wrap func(k int, h http.Handler) http.Handler, mutate func(*gateway.Config)) []*clusterNode {
	t.Helper()
	lns, urls := loopbacks(t, n)
	nodes := make([]*clusterNode, n)
	for k := range n {
		node := &clusterNode{}
		var h http.Handler
		if k < len(handlers) && handlers[k] != nil {
			h = handlers[k]
		} else {
			node.store = s3test.Wrap(fixture(k).store)
			node.g, _ = start(t, node.store, func(c *gateway.Config) {
				c.Cluster = gateway.ClusterConfig{Peers: urls, Self: k, ProbeInterval: 50 * time.Millisecond, PeerTimeout: 2 * time.Second}
				c.PrefetchConcurrency = -1 // store reads counted on demand only
				if mutate != nil {
					mutate(c)
				}
			})
			h = node.g
		}
		if wrap != nil {
			h = wrap(k, h)
		}
		node.srv = &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: h}}
		node.srv.Start()
		t.Cleanup(node.srv.Close)
		nodes[k] = node
	}
	return nodes
}

// loopbacks listens on n loopback ports, for a cluster's nodes, and
// returns the listeners and their base URLs, sorted by URL as a
// membership sorts its members: node k of a test cluster is member k, so
// cluster.Home and owners' positions index it directly.
func loopbacks(t testing.TB, n int) ([]net.Listener, []string) {
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

// membershipOf is the membership of a test cluster's nodes.
func membershipOf(t *testing.T, cl []*clusterNode) *cluster.Membership {
	t.Helper()
	urls := make([]string, len(cl))
	for k, n := range cl {
		urls[k] = n.srv.URL
	}
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// clusterReads is the chunk reads from the store of every node of cl.
func clusterReads(cl []*clusterNode) (reads int) {
	for _, n := range cl {
		if n.store != nil {
			r := n.store.Total().Under("chunks/").Sum().Reads
			reads += r
		}
	}
	return reads
}

// readRank reads every batch of an epoch for one rank from base and
// returns the bodies.
func readRank(t testing.TB, base string, q string, epoch, batches int) [][]byte {
	t.Helper()
	var out [][]byte
	for m := range batches {
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", base, epoch, m, q))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("epoch %d batch %d (%s) from %s: %s: %s", epoch, m, q, base, resp.Status, body)
		}
		out = append(out, body)
	}
	return out
}

func TestClusterEpochExactlyOnceFromHomes(t *testing.T) {
	f := newFixture(t, 32, 16) // 512 samples
	const nodes, world, batch = 4, 8, 8
	batches := 512 / (world * batch)
	for _, locality := range []bool{true, false} {
		t.Run(fmt.Sprintf("locality=%t", locality), func(t *testing.T) {
			cl := startCluster(t, f, nodes, nil, nil)
			seen := map[string]int{}
			bodies := map[string][]byte{}
			for r := range world {
				q := fmt.Sprintf("seed=7&window=16&batch_size=%d&world=%d&rank=%d&locality=%t", batch, world, r, locality)
				home := cl[cluster.Home(r, world, nodes)]
				for m, body := range readRank(t, home.srv.URL, q, 0, batches) {
					f.verify(t, readTar(t, body), seen)
					bodies[fmt.Sprintf("%d/%d", r, m)] = body
				}
			}
			exactlyOnce(t, seen, 512, "the epoch over all ranks")
			var reads int
			var fetched, home, peer float64
			for _, n := range cl {
				r := n.store.Total().Under("chunks/").Sum().Reads
				reads += r
				fetched += metricSum(t, n.srv.URL, "brand_peer_bytes_fetched_total")
				home += metric(t, n.srv.URL, `brand_locality_bytes_total{source="home"}`)
				peer += metric(t, n.srv.URL, `brand_locality_bytes_total{source="peer"}`)
			}
			// Each chunk is read by its owner alone.
			if reads != 32 {
				t.Errorf("the cluster read %d chunks from the store, want each of the 32 once", reads)
			}
			if fetched != peer {
				t.Errorf("peer bytes fetched %v, batches carried %v from peers", fetched, peer)
			}
			share := peer / (home + peer)
			t.Logf("locality=%t: %.1f%% of batch bytes crossed nodes", locality, 100*share)
			// The order is the single gateway's (not stratified by
			// owner), so a global batch holds each node's chunks only
			// as the window happens to, and owners hash the nodes' URLs
			// (random loopback ports): over 20 runs of these 32 chunks,
			// 10–25 % crossed nodes (docs/scale-out.md has the figure
			// of a larger dataset).
			if locality && share > 0.30 {
				t.Errorf("with locality %.1f%% of batch bytes crossed nodes, want at most 30%%", 100*share)
			}
			if ahead := metricSum(t, cl[0].srv.URL, "brand_peer_samples_fetched_ahead_total"); !locality && ahead == 0 {
				t.Error("no sample was fetched from a peer ahead of its batch")
			}
			if !locality && share < 0.5 {
				t.Errorf("without locality only %.1f%% crossed nodes; expected about 75%%", 100*share)
			}
			// /stats shows the node's view of the cluster and its traffic.
			_, body := get(t, cl[1].srv.URL+"/stats")
			var st struct {
				Cluster *api.ClusterStats `json:"cluster"`
			}
			if err := json.Unmarshal(body, &st); err != nil || st.Cluster == nil {
				t.Fatalf("/stats: %v: %s", err, body)
			}
			cs := st.Cluster
			home1 := metric(t, cl[1].srv.URL, `brand_locality_bytes_total{source="home"}`)
			if cs.Self != 1 || len(cs.Peers) != nodes-1 || float64(cs.HomeBytes) != home1 || cs.Locality <= 0 || cs.Locality > 1 {
				t.Errorf("/stats cluster = %+v; home bytes on /metrics %v", cs, home1)
			}
			// Any node answers any request with the same bytes.
			for _, r := range []int{0, 3, 7} {
				q := fmt.Sprintf("seed=7&window=16&batch_size=%d&world=%d&rank=%d&locality=%t", batch, world, r, locality)
				for k, n := range cl {
					resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/1?%s", n.srv.URL, q))
					if resp.StatusCode != http.StatusOK || !bytes.Equal(body, bodies[fmt.Sprintf("%d/1", r)]) {
						t.Fatalf("rank %d batch 1 from node %d differs from its home's (%s)", r, k, resp.Status)
					}
				}
			}
			// Each node keeps its own chunks' sample tables alone (a
			// partial index) and reads another's only for a read that
			// prepared it (chunkindex panics on a read that did not,
			// which fails the request); a sample by key comes from any
			// node.
			key := f.index.SampleKey(100)
			for k, n := range cl {
				resp, body := get(t, n.srv.URL+"/samples/"+key)
				if ss := readTar(t, body); resp.StatusCode != http.StatusOK || len(ss) != 1 || ss[0].key != key {
					t.Errorf("sample %q from node %d: %s, %d samples", key, k, resp.Status, len(ss))
				}
			}
		})
	}
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

// TestClusterMembersHeader: a batch of a cluster names the membership it
// is laid out under (Brand-Members): the agreed one, or the one the
// request pins, with the same bytes and ETag; a version no node knows is
// 409 naming the current one. The ETag names the membership only where
// the assignment depends on it: world=1 is a single gateway's. (Which
// version a cluster agrees on, and a pinned version asked of a peer:
// membership's TestAgreedMembership; every step's samples the same under
// any membership, and jobs pinned across a resize: integration's
// TestClusterResize.)
func TestClusterMembersHeader(t *testing.T) {
	f := newFixture(t, 8, 10)
	cl := startCluster(t, f, 2, nil, nil)
	current := membershipOf(t, cl).Version()
	waitMembers(t, cl, current)
	_, single := start(t, f.store, nil)
	batch := func(base, q string) (*http.Response, []byte) {
		return get(t, base+"/epoch/0/batch/1?seed=3&batch_size=4&window=8&"+q)
	}
	resp, body := batch(cl[1].srv.URL, "world=2&rank=0")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderMembers) != current {
		t.Fatalf("%s, Brand-Members %q; want 200 naming the agreed %s", resp.Status, resp.Header.Get(api.HeaderMembers), current)
	}
	pinned, pbody := batch(cl[0].srv.URL, "world=2&rank=0&members="+current)
	if pinned.StatusCode != http.StatusOK || pinned.Header.Get(api.HeaderMembers) != current || pinned.Header.Get("ETag") != resp.Header.Get("ETag") || !bytes.Equal(pbody, body) {
		t.Errorf("the agreed version pinned, from the other node: %s, Brand-Members %q, ETag %s (unpinned %s)",
			pinned.Status, pinned.Header.Get(api.HeaderMembers), pinned.Header.Get("ETag"), resp.Header.Get("ETag"))
	}
	if alone, _ := batch(single.URL, "world=2&rank=0"); alone.Header.Get("ETag") == resp.Header.Get("ETag") {
		t.Error("a cluster's batch has a single gateway's ETag: it does not name the membership its rank's samples are assigned under")
	}
	one, _ := batch(cl[0].srv.URL, "world=1")
	if sone, _ := batch(single.URL, "world=1"); one.Header.Get("ETag") != sone.Header.Get("ETag") || one.Header.Get("ETag") == "" {
		t.Errorf("world=1 on a cluster: ETag %s, a single gateway's %s; nothing of the cluster enters it", one.Header.Get("ETag"), sone.Header.Get("ETag"))
	}
	resp, body = batch(cl[0].srv.URL, "world=2&rank=0&members=00000000deadbeef")
	if resp.StatusCode != http.StatusConflict || resp.Header.Get(api.HeaderMembers) != current || !strings.Contains(string(body), current) {
		t.Errorf("an unknown membership: %s, Brand-Members %q: %s; want 409 naming %s", resp.Status, resp.Header.Get(api.HeaderMembers), body, current)
	}
}

func TestClusterEndpoint(t *testing.T) {
	f := newFixture(t, 8, 4)
	cl := startCluster(t, f, 3, nil, nil)
	resp, body := get(t, cl[1].srv.URL+"/cluster?world=6")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	var c api.Cluster
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Self != 1 || len(c.Nodes) != 3 || c.Nodes[2].URL != cl[2].srv.URL || !slices.Equal(c.Homes, []int{0, 0, 1, 1, 2, 2}) {
		t.Errorf("/cluster = %+v", c)
	}
	_, single := start(t, f.store, nil)
	resp, body = get(t, single.URL+"/cluster")
	c = api.Cluster{}
	if err := json.Unmarshal(body, &c); resp.StatusCode != http.StatusOK || err != nil || c.Self != 0 || len(c.Nodes) != 1 {
		t.Errorf("single gateway /cluster: %s %s", resp.Status, body)
	}
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

// metricSum adds up every series of a metric on /metrics.
func metricSum(t *testing.T, base, name string) float64 {
	t.Helper()
	return scrapeMetrics(t, base).Sum(name)
}
