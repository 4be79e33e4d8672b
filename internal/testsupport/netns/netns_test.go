package netns

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFaults serves HTTP on one host and asks it from another through
// each fault: a fault stops what it names and nothing else, and Heal
// ends it.
func TestFaults(t *testing.T) {
	n := New(t)
	a, b, c := n.Host("a"), n.Host("b"), n.Host("c")
	ln, err := b.Listen(b.IP + ":8080")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	// b's own server, reached back from b: a second listener on a.
	back, err := a.Listen(a.IP + ":8080")
	if err != nil {
		t.Fatal(err)
	}
	backSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "a") })}
	go func() { _ = backSrv.Serve(back) }()
	t.Cleanup(func() { backSrv.Close() })

	ask := func(from *Host, method, url string) error {
		hc := from.HTTPClient(500 * time.Millisecond)
		defer hc.CloseIdleConnections()
		req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	bURL, aURL := "http://"+b.IP+":8080", "http://"+a.IP+":8080"
	type probe struct {
		from          *Host
		method, url   string
		wantReachable bool
	}
	cases := []struct {
		name   string
		fault  func()
		probes []probe
	}{
		{"none", func() {}, []probe{{a, "GET", bURL + "/x", true}, {c, "GET", bURL + "/x", true}, {b, "GET", aURL + "/", true}}},
		{"cut a from b", func() { a.Cut(b) }, []probe{{a, "GET", bURL + "/x", false}, {b, "GET", aURL + "/", false}, {c, "GET", bURL + "/x", true}}},
		{"a cannot reach b's port", func() { a.Unreachable(8080, b) }, []probe{{a, "GET", bURL + "/x", false}, {b, "GET", aURL + "/", true}, {c, "GET", bURL + "/x", true}}},
		{"b drops POST /samples", func() { b.DropRequests(8080, "POST /samples") }, []probe{
			{a, "POST", bURL + "/samples", false}, {a, "GET", bURL + "/samples", true}, {a, "POST", bURL + "/state", true},
			{b, "POST", aURL + "/samples", true}}},
		{"b's link down", b.LinkDown, []probe{{a, "GET", bURL + "/x", false}, {c, "GET", bURL + "/x", false}}},
	}
	for _, tc := range cases {
		tc.fault()
		for _, p := range tc.probes {
			err := ask(p.from, p.method, p.url)
			if (err == nil) != p.wantReachable {
				t.Errorf("%s: %s %s from %s: %v, want reachable %v", tc.name, p.method, p.url, p.from.Name, err, p.wantReachable)
			}
		}
		n.Heal()
		if err := ask(a, "POST", bURL+"/samples"); err != nil {
			t.Errorf("after %s healed: %v", tc.name, err)
		}
	}
}

// TestForward reaches a server of the test process's own namespace
// through a host's address, and a cut stops it.
func TestForward(t *testing.T) {
	n := New(t)
	store, node := n.Host("store"), n.Host("node")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "stored") })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	addr := store.Forward(store.IP+":9000", ln.Addr().String())
	hc := node.HTTPClient(700 * time.Millisecond)
	get := func() (string, error) {
		resp, err := hc.Get("http://" + addr + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(); err != nil || got != "stored" {
		t.Fatalf("through the forward: %q, %v", got, err)
	}
	hc.CloseIdleConnections()
	node.Cut(store)
	if _, err := get(); err == nil {
		t.Fatal("the node reached the store through a cut")
	}
	n.Heal()
	if got, err := get(); err != nil || got != "stored" {
		t.Fatalf("healed: %q, %v", got, err)
	}
}
