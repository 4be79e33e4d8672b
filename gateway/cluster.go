package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
)

// peerSet is this node's view of its cluster: the layout, which is fixed by
// the configured peer list, and the liveness of the other nodes, which
// decides only where a chunk's bytes are read from. A batch's contents
// never depend on liveness: the stratified order and the assignment of
// samples to ranks are computed from the list alone (package cluster).
type peerSet struct {
	urls []string
	self int
	up   []atomic.Bool // per node; always true for self
	// held[k] is when node k may be seen up again after a failed fetch
	// (unix nanoseconds), and fails[k] how many fetches in a row failed:
	// a node that answers its probes but fails what it is asked must not
	// cost a timeout on every batch.
	held   []atomic.Int64
	fails  []atomic.Int32
	client *http.Client
	token  string
	// timeout bounds one fetch from a peer; probe is the interval between
	// probes of a live peer.
	timeout, probe time.Duration
	metrics        *peerMetrics
	log            zerolog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newPeerSet returns nil without peers: a single gateway.
func newPeerSet(c ClusterConfig, reg prometheus.Registerer, log zerolog.Logger) *peerSet {
	if len(c.Peers) == 0 {
		return nil
	}
	p := &peerSet{urls: c.Peers, self: c.Self, up: make([]atomic.Bool, len(c.Peers)),
		held: make([]atomic.Int64, len(c.Peers)), fails: make([]atomic.Int32, len(c.Peers)),
		token: c.Token, timeout: c.PeerTimeout, probe: c.ProbeInterval, log: log,
		metrics: newPeerMetrics(reg, c.Peers, c.Self)}
	p.client = &http.Client{Transport: &http.Transport{
		Proxy:               nil, // peers are reached directly, never through a proxy
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
	// Every peer starts up: a fetch from one that is not finds out at
	// once (refused, or 503 while it loads) and falls back, and the first
	// probe follows within milliseconds.
	for k := range p.up {
		p.setUp(k, true)
	}
	return p
}

// start probes every other node until stop.
func (p *peerSet) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for k := range p.urls {
		if k != p.self {
			p.wg.Go(func() { p.probeLoop(ctx, k) })
		}
	}
}

func (p *peerSet) stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	p.client.CloseIdleConnections()
}

func (p *peerSet) nodes() int { return len(p.urls) }

func (p *peerSet) isUp(k int) bool { return k == p.self || p.up[k].Load() }

func (p *peerSet) setUp(k int, up bool) {
	was := p.up[k].Swap(up)
	v := 0.0
	if up {
		v = 1
	}
	p.metrics.up.WithLabelValues(p.urls[k]).Set(v)
	if was != up && k != p.self {
		ev := p.log.Warn()
		if up {
			ev = p.log.Info()
		}
		ev.Str("peer", p.urls[k]).Int("node", k).Bool("up", up).Msg("peer liveness changed")
	}
}

// heard records that node k asked this node for samples: it is serving,
// so it is up, whatever its last probe said (unless a fetch from it failed
// lately: see markDown).
func (p *peerSet) heard(k int) {
	if k != p.self && k >= 0 && k < len(p.urls) && !p.up[k].Load() && !p.isHeld(k) {
		p.setUp(k, true)
	}
}

// Hold-down after failed fetches: a node is not taken back on a probe's
// word for holdBase after its first failure in a row, doubling per
// failure up to holdMax.
const (
	holdBase = 2 * time.Second
	holdMax  = time.Minute
)

// markDown records a failed fetch from node k. The prober brings it back
// once its /readyz answers ready and the hold-down has passed.
func (p *peerSet) markDown(k int) {
	if k == p.self {
		return
	}
	if !p.isHeld(k) {
		// Fetches that fail together (a batch's, or the ranks' of one
		// step) count once: the hold grows with failures after a node
		// was taken back, not with how many requests were in flight.
		n := min(p.fails[k].Add(1), 6)
		hold := min(holdBase<<(n-1), holdMax)
		p.held[k].Store(time.Now().Add(hold).UnixNano())
	}
	p.setUp(k, false)
}

// fetched records a successful fetch from node k.
func (p *peerSet) fetched(k int) { p.fails[k].Store(0) }

// isHeld reports whether node k is in its hold-down.
func (p *peerSet) isHeld(k int) bool { return time.Now().UnixNano() < p.held[k].Load() }

// source returns the node to read chunk c of ds from: its owner if the
// owner is live and not in skip, else the first live node of the chunk's
// ranking (self is always live, so there is one).
func (p *peerSet) source(ds *loadedDataset, c int, skip map[int]bool) int {
	own := ds.owners(p.nodes())[c]
	if p.isUp(own) && !skip[own] {
		return own
	}
	for _, k := range cluster.Ranking(make([]int, 0, p.nodes()), ds.clusterKey(), c, p.nodes()) {
		if k == p.self || (p.isUp(k) && !skip[k]) {
			return k
		}
	}
	return p.self
}

// probeLoop probes node k's /readyz: every probe interval while it is up,
// with back-off from a quarter interval up to 4 intervals while it is
// down. A node that was down is thus seen back within a few seconds, and
// sooner if it asks this node for samples first (heard).
//
// A refused connection or a not-ready answer marks the node down at once:
// it is gone, or says so. A probe that times out does only the third time
// in a row: a node busy serving (or a machine loaded by a test under the
// race detector) answers late, and taking it for dead would make every
// node read its chunks from the store too. Its real failures show in
// fetches, which mark it down themselves.
func (p *peerSet) probeLoop(ctx context.Context, k int) {
	wait := time.Duration(0)
	slow := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		res := p.probeOnce(ctx, k)
		if ctx.Err() != nil {
			return
		}
		if res == probeSlow {
			if slow++; slow < 3 {
				wait = p.probe
				continue
			}
		}
		slow = 0
		up := res == probeUp && !p.isHeld(k)
		p.setUp(k, up)
		switch {
		case up:
			wait = p.probe
		case wait < p.probe:
			wait = p.probe / 4
		default:
			wait = min(2*wait, 4*p.probe)
		}
	}
}

// What a probe found.
const (
	probeUp   = iota
	probeDown // refused, reset, or not ready
	probeSlow // no answer in time
)

func (p *peerSet) probeOnce(ctx context.Context, k int) int {
	pctx, cancel := context.WithTimeout(ctx, max(p.probe, 2*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, p.urls[k]+"/readyz", nil)
	if err != nil {
		return probeDown
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if pctx.Err() != nil {
			return probeSlow
		}
		return probeDown
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return probeDown
	}
	return probeUp
}

// view is the body of GET /cluster.
func (p *peerSet) view(world int) api.Cluster {
	c := api.Cluster{Self: p.self, Nodes: make([]api.ClusterNode, len(p.urls))}
	for k, u := range p.urls {
		c.Nodes[k] = api.ClusterNode{URL: u, Up: p.isUp(k)}
	}
	if world > 0 {
		c.Homes = make([]int, world)
		for r := range c.Homes {
			c.Homes[r] = cluster.Home(r, world, len(p.urls))
		}
	}
	return c
}

// handleCluster serves GET /cluster[?world=W]. A single gateway answers
// with itself, unnamed, as its only node.
func (g *Gateway) handleCluster(w http.ResponseWriter, r *http.Request) {
	world := 0
	if v := r.URL.Query().Get(api.ParamWorld); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > g.cfg.Limits.MaxWorld {
			writeError(r.Context(), w, fmt.Errorf("%w: world must be between 1 and %d, got %q", ErrBadRequest, g.cfg.Limits.MaxWorld, v))
			return
		}
		world = n
	}
	if g.peers == nil {
		c := api.Cluster{Nodes: []api.ClusterNode{{Up: true}}}
		if world > 0 {
			c.Homes = make([]int, world)
		}
		writeJSON(w, http.StatusOK, c)
		return
	}
	writeJSON(w, http.StatusOK, g.peers.view(world))
}

// peerMetrics count a node's traffic with its peers.
type peerMetrics struct {
	up        *prometheus.GaugeVec
	fetched   *prometheus.CounterVec // bytes this node fetched, by peer
	served    *prometheus.CounterVec // bytes this node served, by peer
	failures  *prometheus.CounterVec // fetches that failed, by peer
	locality  *prometheus.CounterVec // batch bytes by source: home or peer
	aheadUsed prometheus.Counter     // samples a batch found fetched ahead
}

func newPeerMetrics(reg prometheus.Registerer, urls []string, self int) *peerMetrics {
	m := &peerMetrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_peer_up",
			Help: "1 if the peer answered its last /readyz probe ready (this node counts itself up)."}, []string{"peer"}),
		fetched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_peer_bytes_fetched_total",
			Help: "Sample bytes this node fetched from each peer."}, []string{"peer"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_peer_bytes_served_total",
			Help: "Sample bytes this node served to each peer."}, []string{"peer"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_peer_fetch_failures_total",
			Help: "Sample fetches from each peer that failed (refused, timed out, bad status or checksum) and were read elsewhere."}, []string{"peer"}),
		locality: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_locality_bytes_total",
			Help: "Sample bytes of batches served, by where they came from: home (this node's cache) or peer."}, []string{"source"}),
		aheadUsed: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_peer_samples_fetched_ahead_total",
			Help: "Samples of batches that had been fetched from peers ahead of the request."}),
	}
	reg.MustRegister(m.up, m.fetched, m.served, m.failures, m.locality, m.aheadUsed)
	for k, u := range urls {
		if k != self {
			m.fetched.WithLabelValues(u)
			m.served.WithLabelValues(u)
			m.failures.WithLabelValues(u)
		}
	}
	m.locality.WithLabelValues("home")
	m.locality.WithLabelValues("peer")
	return m
}

// maxPeerBody bounds an internal resource read from a peer: a node's part
// of an epoch's feedback, 8 bytes a sample.
const maxPeerBody = 1 << 35

// get fetches a small internal resource from a peer.
func (p *peerSet) get(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(headerPeer, strconv.Itoa(p.self))
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b[:min(len(b), 512)])))
	}
	return b, nil
}
