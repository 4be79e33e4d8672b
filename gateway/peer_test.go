package gateway_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/peer"
	"github.com/brandgw/brand/internal/peercred"
)

// peerRequest posts a sample request to base's internal endpoint as node
// from would (unsigned: the cluster has no secret), and returns the
// response and its body.
func peerRequest(t *testing.T, base, query string, ids []int, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodPost, base+peer.SamplesPath+"?"+query, sampleList(ids), hdr...)
}

// sampleList is the body of a sample request for ids.
func sampleList(ids []int) []byte {
	b := []byte{}
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return b
}

// signedBy returns the headers of the credential the gateway of the node
// at from signs a request (method, url, body) to the node at base with:
// a credential covers its one request, once.
func signedBy(t *testing.T, secret []byte, from, base, method, url string, body []byte) []string {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	peercred.NewCredentials(secret).Sign(req, from, base, body)
	var hdr []string
	for _, h := range []string{peercred.HeaderPeer, peercred.HeaderPeerTime, peercred.HeaderPeerNonce, peercred.HeaderPeerBody, peercred.HeaderPeerAuth} {
		hdr = append(hdr, h, req.Header.Get(h))
	}
	return hdr
}

// TestPeerRequestBounds: a peer's sample request is bounded as a batch is.
// The reproduction: the IDs 0–1999 repeated up to a million (a 4.4 MB
// body) made the gateway allocate the summed length of every repeat and
// die of it; a list above --max-batch-size, and a snapshot version that is
// not one, reached the store and answered 200 and 404.
func TestPeerRequestBounds(t *testing.T) {
	f := newFixture(t, 8, 16)
	var bound int64 // the bytes of samples 0–31: 16 fit, 64 do not
	for id := range 32 {
		_, _, n, _ := f.index.SampleRange(id)
		bound += n
	}
	cl := startCluster(t, f, 2, nil, func(c *gateway.Config) {
		c.Limits.MaxBatchSize = 64
		c.Limits.MaxBatchBytes = bound
	})
	base := cl[0].srv.URL
	q := "dataset=test&index=" + f.index.ID()
	stream := q + "&seed=0&window=8&epoch=0&pos=0"
	seq := func(lo, hi int) []int {
		var ids []int
		for id := lo; id < hi; id++ {
			ids = append(ids, id)
		}
		return ids
	}
	repeated := append(seq(0, 16), seq(0, 16)...)
	tests := []struct {
		name  string
		query string
		ids   []int
		want  int
	}{
		{"distinct, within bounds", stream, seq(0, 16), http.StatusOK},
		{"no stream: a single sample's", q, []int{3}, http.StatusOK},
		{"an ID twice", stream, repeated, http.StatusBadRequest},
		{"above the batch bound", stream, seq(0, 65), http.StatusBadRequest},
		{"above the byte bound", stream, seq(0, 64), http.StatusBadRequest},
		{"an ID outside the index", stream, []int{8 * 16}, http.StatusBadRequest},
		{"a version that is not one", stream + "&job=a&importance=zzz&hot=1", []int{1}, http.StatusBadRequest},
		{"a parameter twice", stream + "&seed=1", []int{1}, http.StatusBadRequest},
		{"an unknown parameter", stream + "&rank=1", []int{1}, http.StatusBadRequest},
		{"half a stream", q + "&epoch=0", []int{1}, http.StatusBadRequest},
		{"another index version", "dataset=test&index=0123456789abcdef", []int{1}, http.StatusConflict},
		{"no index", "dataset=test", []int{1}, http.StatusBadRequest},
		{"an unknown dataset", "dataset=nope&index=" + f.index.ID(), []int{1}, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := peerRequest(t, base, tc.query, tc.ids)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s: %s", resp.Status, body)
			}
			if tc.want != http.StatusOK {
				return
			}
			var want int64 = 4 // the reply's head: no sample missing
			for _, id := range tc.ids {
				_, _, n, _ := f.index.SampleRange(id)
				want += n
			}
			if int64(len(body)) != want || binary.LittleEndian.Uint32(body) != 0 {
				t.Fatalf("reply of %d bytes (head %x), want %d", len(body), body[:4], want)
			}
		})
	}
	// The repeats of the reproduction, at scale: refused before any
	// allocation, whatever the body's size.
	var huge []int
	for len(huge) < 1_000_000 {
		huge = append(huge, seq(0, 64)...)
	}
	if resp, body := peerRequest(t, base, stream, huge); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a million repeated IDs: %s: %.200s", resp.Status, body)
	}
}

// TestPeerAuthentication: with a peer secret, the internal endpoints take
// a peer's credential and nothing else — not a client's token — and a
// client endpoint takes no peer credential. A cluster of nodes with
// client tokens works through its peers (the store is read once) only
// because peers authenticate as peers.
func TestPeerAuthentication(t *testing.T) {
	f := newFixture(t, 32, 16)
	secret := []byte("a shared secret of the test cluster")
	cl := startCluster(t, f, 4, nil, func(c *gateway.Config) {
		c.AuthTokens = []string{"client-token"}
		c.Cluster.Secret = secret
	})
	// The cluster works through its peers: every chunk read from the store
	// once, by its owner.
	const world, batch = 8, 8
	seen := map[string]int{}
	for r := range world {
		qr := fmt.Sprintf("seed=7&window=4&batch_size=%d&world=%d&rank=%d", batch, world, r)
		home := cl[cluster.Home(r, world, 4)].srv.URL
		for m := range 512 / (world * batch) {
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", home, m, qr), "Authorization", "Bearer client-token")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("rank %d batch %d: %s: %s", r, m, resp.Status, body)
			}
			f.verify(t, readTar(t, body), seen)
		}
	}
	exactlyOnce(t, seen, 512, "an epoch of a cluster with tokens")
	if reads := clusterReads(cl); reads != 32 {
		t.Errorf("the cluster read %d chunks from the store, want each of the 32 once", reads)
	}
	// Only a peer's credential opens the internal endpoints.
	base := cl[0].srv.URL
	q := "dataset=test&index=" + f.index.ID()
	// Node 1's credential for the request, as its gateway computes it.
	cred := func(method, url string, body []byte) []string {
		return signedBy(t, secret, cl[1].srv.URL, base, method, url, body)
	}
	samples := base + peer.SamplesPath + "?" + q
	forNode2 := cred(http.MethodPost, samples, sampleList([]int{1}))
	forNode2[1] = cl[2].srv.URL
	tests := []struct {
		name string
		hdr  []string
		want int
	}{
		{"nothing", nil, http.StatusUnauthorized},
		{"a client's token", []string{"Authorization", "Bearer client-token"}, http.StatusUnauthorized},
		{"a node's URL alone", []string{peercred.HeaderPeer, cl[1].srv.URL}, http.StatusUnauthorized},
		{"node 1's credential for node 2", forNode2, http.StatusUnauthorized},
		{"node 1's credential", cred(http.MethodPost, samples, sampleList([]int{1})), http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if resp, body := peerRequest(t, base, q, []int{1}, tc.hdr...); resp.StatusCode != tc.want {
				t.Fatalf("%s: %s", resp.Status, body)
			}
		})
	}
	if resp, _ := get(t, base+"/epoch/0", cred(http.MethodGet, base+"/epoch/0", nil)...); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a peer's credential on a client endpoint: %s", resp.Status)
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
				for _, path := range []string{peer.StatePath, peer.FeedbackPath + "j?dataset=test&index=" + ix + "&epoch=0"} {
					resp, body := get(t, srv.URL+path, hdr...)
					if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), ix) {
						t.Errorf("%s (headers %q): %s %.200s; want 404 naming nothing", path, hdr, resp.Status, body)
					}
				}
			}
		})
	}
}

// silentPeer is a node that stopped (SIGSTOP): it accepts connections and
// answers nothing, probes included, until released.
type silentPeer struct {
	asked atomic.Int64
	stop  chan struct{}
}

func (s *silentPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == peer.SamplesPath {
		s.asked.Add(1)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-s.stop:
	}
}

// TestForgedPeerHeaderChangesNothing: a request that only says it comes
// from a node does not make that node live. The reproduction: with node 2
// stopped, a Brand-Peer: 2 sent every half second kept the others taking
// it for up, and each of 11 fetches waited the peer timeout.
func TestForgedPeerHeaderChangesNothing(t *testing.T) {
	f := newFixture(t, 32, 16)
	sp := &silentPeer{stop: make(chan struct{})}
	t.Cleanup(func() { close(sp.stop) })
	cl := startCluster(t, f, 3, []http.Handler{nil, sp, nil}, func(c *gateway.Config) {
		c.Cluster.PeerTimeout = 100 * time.Millisecond
		c.Cluster.ProbeInterval = 20 * time.Millisecond
	})
	forge := func() {
		q := url.Values{api.ParamDataset: {"test"}, api.ParamIndex: {f.index.ID()}}
		peerRequest(t, cl[0].srv.URL, q.Encode(), []int{0}, peercred.HeaderPeer, cl[1].srv.URL)
		req, _ := http.NewRequest(http.MethodGet, cl[0].srv.URL+peer.StatePath, nil)
		req.Header.Set(peercred.HeaderPeer, cl[1].srv.URL)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			forge()
			time.Sleep(5 * time.Millisecond) // a flood of forgeries, not a synchronisation
		}
	})
	// Epochs over two seconds: long past the first hold-downs (2 s) a
	// forgery used to cut short.
	deadline := time.Now().Add(2500 * time.Millisecond)
	seen := map[string]int{}
	for epoch := 0; time.Now().Before(deadline); epoch++ {
		clear(seen)
		for r := range 2 {
			q := fmt.Sprintf("seed=1&window=4&batch_size=16&world=2&rank=%d", r)
			for _, body := range readRank(t, cl[0].srv.URL, q, epoch, 512/32) {
				f.verify(t, readTar(t, body), seen)
			}
		}
		exactlyOnce(t, seen, 512, fmt.Sprintf("epoch %d beside a stopped peer and forgeries", epoch))
	}
	stop.Store(true)
	wg.Wait()
	// The silent node may be asked before its probes time out three
	// times; once held down or probed down, never again on a forgery's
	// word.
	if n := sp.asked.Load(); n > 3 {
		t.Errorf("the stopped peer was asked %d times; forgeries kept it up", n)
	}
	var c api.Cluster
	_, body := get(t, cl[0].srv.URL+"/cluster")
	if err := json.Unmarshal(body, &c); err != nil || c.Nodes[1].Up {
		t.Errorf("node 0 takes the stopped node for up: %s", body)
	}
}
