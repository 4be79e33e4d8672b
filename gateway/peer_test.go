package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// peerRequest is gatewaytest.PeerRequest.
func peerRequest(t *testing.T, base, query string, ids []int, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return gatewaytest.PeerRequest(t, base, query, ids, hdr...)
}

// signedBy returns the headers of the credential the gateway of the node
// at from signs a request (method, url, body) to the node at base, in its
// boot boot, with: a credential covers its one request, once.
func signedBy(t *testing.T, secret []byte, from, base, boot, method, url string, body []byte) []string {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	peercred.NewCredentials(secret).Sign(req, from, base, boot, body)
	var hdr []string
	for _, h := range []string{peercred.HeaderPeer, peercred.HeaderPeerTime, peercred.HeaderPeerNonce, peercred.HeaderPeerBody, peercred.HeaderPeerBoot, peercred.HeaderPeerAuth} {
		hdr = append(hdr, h, req.Header.Get(h))
	}
	return hdr
}

// TestInternalEndpoints: the wire contract of every internal endpoint on
// a node of a cluster with a peer secret and client tokens: a peer's
// credential for the request opens it, once; nothing else does — no
// credential, a client's token, a node's URL alone, another node's
// credential, one replayed, one for an earlier boot of the node (each
// life of a node draws its own) — and a node that no version lists is
// told it is not a member. A chunk the node's cache does not hold is 404 saying
// so (the store is not read for another node), one it holds is its
// bytes, one past the index 400. A peer's credential opens no client
// endpoint. (What a credential binds is peercred's TestVerify; that a
// cluster with tokens serves through its peers, each chunk read once, is
// integration's TestClusterSkewAndHostilePeers and
// TestClusterColdEpochOneReadPerChunk.)
func TestInternalEndpoints(t *testing.T) {
	f := newFixture(t, 8, 10)
	secret := []byte("a shared secret of the test cluster")
	cl := startCluster(t, f, 2, nil, func(c *gateway.Config) {
		c.AuthTokens = []string{"client-token"}
		c.Cluster.Secret = secret
	})
	base, node1 := cl[0].srv.URL, cl[1].srv.URL
	boot := gateway.PeerBoot(cl[0].g)
	ix := "dataset=test&index=" + f.index.ID()
	members := membershipOf(t, cl).Version()
	chunkURL := func(c int) string { return fmt.Sprintf("%s%s?%s&chunk=%d", base, transport.ChunkPath, ix, c) }
	endpoints := []struct {
		name, method, url string
		body              []byte
		want              int
	}{
		{"a chunk not held", http.MethodGet, chunkURL(0), nil, http.StatusNotFound},
		{"samples", http.MethodPost, base + transport.SamplesPath + "?" + ix, gatewaytest.SampleList([]int{1}), http.StatusOK},
		{"state", http.MethodGet, base + transport.StatePath, nil, http.StatusOK},
		{"members", http.MethodGet, base + transport.MembersPath + "?members=" + members, nil, http.StatusOK},
		{"members not kept", http.MethodGet, base + transport.MembersPath + "?members=00000000deadbeef", nil, http.StatusNotFound},
		{"needed", http.MethodPost, base + transport.NeededPath + "?" + ix + "&held=true", gatewaytest.SampleList([]int{0, 1}), http.StatusOK},
		{"keep", http.MethodPost, base + transport.NeededPath + "?" + ix + "&keep=true", gatewaytest.SampleList([]int{0, 1}), http.StatusOK},
		{"steps", http.MethodGet, base + transport.StepsPath + "j?from=0", nil, http.StatusOK},
		{"feedback", http.MethodGet, base + transport.FeedbackPath + "j?" + ix + "&epoch=0&seal=0123456789abcdef", nil, http.StatusOK},
		{"a seal settled", http.MethodPost, base + transport.FeedbackPath + "j?" + ix + "&epoch=0&seal=0123456789abcdef&sealed=fedcba9876543210", nil, http.StatusOK},
		{"feedback for no seal", http.MethodGet, base + transport.FeedbackPath + "j?" + ix + "&epoch=0", nil, http.StatusBadRequest},
		{"a chunk past the index", http.MethodGet, chunkURL(f.index.NumChunks()), nil, http.StatusBadRequest},
	}
	send := func(method, url string, body []byte, hdr []string) (*http.Response, []byte) {
		return do(t, method, url, body, hdr...)
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			cred := func(from string) []string { return signedBy(t, secret, from, base, boot, ep.method, ep.url, ep.body) }
			forNode2 := cred(node1)
			forNode2[1] = "http://127.0.0.1:1" // the credential says it is another node's
			valid := cred(node1)
			// Signed for another life of node 0: refused, naming this one.
			earlier := signedBy(t, secret, node1, base, "0123456789abcdef0123456789abcdef", ep.method, ep.url, ep.body)
			if resp, body := send(ep.method, ep.url, ep.body, earlier); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get(peercred.HeaderPeerBoot) != boot {
				t.Errorf("a credential for an earlier boot: %s, %s %q (want %s): %.200s", resp.Status, peercred.HeaderPeerBoot, resp.Header.Get(peercred.HeaderPeerBoot), boot, body)
			}
			for _, tc := range []struct {
				name string
				hdr  []string
				want int
			}{
				{"nothing", nil, http.StatusUnauthorized},
				{"a client's token", []string{"Authorization", "Bearer client-token"}, http.StatusUnauthorized},
				{"a node's URL alone", []string{peercred.HeaderPeer, node1}, http.StatusUnauthorized},
				{"node 1's credential for another node", forNode2, http.StatusUnauthorized},
				{"node 1's credential", valid, ep.want},
				{"the same, replayed", valid, http.StatusUnauthorized},
			} {
				if resp, body := send(ep.method, ep.url, ep.body, tc.hdr); resp.StatusCode != tc.want {
					t.Errorf("%s: %s: %.200s", tc.name, resp.Status, body)
				} else if ep.name == "a chunk not held" && tc.want == http.StatusNotFound && resp.Header.Get(transport.HeaderHeld) != "false" {
					t.Errorf("a chunk not held: %s: %q", transport.HeaderHeld, resp.Header.Get(transport.HeaderHeld))
				}
			}
			if reads := clusterReads(cl); ep.name == "a chunk not held" && reads != 0 {
				t.Errorf("asking for a chunk not held read %d chunks from the store", reads)
			}
			resp, body := send(ep.method, ep.url, ep.body, cred("http://127.0.0.1:1"))
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get(peercred.HeaderNotMember) == "" {
				t.Errorf("a node no version lists: %s (%s %q): %.200s", resp.Status, peercred.HeaderNotMember, resp.Header.Get(peercred.HeaderNotMember), body)
			}
		})
	}
	if resp, _ := get(t, base+"/epoch/0", signedBy(t, secret, node1, base, boot, http.MethodGet, base+"/epoch/0", nil)...); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a peer's credential on a client endpoint: %s", resp.Status)
	}
	// Node 0 restarted at its URL draws a boot of its own, so that what
	// it took in its earlier life is not taken again (the reproduction:
	// a captured state probe replayed after a restart was 200):
	// peercred's TestReplayAfterRestart; the asker signing again for the
	// new boot, transport's TestCallSignsForTheNodesBoot.
	again, _ := start(t, f.store, func(c *gateway.Config) {
		c.AuthTokens, c.Cluster = []string{"client-token"}, gateway.ClusterConfig{Peers: []string{base, node1}, Self: 0, Secret: secret}
	})
	if gateway.PeerBoot(again) == boot {
		t.Errorf("node 0 restarted drew its earlier boot %s", boot)
	}

	// Node 0 reads an epoch through its cache, alone: it holds chunks, and
	// hands over each one's stored bytes.
	for m := range 8 {
		if resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?seed=1&batch_size=10", base, m), "Authorization", "Bearer client-token"); resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %d: %s: %s", m, resp.Status, body)
		}
	}
	held := 0
	for c := range f.index.NumChunks() {
		resp, body := get(t, chunkURL(c), signedBy(t, secret, node1, base, boot, http.MethodGet, chunkURL(c), nil)...)
		if resp.StatusCode != http.StatusOK {
			continue
		}
		ch := f.index.Chunk(c)
		want := make([]byte, ch.Size)
		if err := f.store.ReadRange(context.Background(), ch.Key, ch.ETag, 0, want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, want) {
			t.Errorf("chunk %d: %d bytes, not the stored chunk's %d", c, len(body), len(want))
		}
		held++
	}
	if held == 0 {
		t.Error("node 0 handed over none of its chunks after an epoch")
	}
}

// TestClusterNeedsAPeerSecretWithTokens: a cluster whose clients need
// tokens but whose nodes have no peer secret is refused at start.
func TestClusterNeedsAPeerSecretWithTokens(t *testing.T) {
	_, err := gateway.New(gateway.Config{Datasets: []gateway.DatasetSpec{{Name: "d", URL: "file:///d"}},
		AuthTokens: []string{"t"}, Cluster: gateway.ClusterConfig{Peers: []string{"http://a", "http://b"}}})
	if err == nil {
		t.Fatal("a cluster with tokens and no peer secret was accepted")
	}
}

// TestSingleGatewayHasNoInternalEndpoints: a single gateway serves no
// internal endpoint, to anyone. The reproduction: a gateway with
// --auth-token-file answered GET /internal/v2/state without a token, and
// POST /internal/v2/samples with two sample IDs returned their bytes —
// the whole dataset, to any client, without a token.
func TestSingleGatewayHasNoInternalEndpoints(t *testing.T) {
	f := newFixture(t, 4, 8)
	ix := f.index.ID()
	for _, tokens := range [][]string{nil, {"client-token"}} {
		t.Run(fmt.Sprintf("tokens=%d", len(tokens)), func(t *testing.T) {
			_, srv := start(t, f.store, func(c *gateway.Config) { c.AuthTokens = tokens })
			auth := []string{}
			if tokens != nil {
				auth = []string{"Authorization", "Bearer client-token"}
			}
			for _, hdr := range [][]string{nil, auth} {
				resp, body := peerRequest(t, srv.URL, "dataset=test&index="+ix, []int{0, 1}, hdr...)
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("samples (headers %q): %s, %d bytes; want 404", hdr, resp.Status, len(body))
				}
				for _, path := range []string{transport.StatePath, transport.FeedbackPath + "j?dataset=test&index=" + ix + "&epoch=0"} {
					resp, body := get(t, srv.URL+path, hdr...)
					if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), ix) {
						t.Errorf("%s (headers %q): %s %.200s; want 404 naming nothing", path, hdr, resp.Status, body)
					}
				}
			}
		})
	}
}

// TestPeerNotServingIsNotTakenUp: a node heard asking for something is
// taken for up (transport.Nodes.Heard) only if it says it serves. A node
// starting asks its peers (their state, which chunks they hold) while
// its indexes load; taken for up then, it was taken for down again by
// the next probe's answer (503, not ready) — on a starved cluster after
// it had settled and a job had started, and its chunks were read by its
// peers while it read them too (integration's
// TestClusterColdEpochOneReadPerChunk). Node 1 here answers every
// request 503 (loading); node 0 probes it once an hour.
func TestPeerNotServingIsNotTakenUp(t *testing.T) {
	f := newFixture(t, 2, 4)
	secret := []byte("a shared secret of the test cluster")
	loading := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error": "not ready: dataset indexes are still loading"}`, http.StatusServiceUnavailable)
	})
	cl := startCluster(t, f, 2, []http.Handler{nil, loading}, func(c *gateway.Config) {
		c.Cluster.Secret = secret
		c.Cluster.ProbeInterval = time.Hour
	})
	base, node1 := cl[0].srv.URL, cl[1].srv.URL
	boot := gateway.PeerBoot(cl[0].g)
	up := func() bool { return gatewaytest.ClusterView(t, base).Nodes[1].Up }
	gatewaytest.WaitFor(t, 10*time.Second, "node 1 down after its first probe", func() bool { return !up() })
	state := base + transport.StatePath
	for _, tc := range []struct {
		name    string
		serving bool
	}{{"not serving", false}, {"serving", true}} {
		hdr := signedBy(t, secret, node1, base, boot, http.MethodGet, state, nil)
		if !tc.serving {
			hdr = append(hdr, transport.HeaderNotServing, "true")
		}
		if resp, body := get(t, state, hdr...); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: node 1's probe of node 0: %s %s", tc.name, resp.Status, body)
		}
		if got := up(); got != tc.serving {
			t.Errorf("node 1 asked node 0's state, %s: node 0 sees it up %t, want %t", tc.name, got, tc.serving)
		}
	}
}
