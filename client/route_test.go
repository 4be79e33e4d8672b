package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// fakeCluster is n fake gateways serving the same datasets (so every node
// answers every request with the same bytes, as a cluster's do), each
// knowing the others as a cluster node does, with one log of the requests
// of all of them in arrival order and a fault per node.
type fakeCluster struct {
	nodes []*fakeGateway
	urls  []string

	mu     sync.Mutex
	hits   []hit
	faults []func(w http.ResponseWriter, r *http.Request) bool
}

// hit is a request that reached node.
type hit struct {
	node int
	path string
}

// newFakeCluster starts n fake gateways, node k being the k-th by URL:
// a cluster's membership sorts its members, and homes are positions in it.
func newFakeCluster(t testing.TB, n int) *fakeCluster {
	c := &fakeCluster{faults: make([]func(http.ResponseWriter, *http.Request) bool, n)}
	for range n {
		c.nodes = append(c.nodes, newFakeGateway(t))
	}
	slices.SortFunc(c.nodes, func(a, b *fakeGateway) int { return strings.Compare(a.URL, b.URL) })
	for _, g := range c.nodes {
		c.urls = append(c.urls, g.URL)
	}
	for k, g := range c.nodes {
		g.setCluster(c.urls, k)
		g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			c.mu.Lock()
			c.hits = append(c.hits, hit{k, r.URL.Path})
			fault := c.faults[k]
			c.mu.Unlock()
			return fault != nil && fault(w, r)
		})
	}
	return c
}

// setFault makes node k answer with fault (nil: normally).
func (c *fakeCluster) setFault(k int, fault func(w http.ResponseWriter, r *http.Request) bool) {
	c.mu.Lock()
	c.faults[k] = fault
	c.mu.Unlock()
}

// kill stops node k: its connections are cut and new ones refused.
func (c *fakeCluster) kill(k int) {
	c.nodes[k].srv.CloseClientConnections()
	c.nodes[k].srv.Close()
}

// nodesOf returns the nodes that received requests for path, in order, a
// node repeated at once counted once (the transport may resend a request
// whose connection closed before any answer).
func (c *fakeCluster) nodesOf(path string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, h := range c.hits {
		if h.path == path && (len(out) == 0 || out[len(out)-1] != h.node) {
			out = append(out, h.node)
		}
	}
	return out
}

// node returns the position of a node's URL, for messages and checks.
func (c *fakeCluster) node(t testing.TB, url string) int {
	t.Helper()
	k := slices.Index(c.urls, url)
	if k < 0 {
		t.Fatalf("served by %q, which is not a node of %q", url, c.urls)
	}
	return k
}

// Faults a node may answer with.
func status(code int) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		fakeError(w, code, "node unavailable")
		return true
	}
}

// cut sends the headers of a long body and a few bytes of it, then breaks
// the connection: a node dying mid-response.
func cut(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", "100000")
	w.Header().Set(api.HeaderEpochBatches, "1")
	w.Header().Set(api.HeaderEpochSamples, "1")
	w.Header().Set(api.HeaderBatchSamples, "1")
	w.WriteHeader(http.StatusOK)
	w.Write(make([]byte, 512))
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

// abort breaks the connection before any answer.
func abort(w http.ResponseWriter, r *http.Request) bool { panic(http.ErrAbortHandler) }

func noWait(ctx context.Context, d time.Duration) error { return ctx.Err() }

func TestClusterRoutesEveryRankToItsHome(t *testing.T) {
	const world = 8
	for _, n := range []int{2, 3, 4} {
		t.Run(strconv.Itoa(n)+" nodes", func(t *testing.T) {
			fc := newFakeCluster(t, n)
			for rank := range world {
				home := rank * n / world
				c, err := client.New("", client.Options{Peers: fc.urls,
					Job: api.Job{Params: shuffle.Params{Seed: 3, BatchSize: 2, World: world, Rank: rank}}})
				if err != nil {
					t.Fatal(err)
				}
				fc.mu.Lock()
				fc.hits = nil
				fc.mu.Unlock()
				batches := 0
				for b, err := range c.Epoch(t.Context(), 0) {
					if err != nil {
						t.Fatal(err)
					}
					if b.Node != fc.urls[home] {
						t.Errorf("rank %d batch %d served by node %d; want its home %d", rank, b.Index, fc.node(t, b.Node), home)
					}
					batches++
				}
				for _, h := range fc.hits {
					if h.node != home {
						t.Errorf("rank %d: %s sent to node %d; want its home %d", rank, h.path, h.node, home)
					}
				}
				if len(fc.hits) != batches+1 {
					t.Errorf("rank %d: %d requests for a plan and %d batches", rank, len(fc.hits), batches)
				}
			}
		})
	}
}

func TestClusterFailover(t *testing.T) {
	const world = 8
	tests := []struct {
		name    string
		rank    int         // home: rank*4/8
		down    map[int]any // node -> fault (see applyFault)
		want    []int       // nodes the batch request reached, in order
		status  int         // the error's status; 0: success
		retries int         // MaxRetries
	}{
		{name: "home refuses connections", rank: 5, down: faults(2, "kill"), want: []int{3}},
		{name: "home answers 503", rank: 5, down: faults(2, 503), want: []int{2, 3}},
		{name: "home answers 502", rank: 5, down: faults(2, 502), want: []int{2, 3}},
		{name: "home answers 504", rank: 5, down: faults(2, 504), want: []int{2, 3}},
		{name: "home dies mid-body", rank: 5, down: faults(2, "cut"), want: []int{2, 3}},
		{name: "home closes before answering", rank: 5, down: faults(2, "abort"), want: []int{2, 3}},
		{name: "home times out", rank: 5, down: faults(2, "hang"), want: []int{2, 3}},
		{name: "home and the next node down", rank: 5, down: faults(2, "kill", 3, 503), want: []int{3, 0}},
		{name: "the order wraps around", rank: 7, down: faults(3, 503), want: []int{3, 0}},
		{name: "three of four down", rank: 2, down: faults(1, 503, 2, "cut", 3, "kill"), want: []int{1, 2, 0}},
		{name: "404 is not failed over", rank: 5, down: faults(2, 404), want: []int{2}, status: 404},
		{name: "every node down, budget of 5 retries", rank: 5, down: faults(0, 503, 1, 503, 2, 503, 3, 503),
			want: []int{2, 3, 0, 1, 2, 3}, status: 503},
		{name: "every node down, budget of 2 retries", rank: 5, down: faults(0, 503, 1, 503, 2, 503, 3, 503),
			want: []int{2, 3, 0}, status: 503, retries: 2},
		{name: "no retries, no failover", rank: 5, down: faults(2, 503), want: []int{2}, status: 503, retries: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCluster(t, 4)
			for k, f := range tt.down {
				applyFault(fc, k, f)
			}
			ref := newFakeGateway(t) // a gateway alone, for the bytes
			job := api.Job{Params: shuffle.Params{Seed: 9, BatchSize: 2, World: world, Rank: tt.rank}}
			// A timeout of the whole request, so that a node that never
			// answers is a retryable transport error within the test.
			hc := &http.Client{Timeout: 500 * time.Millisecond}
			c, err := client.New("", client.Options{Peers: fc.urls, Job: job, MaxRetries: tt.retries, HTTPClient: hc})
			if err != nil {
				t.Fatal(err)
			}
			var waits []time.Duration
			client.SetSleep(c, func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				return nil
			})
			b, err := c.Batch(t.Context(), 1, 0)
			if got := fc.nodesOf("/epoch/1/batch/0"); !slices.Equal(got, tt.want) {
				t.Errorf("batch request reached nodes %v; want %v", got, tt.want)
			}
			if tt.status != 0 {
				var apiErr *client.APIError
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
					t.Fatalf("err = %v; want a %d", err, tt.status)
				}
				// A call waits only once it has tried every node.
				if want := max(0, len(tt.want)-4); len(waits) != want {
					t.Errorf("waited %d times (%v); want %d", len(waits), waits, want)
				}
				// The backoff grows with the waits, not with the failovers.
				for i, d := range waits {
					if hi := client.DefaultBackoff << i; d < hi/2 || d > hi {
						t.Errorf("wait %d is %v; want within [%v, %v]", i, d, hi/2, hi)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(waits) != 0 {
				t.Errorf("waited %v before trying a node not tried yet", waits)
			}
			if last := tt.want[len(tt.want)-1]; b.Node != fc.urls[last] {
				t.Errorf("Batch.Node = node %d; want %d", fc.node(t, b.Node), last)
			}
			rc, err := client.New(ref.URL, client.Options{Job: job})
			if err != nil {
				t.Fatal(err)
			}
			want, err := rc.Batch(t.Context(), 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(b.Samples, want.Samples, sameSample) || b.ETag != want.ETag {
				t.Errorf("failed-over batch differs from the gateway's: %q vs %q", keys(b.Samples), keys(want.Samples))
			}
		})
	}
}

// faults builds a map of faults from node, fault pairs.
func faults(pairs ...any) map[int]any {
	m := map[int]any{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i].(int)] = pairs[i+1]
	}
	return m
}

// applyFault makes node k fail: with an HTTP status, or "kill", "cut",
// "abort" or "hang" (no answer until the client gives up).
func applyFault(fc *fakeCluster, k int, f any) {
	switch f {
	case "kill":
		fc.kill(k)
	case "cut":
		fc.setFault(k, cut)
	case "abort":
		fc.setFault(k, abort)
	case "hang":
		fc.setFault(k, func(w http.ResponseWriter, r *http.Request) bool {
			<-r.Context().Done() // the client's timeout
			return true
		})
	default:
		fc.setFault(k, status(f.(int)))
	}
}

func sameSample(a, b client.Sample) bool {
	if a.Key != b.Key || len(a.Files) != len(b.Files) {
		return false
	}
	for ext, data := range a.Files {
		if string(b.Files[ext]) != string(data) {
			return false
		}
	}
	return true
}

func TestClusterReturnsHomeAfterHomeRetry(t *testing.T) {
	fc := newFakeCluster(t, 3)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := api.Job{Params: shuffle.Params{Seed: 1, BatchSize: 1, World: 3, Rank: 1}} // home 1
	c, err := client.New("", client.Options{Peers: fc.urls, Job: job, HomeRetry: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	client.SetNow(c, func() time.Time { return now })
	fc.setFault(1, status(503))
	steps := []struct {
		after time.Duration
		up    bool // the home is back
		want  int
	}{
		{0, false, 2},
		{5 * time.Second, true, 2}, // back, but not tried before HomeRetry
		{9999 * time.Millisecond, true, 2},
		{10 * time.Second, true, 1},
		{11 * time.Second, true, 1},
	}
	start := now
	for i, s := range steps {
		now = start.Add(s.after)
		if s.up {
			fc.setFault(1, nil)
		}
		b, err := c.Batch(t.Context(), 0, i)
		if err != nil {
			t.Fatal(err)
		}
		if got := fc.node(t, b.Node); got != s.want {
			t.Errorf("batch %d at +%v served by node %d; want %d", i, s.after, got, s.want)
		}
	}
}

func TestClusterEpochSurvivesLosingTheHome(t *testing.T) {
	for _, how := range []any{"kill", 503, "cut"} {
		t.Run(fmt.Sprint(how), func(t *testing.T) {
			fc := newFakeCluster(t, 2)
			ref := newFakeGateway(t)
			job := api.Job{Params: shuffle.Params{Seed: 5, BatchSize: 1, World: 2, Rank: 1}} // home 1
			want := readEpoch(t, ref.URL, client.Options{Job: job}, 0, nil)
			var served []int
			got := readEpoch(t, "", client.Options{Peers: fc.urls, Job: job, Ahead: 3}, 0, func(b *client.Batch) {
				served = append(served, fc.node(t, b.Node))
				if b.Index == 2 {
					applyFault(fc, 1, how)
				}
			})
			if len(got) != len(want) {
				t.Fatalf("%d batches; want %d", len(got), len(want))
			}
			for i := range want {
				if !slices.EqualFunc(got[i], want[i], sameSample) {
					t.Errorf("batch %d: %q; want %q", i, keys(got[i]), keys(want[i]))
				}
			}
			if served[0] != 1 || served[len(served)-1] != 0 {
				t.Errorf("served by nodes %v; want the home 1 first and node 0 last", served)
			}
		})
	}
}

// readEpoch reads an epoch with a client of opts, copying every batch's
// samples, and calls each (if not nil) with each batch.
func readEpoch(t *testing.T, base string, opts client.Options, epoch int, each func(*client.Batch)) [][]client.Sample {
	t.Helper()
	c, err := client.New(base, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]client.Sample
	for b, err := range c.Epoch(t.Context(), epoch) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(b.Samples))
		if each != nil {
			each(b)
		}
	}
	return out
}

// TestClusterDoesNotMixIndexes: a node that serves another index of the
// dataset (a misconfigured replica) must end the epoch with an error, not
// hand out batches of another order.
func TestClusterDoesNotMixIndexes(t *testing.T) {
	home := newFakeGateway(t)
	other := startFakeGatewayWith(newFakeDataset("toy", []int{5, 5, 5, 5}, toySample))
	t.Cleanup(other.Close)
	if home.datasets["toy"].index == other.datasets["toy"].index {
		t.Fatal("the two datasets have the same index")
	}
	peers := []string{other.URL, home.URL}
	slices.Sort(peers) // as the client orders them
	// Rank r of two is at node r: the rank whose home is home.
	job := api.Job{Params: shuffle.Params{Seed: 5, BatchSize: 2, World: 2, Rank: slices.Index(peers, home.URL)}}
	c, err := client.New("", client.Options{Peers: peers, Job: job, Ahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var last error
	for b, err := range c.Epoch(t.Context(), 0) {
		if err != nil {
			last = err
			break
		}
		n++
		if b.Index == 0 {
			home.setHook(func(w http.ResponseWriter, r *http.Request) bool { return status(503)(w, r) })
		}
	}
	if !errors.Is(last, client.ErrBadResponse) {
		t.Fatalf("after %d batches: err = %v; want ErrBadResponse", n, last)
	}
	if n != 1 {
		t.Errorf("%d batches before the error; want 1", n)
	}
}

// TestClusterCancelIsNotAFailure: requests the caller cancels (a loop that
// breaks with batches in flight) do not pass the home over.
func TestClusterCancelIsNotAFailure(t *testing.T) {
	fc := newFakeCluster(t, 2)
	done := released(t)
	fc.setFault(1, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/epoch/0/batch/0" || r.URL.Path == "/epoch/0" {
			return false
		}
		select { // hold every later batch until the client gives up on it
		case <-r.Context().Done():
		case <-done:
		}
		return true
	})
	job := api.Job{Params: shuffle.Params{Seed: 5, BatchSize: 1, World: 2, Rank: 1}} // home 1
	c, err := client.New("", client.Options{Peers: fc.urls, Job: job, Ahead: 3})
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range c.Epoch(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if b.Node != fc.urls[1] {
			t.Fatalf("batch 0 from %s; want the home", b.Node)
		}
		break
	}
	fc.setFault(1, nil)
	b, err := c.Batch(t.Context(), 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b.Node != fc.urls[1] {
		t.Errorf("after a cancelled epoch, batch from node %d; want the home 1", fc.node(t, b.Node))
	}
}

func TestClusterDiscover(t *testing.T) {
	tests := []struct {
		name  string
		rank  int // of 4
		hook  func(fc *fakeCluster) func(w http.ResponseWriter, r *http.Request) bool
		base  int // node asked for the layout
		want  int // node the batch comes from; -1: the base URL
		isBad bool
	}{
		{name: "home from the layout", rank: 1, base: 3, want: 1},
		{name: "rank 0 asks the last node", rank: 0, base: 3, want: 0},
		{name: "homes as the gateway lists them", rank: 3, base: 2, want: 0,
			hook: clusterAnswer(func(cl *api.Cluster) { cl.Homes = []int{0, 0, 0, 0} })},
		{name: "a node seen down starts passed over", rank: 2, base: 0, want: 3,
			hook: clusterAnswer(func(cl *api.Cluster) { cl.Nodes[2].Up = false })},
		{name: "a single gateway is reached at the base URL", rank: 2, base: 1, want: -1,
			hook: clusterAnswer(func(cl *api.Cluster) {
				cl.Nodes, cl.Self, cl.Homes = []api.ClusterNode{{URL: "http://brand-0.invalid:8080", Up: true}}, 0, nil
			})},
		{name: "a gateway from before clusters", rank: 2, base: 1, want: -1,
			hook: func(fc *fakeCluster) func(w http.ResponseWriter, r *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Path != "/cluster" {
						return false
					}
					fakeError(w, 404, "no route for GET /cluster")
					return true
				}
			}},
		{name: "homes for another world", rank: 1, base: 0, isBad: true,
			hook: clusterAnswer(func(cl *api.Cluster) { cl.Homes = []int{0, 1} })},
		{name: "home outside the nodes", rank: 1, base: 0, isBad: true,
			hook: clusterAnswer(func(cl *api.Cluster) { cl.Homes = []int{0, 9, 0, 0} })},
		{name: "self outside the nodes", rank: 1, base: 0, isBad: true,
			hook: clusterAnswer(func(cl *api.Cluster) { cl.Self = 4 })},
		{name: "a node that is no URL", rank: 1, base: 0, isBad: true,
			hook: clusterAnswer(func(cl *api.Cluster) { cl.Nodes[1].URL = "brand-1:8080" })},
		{name: "a node listed twice", rank: 1, base: 0, isBad: true,
			hook: clusterAnswer(func(cl *api.Cluster) { cl.Nodes[1].URL = cl.Nodes[0].URL })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCluster(t, 4)
			if tt.hook != nil {
				fc.setFault(tt.base, tt.hook(fc))
			}
			job := api.Job{Params: shuffle.Params{Seed: 2, BatchSize: 2, World: 4, Rank: tt.rank}}
			c, err := client.New(fc.urls[tt.base], client.Options{Discover: true, Job: job})
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Batch(t.Context(), 0, 0)
			if tt.isBad {
				if !errors.Is(err, client.ErrBadResponse) {
					t.Fatalf("err = %v; want ErrBadResponse", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fc.nodesOf("/cluster"); !slices.Equal(got, []int{tt.base}) {
				t.Errorf("/cluster asked of nodes %v; want %d alone", got, tt.base)
			}
			want := fc.urls[tt.base]
			if tt.want >= 0 {
				want = fc.urls[tt.want]
			}
			if b.Node != want {
				t.Errorf("batch from node %d; want %s", fc.node(t, b.Node), want)
			}
			// The layout is asked for once.
			if _, err := c.Batch(t.Context(), 0, 1); err != nil {
				t.Fatal(err)
			}
			if got := fc.nodesOf("/cluster"); len(got) != 1 {
				t.Errorf("/cluster asked of nodes %v; want once", got)
			}
		})
	}
}

// clusterAnswer answers /cluster with the node's real answer, edited.
func clusterAnswer(edit func(*api.Cluster)) func(fc *fakeCluster) func(w http.ResponseWriter, r *http.Request) bool {
	return func(fc *fakeCluster) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/cluster" {
				return false
			}
			cl := api.Cluster{Self: 0}
			for _, u := range fc.urls {
				cl.Nodes = append(cl.Nodes, api.ClusterNode{URL: u, Up: true})
			}
			if w := r.URL.Query().Get("world"); w == "4" {
				cl.Homes = []int{0, 1, 2, 3}
			}
			edit(&cl)
			writeJSON(w, cl)
			return true
		}
	}
}

func TestClusterDiscoveryIsRetriedAfterAFailure(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.setFault(0, status(503))
	job := api.Job{Params: shuffle.Params{Seed: 2, BatchSize: 2, World: 2, Rank: 1}}
	c, err := client.New(fc.urls[0], client.Options{Discover: true, Job: job, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Batch(t.Context(), 0, 0); err == nil {
		t.Fatal("discovery from a node answering 503 succeeded")
	}
	fc.setFault(0, nil)
	b, err := c.Batch(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Node != fc.urls[1] {
		t.Errorf("batch from node %d; want the home 1", fc.node(t, b.Node))
	}
	cl, err := c.Cluster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cl.Self != 1 || !slices.Equal(cl.Homes, []int{0, 1}) {
		t.Errorf("Cluster() = self %d, homes %v; want self 1 (the home answers) and homes [0 1]", cl.Self, cl.Homes)
	}
}

func TestLocalityOffIsSentWithEveryRequest(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run("NoLocality="+strconv.FormatBool(off), func(t *testing.T) {
			gw := newFakeGateway(t)
			job := api.Job{Params: shuffle.Params{Seed: 2, BatchSize: 3}, NoLocality: off}
			readEpoch(t, gw.URL, client.Options{Job: job}, 0, nil)
			reqs := gw.requests()
			if len(reqs) < 2 {
				t.Fatalf("requests %q", reqs)
			}
			for _, r := range reqs {
				if got := query(t, r).Get(api.ParamLocality); (got == "false") != off || (!off && got != "") {
					t.Errorf("%s: locality=%q with NoLocality %t", r, got, off)
				}
			}
		})
	}
}

func TestClusterOptions(t *testing.T) {
	tests := []struct {
		name string
		base string
		opts client.Options
		ok   bool
	}{
		{"peers without a base URL", "", client.Options{Peers: []string{"http://a:1", "http://b:1"}}, true},
		{"a StatefulSet pattern", "", client.Options{Peers: []string{"http://brand-{0..3}.brand.ns.svc:8080"}}, true},
		{"discover from the base URL", "http://a:1", client.Options{Discover: true}, true},
		{"peers and discover", "http://a:1", client.Options{Peers: []string{"http://a:1"}, Discover: true}, false},
		{"a peer that is no URL", "", client.Options{Peers: []string{"a:1"}}, false},
		{"a peer listed twice", "", client.Options{Peers: []string{"http://a:1", "http://a:1/"}}, false},
		{"a negative HomeRetry", "http://a:1", client.Options{HomeRetry: -time.Second}, false},
		{"a negative ProbeAfter", "http://a:1", client.Options{ProbeAfter: -time.Second}, false},
		{"no base URL and no peers", "", client.Options{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New(tt.base, tt.opts)
			if tt.ok && err != nil {
				t.Fatal(err)
			}
			if !tt.ok && !errors.Is(err, client.ErrInvalid) {
				t.Fatalf("err = %v; want ErrInvalid", err)
			}
		})
	}
}

// TestClusterFailsOverFromAnotherIndexVersion: a node that does not hold
// the index version the client reads answers 409; the client asks the
// next node without taking the first for down, and when no node holds the
// version the call fails with ErrIndexChanged.
func TestClusterFailsOverFromAnotherIndexVersion(t *testing.T) {
	home, next := newFakeGateway(t), newFakeGateway(t)
	conflict := func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.URL.Path, "/epoch/") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error": "index version not held", "status": 409}`)
		return true
	}
	home.setHook(conflict)
	peers := []string{home.URL, next.URL}
	slices.Sort(peers) // as the client orders them
	// Rank r of two is at node r: the rank whose home is home.
	job := api.Job{Params: shuffle.Params{Seed: 5, BatchSize: 2, World: 2, Rank: slices.Index(peers, home.URL)}}
	c, err := client.New("", client.Options{Peers: peers, Job: job, Ahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	for m := range 2 {
		b, err := c.Batch(t.Context(), 0, m)
		if err != nil {
			t.Fatalf("batch %d: %v", m, err)
		}
		if b.Node != next.URL {
			t.Fatalf("batch %d from %s, want the node that holds the version", m, b.Node)
		}
	}
	// Not taken for down: the second batch went to the home first again.
	if n := len(home.requests()); n != 2 {
		t.Errorf("the home node was asked %d times, want once per batch", n)
	}
	next.setHook(conflict)
	if _, err := c.Batch(t.Context(), 0, 2); !errors.Is(err, client.ErrIndexChanged) {
		t.Fatalf("no node holds the version: %v, want ErrIndexChanged", err)
	}
}

// TestDiscoveryFollowsTheMembership: a client that discovered a cluster of
// two nodes asks for the layout again once an epoch pins another
// membership version (a node joined), and sends the rest of its rank's
// requests to the rank's home among three. The reproduction: the layout
// was kept for the client's life, so a job never reached a joined node.
func TestDiscoveryFollowsTheMembership(t *testing.T) {
	fc := newFakeCluster(t, 3)
	var mu sync.Mutex
	nodes, members := 2, "00000000000000a1"
	for k := range fc.urls {
		fc.setFault(k, func(w http.ResponseWriter, r *http.Request) bool {
			mu.Lock()
			n, v := nodes, members
			mu.Unlock()
			if r.URL.Path != "/cluster" {
				w.Header().Set(api.HeaderMembers, v)
				return false
			}
			cl := api.Cluster{Self: k, Members: v}
			for _, u := range fc.urls[:n] {
				cl.Nodes = append(cl.Nodes, api.ClusterNode{URL: u, Up: true})
			}
			if w := r.URL.Query().Get("world"); w != "" {
				world, _ := strconv.Atoi(w)
				for rank := range world {
					cl.Homes = append(cl.Homes, rank*n/world)
				}
			}
			writeJSON(w, cl)
			return true
		})
	}
	job := api.Job{Params: shuffle.Params{Seed: 2, BatchSize: 1, World: 3, Rank: 2}}
	c, err := client.New(fc.urls[0], client.Options{Discover: true, Ahead: -1, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	served := func(epoch int) map[int]int {
		out := map[int]int{}
		for b, err := range c.Epoch(t.Context(), epoch) {
			if err != nil {
				t.Fatalf("epoch %d: %v", epoch, err)
			}
			out[fc.node(t, b.Node)]++
			b.Release()
		}
		return out
	}
	if got := served(0); len(got) != 1 || got[1] == 0 {
		t.Fatalf("epoch 0 served by %v; want node 1 alone (rank 2's home of two)", got)
	}
	mu.Lock()
	nodes, members = 3, "00000000000000b2"
	mu.Unlock()
	got := served(1)
	if got[2] == 0 {
		t.Errorf("epoch 1 served by %v; want node 2 (rank 2's home of three) after the first batch", got)
	}
	if c.Members() != "00000000000000b2" {
		t.Errorf("Members() = %q", c.Members())
	}
}
