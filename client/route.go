package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
)

// DefaultHomeRetry is Options.HomeRetry when zero.
const DefaultHomeRetry = 10 * time.Second

// node is a gateway the client may send a request to.
type node struct {
	url  *url.URL // base URL, without a trailing slash
	name string   // as the peer list spells it; Batch.Node
}

// router chooses the node of each attempt of a request. Every request of a
// client starts at its rank's home node, where the cluster caches that
// rank's samples; a node whose attempt failed is passed over for
// HomeRetry, the next nodes in order (home+1, home+2, … mod N) taking its
// requests, after which it is tried again. Which node answers never
// changes a batch's bytes, only how fast they come: every node serves any
// request identically.
//
// A client of a single gateway has a router of one node, which it always
// picks: its requests, retries and waits are those of a client that has
// never heard of clusters.
//
// A router is safe for concurrent use: Epoch's read-ahead requests share
// one, so that the first to find the home down spares the others the
// timeout.
type router struct {
	nodes []node
	home  int
	retry time.Duration    // how long a failed node is passed over
	now   func() time.Time // the clock of the marks; tests replace it

	mu        sync.Mutex
	downUntil []time.Time // when each node is tried again; zero: not down
	marked    []uint64    // when each node was last marked, in marks
	marks     uint64
}

func newRouter(nodes []node, home int, retry time.Duration, now func() time.Time) *router {
	return &router{nodes: nodes, home: home, retry: retry, now: now,
		downUntil: make([]time.Time, len(nodes)), marked: make([]uint64, len(nodes))}
}

// untried returns the first node in the order home, home+1, … that a call
// has not tried, or -1.
func (r *router) untried(tried []bool) int {
	for i := range r.nodes {
		if k := (r.home + i) % len(r.nodes); !tried[k] {
			return k
		}
	}
	return -1
}

// pick returns the node of the next attempt: the first in the order home,
// home+1, … that is not passed over, or, when every node failed recently,
// the one whose mark ends first, the one marked first on a tie (a clock
// too coarse to tell), so that a call keeps cycling through the nodes in
// order.
func (r *router) pick() int {
	if len(r.nodes) == 1 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	best := -1
	for i := range r.nodes {
		k := (r.home + i) % len(r.nodes)
		if !now.Before(r.downUntil[k]) {
			return k
		}
		if best < 0 || r.downUntil[k].Before(r.downUntil[best]) ||
			(r.downUntil[k].Equal(r.downUntil[best]) && r.marked[k] < r.marked[best]) {
			best = k
		}
	}
	return best
}

// next returns the node a request to node k is hedged on: the first in
// the order k+1, k+2, … that is not passed over, or -1 (a single node,
// or every other node failed recently).
func (r *router) next(k int) int {
	if len(r.nodes) == 1 {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for i := 1; i < len(r.nodes); i++ {
		if j := (k + i) % len(r.nodes); !now.Before(r.downUntil[j]) {
			return j
		}
	}
	return -1
}

// fail passes node k over for the router's retry period, and returns
// the mark (for unfail).
func (r *router) fail(k int) uint64 {
	if len(r.nodes) == 1 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.downUntil[k] = r.now().Add(r.retry)
	r.marks++
	r.marked[k] = r.marks
	return r.marks
}

// unfail takes node k back if mark is still its last (fail): a node
// passed over when a hedge answered before it did, which then answered
// its probe, is alive, and a failure marked since is another's.
func (r *router) unfail(k int, mark uint64) {
	if len(r.nodes) == 1 {
		return
	}
	r.mu.Lock()
	if r.marked[k] == mark {
		r.downUntil[k] = time.Time{}
	}
	r.mu.Unlock()
}

// endpoint returns the absolute URL of path (which starts with '/') on node
// k. path is unescaped; url.URL escapes it, keeping '/'.
func (r *router) endpoint(k int, path string, q url.Values) string {
	u := *r.nodes[k].url
	u.Path = u.Path + path
	u.RawPath = ""
	u.RawQuery = q.Encode()
	return u.String()
}

// parseNodes checks and normalises a peer list (the syntax of brand serve
// --peers, patterns included), sorted as a cluster's membership sorts its
// members: a rank's home is a position in that order (cluster.Home).
func parseNodes(peers []string) ([]node, error) {
	list, err := cluster.ParsePeers(strings.Join(peers, ","))
	if err != nil {
		return nil, err
	}
	slices.Sort(list)
	nodes := make([]node, len(list))
	for i, p := range list {
		u, err := url.Parse(p)
		if err != nil {
			return nil, fmt.Errorf("peer %q: %w", p, err)
		}
		u.RawPath = ""
		nodes[i] = node{url: u, name: p}
	}
	return nodes, nil
}

// homeOf returns the job's home among n nodes: rank 0 for a world left to
// the gateway, whose rank can only be 0.
func homeOf(job api.Job, n int) int {
	if job.World < 1 {
		return 0
	}
	return cluster.Home(job.Rank, job.World, n)
}

// routes returns the router of the client's requests, asking the base URL
// for the cluster's layout first if Options.Discover is set and that has
// not succeeded yet. A failed discovery is not remembered: the next call
// asks again. Once an epoch has pinned a membership version other than
// the layout's (learnMembers), the layout is asked for again through the
// nodes known; if none answers, the old one is kept until the next
// epoch's pin.
func (t *transport) routes(ctx context.Context) (*router, error) {
	if !t.opts.Discover {
		return t.router, nil
	}
	t.discoverMu.Lock()
	defer t.discoverMu.Unlock()
	if t.discovered != nil && t.rediscover.CompareAndSwap(true, false) {
		if cl, err := t.fetchCluster(ctx, t.discovered); err == nil {
			if r, err := t.routerOf(cl); err == nil {
				t.discovered = r
				t.discoveredMembers.Store(&cl.Members)
			}
		}
	}
	if t.discovered != nil {
		return t.discovered, nil
	}
	cl, err := t.fetchCluster(ctx, t.router)
	if err != nil {
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			return nil, fmt.Errorf("client: discovering the cluster: %w", err)
		}
		// A gateway from before clusters has no /cluster: it is alone.
		cl = &api.Cluster{Nodes: []api.ClusterNode{{URL: t.base.String(), Up: true}}}
	}
	r, err := t.routerOf(cl)
	if err != nil {
		return nil, fmt.Errorf("client: discovering the cluster at %s: %w", t.base, err)
	}
	t.discovered = r
	t.discoveredMembers.Store(&cl.Members)
	return r, nil
}

// routerOf builds the router of a discovered layout. A single node is
// reached at the base URL, which is how this client reaches it, whatever
// it calls itself. Nodes the answering gateway saw down start passed over.
func (t *transport) routerOf(cl *api.Cluster) (*router, error) {
	if len(cl.Nodes) <= 1 {
		return t.router, nil
	}
	urls := make([]string, len(cl.Nodes))
	for i, n := range cl.Nodes {
		urls[i] = n.URL
	}
	nodes, err := parseNodes(urls)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if len(nodes) != len(cl.Nodes) {
		return nil, fmt.Errorf("%w: %d nodes listed as %d URLs", ErrBadResponse, len(cl.Nodes), len(nodes))
	}
	home := homeOf(t.opts.Job, len(nodes))
	if w := t.opts.Job.World; w > 0 && len(cl.Homes) > 0 {
		// The gateway's layout decides where the rank's samples live.
		if len(cl.Homes) != w {
			return nil, fmt.Errorf("%w: asked for the homes of %d ranks, got %d", ErrBadResponse, w, len(cl.Homes))
		}
		home = cl.Homes[t.opts.Job.Rank]
		if home < 0 || home >= len(nodes) {
			return nil, fmt.Errorf("%w: home %d of rank %d outside the %d nodes", ErrBadResponse, home, t.opts.Job.Rank, len(nodes))
		}
	}
	r := newRouter(nodes, home, t.opts.HomeRetry, func() time.Time { return t.now() })
	for k, n := range cl.Nodes {
		if !n.Up {
			r.fail(k)
		}
	}
	return r, nil
}

// Cluster fetches the cluster's layout (GET /cluster) as the node the
// client's rank is routed to sees it: the nodes in order, which of them
// answered, their liveness, and, when Options.Job sets World, every rank's
// home. A single gateway lists only itself.
func (c *Client) Cluster(ctx context.Context) (*api.Cluster, error) {
	r, err := c.t.routes(ctx)
	if err != nil {
		return nil, err
	}
	cl, err := c.t.fetchCluster(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("client: cluster: %w", err)
	}
	return cl, nil
}

// fetchCluster gets /cluster through r and checks that its answer
// describes a cluster.
func (t *transport) fetchCluster(ctx context.Context, r *router) (*api.Cluster, error) {
	q := url.Values{}
	if w := t.opts.Job.World; w > 0 {
		q.Set(api.ParamWorld, strconv.Itoa(w))
	}
	cl, _, err := getJSONVia[api.Cluster](ctx, t, r, "/cluster", q)
	if err != nil {
		return nil, err
	}
	if len(cl.Nodes) == 0 || cl.Self < 0 || cl.Self >= len(cl.Nodes) {
		return nil, fmt.Errorf("%w: cluster of %d nodes answered by node %d", ErrBadResponse, len(cl.Nodes), cl.Self)
	}
	return cl, nil
}
