package gateway_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/s3face/s3auth"
)

// Short body deadlines, so that the test stays fast; a body sent a byte
// every bodyTick would take 40 s at 400 bytes.
const (
	bodyTimeout      = 500 * time.Millisecond
	largeBodyTimeout = time.Second
	bodyTick         = 100 * time.Millisecond
	// bodySlack is what a connection's end may take beyond its bound:
	// scheduling on a loaded machine under the race detector.
	bodySlack = 3 * time.Second
)

// bodyRoute is one route of a listener, for TestSlowBodies: its method,
// its pattern in the routing table, a path that reaches it, and how a
// request to it is credited.
type bodyRoute struct {
	method, pattern, path string
	cred                  string // "token", "peer", "s3" or "" (open)
	timeout               time.Duration
	// refused is the status of a request that is refused whatever its
	// credential (an S3 write, an unknown path); 0 for none.
	refused int
}

// TestSlowBodies holds a slow request body — 400 bytes declared and a
// byte sent every 100 ms, with and without a credential; a Content-Length
// of 1 GiB, over every route's bound; a chunked body trickling in — on
// every route of the data port (public, operators' and the nodes'
// internal ones), the admin listener and the S3 face, and sees each
// connection end within the route's body deadline (plus slack). A
// request without a credential is answered 401 (the S3 face's 403)
// without its body being read, and its connection closed.
//
// The reproduction: POST /internal/v2/samples with Content-Length: 400
// and a byte every 2 s, with no credential, held its connection and a
// goroutine for as long as the client liked (75 s tested), and so did
// the same with a client token, a 4 MiB Content-Length, POST /plan and
// /internal/v2/needed: the servers set only ReadHeaderTimeout, and an
// unauthenticated request was answered only once its whole body had been
// drained.
func TestSlowBodies(t *testing.T) {
	f := newFixture(t, 8, 8)
	ix := f.index.ID()
	secret := []byte("a shared secret of the test cluster")
	creds, err := s3auth.ParseCredentials(strings.NewReader(s3ID + " " + s3Secret + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	bounds := func(c *gateway.Config) {
		c.AuthTokens = []string{"client-token"}
		c.BodyTimeout, c.LargeBodyTimeout = bodyTimeout, largeBodyTimeout
		c.S3 = gateway.S3Config{Credentials: creds}
	}
	cl := startCluster(t, f, 2, nil, func(c *gateway.Config) {
		bounds(c)
		c.Cluster.Secret = secret
	})
	data := cl[0].srv
	s3 := httptest.NewServer(cl[0].g.S3Handler())
	t.Cleanup(s3.Close)
	admin, _ := start(t, f.store, func(c *gateway.Config) {
		bounds(c)
		c.SeparateAdmin = true
	})
	adminSrv := httptest.NewServer(admin.AdminHandler())
	t.Cleanup(adminSrv.Close)

	short, large := bodyTimeout, largeBodyTimeout
	q := "?dataset=test&index=" + ix
	public := []bodyRoute{
		{"GET", "/healthz", "/healthz", "", short, 0},
		{"GET", "/readyz", "/readyz", "", short, 0},
		{"GET", "/datasets", "/datasets", "token", short, 0},
		{"GET", "/epoch/{epoch}", "/epoch/0", "token", short, 0},
		{"GET", "/epoch/{epoch}/batch/{batch}", "/epoch/0/batch/0", "token", short, 0},
		{"GET", "/epoch/{epoch}/batch/{batch}/manifest", "/epoch/0/batch/0/manifest", "token", short, 0},
		{"GET", "/samples/*", "/samples/class0/sample00000", "token", short, 0},
		{"GET", "/cluster", "/cluster", "token", short, 0},
		{"POST", "/importance/{job}/feedback", "/importance/j/feedback?dataset=test&epoch=0", "token", large, 0},
		{"POST", "/importance/{job}/seal", "/importance/j/seal?dataset=test&epoch=0", "token", short, 0},
		{"GET", "/importance/{job}/epochs/{epoch}", "/importance/j/epochs/0?dataset=test", "token", short, 0},
		{"GET", "/jobs/{job}/schedule", "/jobs/j/schedule", "token", short, 0},
		{"PUT", "/jobs/{job}/schedule", "/jobs/j/schedule", "token", short, 0},
		{"POST", "/jobs/{job}/schedule", "/jobs/j/schedule", "token", short, 0},
		{"GET", "/jobs/{job}/exclude", "/jobs/j/exclude", "token", short, 0},
		{"POST", "/jobs/{job}/exclude", "/jobs/j/exclude", "token", large, 0},
		{"GET", "/jobs/{job}/append", "/jobs/j/append", "token", short, 0},
		{"GET", "/jobs/{job}/edits", "/jobs/j/edits", "token", short, 0},
		{"POST", "/jobs/{job}/append", "/jobs/j/append", "token", short, 0},
		{"GET", "/metrics", "/metrics", "token", short, 0},
		{"GET", "/stats", "/stats", "token", short, 0},
		{"GET", "/plan", "/plan", "token", short, 0},
		{"POST", "/plan", "/plan", "token", short, 0},
		{"POST", "/prewarm", "/prewarm?steps=1", "token", short, 0},
		{"PUT", "/tasks/{job}", "/tasks/j?dataset=test", "token", short, 0},
		{"GET", "/tasks/{job}", "/tasks/j?dataset=test", "token", short, 0},
		{"GET", "/tasks/{job}/leases", "/tasks/j/leases?dataset=test&generator=g", "token", short, 0},
		{"POST", "/tasks/{job}/leases", "/tasks/j/leases?dataset=test", "token", short, 0},
		{"POST", "/tasks/{job}/leases/{lease}/feedback", "/tasks/j/leases/x-1/feedback?dataset=test", "token", short, 0},
		{"GET", "/tasks/{job}/leases/{lease}/samples", "/tasks/j/leases/x-1/samples?dataset=test", "token", short, 0},
		{"GET", "/tasks/{job}/replay", "/tasks/j/replay?dataset=test", "token", short, 0},
		{"GET", "/tasks/{job}/steps/{step}", "/tasks/j/steps/0?dataset=test", "token", short, 0},
		{"POST", "/tasks/{job}/trainer", "/tasks/j/trainer?dataset=test", "token", short, 0},
		{"POST", "/tasks/{job}/exclude", "/tasks/j/exclude?dataset=test", "token", short, 0},
		{"POST", "/tasks/{job}/append", "/tasks/j/append?dataset=test", "token", short, 0},
		{"POST", "/tasks/{job}/ratios", "/tasks/j/ratios?dataset=test", "token", short, 0},
		{"GET", "", "/no/such/endpoint", "token", short, http.StatusNotFound},
		{"POST", "", "/datasets", "token", short, http.StatusMethodNotAllowed},
		{"POST", transport.SamplesPath, transport.SamplesPath + q, "peer", short, 0},
		{"GET", transport.StatePath, transport.StatePath, "peer", short, 0},
		{"GET", transport.MembersPath, transport.MembersPath + "?members=0123456789abcdef", "peer", short, 0},
		{"GET", transport.ChunkPath, transport.ChunkPath + q + "&chunk=0", "peer", short, 0},
		{"POST", transport.NeededPath, transport.NeededPath + q + "&ahead=1", "peer", short, 0},
		{"GET", transport.FeedbackPath + "{job}", transport.FeedbackPath + "j" + q + "&epoch=0&seal=0123456789abcdef", "peer", short, 0},
		{"POST", transport.FeedbackPath + "{job}", transport.FeedbackPath + "j" + q + "&epoch=0&seal=0123456789abcdef", "peer", short, 0},
		{"GET", transport.StepsPath + "{job}", transport.StepsPath + "j?from=0", "peer", short, 0},
	}
	operators := []bodyRoute{
		{"GET", "/metrics", "/metrics", "token", short, 0},
		{"GET", "/stats", "/stats", "token", short, 0},
		{"GET", "/plan", "/plan", "token", short, 0},
		{"POST", "/plan", "/plan", "token", short, 0},
		{"GET", "/datasets", "/datasets", "token", short, 0},
		{"GET", "/debug/pprof/", "/debug/pprof/", "token", short, 0},
		{"POST", "/debug/pprof/", "/debug/pprof/", "token", short, 0},
		{"GET", "/debug/pprof/cmdline", "/debug/pprof/cmdline", "token", short, 0},
		{"GET", "/debug/pprof/profile", "/debug/pprof/profile?seconds=1", "token", short, 0},
		{"GET", "/debug/pprof/symbol", "/debug/pprof/symbol", "token", short, 0},
		{"POST", "/debug/pprof/symbol", "/debug/pprof/symbol", "token", short, 0},
		{"GET", "/debug/pprof/trace", "/debug/pprof/trace?seconds=1", "token", short, 0},
		{"GET", "/debug/pprof/{profile}", "/debug/pprof/heap", "token", short, 0},
	}
	s3Routes := []bodyRoute{
		{"GET", "", "/", "s3", short, 0},
		{"GET", "", "/test", "s3", short, 0},
		{"HEAD", "", "/test", "s3", short, 0},
		{"GET", "", "/test/class0/sample00000.jpg", "s3", short, 0},
		{"HEAD", "", "/test/class0/sample00000.jpg", "s3", short, 0},
		{"PUT", "", "/test/class0/new.jpg", "s3", short, http.StatusForbidden},
		{"POST", "", "/test?delete", "s3", short, http.StatusForbidden},
		{"DELETE", "", "/test/class0/sample00000.jpg", "s3", short, http.StatusForbidden},
	}
	// Every route of the two routers has its case here: a route added
	// without one fails this test until it has.
	covered(t, "the data port", gateway.RoutesOf(cl[0].g), public)
	covered(t, "the admin listener", admin.AdminHandler().(chi.Routes), operators)

	// Every case at once: each takes up to its route's deadline, and
	// the subtests' parallelism is the machine's cores.
	type result struct {
		name   string
		status int
		want   int
		err    error
	}
	var results []*result
	var wg sync.WaitGroup
	for _, l := range []struct {
		name   string
		base   string
		routes []bodyRoute
	}{{"data", data.URL, public}, {"admin", adminSrv.URL, operators}, {"s3", s3.URL, s3Routes}} {
		for _, rt := range l.routes {
			for _, body := range []string{"slow", "declared 1 GiB", "chunked"} {
				for _, credited := range []bool{false, true} {
					if !credited && (rt.cred == "" || body != "slow") {
						continue
					}
					res := &result{name: fmt.Sprintf("%s %s %s, %s body, credential %v", l.name, rt.method, rt.path, body, credited)}
					res.want = rt.refused
					if res.want == 0 && !credited {
						res.want = http.StatusUnauthorized
						if rt.cred == "s3" {
							res.want = http.StatusForbidden
						}
					}
					results = append(results, res)
					head := rawRequest(t, l.base, rt, body, credited, secret, cl[0].srv.URL, gateway.PeerBoot(cl[0].g))
					c := sendSlowly(t, l.base, rt.method, head, body == "chunked")
					wg.Go(func() { res.status, res.err = c.ended(rt.timeout) })
				}
			}
		}
	}
	wg.Wait()
	for _, res := range results {
		switch {
		case res.err != nil:
			t.Errorf("%s: %v", res.name, res.err)
		case res.want != 0 && res.status != res.want:
			t.Errorf("%s: status %d; want %d", res.name, res.status, res.want)
		case res.want == 0 && res.status < 400:
			t.Errorf("%s: status %d; want the body refused", res.name, res.status)
		}
	}
	t.Logf("%d requests with slow or oversized bodies, each connection ended within its route's deadline", len(results))
}

// covered fails unless every route pattern of routes has a case.
func covered(t *testing.T, what string, routes chi.Routes, cases []bodyRoute) {
	t.Helper()
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !slices.ContainsFunc(cases, func(c bodyRoute) bool { return c.pattern == route }) {
			t.Errorf("%s: route %s %s has no case in TestSlowBodies", what, method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rawRequest is the head of a request to rt on base with the body's
// framing (Content-Length 400 or 1 GiB, or chunked) and, if credited,
// its credential: a client's token, the peer credential of the node at
// self (for base's boot boot), or an S3 signature.
func rawRequest(t *testing.T, base string, rt bodyRoute, body string, credited bool, secret []byte, self, boot string) string {
	t.Helper()
	req, err := http.NewRequest(rt.method, base+rt.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch body {
	case "slow":
		req.ContentLength = 400
	case "declared 1 GiB":
		req.ContentLength = 1 << 30
	}
	if credited {
		switch rt.cred {
		case "token":
			req.Header.Set("Authorization", "Bearer client-token")
		case "peer":
			peercred.NewCredentials(secret).Sign(req, self, base, boot, nil)
		case "s3":
			req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
			req = signer.SignV4(*req, s3ID, s3Secret, "", "us-east-1")
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", rt.method, req.URL.RequestURI(), req.URL.Host)
	if err := req.Header.Write(&b); err != nil {
		t.Fatal(err)
	}
	if body == "chunked" {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", req.ContentLength)
	}
	b.WriteString("\r\n")
	return b.String()
}

// slowClient sends a request's head, then its body a byte every
// bodyTick for as long as the connection lets it.
type slowClient struct {
	conn   net.Conn
	method string
	start  time.Time
}

func sendSlowly(t *testing.T, base, method, head string, chunked bool) *slowClient {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	c := &slowClient{conn: conn, method: method, start: time.Now()}
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	piece := []byte("x")
	if chunked {
		piece = []byte("1\r\nx\r\n")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(bodyTick)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write(piece); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		conn.Close()
		<-done
	})
	return c
}

// ended reads the answer, if one comes, and waits for the server to end
// the connection; an error if the connection is still open
// bound+bodySlack after the request began. It returns the answer's
// status, 0 if none came.
func (c *slowClient) ended(bound time.Duration) (int, error) {
	_ = c.conn.SetReadDeadline(c.start.Add(bound + bodySlack))
	br := bufio.NewReader(c.conn)
	status := 0
	if resp, err := http.ReadResponse(br, &http.Request{Method: c.method}); err == nil {
		status = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	if _, err := io.Copy(io.Discard, br); errors.Is(err, os.ErrDeadlineExceeded) {
		return status, fmt.Errorf("the connection was still open %s after the request began (status %d; body deadline %s)",
			time.Since(c.start).Round(time.Millisecond), status, bound)
	}
	return status, nil
}

// TestQueryRefusedBeforeTheBody: a request with a body whose query is
// refused (an unknown parameter) is answered at once, its body unread
// and its connection closed, on every route that takes a body (a
// schedule edit and POST /plan take no parameter, and refuse one as
// every route does: TestUnknownParametersOfEveryRoute). The
// reproduction: each answered its 400 only at the body's deadline (30 s
// by default), the server reading the body the handler had not before
// the answer went out. The deadline here is a minute, the wait for the
// answer 10 s.
func TestQueryRefusedBeforeTheBody(t *testing.T) {
	f := newFixture(t, 8, 8)
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.AuthTokens = []string{"client-token"}
		c.BodyTimeout, c.LargeBodyTimeout = time.Minute, time.Minute
	})
	for _, route := range []string{
		"POST /jobs/j/exclude?", "POST /jobs/j/append?", "POST /importance/j/feedback?dataset=test&epoch=0&",
		"PUT /tasks/j?dataset=test&", "POST /tasks/j/leases?dataset=test&",
		"POST /tasks/j/leases/x-1/feedback?dataset=test&", "POST /tasks/j/trainer?dataset=test&",
		"POST /tasks/j/exclude?dataset=test&", "POST /tasks/j/append?dataset=test&", "POST /tasks/j/ratios?dataset=test&",
		"PUT /jobs/j/schedule?", "POST /jobs/j/schedule?", "POST /plan?",
	} {
		t.Run(route, func(t *testing.T) {
			method, path, _ := strings.Cut(route, " ")
			c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprintf(c, "%s %sbogus=1 HTTP/1.1\r\nHost: brand\r\nAuthorization: Bearer client-token\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n", method, path); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer within 10 s of the headers, the body unsent: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !resp.Close {
				t.Errorf("%d (connection closed: %v), want 400 closing the connection: %s", resp.StatusCode, resp.Close, body)
			}
		})
	}
}
