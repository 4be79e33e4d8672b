package peer

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/tensors"
)

// Config configures a Set.
type Config struct {
	Peers []string // base URLs; node k is Peers[k]
	Self  int
	// Timeout bounds one fetch from a peer; Probe is the interval between
	// probes of a live peer.
	Timeout, Probe time.Duration
	Credentials    Credentials
	Registry       prometheus.Registerer
	Log            zerolog.Logger
	// Held returns the index versions this node holds of a dataset, the
	// one it serves now first (catalog.Catalog.Held): counted with the
	// peers' in the cluster's agreement (Agreed).
	Held func(dataset string) []string
	// Skew is told when a peer serves another version of a dataset than
	// this node does: the store may hold a new index this node has not
	// polled yet. It is called at most once a second and must not block.
	Skew func()
	// AheadBytes bounds the samples fetched ahead of need (Ahead).
	AheadBytes int64
	// MaxReplyBytes bounds a reply of transformed samples (the node's
	// --max-batch-bytes); 0: none.
	MaxReplyBytes int64
	// Load is this node's transform stage's load (tensors.Stage.Load),
	// which it compares with an owner's before asking it for tensors
	// (balance.go); nil: always ask the owner. Slack is the rule's
	// margin: 0 is BalanceSlack, negative never moves the work.
	Load  func() tensors.Load
	Slack time.Duration
}

// node is this node's view of another.
type node struct {
	up atomic.Bool // always true for self
	// held is when the node may be seen up again after a failed fetch
	// (unix nanoseconds), and fails how many fetches in a row failed: a
	// node that answers its probes but fails what it is asked must not
	// cost a timeout on every batch.
	held  atomic.Int64
	fails atomic.Int32
	state atomic.Pointer[State] // its last probe's answer

	fetched, served            atomic.Int64 // sample bytes
	down, refused, versionMiss atomic.Int64 // failed fetches, by kind
}

// Set is this node's view of its cluster: the layout, which is fixed by
// the configured peer list, and what it last learnt of the other nodes —
// whether they are up and which index versions they hold — which decides
// only where a chunk's bytes are read from. A batch's contents never
// depend on liveness: the stratified order and the assignment of samples
// to ranks are computed from the list alone (package cluster).
type Set struct {
	urls    []string
	self    int
	nodes   []node
	client  *http.Client
	cred    Credentials
	timeout time.Duration
	probe   time.Duration
	held    func(string) []string
	skew    func()
	lastSke atomic.Int64
	log     zerolog.Logger

	home, peer atomic.Int64 // sample bytes of batches served, by source
	ahead      *Ahead
	maxReply   int64
	load       func() tensors.Load
	slack      time.Duration
	// Samples asked of owners with a pipeline: transformed there, or as
	// stored, to be transformed here (balance.go).
	askedTransformed, askedRaw atomic.Int64
	upGauge                    *prometheus.GaugeVec

	// ctx ends at Close: the probes and the fetches ahead run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// minProbeTimeout is the shortest a probe waits for an answer.
const minProbeTimeout = 2 * time.Second

// NewSet returns the view of a cluster; Start begins probing.
func NewSet(c Config) *Set {
	s := &Set{urls: c.Peers, self: c.Self, nodes: make([]node, len(c.Peers)), cred: c.Credentials,
		timeout: c.Timeout, probe: c.Probe, held: c.Held, skew: c.Skew, log: c.Log, ahead: NewAhead(c.AheadBytes),
		maxReply: c.MaxReplyBytes, load: c.Load, slack: c.Slack}
	if s.slack == 0 {
		s.slack = BalanceSlack
	}
	if s.maxReply <= 0 {
		s.maxReply = math.MaxInt64
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.client = &http.Client{Transport: &http.Transport{
		Proxy:               nil, // peers are reached directly, never through a proxy
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
	s.register(c.Registry)
	// Every peer starts up: a fetch from one that is not finds out at
	// once (refused, or 503 while it loads) and falls back, and the first
	// probe follows within milliseconds.
	for k := range s.nodes {
		s.setUp(k, true)
	}
	return s
}

// Start probes every other node until Close.
func (s *Set) Start() {
	for k := range s.urls {
		if k != s.self {
			s.wg.Go(func() { s.probeLoop(s.ctx, k) })
		}
	}
}

// Close stops the probes and the fetches ahead and waits for them.
func (s *Set) Close() {
	s.cancel()
	s.wg.Wait()
	s.client.CloseIdleConnections()
}

// Self returns this node's position.
func (s *Set) Self() int { return s.self }

// Nodes returns the cluster's node count.
func (s *Set) Nodes() int { return len(s.urls) }

// URL returns node k's base URL.
func (s *Set) URL(k int) string { return s.urls[k] }

func (s *Set) isUp(k int) bool { return k == s.self || s.nodes[k].up.Load() }

func (s *Set) setUp(k int, up bool) {
	was := s.nodes[k].up.Swap(up)
	v := 0.0
	if up {
		v = 1
	}
	s.upGauge.WithLabelValues(s.urls[k]).Set(v)
	if was != up && k != s.self {
		ev := s.log.Warn()
		if up {
			ev = s.log.Info()
		}
		ev.Str("peer", s.urls[k]).Int("node", k).Bool("up", up).Msg("peer liveness changed")
	}
}

// Heard records that node k, authenticated (Credentials.Verify), asked
// this node for something: it is serving, so it is up, whatever its last
// probe said, unless a fetch from it failed lately (see markDown).
func (s *Set) Heard(k int) {
	if k != s.self && k >= 0 && k < len(s.urls) && !s.nodes[k].up.Load() && !s.isHeld(k) {
		s.setUp(k, true)
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
// once it answers ready and the hold-down has passed.
func (s *Set) markDown(k int) {
	if k == s.self {
		return
	}
	n := &s.nodes[k]
	if !s.isHeld(k) {
		// Fetches that fail together (a batch's, or the ranks' of one
		// step) count once: the hold grows with failures after a node
		// was taken back, not with how many requests were in flight.
		f := min(n.fails.Add(1), 6)
		hold := min(holdBase<<(f-1), holdMax)
		n.held.Store(time.Now().Add(hold).UnixNano())
	}
	s.setUp(k, false)
}

// isHeld reports whether node k is in its hold-down.
func (s *Set) isHeld(k int) bool { return time.Now().UnixNano() < s.nodes[k].held.Load() }

// holds reports whether node k, by its last state, holds version id of
// dataset name. Before its first probe a node is taken to hold every
// version: a request finds out (409) and is read elsewhere.
func (s *Set) holds(k int, name, id string) bool {
	st := s.nodes[k].state.Load()
	if k == s.self || st == nil {
		return true
	}
	for _, d := range st.Datasets {
		if d.Name == name {
			return slices.Contains(d.Held, id)
		}
	}
	return false
}

// Source returns the node to read chunk c of ds from: its owner if the
// owner is up, holds ds's version and skip does not name it; else the
// first such node of the chunk's ranking, this node last (it reads the
// store, so there is always one).
func (s *Set) Source(ds *catalog.Dataset, c int, skip func(int) bool) int {
	n := len(s.urls)
	usable := func(k int) bool { return k == s.self || s.isUp(k) && !skip(k) && s.holds(k, ds.Name, ds.ID()) }
	if own := ds.Owners(n)[c]; usable(own) {
		return own
	}
	for _, k := range cluster.Ranking(make([]int, 0, n), ds.ClusterKey(), c, n) {
		if usable(k) {
			return k
		}
	}
	return s.self
}

// Local reports whether this node is chunk c of ds's source now: whether
// it reads the chunk into its own cache.
func (s *Set) Local(ds *catalog.Dataset, c int) bool {
	return s.Source(ds, c, func(int) bool { return false }) == s.self
}

// Fetch asks node k for samples and checks them. A failure is classified
// (see the package doc): ErrDown holds the node down; ErrRefused and
// ErrVersion do not.
func (s *Set) Fetch(ctx context.Context, k int, req Request) (Reply, error) {
	rep, err := s.fetch(ctx, k, req)
	n := &s.nodes[k]
	switch {
	case err == nil:
		n.fails.Store(0)
		for _, d := range rep.Data {
			n.fetched.Add(int64(len(d)))
		}
	case ctx.Err() != nil:
		// The asker gave up: nothing is known of the peer.
	case errors.Is(err, ErrVersion):
		n.versionMiss.Add(1)
		s.log.Info().Err(err).Str("peer", s.urls[k]).Str("dataset", req.DS.Name).Msg("peer does not hold the index version asked for; reading elsewhere")
	case errors.Is(err, ErrRefused):
		n.refused.Add(1)
		s.log.Warn().Err(err).Str("peer", s.urls[k]).Int("samples", len(req.IDs)).Msg("a peer could not serve samples; reading them elsewhere")
	default:
		n.down.Add(1)
		s.log.Warn().Err(err).Str("peer", s.urls[k]).Int("samples", len(req.IDs)).Msg("fetching samples from a peer failed; holding it down and reading them elsewhere")
		s.markDown(k)
	}
	return rep, err
}

// Served records sample bytes this node served to node k (an
// authenticated asker; -1 for an unauthenticated one).
func (s *Set) Served(k int, n int64) {
	if k >= 0 && k < len(s.nodes) {
		s.nodes[k].served.Add(n)
	}
}

// Delivered records the sample bytes of a batch served, by where they
// came from: this node's cache (home) or peers.
func (s *Set) Delivered(home, peer int64) {
	s.home.Add(home)
	s.peer.Add(peer)
}

// probeLoop probes node k's state: every probe interval while it is up,
// with back-off from a quarter interval up to 4 intervals while it is
// down. A node that was down is thus seen back within a few seconds, and
// sooner if it asks this node for samples first (Heard).
//
// A refused connection or a not-ready answer marks the node down at once:
// it is gone, or says so. A probe that times out does only the third time
// in a row: a node busy serving (or a machine loaded by a test under the
// race detector) answers late, and taking it for dead would make every
// node read its chunks from the store too. Its real failures show in
// fetches, which mark it down themselves.
func (s *Set) probeLoop(ctx context.Context, k int) {
	wait := time.Duration(0)
	slowRun := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		st, slow, err := s.probeState(ctx, k)
		if ctx.Err() != nil {
			return
		}
		if slow {
			if slowRun++; slowRun < 3 {
				wait = s.probe
				continue
			}
		}
		slowRun = 0
		if err == nil {
			s.nodes[k].state.Store(&st)
			s.checkSkew(&st)
		} else if !slow {
			s.log.Debug().Err(err).Str("peer", s.urls[k]).Msg("probe failed")
		}
		up := err == nil && st.Ready && !s.isHeld(k)
		s.setUp(k, up)
		switch {
		case up:
			wait = s.probe
		case wait < s.probe:
			wait = s.probe / 4
		default:
			wait = min(2*wait, 4*s.probe)
		}
	}
}

// current is the version of a dataset this node serves, "" if none.
func (s *Set) current(name string) string {
	if held := s.held(name); len(held) > 0 {
		return held[0]
	}
	return ""
}

// checkSkew tells Skew when a peer serves another current version of a
// dataset than this node.
func (s *Set) checkSkew(st *State) {
	for _, d := range st.Datasets {
		if cur := s.current(d.Name); cur != "" && d.Current != cur {
			now := time.Now().UnixNano()
			if last := s.lastSke.Load(); now-last > int64(time.Second) && s.lastSke.CompareAndSwap(last, now) {
				s.skew()
			}
			return
		}
	}
}

// Agreed returns the index version of a dataset the cluster serves: the
// one most of the live nodes (this one included) serve now, the smallest
// ID among as many. A version some node has replaced by reloading (it
// holds both, the newer as its current) counts as its successor: every
// node of a cluster over one store reloads to the same index, and a node
// that has not polled the store yet, or whose last state this node has
// not probed yet, counts for the version it will serve. Every node
// computes it from what it last learnt, so within a probe interval of a
// reload they agree. A node that does not hold the agreed version does
// not serve that dataset's batches (the gateway answers 409 naming nodes
// that do), and so never serves another version's order to ranks whose
// siblings read the agreed one.
func (s *Set) Agreed(name string) string {
	var currents []string
	next := map[string]string{} // a replaced version → the one that replaced it
	add := func(held []string) {
		if len(held) == 0 {
			return
		}
		currents = append(currents, held[0])
		for _, old := range held[1:] {
			next[old] = held[0]
		}
	}
	add(s.held(name))
	for k := range s.nodes {
		if k == s.self || !s.isUp(k) {
			continue
		}
		if st := s.nodes[k].state.Load(); st != nil {
			for _, d := range st.Datasets {
				if d.Name == name {
					add(append([]string{d.Current}, slices.DeleteFunc(slices.Clone(d.Held), func(id string) bool { return id == d.Current })...))
				}
			}
		}
	}
	counts := map[string]int{}
	for _, id := range currents {
		counts[newest(id, next)]++
	}
	best, n := "", 0
	for id, c := range counts {
		if c > n || c == n && id < best {
			best, n = id, c
		}
	}
	return best
}

// newest follows the replacements of version id to the newest. A cycle
// (a version restored on one node while others reload past it) is no
// evidence either way: id stands for itself.
func newest(id string, next map[string]string) string {
	seen := map[string]bool{id: true}
	cur := id
	for {
		n, ok := next[cur]
		if !ok {
			return cur
		}
		if seen[n] {
			return id
		}
		seen[n] = true
		cur = n
	}
}

// Holders returns the URLs of the live nodes that hold version id of a
// dataset, this one first if it does: where a client may read it.
func (s *Set) Holders(name, id string, self bool) []string {
	var out []string
	if self {
		out = append(out, s.urls[s.self])
	}
	for k := range s.nodes {
		if k != s.self && s.isUp(k) && s.nodes[k].state.Load() != nil && s.holds(k, name, id) {
			out = append(out, s.urls[k])
		}
	}
	return out
}

// View is the body of GET /cluster: the nodes, their liveness and current
// index versions as this node last learnt them, and the versions the
// cluster agrees on.
func (s *Set) View(world int, datasets []string) api.Cluster {
	c := api.Cluster{Self: s.self, Nodes: make([]api.ClusterNode, len(s.urls)), Agreed: map[string]string{}}
	for k, u := range s.urls {
		n := api.ClusterNode{URL: u, Up: s.isUp(k)}
		switch st := s.nodes[k].state.Load(); {
		case k == s.self:
			n.Indexes = map[string]string{}
			for _, d := range datasets {
				n.Indexes[d] = s.current(d)
			}
		case st != nil:
			n.Indexes = map[string]string{}
			for _, d := range st.Datasets {
				n.Indexes[d.Name] = d.Current
			}
		}
		c.Nodes[k] = n
	}
	for _, d := range datasets {
		c.Agreed[d] = s.Agreed(d)
	}
	if world > 0 {
		c.Homes = make([]int, world)
		for r := range c.Homes {
			c.Homes[r] = cluster.Home(r, world, len(s.urls))
		}
	}
	return c
}

// Stats is the cluster's part of /stats.
func (s *Set) Stats(datasets []string) *api.ClusterStats {
	cs := &api.ClusterStats{Cluster: s.View(0, datasets)}
	for k, u := range s.urls {
		if k == s.self {
			continue
		}
		n := &s.nodes[k]
		cs.Peers = append(cs.Peers, api.PeerStats{URL: u, Up: s.isUp(k), FetchedBytes: n.fetched.Load(), ServedBytes: n.served.Load(),
			Failures: n.down.Load() + n.refused.Load() + n.versionMiss.Load()})
	}
	cs.HomeBytes, cs.PeerBytes = s.home.Load(), s.peer.Load()
	cs.Locality = 1
	if t := cs.HomeBytes + cs.PeerBytes; t > 0 {
		cs.Locality = float64(cs.HomeBytes) / float64(t)
	}
	return cs
}

// register adds the set's collectors to reg: the counters are read from
// the set's own atomics, which /stats reads too.
func (s *Set) register(reg prometheus.Registerer) {
	s.upGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_peer_up",
		Help: "1 if the peer answered its last state probe ready (this node counts itself up)."}, []string{"peer"})
	reg.MustRegister(s.upGauge)
	counter := func(name, help string, labels prometheus.Labels, v *atomic.Int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v.Load()) }))
	}
	for k, u := range s.urls {
		if k == s.self {
			continue
		}
		n := &s.nodes[k]
		peer := prometheus.Labels{"peer": u}
		counter("brand_peer_bytes_fetched_total", "Sample bytes this node fetched from each peer.", peer, &n.fetched)
		counter("brand_peer_bytes_served_total", "Sample bytes this node served to each peer (authenticated peers only).", peer, &n.served)
		failures := "Sample fetches from each peer that failed and were read elsewhere, by kind: down (no answer, 503 or bad bytes: the peer is held down), refused (a store error or 4xx on its side) or version (it does not hold the index version asked for)."
		for kind, v := range map[string]*atomic.Int64{"down": &n.down, "refused": &n.refused, "version": &n.versionMiss} {
			counter("brand_peer_fetch_failures_total", failures, prometheus.Labels{"peer": u, "kind": kind}, v)
		}
	}
	locality := "Sample bytes of batches served, by where they came from: home (this node's cache) or peer."
	counter("brand_locality_bytes_total", locality, prometheus.Labels{"source": "home"}, &s.home)
	counter("brand_locality_bytes_total", locality, prometheus.Labels{"source": "peer"}, &s.peer)
	counter("brand_peer_samples_fetched_ahead_total", "Samples of batches that had been fetched from peers ahead of the request.", nil, &s.ahead.used)
	asked := "Samples of jobs with a pipeline asked of the nodes that read them, by where they were to be transformed: at that node (owner), or here (self: the owner's pipeline differs, or its transform queue is longer than this node's)."
	counter("brand_peer_transform_samples_total", asked, prometheus.Labels{"where": "owner"}, &s.askedTransformed)
	counter("brand_peer_transform_samples_total", asked, prometheus.Labels{"where": "self"}, &s.askedRaw)
}
