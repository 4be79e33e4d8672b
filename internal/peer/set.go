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

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/tensors"
)

// Lister gives the cluster's members as the platform names them: a
// static list, a watched file, the headless Service's DNS records
// (package membership). List is called every poll interval and must not
// block for long; an error keeps the last list.
type Lister interface {
	List(ctx context.Context) ([]string, error)
}

// Warm runs when this node's member list changes from one membership to
// another, before the node tells its peers it uses the new one: it loads
// the chunks this node gains (cluster.Moves) that the jobs need soon
// (internal/handover), and says what it moved (the chunk and byte fields
// of the change). It calls loading once it knows it has chunks to load,
// before it loads them: from then until it returns, this node tells its
// peers it is warming up for to (State.Warming). A node with nothing to
// load is warm at once. ctx ends when a newer list replaces to, or past
// the flip timeout. An error is logged, and the node moves to the new
// version anyway.
type Warm func(ctx context.Context, from, to *cluster.Membership, loading func()) (api.MembershipChange, error)

// Config configures a Set.
type Config struct {
	// Self is this node's URL as the members are listed (its identity:
	// credentials, ownership and its peers' probes name it by it).
	Self string
	// Members lists the cluster's members; Poll is how often (default:
	// Probe).
	Members Lister
	Poll    time.Duration
	// Warm, if set, runs before this node reports a new membership.
	Warm Warm
	// FlipTimeout bounds a membership change on this node: its warm-up
	// and then its wait for the other members warming up for the new
	// version, after which it reports the new version anyway and says
	// why. Default DefaultFlipTimeout.
	FlipTimeout time.Duration
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

// node is this node's view of another, or of itself. A node is known by
// its URL and keeps its slot — the int the reader and the gateway name it
// by — for the Set's life, through any number of membership changes.
type node struct {
	url  string
	slot int
	up   atomic.Bool // always true for self
	// held is when the node may be seen up again after a failed fetch
	// (unix nanoseconds), and fails how many fetches in a row failed: a
	// node that answers its probes but fails what it is asked must not
	// cost a timeout on every batch.
	held  atomic.Int64
	fails atomic.Int32
	state atomic.Pointer[State] // its last probe's answer

	fetched, served            atomic.Int64 // sample bytes
	down, refused, versionMiss atomic.Int64 // failed fetches, by kind

	stop context.CancelFunc // of its probe loop while probed; under Set.mu
}

// Set is this node's view of its cluster: its membership — the versions
// this node lists, reports and the cluster agrees on (see members.go) —
// and what it last learnt of the other nodes: whether they are up and
// which index versions and membership they use. Liveness decides only
// where a chunk's bytes are read from; the layout of a batch depends on a
// membership version alone, which a request pins or gets the agreed one.
type Set struct {
	self    *node
	client  *http.Client
	cred    Credentials
	timeout time.Duration
	probe   time.Duration
	poll    time.Duration
	held    func(string) []string
	skew    func()
	lastSke atomic.Int64
	log     zerolog.Logger
	lister  Lister
	warm    Warm
	reg     prometheus.Registerer

	mu       sync.Mutex       // guards byURL, slots' growth, views' writes, probe loops, the warm-up and the listed URLs
	byURL    map[string]*node // every node ever known
	started  bool             // Start was called: new members are probed at once
	warmStop context.CancelFunc
	pending  []func() // warm-ups to start with Start
	// sourced is the source's last list, leaving members included; the
	// local version is it without them (relistLocked).
	sourced     *cluster.Membership
	leaving     atomic.Bool // this node was told to leave (Leave)
	flipTimeout time.Duration
	// change is this node's last membership change and its figures;
	// changeAt when its list changed, for the time to agreement.
	change   atomic.Pointer[api.MembershipChange]
	changeAt time.Time
	slots    atomic.Pointer[[]*node]

	view    atomic.Pointer[view]
	history *lru.Cache[string, *cluster.Membership] // versions seen, by version

	home, peer atomic.Int64 // sample bytes of batches served, by source
	ahead      *Ahead
	maxReply   int64
	load       func() tensors.Load
	slack      time.Duration
	// Samples asked of owners with a pipeline: transformed there, or as
	// stored, to be transformed here (balance.go).
	askedTransformed, askedRaw atomic.Int64
	upGauge                    *prometheus.GaugeVec
	metrics                    membershipMetrics

	// ctx ends at Close: the probes, polls, warm-ups and the fetches
	// ahead run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// DefaultFlipTimeout is Config.FlipTimeout when zero.
const DefaultFlipTimeout = 30 * time.Second

// minProbeTimeout is the shortest a probe waits for an answer.
const minProbeTimeout = 2 * time.Second

// maxKnown bounds the nodes a Set keeps (every URL a membership or an
// authenticated peer ever named): a StatefulSet's pods keep their names,
// so a cluster that grows and shrinks reuses them.
const maxKnown = 4096

// NewSet returns the view of a cluster; Start begins listing members and
// probing. Until the first list, the membership is this node alone.
func NewSet(c Config) *Set {
	s := &Set{cred: c.Credentials, timeout: c.Timeout, probe: c.Probe, poll: c.Poll, held: c.Held, skew: c.Skew, log: c.Log,
		lister: c.Members, warm: c.Warm, flipTimeout: c.FlipTimeout, reg: c.Registry, byURL: map[string]*node{}, ahead: NewAhead(c.AheadBytes),
		maxReply: c.MaxReplyBytes, load: c.Load, slack: c.Slack}
	if s.poll <= 0 {
		s.poll = s.probe
	}
	if s.flipTimeout <= 0 {
		s.flipTimeout = DefaultFlipTimeout
	}
	if s.slack == 0 {
		s.slack = BalanceSlack
	}
	if s.maxReply <= 0 {
		s.maxReply = math.MaxInt64
	}
	s.history, _ = lru.New[string, *cluster.Membership](maxHistory)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.client = &http.Client{Transport: &http.Transport{
		Proxy:               nil, // peers are reached directly, never through a proxy
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
	s.slots.Store(&[]*node{})
	s.register(c.Registry)
	s.self = s.nodeOf(c.Self)
	alone, _ := cluster.NewMembership([]string{c.Self})
	s.view.Store(&view{local: alone, reported: alone, agreed: alone, agreedSlots: []int{s.self.slot}})
	if c.Members != nil {
		// The first list, at once: a node starts with its peers known.
		if urls, err := c.Members.List(s.ctx); err == nil {
			s.listed(urls)
		} else {
			s.log.Warn().Err(err).Msg("listing the cluster's members")
		}
	}
	return s
}

// Start lists the members every poll interval and probes every other
// member until Close.
func (s *Set) Start() {
	s.wg.Go(s.pollLoop)
	s.mu.Lock()
	s.started = true
	for _, f := range s.pending {
		s.wg.Go(f)
	}
	s.pending = nil
	s.probeMembers()
	s.mu.Unlock()
}

// Close stops the probes, polls and fetches ahead and waits for them.
func (s *Set) Close() {
	s.cancel()
	s.wg.Wait()
	s.client.CloseIdleConnections()
}

// nodeOf returns the node of url, adding it if it is new (and there is
// room: past maxKnown, nil).
func (s *Set) nodeOf(url string) *node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodeLocked(url)
}

func (s *Set) nodeLocked(url string) *node {
	if n, ok := s.byURL[url]; ok {
		return n
	}
	old := *s.slots.Load()
	if len(old) >= maxKnown {
		return nil
	}
	n := &node{url: url, slot: len(old)}
	s.byURL[url] = n
	grown := append(slices.Clip(old), n)
	s.slots.Store(&grown)
	// A node starts up: a fetch from one that is not finds out at once
	// (refused, or 503 while it loads) and falls back, and its first
	// probe follows within milliseconds.
	n.up.Store(true)
	s.upGauge.WithLabelValues(url).Set(1)
	if s.self != nil {
		s.registerNode(n)
	}
	return n
}

// at returns the node in slot k.
func (s *Set) at(k int) *node { return (*s.slots.Load())[k] }

// Slot returns the slot of the node at url, adding it if it is new; -1
// for "" (an unauthenticated asker) or past maxKnown.
func (s *Set) Slot(url string) int {
	if url == "" {
		return -1
	}
	n := s.nodeOf(url)
	if n == nil {
		return -1
	}
	return n.slot
}

// Self returns this node's slot.
func (s *Set) Self() int { return s.self.slot }

// Nodes returns the member count of the membership the cluster agrees on.
func (s *Set) Nodes() int { return s.view.Load().agreed.Len() }

// URL returns the base URL of the node in slot k.
func (s *Set) URL(k int) string { return s.at(k).url }

// IsUp reports whether the node at url is up, as this node last learnt.
func (s *Set) IsUp(url string) bool {
	s.mu.Lock()
	n := s.byURL[url]
	s.mu.Unlock()
	return n != nil && (n == s.self || n.up.Load())
}

func (s *Set) isUp(k int) bool { return k == s.self.slot || s.at(k).up.Load() }

func (s *Set) setUp(n *node, up bool) {
	was := n.up.Swap(up)
	v := 0.0
	if up {
		v = 1
	}
	s.upGauge.WithLabelValues(n.url).Set(v)
	if was != up && n != s.self {
		ev := s.log.Warn()
		if up {
			ev = s.log.Info()
		}
		ev.Str("peer", n.url).Bool("up", up).Msg("peer liveness changed")
		s.refresh()
	}
}

// Heard records that node k, authenticated (Credentials.Verify), asked
// this node for something: it is serving, so it is up, whatever its last
// probe said, unless a fetch from it failed lately (see markDown).
func (s *Set) Heard(k int) {
	if k < 0 || k == s.self.slot || k >= len(*s.slots.Load()) {
		return
	}
	if n := s.at(k); !n.up.Load() && !s.isHeld(n) {
		s.setUp(n, true)
	}
}

// Hold-down after failed fetches: a node is not taken back on a probe's
// word for holdBase after its first failure in a row, doubling per
// failure up to holdMax.
const (
	holdBase = 2 * time.Second
	holdMax  = time.Minute
)

// markDown records a failed fetch from node n. The prober brings it back
// once it answers ready and the hold-down has passed.
func (s *Set) markDown(n *node) {
	if n == s.self {
		return
	}
	if !s.isHeld(n) {
		// Fetches that fail together (a batch's, or the ranks' of one
		// step) count once: the hold grows with failures after a node
		// was taken back, not with how many requests were in flight.
		f := min(n.fails.Add(1), 6)
		hold := min(holdBase<<(f-1), holdMax)
		n.held.Store(time.Now().Add(hold).UnixNano())
	}
	s.setUp(n, false)
}

// isHeld reports whether node n is in its hold-down.
func (s *Set) isHeld(n *node) bool { return time.Now().UnixNano() < n.held.Load() }

// holds reports whether node n, by its last state, holds version id of
// dataset name. Before its first probe a node is taken to hold every
// version: a request finds out (409) and is read elsewhere.
func (s *Set) holds(n *node, name, id string) bool {
	st := n.state.Load()
	if n == s.self || st == nil {
		return true
	}
	for _, d := range st.Datasets {
		if d.Name == name {
			return slices.Contains(d.Held, id)
		}
	}
	return false
}

// Source returns the slot of the node to read chunk c of ds from: its
// owner under the membership the cluster agrees on if the owner is up,
// holds ds's version, is not warming up for that membership (its old
// owner serves it meanwhile) and skip does not name it; else the first
// such member of the chunk's ranking, this node last (it reads the
// store, so there is always one). Which node reads a chunk follows the live
// membership; a batch's bytes never depend on it.
func (s *Set) Source(ds *catalog.Dataset, c int, skip func(int) bool) int {
	v := s.view.Load()
	usable := func(k int) bool {
		if k == s.self.slot {
			return v.warming != v.agreed.Version()
		}
		n := s.at(k)
		return s.isUp(k) && !skip(k) && s.holds(n, ds.Name, ds.ID()) && !warmingFor(n, v.agreed.Version())
	}
	if own := v.agreedSlots[ds.Owners(v.agreed)[c]]; usable(own) {
		return own
	}
	for _, p := range cluster.Ranking(make([]int, 0, v.agreed.Len()), ds.ClusterKey(), c, v.agreed.IDs()) {
		if k := v.agreedSlots[p]; usable(k) {
			return k
		}
	}
	return s.self.slot
}

// Local reports whether this node is chunk c of ds's source now: whether
// it reads the chunk into its own cache.
func (s *Set) Local(ds *catalog.Dataset, c int) bool {
	return s.Source(ds, c, func(int) bool { return false }) == s.self.slot
}

// Fetch asks node k for samples and checks them. A failure is classified
// (see the package doc): ErrDown holds the node down; ErrRefused and
// ErrVersion do not.
func (s *Set) Fetch(ctx context.Context, k int, req Request) (Reply, error) {
	n := s.at(k)
	rep, err := s.fetch(ctx, n, req)
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
		s.log.Info().Err(err).Str("peer", n.url).Str("dataset", req.DS.Name).Msg("peer does not hold the index version asked for; reading elsewhere")
	case errors.Is(err, ErrRefused):
		n.refused.Add(1)
		s.log.Warn().Err(err).Str("peer", n.url).Int("samples", len(req.IDs)).Msg("a peer could not serve samples; reading them elsewhere")
	default:
		n.down.Add(1)
		s.log.Warn().Err(err).Str("peer", n.url).Int("samples", len(req.IDs)).Msg("fetching samples from a peer failed; holding it down and reading them elsewhere")
		s.markDown(n)
	}
	return rep, err
}

// Served records sample bytes this node served to node k (an
// authenticated asker; -1 for an unauthenticated one).
func (s *Set) Served(k int, n int64) {
	if k >= 0 && k < len(*s.slots.Load()) {
		s.at(k).served.Add(n)
	}
}

// Delivered records the sample bytes of a batch served, by where they
// came from: this node's cache (home) or peers.
func (s *Set) Delivered(home, peer int64) {
	s.home.Add(home)
	s.peer.Add(peer)
}

// probeLoop probes node n's state until ctx ends: every probe interval
// while it is up, with back-off from a quarter interval up to 4 intervals
// while it is down. A node that was down is thus seen back within a few
// seconds, and sooner if it asks this node for samples first (Heard).
//
// A refused connection or a not-ready answer marks the node down at once:
// it is gone, or says so. A probe that times out does only the third time
// in a row: a node busy serving (or a machine loaded by a test under the
// race detector) answers late, and taking it for dead would make every
// node read its chunks from the store too. Its real failures show in
// fetches, which mark it down themselves.
func (s *Set) probeLoop(ctx context.Context, n *node) {
	wait := time.Duration(0)
	slowRun := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		st, slow, err := s.probeState(ctx, n)
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
			if prev := n.state.Swap(&st); (prev != nil && prev.Leaving) != st.Leaving {
				s.relist() // it leaves, or is back
			}
			s.learn(&st)
			s.checkSkew(&st)
		} else if !slow {
			s.log.Debug().Err(err).Str("peer", n.url).Msg("probe failed")
		}
		up := err == nil && st.Ready && !s.isHeld(n)
		s.setUp(n, up)
		if err == nil {
			s.refresh() // its membership may have changed
		}
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

// live calls f with every other node this node counts in agreements: the
// members it probes that are up and have told their state.
func (s *Set) live(f func(n *node, st *State)) {
	v := s.view.Load()
	for _, k := range v.probed {
		n := s.at(k)
		if n == s.self || !n.up.Load() {
			continue
		}
		if st := n.state.Load(); st != nil {
			f(n, st)
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
	s.live(func(_ *node, st *State) {
		for _, d := range st.Datasets {
			if d.Name == name {
				add(append([]string{d.Current}, slices.DeleteFunc(slices.Clone(d.Held), func(id string) bool { return id == d.Current })...))
			}
		}
	})
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

// Holders returns the URLs of the live members that hold version id of a
// dataset, this one first if it does: where a client may read it.
func (s *Set) Holders(name, id string, self bool) []string {
	var out []string
	if self {
		out = append(out, s.self.url)
	}
	s.live(func(n *node, _ *State) {
		if s.holds(n, name, id) {
			out = append(out, n.url)
		}
	})
	return out
}

// View is the body of GET /cluster: the members of the membership the
// cluster agrees on (this node's position among them, or after them if it
// is not one), their liveness, index versions and the membership each
// reports, as this node last learnt them; the versions the cluster agrees
// on; and with world > 0 each rank's home among the members.
func (s *Set) View(world int, datasets []string) api.Cluster {
	v := s.view.Load()
	c := api.Cluster{Agreed: map[string]string{}, Members: v.agreed.Version(), Local: v.local.Version(), Reported: v.reported.Version(),
		Warming: v.warming, Leaving: s.leaving.Load(), LastChange: s.change.Load()}
	slotsShown := slices.Clone(v.agreedSlots) // the members' slots, then this node's if it is not one
	c.Self = slices.Index(slotsShown, s.self.slot)
	if c.Self < 0 {
		c.Self = len(slotsShown)
		slotsShown = append(slotsShown, s.self.slot)
	}
	for _, k := range slotsShown {
		n := s.at(k)
		cn := api.ClusterNode{URL: n.url, Up: s.isUp(k)}
		switch st := n.state.Load(); {
		case n == s.self:
			cn.Indexes = map[string]string{}
			for _, d := range datasets {
				cn.Indexes[d] = s.current(d)
			}
			cn.Members, cn.Warming, cn.Leaving = v.reported.Version(), v.warming, s.leaving.Load()
		case st != nil:
			cn.Indexes = map[string]string{}
			for _, d := range st.Datasets {
				cn.Indexes[d.Name] = d.Current
			}
			cn.Members, cn.Warming, cn.Leaving = st.Members, st.Warming, st.Leaving
		}
		c.Nodes = append(c.Nodes, cn)
	}
	for _, d := range datasets {
		c.Agreed[d] = s.Agreed(d)
	}
	if world > 0 {
		c.Homes = make([]int, world)
		for r := range c.Homes {
			c.Homes[r] = cluster.Home(r, world, v.agreed.Len())
		}
	}
	return c
}

// Stats is the cluster's part of /stats.
func (s *Set) Stats(datasets []string) *api.ClusterStats {
	cs := &api.ClusterStats{Cluster: s.View(0, datasets)}
	for _, k := range s.view.Load().probed {
		n := s.at(k)
		cs.Peers = append(cs.Peers, api.PeerStats{URL: n.url, Up: s.isUp(k), FetchedBytes: n.fetched.Load(), ServedBytes: n.served.Load(),
			Failures: n.down.Load() + n.refused.Load() + n.versionMiss.Load()})
	}
	cs.HomeBytes, cs.PeerBytes = s.home.Load(), s.peer.Load()
	cs.Locality = 1
	if t := cs.HomeBytes + cs.PeerBytes; t > 0 {
		cs.Locality = float64(cs.HomeBytes) / float64(t)
	}
	return cs
}

// register adds the set's own collectors to reg; a node's are added when
// it is first known (registerNode).
func (s *Set) register(reg prometheus.Registerer) {
	s.upGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_peer_up",
		Help: "1 if the peer answered its last state probe ready (this node counts itself up)."}, []string{"peer"})
	reg.MustRegister(s.upGauge)
	locality := "Sample bytes of batches served, by where they came from: home (this node's cache) or peer."
	counter(reg, "brand_locality_bytes_total", locality, prometheus.Labels{"source": "home"}, &s.home)
	counter(reg, "brand_locality_bytes_total", locality, prometheus.Labels{"source": "peer"}, &s.peer)
	counter(reg, "brand_peer_samples_fetched_ahead_total", "Samples of batches that had been fetched from peers ahead of the request.", nil, &s.ahead.used)
	asked := "Samples of jobs with a pipeline asked of the nodes that read them, by where they were to be transformed: at that node (owner), or here (self: the owner's pipeline differs, or its transform queue is longer than this node's)."
	counter(reg, "brand_peer_transform_samples_total", asked, prometheus.Labels{"where": "owner"}, &s.askedTransformed)
	counter(reg, "brand_peer_transform_samples_total", asked, prometheus.Labels{"where": "self"}, &s.askedRaw)
	s.metrics = newMembershipMetrics(reg)
}

// registerNode adds node n's counters to the registry, read from its
// atomics, which /stats reads too.
func (s *Set) registerNode(n *node) {
	peer := prometheus.Labels{"peer": n.url}
	counter(s.reg, "brand_peer_bytes_fetched_total", "Sample bytes this node fetched from each peer.", peer, &n.fetched)
	counter(s.reg, "brand_peer_bytes_served_total", "Sample bytes this node served to each peer (authenticated peers only).", peer, &n.served)
	failures := "Sample fetches from each peer that failed and were read elsewhere, by kind: down (no answer, 503 or bad bytes: the peer is held down), refused (a store error or 4xx on its side) or version (it does not hold the index version asked for)."
	for kind, v := range map[string]*atomic.Int64{"down": &n.down, "refused": &n.refused, "version": &n.versionMiss} {
		counter(s.reg, "brand_peer_fetch_failures_total", failures, prometheus.Labels{"peer": n.url, "kind": kind}, v)
	}
}

func counter(reg prometheus.Registerer, name, help string, labels prometheus.Labels, v *atomic.Int64) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
		func() float64 { return float64(v.Load()) }))
}
