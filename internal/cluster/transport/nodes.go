package transport

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/server/stopper"
)

// Config configures a node's view of its peers.
type Config struct {
	// Self is this node's URL as the members are listed: its identity.
	Self string
	// Timeout bounds one fetch from a peer; Probe is the interval between
	// probes of a live peer.
	Timeout, Probe time.Duration
	Credentials    peercred.Credentials
	MaxReplyBytes  int64 // a reply of transformed samples (--max-batch-bytes); 0: none
	// Serving says whether this node serves now (its indexes loaded,
	// requests let through); nil: always. Its requests say when it does
	// not (HeaderNotServing), so that its peers do not take it for up on
	// their word while their probes would find it not ready.
	Serving func() bool
	// Hold is a node's first hold-down after a failed fetch, doubling per
	// renewed failure up to a minute (DefaultHold if 0).
	Hold time.Duration
	// Returning, if set, runs on a node's probe loop as its probe takes
	// it back up after it was down, before any of this node's reads can
	// go to it again: this node stood in for it meanwhile, and tells it
	// which of its chunks it read (the gateway's hand-back,
	// Client.Give). ctx ends with the probes.
	Returning func(ctx context.Context, url string)
	// Group runs the probes and ends them when it stops (nil: a part of
	// the Nodes' own, stopped by Close).
	Group    *stopper.Group
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// node is this node's view of another, or of itself, known by its URL; it
// keeps its slot for the Nodes' life (the package doc).
type node struct {
	url    string
	slot   int
	client Client
	up     atomic.Bool // always true for self
	// held is when the node may be seen up again after a failed fetch
	// (unix nanoseconds), and fails how many fetches in a row failed: a
	// node that answers its probes but fails what it is asked must not
	// cost a timeout on every batch.
	held  atomic.Int64
	fails atomic.Int32
	state atomic.Pointer[nodestate.State] // its last probe's answer
	// unreached: its last probe got no answer at all (Unreached).
	unreached atomic.Bool
	// answered is when it last answered this node (a probe, a fetch, a
	// canary), in unix nanoseconds; never what it asked this node, which
	// says it reaches this node, not that this node reaches it.
	answered atomic.Int64
	// heard is when it last asked this node for something while it
	// served (Heard), in unix nanoseconds: a probe sent before that
	// whose answer says it is down or not ready is stale (probeLoop).
	heard atomic.Int64

	fetched, served                     atomic.Int64 // sample bytes
	down, timeout, refused, versionMiss atomic.Int64 // failed fetches, by kind
	// slow counts its fetches a hedge answered first (Hedged), lateRun
	// how many in a row, and lostAt when the last of those was told
	// (unix nanoseconds).
	slow    atomic.Int64
	lateRun atomic.Int32
	lostAt  atomic.Int64

	stop context.CancelFunc // of its probe loop while probed; under Nodes.mu
}

// Nodes is this node's view of the other nodes: each one's slot, client
// and liveness, what it last said of itself (its State), and the bytes
// that passed between them. Which nodes it probes is its caller's to say
// (Probe): the members of the membership versions this node knows.
type Nodes struct {
	self    *node
	t       *transport
	probe   time.Duration
	hold    time.Duration                         // the first hold-down (Config.Hold)
	back    func(ctx context.Context, url string) // Config.Returning
	log     zerolog.Logger
	reg     prometheus.Registerer
	upGauge *prometheus.GaugeVec

	mu      sync.Mutex       // guards byURL, slots' growth, the probe loops and watcher
	byURL   map[string]*node // every node ever known
	started bool             // Start was called: nodes asked for are probed at once
	watcher nodestate.Watcher
	slots   atomic.Pointer[[]*node]
	probed  atomic.Pointer[[]int] // the slots probed, sorted

	part *stopper.Group // runs the probes
}

// maxKnown bounds the nodes a Nodes keeps (every URL a membership ever
// named): a StatefulSet's pods keep their names, so a cluster that grows
// and shrinks reuses them.
const maxKnown = 4096

// New returns this node's view of its peers, knowing only itself; Probe
// names the nodes to probe, and Start begins probing them.
func New(c Config) *Nodes {
	if c.Hold <= 0 {
		c.Hold = DefaultHold
	}
	n := &Nodes{t: newTransport(c), probe: c.Probe, hold: c.Hold, back: c.Returning, log: c.Log, reg: c.Registry, byURL: map[string]*node{}, part: stopper.Own(c.Group, "peer: probes")}
	n.part.OnStop(n.t.http.CloseIdleConnections)
	n.slots.Store(&[]*node{})
	n.probed.Store(&[]int{})
	n.upGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_peer_up",
		Help: "1 if the peer answered its last state probe ready (this node counts itself up)."}, []string{"peer"})
	c.Registry.MustRegister(n.upGauge)
	n.mu.Lock()
	n.self = n.nodeLocked(c.Self)
	n.mu.Unlock()
	return n
}

// Start probes the nodes asked for (Probe) until the part stops.
func (n *Nodes) Start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.started = true
	for _, k := range *n.probed.Load() {
		n.probeLocked(n.at(k))
	}
}

// Close stops the probes and waits for them (the Nodes' part).
func (n *Nodes) Close() { n.part.Stop() }

// nodeLocked returns the node of url, adding it if it is new (and there
// is room: past maxKnown, nil); n.mu is held.
func (n *Nodes) nodeLocked(url string) *node {
	if nd, ok := n.byURL[url]; ok {
		return nd
	}
	old := *n.slots.Load()
	if len(old) >= maxKnown {
		return nil
	}
	nd := &node{url: url, slot: len(old), client: n.t.to(url)}
	n.byURL[url] = nd
	grown := append(slices.Clip(old), nd)
	n.slots.Store(&grown)
	// A node starts up: a fetch from one that is not finds out at once
	// (refused, or 503 while it loads) and falls back, and its first
	// probe follows within milliseconds.
	nd.up.Store(true)
	n.upGauge.WithLabelValues(url).Set(1)
	if n.self != nil {
		n.registerNode(nd)
	}
	return nd
}

// at returns the node in slot k.
func (n *Nodes) at(k int) *node { return (*n.slots.Load())[k] }

// Slot returns the slot of the node at url, adding it if it is new; -1
// for "" (an unauthenticated asker) or past maxKnown.
func (n *Nodes) Slot(url string) int {
	if url == "" {
		return -1
	}
	n.mu.Lock()
	nd := n.nodeLocked(url)
	n.mu.Unlock()
	if nd == nil {
		return -1
	}
	return nd.slot
}

// Self returns this node's slot.
func (n *Nodes) Self() int { return n.self.slot }

// URL returns the base URL of the node in slot k.
func (n *Nodes) URL(k int) string { return n.at(k).url }

// State returns what the node in slot k said of itself at its last probe;
// nil before its first answer (and for this node).
func (n *Nodes) State(k int) *nodestate.State { return n.at(k).state.Load() }

// Unreached reports whether the node in slot k got no answer at all to
// its last probe: nothing listens at its URL, or it did not answer in
// time — a node not running, as opposed to one that answers that it is
// not ready yet.
func (n *Nodes) Unreached(k int) bool { return k != n.self.slot && n.at(k).unreached.Load() }

// Down returns the URLs of the nodes this node probes and does not see
// up — down, or not answered ready to a probe yet — sorted (nodestate.State.Down).
func (n *Nodes) Down() []string {
	var out []string
	for _, k := range *n.probed.Load() {
		if nd := n.at(k); !nd.up.Load() || nd.state.Load() == nil {
			out = append(out, nd.url)
		}
	}
	slices.Sort(out)
	return out
}

// Answered returns when the node in slot k last answered this node
// (zero if never); now for this node. A node a probe interval or two
// late is not answering now: a read that fails over after a timeout does
// not wait on it as well (route.Router.ReadRemote). What the node asked
// this one (Heard) does not count: across a one-way cut it asks and
// cannot be reached.
func (n *Nodes) Answered(k int) time.Time {
	if k == n.self.slot {
		return time.Now()
	}
	if t := n.at(k).answered.Load(); t > 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// IsUp reports whether the node at url is up, as this node last learnt.
func (n *Nodes) IsUp(url string) bool {
	n.mu.Lock()
	nd := n.byURL[url]
	n.mu.Unlock()
	return nd != nil && (nd == n.self || nd.up.Load())
}

// Up reports whether the node in slot k is up, as this node last learnt.
func (n *Nodes) Up(k int) bool { return k == n.self.slot || n.at(k).up.Load() }

// setUp records node nd's liveness and tells the watcher if it changed.
func (n *Nodes) setUp(nd *node, up bool, why string) bool {
	was := nd.up.Swap(up)
	v := 0.0
	if up {
		v = 1
	}
	n.upGauge.WithLabelValues(nd.url).Set(v)
	if was == up || nd == n.self {
		return false
	}
	ev := n.log.Warn()
	if up {
		ev = n.log.Info()
	}
	ev.Str("peer", nd.url).Bool("up", up).Str("why", why).Msg("peer liveness changed")
	return true
}

// changed tells the watcher, if any, what was learnt of nd.
func (n *Nodes) changed(nd *node, prev, st *nodestate.State) {
	n.mu.Lock()
	w := n.watcher
	n.mu.Unlock()
	if w != nil {
		w.Changed(nd.slot, prev, st)
	}
}

// Heard records that node k, authenticated (peercred.Verifier), asked
// this node for something: it is serving, so it is up, whatever its last
// probe said — unless a fetch from it failed since it was last taken
// back (see markDown). Such a node may reach this one and not be reached
// by it (an asymmetric cut), or answer its probes and not its fetches (a
// gray failure): only its data path answering takes it back
// (probeLoop's canary). Nor is being asked an answer (Answered).
func (n *Nodes) Heard(k int) {
	if k < 0 || k == n.self.slot || k >= len(*n.slots.Load()) {
		return
	}
	nd := n.at(k)
	nd.heard.Store(time.Now().UnixNano())
	if !nd.up.Load() && !isHeld(nd) && nd.fails.Load() == 0 {
		if n.back != nil {
			// Told in the background: the asker waits on its request.
			n.part.Go(func(ctx context.Context) { n.back(ctx, nd.url) })
		}
		if n.setUp(nd, true, "it asked this node for something") {
			n.changed(nd, nil, nil)
		}
	}
}

// Hold-down after failed fetches: a node is not taken back on a probe's
// word for Config.Hold (DefaultHold) after its first failure in a row,
// doubling per failure up to holdMax.
const (
	DefaultHold = 2 * time.Second
	holdMax     = time.Minute
)

// markDown records a failed fetch from node nd. The prober brings it
// back once it answers ready and the hold-down has passed.
func (n *Nodes) markDown(nd *node) {
	if nd == n.self {
		return
	}
	if !isHeld(nd) {
		// Fetches that fail together (a batch's, or the ranks' of one
		// step) count once: the hold grows with failures after a node
		// was taken back, not with how many requests were in flight.
		f := min(nd.fails.Add(1), 6)
		hold := min(n.hold<<(f-1), holdMax)
		nd.held.Store(time.Now().Add(hold).UnixNano())
	}
	if n.setUp(nd, false, "a request to it failed or timed out") {
		n.changed(nd, nil, nil)
	}
}

// renewHold holds node nd down again after its data path failed a
// canary, as after a failed fetch.
func (n *Nodes) renewHold(nd *node) {
	f := min(nd.fails.Add(1), 6)
	nd.held.Store(time.Now().Add(min(n.hold<<(f-1), holdMax)).UnixNano())
}

// isHeld reports whether node nd is in its hold-down.
func isHeld(nd *node) bool { return time.Now().UnixNano() < nd.held.Load() }

// Fetch asks node k for samples and checks them. A failure is classified
// (see the package doc): ErrDown holds the node down; ErrRefused and
// ErrVersion do not.
func (n *Nodes) Fetch(ctx context.Context, k int, req Request) (Reply, error) {
	nd := n.at(k)
	rep, err := nd.client.Samples(ctx, req)
	switch {
	case err == nil:
		nd.fails.Store(0)
		nd.answered.Store(time.Now().UnixNano())
		for _, d := range rep.Data {
			nd.fetched.Add(int64(len(d)))
		}
	case errors.Is(err, errGaveUp):
		// The asker gave up (its request ended before the peer's
		// bound): nothing is known of the peer.
	case errors.Is(err, ErrTimeout):
		nd.timeout.Add(1)
		n.log.Warn().Err(err).Str("peer", nd.url).Int("samples", len(req.IDs)).Msg("a peer did not answer a fetch within --peer-timeout; holding it down and reading elsewhere")
		n.markDown(nd)
	case errors.Is(err, ErrVersion):
		nd.versionMiss.Add(1)
		n.log.Info().Err(err).Str("peer", nd.url).Str("dataset", req.DS.Name).Msg("peer does not hold the index version asked for; reading elsewhere")
	case errors.Is(err, ErrPeerStoreUnreachable):
		// Its state says so too: a warning per batch would say nothing
		// more (it logs its own loss of the store, and its return).
		nd.refused.Add(1)
		n.log.Debug().Err(err).Str("peer", nd.url).Int("samples", len(req.IDs)).Msg("a peer cut off from the store could not serve samples; reading them elsewhere")
	case errors.Is(err, ErrRefused):
		nd.refused.Add(1)
		n.log.Warn().Err(err).Str("peer", nd.url).Int("samples", len(req.IDs)).Msg("a peer could not serve samples; reading them elsewhere")
	default:
		nd.down.Add(1)
		n.log.Warn().Err(err).Str("peer", nd.url).Int("samples", len(req.IDs)).Msg("fetching samples from a peer failed; holding it down and reading them elsewhere")
		n.markDown(nd)
	}
	return rep, err
}

// Answers reports whether node k answers a state probe before ctx ends,
// an answer counting as one (Answered): a read's check of a client's
// word that k is silent (route.WithUnanswered), a node busy serving
// answering its state at once.
func (n *Nodes) Answers(ctx context.Context, k int) bool {
	if k == n.self.slot {
		return true
	}
	nd := n.at(k)
	if _, _, err := nd.client.State(ctx); err != nil {
		return false
	}
	nd.answered.Store(time.Now().UnixNano())
	return true
}

// lateHold is how many fetches in a row a node may lose to hedges before
// it is held down as after a timeout: one late answer is the tail of a
// healthy node's latencies; several in a row, a node that does not
// answer now (cut off, its requests dropped, stalled).
const lateHold = 3

// Hedged records how a fetch from node k, sent at sent, that was hedged
// (package route, internal/cluster/hedge) ended: lost, its samples came
// first from elsewhere and it was cancelled; else it answered. Every
// loss is counted (kind="slow"); the lateHold-th in a row holds the node
// down as a timeout does (markDown), its samples read elsewhere without
// waiting on it until its data path answers again. "In a row" counts
// fetches sent after the loss before them was known: fetches sent
// together (a step's ranks', a burst of load on this machine) that lose
// together count once, as failures that come together do in markDown.
func (n *Nodes) Hedged(k int, sent time.Time, lost bool) {
	if k < 0 || k == n.self.slot || k >= len(*n.slots.Load()) {
		return
	}
	nd := n.at(k)
	if !lost {
		nd.lateRun.Store(0)
		return
	}
	nd.slow.Add(1)
	if sent.UnixNano() <= nd.lostAt.Load() {
		return // sent before the last loss was known
	}
	nd.lostAt.Store(time.Now().UnixNano())
	if nd.lateRun.Add(1) < lateHold || !nd.up.Load() {
		return
	}
	nd.lateRun.Store(0)
	n.log.Warn().Str("peer", nd.url).Int("in_a_row", lateHold).Msg("a peer's fetches kept losing to their hedges; holding it down and reading elsewhere")
	n.markDown(nd)
}

// FetchChunkThrough fills buf with chunk c of ds from the node in slot
// k, read from the store through its cache if its cache does not hold
// it (Client.ChunkThrough): this node cannot reach the store. A node that
// does not answer in time is held down as after a failed fetch.
func (n *Nodes) FetchChunkThrough(ctx context.Context, k int, ds Dataset, c int, buf []byte) error {
	nd := n.at(k)
	err := nd.client.ChunkThrough(ctx, ds, c, buf)
	switch {
	case err == nil:
		nd.answered.Store(time.Now().UnixNano())
	case errors.Is(err, ErrTimeout):
		nd.timeout.Add(1)
		n.log.Warn().Err(err).Str("peer", nd.url).Msg("a peer did not answer a chunk's read through it within --peer-timeout; holding it down")
		n.markDown(nd)
	}
	return err
}

// Served records sample bytes this node served to node k (an
// authenticated asker; -1 for an unauthenticated one).
func (n *Nodes) Served(k int, b int64) {
	if k >= 0 && k < len(*n.slots.Load()) {
		n.at(k).served.Add(b)
	}
}

// Probe makes the nodes at urls (but this one) the ones probed, from
// Start on, and w the watcher told what is learnt of them; those no
// longer named keep their slots and figures. It returns the slots probed,
// sorted.
func (n *Nodes) Probe(urls []string, w nodestate.Watcher) []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.watcher = w
	want := map[*node]bool{}
	for _, u := range urls {
		if nd := n.nodeLocked(u); nd != nil && nd != n.self {
			want[nd] = true
		}
	}
	probed := make([]int, 0, len(want))
	for nd := range want {
		probed = append(probed, nd.slot)
		if n.started {
			n.probeLocked(nd)
		}
	}
	for _, k := range *n.probed.Load() {
		if nd := n.at(k); !want[nd] && nd.stop != nil {
			nd.stop()
			nd.stop = nil
			n.upGauge.DeleteLabelValues(nd.url)
		}
	}
	slices.Sort(probed)
	n.probed.Store(&probed)
	return slices.Clone(probed)
}

// Peers returns the slots of the nodes this node probes: the other
// members, whose feedback an importance seal collects.
func (n *Nodes) Peers() []int { return slices.Clone(*n.probed.Load()) }

// probeLocked starts node nd's probe loop unless it runs; n.mu is held.
func (n *Nodes) probeLocked(nd *node) {
	if nd.stop != nil {
		return
	}
	// The loop's own context, which Probe cancels when the node leaves
	// the nodes probed, ends with the part's too.
	ctx, stop := context.WithCancel(n.part.Context())
	if !n.part.Go(func(context.Context) { n.probeLoop(ctx, nd) }) {
		stop()
		return
	}
	nd.stop = stop
}

// probeLoop probes node nd's state until ctx ends: every probe interval
// while it is up, with back-off from a quarter interval up to 4 intervals
// while it is down. A node that was down is thus seen back within a few
// seconds, and sooner if it asks this node for samples first (Heard).
//
// A refused connection or a not-ready answer marks the node down at once:
// it is gone, or says so. A node that does not know this one as a member
// yet (peercred.ErrNotMember: this node has just joined) changes nothing, and is
// asked again a quarter interval later. A probe that times out does only the third time
// in a row: a node busy serving (or a machine loaded by a test under the
// race detector) answers late, and taking it for dead would make every
// node read its chunks from the store too. Its real failures show in
// fetches, which mark it down themselves. A node held down after a
// failed fetch is taken back only once its data path answers too: a
// sample request for nothing (Client.Canary), so that a node whose probes
// are answered and whose fetches are not (a gray failure) costs one
// timeout, not one per hold-down.
func (n *Nodes) probeLoop(ctx context.Context, nd *node) {
	wait := time.Duration(0)
	slowRun := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		sent := time.Now().UnixNano()
		st, slow, err := nd.client.State(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, peercred.ErrNotMember) {
			// It is up and has not listed this node yet (this node has
			// just joined): nothing is known of it until it answers.
			wait = n.probe / 4
			continue
		}
		if (err != nil || !st.Ready) && nd.heard.Load() > sent {
			// It asked this node for something, serving, after this
			// probe was sent: an answer that it is down or not ready
			// is older than that (on a loaded machine the probe's
			// answer is read late), and taking it for down would have
			// this node read its chunks in its stead while it reads
			// them too. The next probe says what it is now.
			n.log.Debug().Err(err).Bool("ready", err == nil && st.Ready).Str("peer", nd.url).
				Msg("a probe's answer is older than a request heard from the peer since it was sent; not taken")
			slowRun = 0
			wait = n.probe
			continue
		}
		if slow {
			if slowRun++; slowRun < 3 {
				wait = n.probe
				continue
			}
		}
		slowRun = 0
		var prev, now *nodestate.State
		if err == nil {
			now = &st
			prev = nd.state.Swap(now)
			nd.answered.Store(time.Now().UnixNano())
		} else if !slow {
			n.log.Debug().Err(err).Str("peer", nd.url).Msg("probe failed")
		}
		nd.unreached.Store(errors.Is(err, errNoAnswer))
		up := err == nil && st.Ready && !isHeld(nd)
		why := "its probe answered ready"
		switch {
		case err != nil:
			why = "its probe failed: " + err.Error()
		case !st.Ready:
			why = "its probe says it is not ready"
		case isHeld(nd):
			why = "held down after a failed request"
		}
		if up && !nd.up.Load() && nd.fails.Load() > 0 {
			// Held down after a failed fetch, and its hold has passed:
			// its probe answering is not enough, for a node may answer
			// probes and not fetches (a gray failure). Its data path
			// must answer too, or the node stays down, held anew.
			if cerr := nd.client.Canary(ctx, st); cerr != nil {
				if ctx.Err() != nil {
					return
				}
				n.log.Warn().Err(cerr).Str("peer", nd.url).Msg("a peer held down answers its probes but not a sample request; keeping it down")
				up, why = false, "it answers its probes but not a sample request (canary)"
				n.renewHold(nd)
			}
		}
		if up && !nd.up.Load() && n.back != nil {
			// Taken back: what this node read of its chunks while it
			// was down is told to it first (Config.Returning).
			n.back(ctx, nd.url)
		}
		if n.setUp(nd, up, why) || err == nil {
			n.changed(nd, prev, now)
		}
		switch {
		case up:
			wait = n.probe
		case wait < n.probe:
			wait = n.probe / 4
		default:
			wait = min(2*wait, 4*n.probe)
		}
	}
}

// Stats returns the figures of each node probed.
func (n *Nodes) Stats() []api.PeerStats {
	var out []api.PeerStats
	for _, k := range *n.probed.Load() {
		nd := n.at(k)
		out = append(out, api.PeerStats{URL: nd.url, Up: n.Up(k), FetchedBytes: nd.fetched.Load(), ServedBytes: nd.served.Load(),
			Failures: nd.down.Load() + nd.timeout.Load() + nd.slow.Load() + nd.refused.Load() + nd.versionMiss.Load()})
	}
	return out
}

// registerNode adds node nd's counters to the registry, read from its
// atomics, which /stats reads too.
func (n *Nodes) registerNode(nd *node) {
	peer := prometheus.Labels{"peer": nd.url}
	counter(n.reg, "brand_peer_bytes_fetched_total", "Sample bytes this node fetched from each peer.", peer, &nd.fetched)
	counter(n.reg, "brand_peer_bytes_served_total", "Sample bytes this node served to each peer (authenticated peers only).", peer, &nd.served)
	failures := "Sample fetches from each peer that failed and were read elsewhere, by kind: down (refused connection, 503 or bad bytes) or timeout (no answer within --peer-timeout), for which the peer is held down; slow (a hedge answered first; three in a row hold the peer down); refused (a store error or 4xx on its side) or version (it does not hold the index version asked for)."
	for kind, v := range map[string]*atomic.Int64{"down": &nd.down, "timeout": &nd.timeout, "slow": &nd.slow, "refused": &nd.refused, "version": &nd.versionMiss} {
		counter(n.reg, "brand_peer_fetch_failures_total", failures, prometheus.Labels{"peer": nd.url, "kind": kind}, v)
	}
}

// counter registers a counter read from v.
func counter(reg prometheus.Registerer, name, help string, labels prometheus.Labels, v *atomic.Int64) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
		func() float64 { return float64(v.Load()) }))
}
