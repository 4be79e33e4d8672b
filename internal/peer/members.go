package peer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
)

// A node's membership moves through three versions:
//
//   - local: what its Lister said last (a static list, a file, DNS);
//   - reported: what it tells its peers in its state — local, once the
//     warm-up for it (Config.Warm) has run;
//   - agreed: the version most live nodes report (this one included),
//     the smallest on a tie, as Agreed chooses index versions. Requests
//     that pin no membership are laid out under it, and it decides which
//     node reads each chunk (Source).
//
// Every version seen — listed, reported by a peer, or fetched from one
// for a request that pinned it — is kept in a bounded history, so that a
// node lays out a batch under the version a job pinned an epoch ago.

// ErrUnknownMembers means a request pinned a membership version that no
// node this one can reach knows any more: the gateway answers 409 naming
// the current one, and the clients pin that one.
var ErrUnknownMembers = errors.New("unknown membership version")

// UnknownMembersError is ErrUnknownMembers with the version asked for and
// the one the cluster agrees on now.
type UnknownMembersError struct{ Version, Current string }

func (e *UnknownMembersError) Error() string {
	return fmt.Sprintf("%v %s: no node known to this one holds its member list any more; the cluster's membership is %s (pin members=%s, or none)",
		ErrUnknownMembers, e.Version, e.Current, e.Current)
}

func (e *UnknownMembersError) Unwrap() error { return ErrUnknownMembers }

// maxHistory bounds the membership versions a node keeps: each is its
// member list, and a job pins one for an epoch.
const maxHistory = 64

// view is one state of a node's membership: the three versions, the
// slots of the agreed members by position, and the other nodes probed
// (the members of all three).
type view struct {
	local, reported, agreed *cluster.Membership
	warming                 string // the version this node warms up for, "" if none
	warmed                  string // the version this node has warmed up for and waits to report, "" if none
	joining                 bool   // started, and yet to learn whether it joins a running cluster
	agreedSlots             []int
	probed                  []int
}

// membershipMetrics show the versions and the agreed members.
type membershipMetrics struct {
	versions *prometheus.GaugeVec   // members, by kind and version
	members  *prometheus.GaugeVec   // 1 per agreed member
	changes  *prometheus.CounterVec // by kind
	// What the changes moved to this node, in all and in the last one,
	// and how long the last one took.
	movedChunks  prometheus.Counter
	movedBytes   *prometheus.CounterVec // by source
	lastChunks   prometheus.Gauge
	lastBytes    *prometheus.GaugeVec // by source
	lastSeconds  *prometheus.GaugeVec // by phase
	flipTimeouts prometheus.Counter
	leaving      prometheus.Gauge
}

func newMembershipMetrics(reg prometheus.Registerer) membershipMetrics {
	m := membershipMetrics{
		versions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_members",
			Help: "Members of this node's membership versions, by kind: local (its source's list), reported (what it tells its peers, after the warm-up) and agreed (what most live nodes report; requests without members= are laid out under it)."},
			[]string{"kind", "version"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_member",
			Help: "1 for each member of the agreed membership."}, []string{"member"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_membership_changes_total",
			Help: "Changes of this node's membership versions, by kind (local, reported, agreed)."}, []string{"kind"}),
	}
	m.movedChunks = prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_membership_moved_chunks_total",
		Help: "Chunks this node gained in membership changes and loaded before reporting the new version (those the jobs needed soon)."})
	m.movedBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_membership_moved_bytes_total",
		Help: "Bytes of the chunks this node loaded for membership changes, by source: peer (the old owner's cache), disk (this node's disk tier) or store."}, []string{"source"})
	m.lastChunks = prometheus.NewGauge(prometheus.GaugeOpts{Name: "brand_membership_last_change_chunks",
		Help: "Chunks this node loaded for its last membership change."})
	m.lastBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_last_change_bytes",
		Help: "Bytes this node loaded for its last membership change, by source (peer, disk, store)."}, []string{"source"})
	m.lastSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brand_membership_last_change_seconds",
		Help: "How long this node's last membership change took, by phase: warm (loading the chunks it gains), flip (until it reported the new version) and agree (until the cluster agreed on it; 0 until then)."}, []string{"phase"})
	m.flipTimeouts = prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_membership_flip_timeouts_total",
		Help: "Membership changes this node reported past --membership-flip-timeout, without every gaining member warm."})
	m.leaving = prometheus.NewGauge(prometheus.GaugeOpts{Name: "brand_membership_leaving",
		Help: "1 once this node was told to leave (SIGTERM) and hands its chunks over."})
	reg.MustRegister(m.versions, m.members, m.changes, m.movedChunks, m.movedBytes, m.lastChunks, m.lastBytes, m.lastSeconds, m.flipTimeouts, m.leaving)
	return m
}

// changed records a change's figures once this node reports it.
func (m membershipMetrics) changed(c api.MembershipChange) {
	m.movedChunks.Add(float64(c.Chunks))
	m.lastChunks.Set(float64(c.Chunks))
	for src, b := range map[string]int64{"peer": c.PeerBytes, "disk": c.DiskBytes, "store": c.StoreBytes} {
		m.movedBytes.WithLabelValues(src).Add(float64(b))
		m.lastBytes.WithLabelValues(src).Set(float64(b))
	}
	m.lastSeconds.WithLabelValues("warm").Set(c.WarmSeconds)
	m.lastSeconds.WithLabelValues("flip").Set(c.FlipSeconds)
	m.agreed(c)
	if c.FlipTimedOut {
		m.flipTimeouts.Inc()
	}
}

// agreed records the time to agreement of a change.
func (m membershipMetrics) agreed(c api.MembershipChange) {
	m.lastSeconds.WithLabelValues("agree").Set(c.AgreeSeconds)
}

// show records a version of kind in the metrics.
func (m membershipMetrics) show(kind string, ms *cluster.Membership, changed bool) {
	m.versions.DeletePartialMatch(prometheus.Labels{"kind": kind})
	m.versions.WithLabelValues(kind, ms.Version()).Set(float64(ms.Len()))
	if changed {
		m.changes.WithLabelValues(kind).Inc()
	}
	if kind == "agreed" {
		m.members.Reset()
		for _, u := range ms.Members() {
			m.members.WithLabelValues(u).Set(1)
		}
	}
}

// pollLoop lists the members every poll interval until Close.
func (s *Set) pollLoop() {
	if s.lister == nil {
		return
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(s.poll):
		}
		urls, err := s.lister.List(s.ctx)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn().Err(err).Msg("listing the cluster's members; keeping the last list")
			}
			continue
		}
		s.listed(urls)
	}
}

// listed takes a new list from the Lister.
func (s *Set) listed(urls []string) {
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		s.log.Warn().Err(err).Strs("members", urls).Msg("the cluster's member list is not valid; keeping the last one")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sourced = ms
	s.relistLocked()
}

// relist recomputes the local version: a member started or stopped
// leaving.
func (s *Set) relist() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.relistLocked()
}

// leavingLocked reports whether the member at u is leaving: this node
// once Leave was called, another node as its last state says; s.mu is
// held.
func (s *Set) leavingLocked(u string) bool {
	if u == s.self.url {
		return s.leaving.Load()
	}
	n := s.byURL[u]
	if n == nil {
		return false
	}
	st := n.state.Load()
	return st != nil && st.Leaving
}

// relistLocked makes the source's last list, without the members that
// are leaving, this node's local version, and starts the change to it
// (changeLocked); s.mu is held. When every member listed leaves, the
// local version stays as it is: the cluster stops.
func (s *Set) relistLocked() {
	if s.sourced == nil {
		return
	}
	ms := s.sourced
	if kept := slices.DeleteFunc(slices.Clone(ms.Members()), s.leavingLocked); len(kept) == 0 {
		return // every member leaves: the cluster stops, and nothing moves
	} else if len(kept) < ms.Len() {
		ms, _ = cluster.NewMembership(kept)
	}
	v := s.view.Load()
	if ms.Version() == v.local.Version() {
		return
	}
	s.history.Add(ms.Version(), ms)
	nv := *v
	nv.local = ms
	s.view.Store(&nv)
	s.metrics.show("local", ms, true)
	s.log.Info().Str("members", ms.Version()).Strs("list", ms.Members()).Str("from", v.local.Version()).Msg("the cluster's member list changed")
	s.changeLocked(v.reported, ms)
}

// changeLocked moves this node from reporting membership from to
// reporting to; s.mu is held. A node joining the cluster (it reported
// itself alone: it has just started) reports to at once, so that it
// never counts for a version of itself alone, and warms up meanwhile,
// telling its peers while it loads chunks (State.Warming), who do not
// read its chunks from it until it is done. Any other node warms up
// first, then waits until no live member of to is still warming up for
// it, and only then reports it: the cluster agrees on to once the nodes
// that gain chunks hold the ones the jobs need soon. Both are bounded by
// the flip timeout. Requests keep being laid out under the version they
// pin, or the one agreed: nothing waits on the change.
func (s *Set) changeLocked(from, to *cluster.Membership) {
	if s.warmStop != nil {
		s.warmStop() // a newer list replaces the one warming up
		s.warmStop = nil
	}
	s.setWarmingLocked("")
	s.setWarmedLocked("")
	s.setJoiningLocked(false)
	joining := from.Len() == 1 && from.Members()[0] == s.self.url
	if to.Version() == from.Version() || s.warm == nil && joining {
		s.reportLocked(to)
		return
	}
	if joining {
		s.reportLocked(to)
		s.setJoiningLocked(true)
	}
	ctx, stop := context.WithCancel(s.ctx)
	s.warmStop = stop
	start := time.Now()
	s.changeAt = start
	s.runLocked(func() {
		defer stop()
		if joining {
			// A node joins a cluster that runs without it, or starts
			// with the others (a new cluster, or a restart: the ranking's
			// next members read its chunks while it was away, and it
			// finds them on its disk tier if it kept one).
			from = s.before(ctx, to)
			if from.Index(s.self.url) >= 0 || from.Len() == 1 {
				s.mu.Lock()
				if ctx.Err() == nil {
					s.setJoiningLocked(false)
				}
				s.mu.Unlock()
				return
			}
		}
		change := api.MembershipChange{}
		if s.warm != nil {
			wctx, cancel := context.WithTimeout(ctx, s.flipTimeout)
			var err error
			change, err = s.warm(wctx, from, to, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if ctx.Err() == nil {
					s.setWarmingLocked(to.Version())
				}
			})
			cancel()
			if err != nil && ctx.Err() == nil {
				s.log.Warn().Err(err).Str("members", to.Version()).Msg("warming up for a new membership failed; going on with it")
			}
		}
		change.From, change.To = from.Version(), to.Version()
		change.WarmSeconds = time.Since(start).Seconds()
		s.mu.Lock()
		if ctx.Err() != nil {
			s.mu.Unlock()
			return // replaced by a newer list, which warms up itself, or closed
		}
		s.setWarmingLocked("")
		s.setWarmedLocked(to.Version())
		s.setJoiningLocked(false)
		s.mu.Unlock()
		s.log.Info().Str("members", to.Version()).Int("chunks", change.Chunks).Int64("peer_bytes", change.PeerBytes).
			Int64("store_bytes", change.StoreBytes).Float64("warm_ms", change.WarmSeconds*1000).Msg("warmed up for a new membership")
		if !joining {
			change.FlipTimedOut = !s.awaitGainers(ctx, to, start)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		change.FlipSeconds = time.Since(start).Seconds()
		if s.view.Load().agreed.Version() == to.Version() {
			change.AgreeSeconds = change.FlipSeconds
		}
		s.change.Store(&change)
		s.metrics.changed(change)
		s.setWarmedLocked("")
		if !joining {
			s.reportLocked(to)
		}
	})
}

// runLocked runs f on a tracked goroutine once the Set is started (the
// gateway wires what a warm-up uses before it starts the Set); s.mu is
// held.
func (s *Set) runLocked(f func()) {
	if s.started {
		s.wg.Go(f)
		return
	}
	s.pending = append(s.pending, f)
}

// setWarmingLocked records the version this node warms up for ("" none);
// s.mu is held.
func (s *Set) setWarmingLocked(version string) {
	v := *s.view.Load()
	v.warming = version
	s.view.Store(&v)
}

// setWarmedLocked records the version this node has warmed up for and
// waits to report ("" none; State.Warmed); s.mu is held.
func (s *Set) setWarmedLocked(version string) {
	v := *s.view.Load()
	v.warmed = version
	s.view.Store(&v)
}

// setJoiningLocked records whether this node, just started, has yet to
// learn whether it joins a running cluster (State.Joining); s.mu is held.
func (s *Set) setJoiningLocked(joining bool) {
	v := *s.view.Load()
	v.joining = joining
	s.view.Store(&v)
}

// warmingFor reports whether node n said, at its last probe, that it is
// warming up for membership version.
func warmingFor(n *node, version string) bool {
	st := n.state.Load()
	return st != nil && st.Warming == version
}

// before is the membership the cluster a node joins with to was read
// under before it came: what most of its live peers report, once every
// other member of to has answered a probe or is down; to if none
// reports one. Bounded by the flip timeout.
func (s *Set) before(ctx context.Context, to *cluster.Membership) *cluster.Membership {
	deadline := time.Now().Add(s.flipTimeout)
	var counts map[string]int
	for {
		counts = map[string]int{}
		pending := false
		for _, u := range to.Members() {
			if u == s.self.url {
				continue
			}
			n := s.nodeOf(u)
			if n == nil {
				continue
			}
			switch st := n.state.Load(); {
			case st == nil && n.up.Load():
				pending = true
			case st != nil && n.up.Load() && st.Members != "":
				counts[st.Members]++
			}
		}
		if !pending || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return to
		case <-time.After(s.probe / 4):
		}
	}
	base := to
	best, most := "", 0
	for ver, c := range counts {
		if c > most || c == most && ver < best {
			best, most = ver, c
		}
	}
	if ms, ok := s.history.Peek(best); ok {
		base = ms
	}
	return base
}

// awaitGainers waits until no member of to but this node may still warm
// up for to — one that never answered a probe (a node starting: a pod
// listed before it is ready), one that has yet to learn whether it joins
// a running cluster, one that says it is warming up for to, and, for a
// poll and two probes after the change began, one whose last state says
// it has neither reported to nor warmed up for it (State.Warmed): its
// source may be a poll behind this node's, and it may gain chunks under
// to — and reports true; false past the flip timeout (counted from
// start), which it logs naming the members still waited for, or when ctx
// ends.
func (s *Set) awaitGainers(ctx context.Context, to *cluster.Membership, start time.Time) bool {
	grace := s.poll + 2*s.probe
	for {
		var warming []string
		for _, u := range to.Members() {
			n := s.nodeOf(u)
			if n == nil || n == s.self {
				continue
			}
			st := n.state.Load()
			unseen := st != nil && st.Members != to.Version() && st.Warmed != to.Version() && !st.Leaving && time.Since(start) < grace
			if st == nil || n.up.Load() && (st.Joining || st.Warming == to.Version() || unseen) {
				warming = append(warming, u)
			}
		}
		if len(warming) == 0 {
			return true
		}
		if time.Since(start) > s.flipTimeout {
			s.log.Warn().Str("members", to.Version()).Strs("warming", warming).Dur("flip_timeout", s.flipTimeout).
				Msg("members gaining chunks are still warming up past the flip timeout; reporting the new membership anyway (they read what they lack from the store)")
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(max(s.probe/4, time.Millisecond)):
		}
	}
}

// Leave tells this node's peers that it leaves (State.Leaving): each
// lists its members without it, loads from it the chunks it gains that
// the jobs need soon, and reports the membership without it once warm.
// This node serves them meanwhile, and Leave returns when the cluster
// agrees on a membership without it, when no other member is up and
// staying (the whole cluster stops), or with ctx's error when ctx ends
// first (the caller's bound). A node that is not in a cluster of others
// returns at once.
func (s *Set) Leave(ctx context.Context) error {
	if s.leaving.Swap(true) {
		return errors.New("peer: Leave called twice")
	}
	s.metrics.leaving.Set(1)
	s.log.Info().Msg("leaving the cluster: handing this node's chunks over to their next owners")
	s.relist()
	for {
		if v := s.view.Load(); v.agreed.Index(s.self.url) < 0 || v.agreed.Len() == 1 {
			s.log.Info().Str("members", v.agreed.Version()).Msg("the cluster agrees on a membership without this node")
			return nil
		}
		if !s.heirs() {
			s.log.Info().Msg("no other member is up and staying to hand this node's chunks to")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(s.probe/4, time.Millisecond)):
		}
	}
}

// heirs reports whether a member of the source's list other than this
// node is up and not leaving: one that may take this node's chunks. When
// the whole cluster stops, or the others are gone, there is none, and a
// leaving node need not wait.
func (s *Set) heirs() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sourced == nil {
		return false
	}
	for _, u := range s.sourced.Members() {
		if n := s.byURL[u]; n != nil && n != s.self && n.up.Load() && !s.leavingLocked(u) {
			return true
		}
	}
	return false
}

// reportLocked makes ms the version this node reports; s.mu is held.
func (s *Set) reportLocked(ms *cluster.Membership) {
	v := *s.view.Load()
	changed := v.reported.Version() != ms.Version()
	v.reported = ms
	s.view.Store(&v)
	s.metrics.show("reported", ms, changed)
	s.refreshLocked()
}

// learn records the membership a peer's state reports, checked against
// its version (a list that does not hash to it is ignored).
func (s *Set) learn(st *State) {
	if st.Members == "" || len(st.MemberList) == 0 {
		return
	}
	if _, ok := s.history.Get(st.Members); ok {
		return
	}
	if ms, err := cluster.NewMembership(st.MemberList); err == nil && ms.Version() == st.Members {
		s.history.Add(ms.Version(), ms)
	}
}

// refresh recomputes the agreed membership and the nodes probed.
func (s *Set) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
}

// refreshLocked is refresh with s.mu held.
func (s *Set) refreshLocked() {
	v := *s.view.Load()
	counts := map[string]int{v.reported.Version(): 1}
	s.live(func(n *node, st *State) {
		// A node counts for a version it is a member of: one removed
		// from the list reports the list without it at once, and would
		// tip the cluster to it before the members that gain its chunks
		// have loaded them.
		if ms, ok := s.history.Peek(st.Members); ok && ms.Index(n.url) >= 0 {
			counts[st.Members]++
		}
	})
	best, n := "", 0
	for ver, c := range counts {
		if c > n || c == n && ver < best {
			best, n = ver, c
		}
	}
	agreed := v.reported
	if ms, ok := s.history.Peek(best); ok {
		agreed = ms
	}
	changed := agreed.Version() != v.agreed.Version()
	if changed || v.agreedSlots == nil {
		v.agreed = agreed
		v.agreedSlots = make([]int, 0, agreed.Len())
		for _, u := range agreed.Members() {
			if nd := s.nodeLocked(u); nd != nil {
				v.agreedSlots = append(v.agreedSlots, nd.slot)
			} else {
				v.agreedSlots = append(v.agreedSlots, s.self.slot) // past maxKnown: read here
			}
		}
		s.history.Add(agreed.Version(), agreed)
		s.metrics.show("agreed", agreed, changed)
		if changed {
			s.log.Info().Str("members", agreed.Version()).Strs("list", agreed.Members()).Msg("the cluster agrees on a new membership")
			if c := s.change.Load(); c != nil && c.To == agreed.Version() && c.AgreeSeconds == 0 {
				nc := *c
				nc.AgreeSeconds = time.Since(s.changeAt).Seconds()
				s.change.Store(&nc)
				s.metrics.agreed(nc)
			}
		}
	}
	s.view.Store(&v)
	s.probeMembers()
}

// probeMembers starts probing every member of the three versions and of
// the source's list (a member that left is probed while it is listed:
// it may come back) that is not probed yet and stops probing nodes no
// longer among them; s.mu is held. A node dropped from every version keeps its slot and figures.
func (s *Set) probeMembers() {
	v := *s.view.Load()
	want := map[*node]bool{}
	for _, ms := range []*cluster.Membership{v.local, v.reported, v.agreed, s.sourced} {
		if ms == nil {
			continue
		}
		for _, u := range ms.Members() {
			if nd := s.nodeLocked(u); nd != nil && nd != s.self {
				want[nd] = true
			}
		}
	}
	probed := make([]int, 0, len(want))
	for nd := range want {
		probed = append(probed, nd.slot)
		if nd.stop == nil && s.ctx.Err() == nil && s.started {
			ctx, stop := context.WithCancel(s.ctx)
			nd.stop = stop
			s.wg.Go(func() { s.probeLoop(ctx, nd) })
		}
	}
	for _, k := range v.probed {
		if nd := s.at(k); !want[nd] && nd.stop != nil {
			nd.stop()
			nd.stop = nil
			s.upGauge.DeleteLabelValues(nd.url)
		}
	}
	slices.Sort(probed)
	v.probed = probed
	s.view.Store(&v)
}

// Members returns the membership a request is laid out under: the one it
// pins (version), found in this node's history or asked of the live
// peers, or the one the cluster agrees on when version is "". A version
// no node reachable knows is an *UnknownMembersError naming the current
// one.
func (s *Set) Members(ctx context.Context, version string) (*cluster.Membership, error) {
	v := s.view.Load()
	if version == "" || version == v.agreed.Version() {
		return v.agreed, nil
	}
	if ms, ok := s.history.Get(version); ok {
		return ms, nil
	}
	// Every member not known to be down is asked, those not probed yet
	// too: a node that has just joined is asked before its first probes
	// end.
	var found *cluster.Membership
	for _, k := range v.probed {
		n := s.at(k)
		if !n.up.Load() {
			continue
		}
		ms, err := s.fetchMembers(ctx, n, version)
		if err == nil {
			found = ms
			break
		}
		s.log.Debug().Err(err).Str("peer", n.url).Str("members", version).Msg("asking a peer for a membership version")
	}
	if found != nil {
		s.history.Add(version, found)
		return found, nil
	}
	return nil, &UnknownMembersError{Version: version, Current: v.agreed.Version()}
}

// Known returns the membership version this node keeps, without asking
// its peers: what it answers a peer's question (MembersPath).
func (s *Set) Known(version string) (*cluster.Membership, bool) {
	v := s.view.Load()
	for _, ms := range []*cluster.Membership{v.agreed, v.reported, v.local} {
		if ms.Version() == version {
			return ms, true
		}
	}
	return s.history.Get(version)
}

// Describe fills in what a node's state says of its place in the
// cluster: its URL, its position in the membership it reports, and that
// membership.
func (s *Set) Describe(st *State) {
	v := s.view.Load()
	ms := v.reported
	st.URL, st.Self = s.self.url, ms.Index(s.self.url)
	st.Members, st.MemberList = ms.Version(), ms.Members()
	st.Warming, st.Warmed, st.Joining, st.Leaving = v.warming, v.warmed, v.joining, s.leaving.Load()
}

// Peers returns the slots of the other members this node probes: the
// nodes an importance seal collects feedback from.
func (s *Set) Peers() []int { return slices.Clone(s.view.Load().probed) }
