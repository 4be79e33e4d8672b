package membership

import (
	"context"
	"slices"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/nodestate"
)

// learn records the membership a peer's state reports, checked against
// its version (a list that does not hash to it is ignored).
func (m *Tracker) learn(st *nodestate.State) {
	if st.Members == "" || len(st.MemberList) == 0 {
		return
	}
	if _, ok := m.history.Get(st.Members); ok {
		return
	}
	if ms, err := cluster.NewMembership(st.MemberList); err == nil && ms.Version() == st.Members {
		m.history.Add(ms.Version(), ms)
	}
}

// live calls f with every other node this node counts in the agreement:
// the nodes it probes that are up and have told their state.
func (m *Tracker) live(v *view, f func(k int, st *nodestate.State)) {
	for _, k := range v.probed {
		if !m.peers.Up(k) {
			continue
		}
		if st := m.peers.State(k); st != nil {
			f(k, st)
		}
	}
}

// warm reports whether a node's state counts for the version it reports:
// not while it joins, nor while it warms up for that version. A node
// joining reports the new version at once (so that it never counts for
// itself alone); counted then, joiners as many as the old members (2 →
// 4) tied the vote, and the smaller version hash — the new membership
// in about half the clusters — won it before they had loaded their
// gains, and more joiners than old members outvoted them.
func warm(st *nodestate.State) bool {
	return !st.Joining && st.Warming != st.Members
}

// refreshLocked recomputes the agreed membership and the nodes probed;
// m.mu is held.
func (m *Tracker) refreshLocked() {
	v := *m.view.Load()
	// Each vote, and whether it is a warm node's; only warm votes count
	// unless there are none (a cluster whose nodes start together, all
	// joining).
	type vote struct {
		version string
		warm    bool
	}
	votes := []vote{{v.reported.Version(), !v.joining && v.warming != v.reported.Version()}}
	m.live(&v, func(k int, st *nodestate.State) {
		// A node counts for a version it is a member of: one removed
		// from the list reports the list without it at once, and would
		// tip the cluster to it before the members that gain its chunks
		// have loaded them.
		if ms, ok := m.history.Peek(st.Members); ok && ms.Index(m.peers.URL(k)) >= 0 {
			votes = append(votes, vote{st.Members, warm(st)})
		}
	})
	anyWarm := slices.ContainsFunc(votes, func(x vote) bool { return x.warm })
	counts := map[string]int{}
	for _, x := range votes {
		if x.warm || !anyWarm {
			counts[x.version]++
		}
	}
	best, n := "", 0
	for ver, c := range counts {
		if c > n || c == n && ver < best {
			best, n = ver, c
		}
	}
	agreed := v.reported
	if ms, ok := m.history.Peek(best); ok {
		agreed = ms
	}
	changed := agreed.Version() != v.agreed.Version()
	if changed || v.agreedSlots == nil {
		v.agreed = agreed
		v.agreedSlots = make([]int, 0, agreed.Len())
		for _, u := range agreed.Members() {
			if k := m.peers.Slot(u); k >= 0 {
				v.agreedSlots = append(v.agreedSlots, k)
			} else {
				v.agreedSlots = append(v.agreedSlots, m.selfSlot) // past the nodes known: read here
			}
		}
		m.history.Add(agreed.Version(), agreed)
		m.metrics.show("agreed", agreed, changed)
		if changed {
			m.log.Info().Str("members", agreed.Version()).Strs("list", agreed.Members()).Msg("the cluster agrees on a new membership")
			if c := m.change.Load(); c != nil && c.To == agreed.Version() && c.AgreeSeconds == 0 {
				nc := *c
				nc.AgreeSeconds = time.Since(m.changeAt).Seconds()
				m.change.Store(&nc)
				m.metrics.agreed(nc)
			}
		}
	}
	// Every member of the three versions and of the source's list is
	// probed (a member that left is probed while it is listed: it may come
	// back); a node dropped from all of them keeps its slot and figures.
	var urls []string
	for _, ms := range []*cluster.Membership{v.local, v.reported, v.agreed, m.sourced} {
		if ms != nil {
			urls = append(urls, ms.Members()...)
		}
	}
	v.probed = m.peers.Probe(urls, m)
	m.storeLocked(v)
}

// Members returns the membership a request is laid out under: the one it
// pins (version), found in this node's history, asked of the live peers,
// or read from the datasets' stores (kept.go), or the one the cluster
// agrees on when version is "". A version none of them knows is an
// *UnknownMembersError naming the current one.
func (m *Tracker) Members(ctx context.Context, version string) (*cluster.Membership, error) {
	v := m.view.Load()
	if version == "" || version == v.agreed.Version() {
		return v.agreed, nil
	}
	if ms, ok := m.history.Get(version); ok {
		return ms, nil
	}
	// Every member not known to be down is asked, those not probed yet
	// too: a node that has just joined is asked before its first probes
	// end.
	for _, k := range v.probed {
		if !m.peers.Up(k) {
			continue
		}
		ms, err := m.peers.AskMembers(ctx, k, version)
		if err == nil {
			m.history.Add(version, ms)
			return ms, nil
		}
		m.log.Debug().Err(err).Str("members", version).Msg("asking a peer for a membership version")
	}
	if ms, err := m.kept.find(ctx, version); err == nil {
		m.history.Add(version, ms)
		return ms, nil
	}
	return nil, &UnknownMembersError{Version: version, Current: v.agreed.Version()}
}

// Known returns the membership version this node keeps, without asking
// its peers: what it answers a peer's question (transport.MembersPath).
func (m *Tracker) Known(version string) (*cluster.Membership, bool) {
	v := m.view.Load()
	for _, ms := range []*cluster.Membership{v.agreed, v.reported, v.local} {
		if ms.Version() == version {
			return ms, true
		}
	}
	return m.history.Get(version)
}

// Describe fills in what a node's state says of its place in the
// cluster: its URL, its position in the membership it reports, and that
// membership.
func (m *Tracker) Describe(st *nodestate.State) {
	v := m.view.Load()
	ms := v.reported
	st.URL, st.Self = m.self, ms.Index(m.self)
	st.Members, st.MemberList = ms.Version(), ms.Members()
	st.Warming, st.Warmed, st.Joining, st.Leaving = v.warming, v.warmed, v.joining, m.leaving.Load()
	st.Agreed = v.agreed.Version()
}

// Knows reports whether url is a member of a membership version this node
// knows: its source's list, its three versions, or one of the last ones
// it has seen (peercred.Members: the peers whose credentials it takes).
func (m *Tracker) Knows(url string) bool {
	v := m.view.Load()
	m.mu.Lock()
	sourced := m.sourced
	m.mu.Unlock()
	for _, ms := range append([]*cluster.Membership{v.local, v.reported, v.agreed, sourced}, m.history.Values()...) {
		if ms != nil && ms.Index(url) >= 0 {
			return true
		}
	}
	return false
}
