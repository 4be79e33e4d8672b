package peer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	agreedSlots             []int
	probed                  []int
}

// membershipMetrics show the versions and the agreed members.
type membershipMetrics struct {
	versions *prometheus.GaugeVec   // members, by kind and version
	members  *prometheus.GaugeVec   // 1 per agreed member
	changes  *prometheus.CounterVec // by kind
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
	reg.MustRegister(m.versions, m.members, m.changes)
	return m
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

// listed takes a new list from the Lister: a new local version, and its
// warm-up before it is reported.
func (s *Set) listed(urls []string) {
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		s.log.Warn().Err(err).Strs("members", urls).Msg("the cluster's member list is not valid; keeping the last one")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	if s.warmStop != nil {
		s.warmStop() // a newer list replaces the one warming up
		s.warmStop = nil
	}
	if s.warm == nil || ms.Version() == v.reported.Version() {
		s.reportLocked(ms)
		return
	}
	ctx, stop := context.WithCancel(s.ctx)
	s.warmStop = stop
	from := v.reported
	s.wg.Go(func() {
		defer stop()
		start := time.Now()
		if err := s.warm(ctx, from, ms); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Str("members", ms.Version()).Msg("warming up for a new membership failed; reporting it anyway")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if ctx.Err() != nil && s.ctx.Err() == nil {
			return // replaced by a newer list, which warms up itself
		}
		if s.ctx.Err() != nil {
			return
		}
		s.log.Info().Str("members", ms.Version()).Float64("warm_ms", float64(time.Since(start))/float64(time.Millisecond)).Msg("warmed up for a new membership")
		s.reportLocked(ms)
	})
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
	s.live(func(_ *node, st *State) {
		if _, ok := s.history.Peek(st.Members); ok {
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
		}
	}
	s.view.Store(&v)
	s.probeMembers()
}

// probeMembers starts probing every member of the three versions that is
// not probed yet and stops probing nodes no longer among them; s.mu is
// held. A node dropped from every version keeps its slot and figures.
func (s *Set) probeMembers() {
	v := *s.view.Load()
	want := map[*node]bool{}
	for _, ms := range []*cluster.Membership{v.local, v.reported, v.agreed} {
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
	ms := s.view.Load().reported
	st.URL, st.Self = s.self.url, ms.Index(s.self.url)
	st.Members, st.MemberList = ms.Version(), ms.Members()
}

// Peers returns the slots of the other members this node probes: the
// nodes an importance seal collects feedback from.
func (s *Set) Peers() []int { return slices.Clone(s.view.Load().probed) }
