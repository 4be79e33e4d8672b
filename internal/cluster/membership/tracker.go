package membership

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/stopper"
)

// A node's membership moves through three versions:
//
//   - local: what its Lister said last (a static list, a file, DNS),
//     without the members whose state says they leave;
//   - reported: what it tells its peers in its state — local, once the
//     warm-up for it (Config.Warm) has run;
//   - agreed: the version most live nodes report (this one included),
//     each counted once warm for it (warm), the smallest on a tie, as the
//     index versions are agreed. Requests that pin no membership are
//     laid out under it, and it decides which node reads each chunk
//     (Config.Follower).
//
// Every version seen — listed, reported by a peer, or fetched from one
// for a request that pinned it — is kept in a bounded history, so that a
// node lays out a batch under the version a job pinned an epoch ago.

// Lister gives the cluster's members as the platform names them: a
// static list, a watched file, the headless Service's DNS records
// (Static, File, DNS). List is called every poll interval and must not
// block for long; an error keeps the last list.
type Lister interface {
	List(ctx context.Context) ([]string, error)
}

// Warmer runs when this node's member list changes from one membership
// to another, before the node tells its peers it uses the new one: it
// loads the chunks this node gains (cluster.Moves) that the jobs need
// soon (internal/cluster/handover), and says what it moved (the chunk and byte
// fields of the change). It calls loading once it knows it has chunks to
// load, before it loads them: from then until it returns, this node tells
// its peers it is warming up for to (State.Warming). A node with nothing
// to load is warm at once. ctx ends when a newer list replaces to, or
// past the flip timeout. An error is logged, and the node moves to the
// new version anyway.
type Warmer interface {
	Warm(ctx context.Context, from, to *cluster.Membership, loading func()) (api.MembershipChange, error)
}

// Peers is what the membership needs of the other nodes (transport.Nodes and its Asks):
// each one's slot, URL, liveness (and whether its last probe got any
// answer) and last state, the nodes to probe — the members of every
// version this node holds now — and a question for a version's member
// list.
type Peers interface {
	Slot(url string) int
	URL(k int) string
	Up(k int) bool
	Unreached(k int) bool
	State(k int) *nodestate.State
	Probe(urls []string, w nodestate.Watcher) []int
	AskMembers(ctx context.Context, k int, version string) (*cluster.Membership, error)
}

// Follower is told the membership the cluster agrees on, its members'
// slots in its order, and the version this node warms up for ("" none),
// each time one of them changes: which node reads a chunk follows them
// (route.Router). It must not block.
type Follower interface {
	Follow(agreed *cluster.Membership, slots []int, warming string)
}

// ListFollower is a Follower also told the member list this node reads
// from its source (leaving members left out) and whether it is listed
// by the cluster, each time one of them changes, before the cluster
// agrees on the list: the store budget's split (gateway/pace.go) falls
// as soon as a node lists a joiner, and a joiner takes its part only
// once the members have. It must not block.
type ListFollower interface {
	Follower
	FollowList(listed *cluster.Membership, listedByAll bool)
}

// Config configures a Tracker.
type Config struct {
	// Self is this node's URL as the members are listed; SelfSlot its
	// slot among the Peers.
	Self     string
	SelfSlot int
	// Members lists the cluster's members; Poll is how often (default:
	// Probe, the peers' probe interval, by which the waits of a change
	// are paced).
	Members     Lister
	Poll, Probe time.Duration
	Peers       Peers
	// Warm, if set, runs before this node reports a new membership.
	Warm Warmer
	// Follower, if set, is told the agreed membership.
	Follower Follower
	// FlipTimeout bounds a membership change on this node: its warm-up
	// and then its wait for the other members warming up for the new
	// version, after which it reports the new version anyway and says
	// why. Default DefaultFlipTimeout.
	FlipTimeout time.Duration
	// Held returns the index versions this node holds of a dataset, the
	// one it serves now first (catalog.Catalog.HeldIDs): counted with the
	// peers' in the cluster's agreement (Agreed).
	Held func(dataset string) []string
	// Skew is told when a peer serves another version of a dataset than
	// this node does: the store may hold a new index this node has not
	// polled yet. It is called at most once a second and must not block.
	Skew func()
	// Datasets returns the datasets served (catalog.Catalog.All; it fails
	// until they are loaded), in whose stores this node keeps the lists
	// of the membership versions it reports, and finds those no node
	// remembers (kept.go); nil: none kept.
	Datasets func() ([]*catalog.Dataset, error)
	// Group runs the polls, the warm-ups and the writes of versions to
	// the stores, and ends them when it stops (nil: a part of the
	// Tracker's own, stopped by Close).
	Group    *stopper.Group
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// DefaultFlipTimeout is Config.FlipTimeout when zero.
const DefaultFlipTimeout = 30 * time.Second

// maxHistory bounds the membership versions a node keeps: each is its
// member list, and a job pins one for an epoch.
const maxHistory = 64

// ErrUnknownMembers means a request pinned a membership version that no
// node this one can reach knows any more: the gateway answers 409 naming
// the current one.
var ErrUnknownMembers = errkind.Named(errkind.Conflict, "members_version", "unknown membership version")

// UnknownMembersError is ErrUnknownMembers with the version asked for and
// the one the cluster agrees on now.
type UnknownMembersError struct{ Version, Current string }

func (e *UnknownMembersError) Error() string {
	return fmt.Sprintf("%v %s: no node known to this one holds its member list any more; the cluster's membership is %s (pin members=%s, or none)",
		ErrUnknownMembers, e.Version, e.Current, e.Current)
}

func (e *UnknownMembersError) Unwrap() error { return ErrUnknownMembers }

// view is one state of a node's membership: the three versions, the
// slots of the agreed members by position, and the other nodes probed
// (the members of all three, and of the source's list).
type view struct {
	local, reported, agreed *cluster.Membership
	warming                 string // the version this node warms up for, "" if none
	warmed                  string // the version this node has warmed up for and waits to report, "" if none
	joining                 bool   // started, and yet to learn whether it joins a running cluster
	agreedSlots             []int
	probed                  []int
}

// Tracker is this node's part in its cluster's membership: the versions
// it lists, reports and agrees on with its peers, a change from one to
// another (the warm-up, the wait for the other gainers, the flip),
// leaving, and the versions it keeps for the requests that pin them.
type Tracker struct {
	self        string
	selfSlot    int
	peers       Peers
	lister      Lister
	poll, probe time.Duration
	warm        Warmer
	follower    Follower
	flipTimeout time.Duration
	held        func(string) []string
	skew        func()
	kept        *kept        // nil: lists are not kept
	lastSkew    atomic.Int64 // when Skew was last told (unix nanoseconds)
	log         zerolog.Logger
	metrics     metrics

	mu       sync.Mutex // guards the views' writes, the warm-up and the source's list
	started  bool       // Start was called: warm-ups run at once
	warmStop context.CancelFunc
	pending  []func() // warm-ups to start with Start
	// sourced is the source's last list, leaving members included; the
	// local version is it without them (relistLocked).
	sourced *cluster.Membership
	leaving atomic.Bool // this node was told to leave (Leave)
	// settled is set once Settled has said yes; settling is when it was
	// first asked (unix nanoseconds), from which a member that stays
	// away holds it back at most the flip timeout.
	settled  atomic.Bool
	settling atomic.Int64
	// change is this node's last membership change and its figures;
	// changeAt when its list changed, for the time to agreement.
	change   atomic.Pointer[api.MembershipChange]
	changeAt time.Time
	view     atomic.Pointer[view]
	// listedByAll is what the list follower was last told.
	listedByAll bool
	history     *lru.Cache[string, *cluster.Membership] // versions seen, by version

	// part runs the polls and warm-ups; ctx is its context.
	part *stopper.Group
	ctx  context.Context
}

// New returns this node's membership; Start begins listing members every
// poll interval. The first list is read at once: a node starts with its
// peers known. Until then, the membership is this node alone.
func New(c Config) *Tracker {
	m := &Tracker{self: c.Self, selfSlot: c.SelfSlot, peers: c.Peers, lister: c.Members, poll: c.Poll, probe: c.Probe, warm: c.Warm,
		follower: c.Follower, flipTimeout: c.FlipTimeout, held: c.Held, skew: c.Skew, kept: keptOf(c.Datasets, c.Log), log: c.Log,
		metrics: newMetrics(c.Registry)}
	if m.poll <= 0 {
		m.poll = m.probe
	}
	if m.flipTimeout <= 0 {
		m.flipTimeout = DefaultFlipTimeout
	}
	m.history, _ = lru.New[string, *cluster.Membership](maxHistory)
	m.part = stopper.Own(c.Group, "membership: polls, warm-ups, kept versions")
	m.ctx = m.part.Context()
	alone, _ := cluster.NewMembership([]string{c.Self})
	m.mu.Lock()
	m.storeLocked(view{local: alone, reported: alone, agreed: alone, agreedSlots: []int{m.selfSlot}})
	m.mu.Unlock()
	if c.Members != nil {
		if urls, err := c.Members.List(m.ctx); err == nil {
			m.listed(urls)
		} else {
			m.log.Warn().Err(err).Msg("listing the cluster's members")
		}
	}
	return m
}

// Start lists the members every poll interval, and runs the warm-ups,
// until Close.
func (m *Tracker) Start() {
	m.part.Go(func(context.Context) { m.pollLoop() })
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started = true
	for _, f := range m.pending {
		m.part.Go(func(context.Context) { f() })
	}
	m.pending = nil
}

// Close stops the polls and warm-ups and waits for them.
func (m *Tracker) Close() {
	m.part.Stop()
}

// storeLocked makes v the view, and tells the follower the agreed
// membership and the warm-up when they change; m.mu is held.
func (m *Tracker) storeLocked(v view) {
	old := m.view.Swap(&v)
	if lf, ok := m.follower.(ListFollower); ok {
		if by := m.listedByAllLocked(&v); old == nil || old.local != v.local || by != m.listedByAll {
			m.listedByAll = by
			lf.FollowList(v.local, by)
		}
	}
	if m.follower != nil && (old == nil || old.agreed != v.agreed || old.warming != v.warming || !slices.Equal(old.agreedSlots, v.agreedSlots)) {
		m.follower.Follow(v.agreed, v.agreedSlots, v.warming)
	}
}

// listedByAllLocked reports whether every live member of the agreed
// membership lists this node: it is one of them, or each one's state
// names a membership holding it (the one it reports) or this node's own
// list (the one it warms up for, or waits to report). A node learning
// whether it joins a running cluster is not listed yet. m.mu is held.
func (m *Tracker) listedByAllLocked(v *view) bool {
	if v.joining {
		return false
	}
	if v.agreed.Index(m.self) >= 0 {
		return true
	}
	all := true
	for _, u := range v.agreed.Members() {
		k := m.peers.Slot(u)
		if k < 0 || !m.peers.Up(k) {
			continue // a member down reads nothing
		}
		st := m.peers.State(k)
		if st == nil || !slices.Contains(st.MemberList, m.self) && st.Warming != v.local.Version() && st.Warmed != v.local.Version() {
			all = false
		}
	}
	return all
}

// pollLoop lists the members every poll interval until Close.
func (m *Tracker) pollLoop() {
	if m.lister == nil {
		return
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(m.poll):
		}
		urls, err := m.lister.List(m.ctx)
		if err != nil {
			if m.ctx.Err() == nil {
				m.log.Warn().Err(err).Msg("listing the cluster's members; keeping the last list")
			}
			continue
		}
		m.listed(urls)
	}
}

// listed takes a new list from the Lister.
func (m *Tracker) listed(urls []string) {
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		m.log.Warn().Err(err).Strs("members", urls).Msg("the cluster's member list is not valid; keeping the last one")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sourced = ms
	m.relistLocked()
}

// Changed hears what a probe, a fetch or a request taught this node of
// the node in slot k (nodestate.Watcher): a version its state reports is kept,
// a member that starts or stops leaving changes the local version, an
// index version it serves that this node does not is told to Skew, and
// the agreement is counted again.
func (m *Tracker) Changed(k int, prev, st *nodestate.State) {
	if st != nil {
		if (prev != nil && prev.Leaving) != st.Leaving {
			m.relist() // it leaves, or is back
		}
		m.learn(st)
		m.checkSkew(st)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refreshLocked()
}

// relist recomputes the local version: a member started or stopped
// leaving.
func (m *Tracker) relist() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.relistLocked()
}

// leavingLocked reports whether the member at u is leaving: this node
// once Leave was called, another node as its last state says; m.mu is
// held.
func (m *Tracker) leavingLocked(u string) bool {
	if u == m.self {
		return m.leaving.Load()
	}
	k := m.peers.Slot(u)
	if k < 0 {
		return false
	}
	st := m.peers.State(k)
	return st != nil && st.Leaving
}

// relistLocked makes the source's last list, without the members that
// are leaving, this node's local version, and starts the change to it
// (changeLocked); m.mu is held. When every member listed leaves, the
// local version stays as it is: the cluster stops.
func (m *Tracker) relistLocked() {
	if m.sourced == nil {
		return
	}
	ms := m.sourced
	if kept := slices.DeleteFunc(slices.Clone(ms.Members()), m.leavingLocked); len(kept) == 0 {
		return // every member leaves: the cluster stops, and nothing moves
	} else if len(kept) < ms.Len() {
		ms, _ = cluster.NewMembership(kept)
	}
	v := m.view.Load()
	if ms.Version() == v.local.Version() {
		return
	}
	m.history.Add(ms.Version(), ms)
	nv := *v
	nv.local = ms
	m.storeLocked(nv)
	m.metrics.show("local", ms, true)
	m.log.Info().Str("members", ms.Version()).Strs("list", ms.Members()).Str("from", v.local.Version()).Msg("the cluster's member list changed")
	m.changeLocked(v.reported, ms)
}

// Solo is a single gateway's membership: none. It lays every batch out
// alone, whatever membership a request names, and serves the index
// versions it holds.
type Solo struct {
	// Held returns the index versions this gateway holds of a dataset,
	// the one it serves first.
	Held func(dataset string) []string
}

// Members is nil: no membership enters a single gateway's layout.
func (Solo) Members(context.Context, string) (*cluster.Membership, error) { return nil, nil }

// Agreed is the version this gateway serves.
func (s Solo) Agreed(name string) string {
	if held := s.Held(name); len(held) > 0 {
		return held[0]
	}
	return ""
}

// Holders: no other node holds anything.
func (Solo) Holders(string, string, bool) []string { return nil }
