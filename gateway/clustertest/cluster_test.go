package clustertest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

func TestClusterEpochExactlyOnceFromHomes(t *testing.T) {
	f := gatewaytest.NewFixture(t, 32, 16) // 512 samples
	const nodes, world, batch = 4, 8, 8
	batches := 512 / (world * batch)
	for _, locality := range []bool{true, false} {
		t.Run(fmt.Sprintf("locality=%t", locality), func(t *testing.T) {
			cl := gatewaytest.StartCluster(t, f.Store, nodes, nil, nil)
			seen := map[string]int{}
			bodies := map[string][]byte{}
			for r := range world {
				q := fmt.Sprintf("seed=7&window=16&batch_size=%d&world=%d&rank=%d&locality=%t", batch, world, r, locality)
				home := cl[cluster.Home(r, world, nodes)]
				for m, body := range gatewaytest.ReadRank(t, home.Srv.URL, q, 0, batches) {
					f.Verify(t, gatewaytest.ReadTar(t, body), seen)
					bodies[fmt.Sprintf("%d/%d", r, m)] = body
				}
			}
			gatewaytest.ExactlyOnce(t, seen, 512, "the epoch over all ranks")
			var reads int
			var fetched, home, peer float64
			for _, n := range cl {
				r := n.Store.Total().Under("chunks/").Sum().Reads
				reads += r
				fetched += gatewaytest.MetricSum(t, n.Srv.URL, "brand_peer_bytes_fetched_total")
				home += gatewaytest.Metric(t, n.Srv.URL, `brand_locality_bytes_total{source="home"}`)
				peer += gatewaytest.Metric(t, n.Srv.URL, `brand_locality_bytes_total{source="peer"}`)
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
			if ahead := gatewaytest.MetricSum(t, cl[0].Srv.URL, "brand_peer_samples_fetched_ahead_total"); !locality && ahead == 0 {
				t.Error("no sample was fetched from a peer ahead of its batch")
			}
			if !locality && share < 0.5 {
				t.Errorf("without locality only %.1f%% crossed nodes; expected about 75%%", 100*share)
			}
			// /stats shows the node's view of the cluster and its traffic.
			_, body := gatewaytest.Get(t, cl[1].Srv.URL+"/stats")
			var st struct {
				Cluster *api.ClusterStats `json:"cluster"`
			}
			if err := json.Unmarshal(body, &st); err != nil || st.Cluster == nil {
				t.Fatalf("/stats: %v: %s", err, body)
			}
			cs := st.Cluster
			home1 := gatewaytest.Metric(t, cl[1].Srv.URL, `brand_locality_bytes_total{source="home"}`)
			if cs.Self != 1 || len(cs.Peers) != nodes-1 || float64(cs.HomeBytes) != home1 || cs.Locality <= 0 || cs.Locality > 1 {
				t.Errorf("/stats cluster = %+v; home bytes on /metrics %v", cs, home1)
			}
			// Any node answers any request with the same bytes.
			for _, r := range []int{0, 3, 7} {
				q := fmt.Sprintf("seed=7&window=16&batch_size=%d&world=%d&rank=%d&locality=%t", batch, world, r, locality)
				for k, n := range cl {
					resp, body := gatewaytest.Get(t, fmt.Sprintf("%s/epoch/0/batch/1?%s", n.Srv.URL, q))
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
			key := f.Index.SampleKey(100)
			for k, n := range cl {
				resp, body := gatewaytest.Get(t, n.Srv.URL+"/samples/"+key)
				if ss := gatewaytest.ReadTar(t, body); resp.StatusCode != http.StatusOK || len(ss) != 1 || ss[0].Key != key {
					t.Errorf("sample %q from node %d: %s, %d samples", key, k, resp.Status, len(ss))
				}
			}
		})
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
	f := gatewaytest.NewFixture(t, 8, 10)
	cl := gatewaytest.StartCluster(t, f.Store, 2, nil, nil)
	current := gatewaytest.MembershipOf(t, gatewaytest.URLs(cl)).Version()
	gatewaytest.WaitMembers(t, gatewaytest.URLs(cl), current)
	_, single := gatewaytest.Start(t, f.Store, nil)
	batch := func(base, q string) (*http.Response, []byte) {
		return gatewaytest.Get(t, base+"/epoch/0/batch/1?seed=3&batch_size=4&window=8&"+q)
	}
	resp, body := batch(cl[1].Srv.URL, "world=2&rank=0")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderMembers) != current {
		t.Fatalf("%s, Brand-Members %q; want 200 naming the agreed %s", resp.Status, resp.Header.Get(api.HeaderMembers), current)
	}
	pinned, pbody := batch(cl[0].Srv.URL, "world=2&rank=0&members="+current)
	if pinned.StatusCode != http.StatusOK || pinned.Header.Get(api.HeaderMembers) != current || pinned.Header.Get("ETag") != resp.Header.Get("ETag") || !bytes.Equal(pbody, body) {
		t.Errorf("the agreed version pinned, from the other node: %s, Brand-Members %q, ETag %s (unpinned %s)",
			pinned.Status, pinned.Header.Get(api.HeaderMembers), pinned.Header.Get("ETag"), resp.Header.Get("ETag"))
	}
	if alone, _ := batch(single.URL, "world=2&rank=0"); alone.Header.Get("ETag") == resp.Header.Get("ETag") {
		t.Error("a cluster's batch has a single gateway's ETag: it does not name the membership its rank's samples are assigned under")
	}
	one, _ := batch(cl[0].Srv.URL, "world=1")
	if sone, _ := batch(single.URL, "world=1"); one.Header.Get("ETag") != sone.Header.Get("ETag") || one.Header.Get("ETag") == "" {
		t.Errorf("world=1 on a cluster: ETag %s, a single gateway's %s; nothing of the cluster enters it", one.Header.Get("ETag"), sone.Header.Get("ETag"))
	}
	resp, body = batch(cl[0].Srv.URL, "world=2&rank=0&members=00000000deadbeef")
	if resp.StatusCode != http.StatusConflict || resp.Header.Get(api.HeaderMembers) != current || !strings.Contains(string(body), current) {
		t.Errorf("an unknown membership: %s, Brand-Members %q: %s; want 409 naming %s", resp.Status, resp.Header.Get(api.HeaderMembers), body, current)
	}
}

func TestClusterEndpoint(t *testing.T) {
	f := gatewaytest.NewFixture(t, 8, 4)
	cl := gatewaytest.StartCluster(t, f.Store, 3, nil, nil)
	resp, body := gatewaytest.Get(t, cl[1].Srv.URL+"/cluster?world=6")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	var c api.Cluster
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Self != 1 || len(c.Nodes) != 3 || c.Nodes[2].URL != cl[2].Srv.URL || !slices.Equal(c.Homes, []int{0, 0, 1, 1, 2, 2}) {
		t.Errorf("/cluster = %+v", c)
	}
	_, single := gatewaytest.Start(t, f.Store, nil)
	resp, body = gatewaytest.Get(t, single.URL+"/cluster")
	c = api.Cluster{}
	if err := json.Unmarshal(body, &c); resp.StatusCode != http.StatusOK || err != nil || c.Self != 0 || len(c.Nodes) != 1 {
		t.Errorf("single gateway /cluster: %s %s", resp.Status, body)
	}
}
