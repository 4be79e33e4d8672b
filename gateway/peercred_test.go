package gateway_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/peer"
	"github.com/brandgw/brand/internal/peercred"
)

// tapped is an internal request a node was sent, as it arrived, and the
// status it was answered with.
type tapped struct {
	method, uri string // uri: path and query, as sent
	hdr         http.Header
	body        []byte
	status      int
	notMember   bool // the answer says its sender is not a member (peercred.HeaderNotMember)
	withheld    bool
}

// wiretap stands in front of a node and records the internal requests
// it is sent, with the node's answers. It withholds the requests withhold
// picks — answering 409 itself, which the sender takes for a node that
// lacks the index version and reads elsewhere — so that a test can send
// them later, their credentials never used.
type wiretap struct {
	next     http.Handler
	withhold func(r *http.Request) bool

	mu   sync.Mutex
	seen []tapped
}

func (rec *wiretap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/internal/") {
		rec.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	one := tapped{method: r.Method, uri: r.URL.RequestURI(), hdr: r.Header.Clone(), body: body}
	rec.mu.Lock()
	one.withheld = rec.withhold != nil && rec.withhold(r)
	rec.mu.Unlock()
	if one.withheld {
		http.Error(w, `{"error": "withheld by the test"}`, http.StatusConflict)
	} else {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rec.next.ServeHTTP(sw, r)
		one.status, one.notMember = sw.status, w.Header().Get(peercred.HeaderNotMember) != ""
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, one)
	rec.mu.Unlock()
}

// find returns the requests tapped that match.
func (rec *wiretap) find(match func(tapped) bool) []tapped {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []tapped
	for _, r := range rec.seen {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// send sends a tapped request to base again, as change makes it.
func (r tapped) send(t *testing.T, base string, change func(req *http.Request)) *http.Response {
	t.Helper()
	req, err := http.NewRequest(r.method, base+r.uri, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range r.hdr {
		if strings.HasPrefix(k, "Brand-") || k == "Content-Type" {
			req.Header[k] = vs
		}
	}
	if change != nil {
		change(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestPeerCredentialsBoundToRequestAndTime: a peer's credential is good
// for its own request, once, within the skew, and from a member: a
// credential seen on the wire cannot be replayed, nor used for another
// method, path, query or body, nor after the skew; a node that is not a
// member of any version the receiver knows is refused (saying so) and
// does not take the receiver for down. The reproduction: a credential
// was HMAC(secret, "brand-peer-v3|URL") — each of these was answered 200.
func TestPeerCredentialsBoundToRequestAndTime(t *testing.T) {
	f := newFixture(t, 8, 16)
	secret := []byte("a shared secret of the test cluster")
	lns, urls := loopbacks(t, 3)
	// Nodes 0 and 1 are the cluster; node 2 lists node 0 and itself, but
	// node 0 does not list it.
	lists := [][]string{urls[:2], urls[:2], {urls[0], urls[2]}}
	const skew = time.Second
	rec := &wiretap{}
	for k, list := range lists {
		g, _ := start(t, f.store, func(c *gateway.Config) {
			c.Cluster = gateway.ClusterConfig{Peers: list, Advertise: urls[k], ProbeInterval: 50 * time.Millisecond, PeerTimeout: 2 * time.Second,
				Secret: secret, CredentialSkew: skew}
		})
		var h http.Handler = g
		if k == 0 {
			rec.next = g
			h = rec
		}
		srv := &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: h}}
		srv.Start()
		t.Cleanup(srv.Close)
	}
	base := urls[0]
	from := func(u string) func(tapped) bool {
		return func(r tapped) bool { return r.hdr.Get(peercred.HeaderPeer) == u }
	}
	probes := func(r tapped) bool { return from(urls[1])(r) && strings.HasPrefix(r.uri, peer.StatePath) }
	fetches := func(r tapped) bool { return from(urls[1])(r) && strings.HasPrefix(r.uri, peer.SamplesPath) }

	// Node 1's requests as they come: its probes, and the sample requests
	// of the batches read from it; the first few of each kind withheld.
	rec.mu.Lock()
	withheld := map[string]int{}
	rec.withhold = func(r *http.Request) bool {
		if r.Header.Get(peercred.HeaderPeer) != urls[1] || withheld[r.URL.Path] >= 4 || r.URL.Path == peer.SamplesPath && r.ContentLength < 8 {
			return false
		}
		withheld[r.URL.Path]++
		return true
	}
	rec.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for m := 0; len(rec.find(func(r tapped) bool { return fetches(r) && r.withheld })) < 3; m++ {
		if time.Now().After(deadline) {
			t.Fatalf("node 1 sent node 0 %d sample requests of two samples or more in 30 s", len(rec.find(fetches)))
		}
		resp, body := get(t, urls[1]+"/epoch/"+strconv.Itoa(m/16)+"/batch/"+strconv.Itoa(m%16))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a batch from node 1: %s: %s", resp.Status, body)
		}
	}
	for len(rec.find(func(r tapped) bool { return probes(r) && r.withheld })) < 4 {
		if time.Now().After(deadline) {
			t.Fatal("node 1 sent node 0 no probes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	captured := time.Now()
	rec.mu.Lock()
	rec.withhold = nil // from now on every request reaches node 0
	rec.mu.Unlock()
	held := func(match func(tapped) bool) []tapped {
		return rec.find(func(r tapped) bool { return match(r) && r.withheld })
	}
	probe, fetch := held(probes), held(fetches)
	members := clusterView(t, urls[0]).Members

	statuses := func(t *testing.T, got, want int, what string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}
	t.Run("its own request, once", func(t *testing.T) {
		statuses(t, probe[0].send(t, base, nil).StatusCode, http.StatusOK, "a probe's credential, first used")
		statuses(t, probe[0].send(t, base, nil).StatusCode, http.StatusUnauthorized, "the same, replayed")
		statuses(t, fetch[0].send(t, base, nil).StatusCode, http.StatusOK, "a sample request's credential, first used")
		statuses(t, fetch[0].send(t, base, nil).StatusCode, http.StatusUnauthorized, "the same, replayed")
	})
	t.Run("another method", func(t *testing.T) {
		resp := probe[1].send(t, base, func(req *http.Request) { req.Method = http.MethodHead })
		statuses(t, resp.StatusCode, http.StatusUnauthorized, "a GET's credential on a HEAD")
	})
	t.Run("another path", func(t *testing.T) {
		resp := probe[2].send(t, base, func(req *http.Request) {
			req.URL, _ = url.Parse(base + peer.MembersPath + "?" + url.Values{api.ParamMembers: {members}}.Encode())
		})
		statuses(t, resp.StatusCode, http.StatusUnauthorized, "a probe's credential on a question for members")
	})
	t.Run("another query", func(t *testing.T) {
		resp := fetch[1].send(t, base, func(req *http.Request) {
			q := req.URL.Query()
			epoch, _ := strconv.Atoi(q.Get("epoch"))
			q.Set("epoch", strconv.Itoa(epoch+1))
			req.URL.RawQuery = q.Encode()
		})
		statuses(t, resp.StatusCode, http.StatusUnauthorized, "a sample request's credential for another epoch")
	})
	t.Run("another body", func(t *testing.T) {
		ids := slices.Clone(fetch[2].body)
		for i, j := 0, len(ids)-4; i < j; i, j = i+4, j-4 {
			a, b := binary.LittleEndian.Uint32(ids[i:]), binary.LittleEndian.Uint32(ids[j:])
			binary.LittleEndian.PutUint32(ids[i:], b)
			binary.LittleEndian.PutUint32(ids[j:], a)
		}
		resp := fetch[2].send(t, base, func(req *http.Request) { req.Body = io.NopCloser(bytes.NewReader(ids)) })
		statuses(t, resp.StatusCode, http.StatusUnauthorized, "a sample request's credential with the samples in another order")
	})
	t.Run("from a node no version lists", func(t *testing.T) {
		for time.Now().Before(deadline) && len(rec.find(from(urls[2]))) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		stranger := rec.find(from(urls[2]))
		if len(stranger) == 0 {
			t.Fatal("node 2 never probed node 0")
		}
		for _, r := range stranger {
			statuses(t, r.status, http.StatusUnauthorized, "node 0's answer to "+r.method+" "+r.uri+" from node 2")
			if !r.notMember {
				t.Errorf("node 0's answer to %s %s from node 2 does not say it is not a member", r.method, r.uri)
			}
		}
		if v := clusterView(t, urls[2]); len(v.Nodes) == 0 || !v.Nodes[0].Up {
			t.Errorf("node 2 takes node 0 for down: %+v", v.Nodes)
		}
	})
	t.Run("stale", func(t *testing.T) {
		time.Sleep(time.Until(captured.Add(2*skew + skew/2))) // a wait, not a measurement
		statuses(t, probe[3].send(t, base, nil).StatusCode, http.StatusUnauthorized, "a probe's credential never used, after the skew")
	})
}
