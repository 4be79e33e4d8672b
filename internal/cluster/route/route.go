// Package route decides which node a chunk's bytes are read from, and
// reads a batch's samples there: a chunk's owner under the membership
// the cluster agrees on when it can serve them, else the next node of the
// chunk's ranking, this node last (it reads the store, so there is always
// one). Which node reads a chunk follows the live membership; a batch's
// bytes never depend on it.
//
// The Router is told the agreed membership by package membership
// (Follow) and asks package peer whether each node is up and what it
// last said of itself. Its remote reads fail over: a node whose fetch
// fails is skipped and its samples asked of the next node, so a peer's
// loss costs time, never the read; a node that has not answered within
// the hedge deadline, learnt from the answers observed
// (internal/cluster/hedge), is hedged: its samples asked of the next
// nodes too, within a budget of hedges a second, so that a node that
// stops answering costs a step about that deadline, not the peer
// timeout (remote.go). It fetches the next batch's remote
// samples before its request (FetchNext; a premade.Store holds them), and decides, by
// the nodes' measured transform load, where a job's samples are
// transformed (offload.go).
//
// A single gateway's router is Solo: every chunk is read here.
package route

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/premade"
	"github.com/brandgw/brand/internal/cluster/hedge"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/stopper"
)

// Peers is what routing needs of the other nodes (transport.Nodes): whether
// one is up, what it last said of itself (the index versions it holds,
// the membership it warms up for, its pipelines and load), and a fetch of
// samples from it.
type Peers interface {
	Up(k int) bool
	State(k int) *nodestate.State
	Fetch(ctx context.Context, k int, req transport.Request) (transport.Reply, error)
	// Answered is when node k last answered this node (zero if never);
	// what it asked this node does not count (a one-way cut).
	Answered(k int) time.Time
	// Answers reports whether node k answers a probe before ctx ends.
	Answers(ctx context.Context, k int) bool
	// Hedged tells how a fetch from node k, sent at sent, ended: lost (a
	// hedge answered first), else it answered. A node that keeps losing
	// is held down as after a timeout.
	Hedged(k int, sent time.Time, lost bool)
}

// Config configures a Router.
type Config struct {
	// Self is this node's URL as the members are listed, SelfSlot its
	// slot among the Peers.
	Self     string
	SelfSlot int
	Peers    Peers
	// Timeout bounds the fetches of a next batch's samples.
	Timeout time.Duration
	// Hedge is when a fetch from a node that has not answered is also
	// asked of the next nodes, and how many such hedges a second
	// (remote.go; zero fields take hedge's defaults).
	Hedge hedge.Config
	// Fresh is how recently a node must have answered this one to be
	// asked for samples where waiting on it would follow a timeout (a
	// read failing over) or is not worth it (a next batch's fetch): a
	// couple of probe intervals (2 s if 0).
	Fresh time.Duration
	// NextBytes bounds the next batches' samples held for their reads;
	// NextBudget, if set, is where they take those bytes instead (the
	// node's memory manager: memory.Account.Within), each batch's only if
	// they are free now.
	NextBytes  int64
	NextBudget premade.Budget
	// Group runs the fetches of next batches and ends them when it stops
	// (nil: a part of the Router's own, stopped by Close).
	Group *stopper.Group
	// Load is this node's transform stage's load (tensorize.Stage.Load),
	// which it compares with an owner's before asking it for tensors
	// (offload.go); nil: always ask the owner. Slack is the rule's
	// margin: 0 is OffloadSlack, negative never moves the work.
	Load  func() nodestate.Load
	Slack time.Duration
	// StoreDown reports whether this node cannot reach a dataset's store
	// now (storepath.Watch; nil: it always can), and Holds whether its
	// cache holds a chunk: cut off from the store, this node reads the
	// chunks it would read itself and does not hold through the next
	// nodes of their rankings, as its peers, refused, do.
	StoreDown func(ds *catalog.Dataset) bool
	Holds     func(ds *catalog.Dataset, c int) bool
	Registry  prometheus.Registerer
	Log       zerolog.Logger
}

// routing is the membership a Router routes by (Follow).
type routing struct {
	agreed  *cluster.Membership
	slots   []int  // the agreed members' slots, in its order
	warming string // the version this node warms up for, "" none
}

// Router picks the node each chunk's bytes come from and reads them
// there.
type Router struct {
	self    int
	peers   Peers
	timeout time.Duration
	fresh   time.Duration // Config.Fresh
	load    func() nodestate.Load
	slack   time.Duration
	// storeDown and holds: Config.StoreDown and Config.Holds.
	storeDown func(ds *catalog.Dataset) bool
	holds     func(ds *catalog.Dataset, c int) bool
	log       zerolog.Logger
	view      atomic.Pointer[routing]
	next      *premade.Store[[][][]byte] // next batches' samples, per part
	hedge     *hedge.Policy
	suspects  *suspicion // peers late lately (suspect.go)
	part      *stopper.Group

	// Figures: sample bytes of batches served by where they came from,
	// samples found fetched with the batch before, and samples asked of owners with a
	// pipeline, transformed there or as stored, to be transformed here.
	home, peer, nextUsed       atomic.Int64
	askedTransformed, askedRaw atomic.Int64
}

// maxNextBatches bounds the next batches held whatever their size.
const maxNextBatches = 256

// New returns a router of a cluster of this node alone, until it is told
// the agreed membership (Follow).
func New(c Config) *Router {
	budget := c.NextBudget
	if budget == nil {
		budget = premade.NewBytes(c.NextBytes)
	}
	r := &Router{self: c.SelfSlot, peers: c.Peers, timeout: c.Timeout, fresh: cmp.Or(c.Fresh, 2*time.Second), load: c.Load, slack: c.Slack, log: c.Log,
		storeDown: c.StoreDown, holds: c.Holds, hedge: hedge.New(c.Hedge), suspects: newSuspicion(c.Hedge.Now),
		next: premade.New(premade.Config[[][][]byte]{Entries: maxNextBatches, Budget: budget}),
		part: stopper.Own(c.Group, "route: next batches' samples")}
	r.part.OnStop(r.next.Close)
	if r.slack == 0 {
		r.slack = OffloadSlack
	}
	alone, _ := cluster.NewMembership([]string{c.Self})
	r.view.Store(&routing{agreed: alone, slots: []int{c.SelfSlot}})
	locality := "Sample bytes of batches served, by where they came from: home (this node's cache) or peer."
	counter(c.Registry, "brand_locality_bytes_total", locality, prometheus.Labels{"source": "home"}, &r.home)
	counter(c.Registry, "brand_locality_bytes_total", locality, prometheus.Labels{"source": "peer"}, &r.peer)
	counter(c.Registry, "brand_peer_samples_fetched_ahead_total", "Samples of batches that had been fetched from peers ahead of the request.", nil, &r.nextUsed)
	hedges := "Fetches from peers hedged: started (a fetch not answered within the learnt deadline also asked of the next nodes), won (the hedge answered first and the fetch was cancelled), refused (no hedge left in the budget, --peer-hedge-rate: the fetch was waited for)."
	for outcome, v := range r.hedge.Counters() {
		counter(c.Registry, "brand_peer_hedges_total", hedges, prometheus.Labels{"outcome": outcome}, v)
	}
	asked := "Samples of jobs with a pipeline asked of the nodes that read them, by where they were to be transformed: at that node (owner), or here (self: the owner's pipeline differs, or its transform queue is longer than this node's)."
	counter(c.Registry, "brand_peer_transform_samples_total", asked, prometheus.Labels{"where": "owner"}, &r.askedTransformed)
	counter(c.Registry, "brand_peer_transform_samples_total", asked, prometheus.Labels{"where": "self"}, &r.askedRaw)
	return r
}

func counter(reg prometheus.Registerer, name, help string, labels prometheus.Labels, v *atomic.Int64) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
		func() float64 { return float64(v.Load()) }))
}

// Close stops the fetches of next batches and waits for them (the
// Router's part).
func (r *Router) Close() { r.part.Stop() }

// Follow makes agreed, whose members are in slots, the membership chunks
// are routed by, and warming the version this node warms up for ("" none)
// (membership.Follower).
func (r *Router) Follow(agreed *cluster.Membership, slots []int, warming string) {
	r.view.Store(&routing{agreed: agreed, slots: slots, warming: warming})
}

// Nodes returns the member count of the membership the cluster agrees on.
func (r *Router) Nodes() int { return r.view.Load().agreed.Len() }

// Source returns the slot of the node to read chunk c of ds from: its
// owner under the membership the cluster agrees on if the owner is up,
// holds ds's version, is not warming up for that membership (its old
// owner serves it meanwhile) and skip does not name it; else the first
// such member of the chunk's ranking that has answered this node lately
// (Config.Fresh), this node last. This node, cut off from ds's store, is
// such a member only for a chunk its cache holds.
//
// The owner is asked whenever it is up: a node waits at most a fetch's
// timeout on it. A node that stands in for an owner must have answered
// lately too: a node cut off from several peers finds each out by a
// timeout of its own, and would otherwise wait on one after the other —
// a peer's probes answer every probe interval, so one that has not for a
// couple of them is not answering now, whatever its last word.
func (r *Router) Source(ds *catalog.Dataset, c int, skip func(int) bool) int {
	v := r.view.Load()
	usable := func(k int) bool {
		if k == r.self {
			return v.warming != v.agreed.Version() && !r.cutOff(ds, c)
		}
		st := r.peers.State(k)
		warming := st != nil && st.Warming == v.agreed.Version()
		return r.peers.Up(k) && !skip(k) && st.Holds(ds.Name, ds.ID()) && !warming
	}
	if own := v.slots[ds.Owners(v.agreed)[c]]; usable(own) {
		return own
	}
	for _, p := range cluster.Ranking(make([]int, 0, v.agreed.Len()), ds.ClusterKey(), c, v.agreed.IDs()) {
		if k := v.slots[p]; usable(k) && !r.stale(k) {
			return k
		}
	}
	return r.self
}

// stale reports whether node k has not answered this one within the
// Router's freshness bound (never this node).
func (r *Router) stale(k int) bool {
	return k != r.self && time.Since(r.peers.Answered(k)) > r.fresh
}

// cutOff reports whether this node cannot read chunk c of ds now: it
// cannot reach ds's store, its cache does not hold the chunk, and no
// peer can read it for it (Through).
func (r *Router) cutOff(ds *catalog.Dataset, c int) bool {
	return r.storeDown != nil && r.storeDown(ds) && (r.holds == nil || !r.holds(ds, c)) && r.Through(ds, c) < 0
}

// Through returns the slot of the node that reads chunk c of ds from the
// store for this node while this node cannot reach the store
// (storepath.Through), -1 if none can: the first other member of the
// chunk's ranking under the agreed membership that is up, holds ds's
// version, has answered lately and does not say it cannot reach the
// store itself.
func (r *Router) Through(ds *catalog.Dataset, c int) int {
	v := r.view.Load()
	for _, p := range cluster.Ranking(make([]int, 0, v.agreed.Len()), ds.ClusterKey(), c, v.agreed.IDs()) {
		k := v.slots[p]
		if k == r.self || !r.peers.Up(k) || r.stale(k) {
			continue
		}
		if st := r.peers.State(k); st.Holds(ds.Name, ds.ID()) && (st == nil || !st.StoreUnreachable) {
			return k
		}
	}
	return -1
}

// Owns reports whether this node owns chunk c of ds under the membership
// the cluster agrees on, whatever the other nodes' liveness: a chunk it
// is the source of (Local) and does not own, it stands in for.
func (r *Router) Owns(ds *catalog.Dataset, c int) bool {
	v := r.view.Load()
	return v.slots[ds.Owners(v.agreed)[c]] == r.self
}

// Owner returns the slot of the node that owns chunk c of ds under the
// membership the cluster agrees on, whatever its liveness.
func (r *Router) Owner(ds *catalog.Dataset, c int) int {
	v := r.view.Load()
	return v.slots[ds.Owners(v.agreed)[c]]
}

// Local reports whether this node is chunk c of ds's source now: whether
// it reads the chunk into its own cache.
func (r *Router) Local(ds *catalog.Dataset, c int) bool {
	return r.Source(ds, c, func(int) bool { return false }) == r.self
}

// Delivered records the sample bytes of a batch served, by where they
// came from: this node's cache (home) or peers.
func (r *Router) Delivered(home, peer int64) {
	r.home.Add(home)
	r.peer.Add(peer)
}

// Locality returns the sample bytes of the batches served, by where they
// came from.
func (r *Router) Locality() (home, peer int64) { return r.home.Load(), r.peer.Load() }
