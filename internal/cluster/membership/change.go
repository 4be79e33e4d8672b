package membership

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/nodestate"
)

// changeLocked moves this node from reporting membership from to
// reporting to; m.mu is held. A node joining the cluster (it reported
// itself alone: it has just started) reports to at once, so that it
// never counts for a version of itself alone, and warms up meanwhile,
// telling its peers while it joins and loads chunks (State.Joining,
// State.Warming), who do not read its chunks from it, nor count its vote
// for to (warm), until it is done. Any other node warms up
// first, then waits until no live member of to is still warming up for
// it, and only then reports it: the cluster agrees on to once the nodes
// that gain chunks hold the ones the jobs need soon. Both are bounded by
// the flip timeout. Requests keep being laid out under the version they
// pin, or the one agreed: nothing waits on the change.
func (m *Tracker) changeLocked(from, to *cluster.Membership) {
	if m.warmStop != nil {
		m.warmStop() // a newer list replaces the one warming up
		m.warmStop = nil
	}
	m.setLocked(func(v *view) { v.warming, v.warmed, v.joining = "", "", false })
	joining := from.Len() == 1 && from.Members()[0] == m.self
	if to.Version() == from.Version() || m.warm == nil && joining {
		m.reportLocked(to)
		return
	}
	if joining {
		m.reportLocked(to)
		m.setLocked(func(v *view) { v.joining = true })
	}
	ctx, stop := context.WithCancel(m.ctx)
	m.warmStop = stop
	start := time.Now()
	m.changeAt = start
	m.runLocked(func() {
		defer stop()
		if joining {
			// A node joins a cluster that runs without it, or starts
			// with the others (a new cluster, or a restart: the ranking's
			// next members read its chunks while it was away, and it
			// finds them on its disk tier if it kept one).
			from = m.before(ctx, to)
			if from.Index(m.self) >= 0 || from.Len() == 1 {
				m.mu.Lock()
				if ctx.Err() == nil {
					m.setLocked(func(v *view) { v.joining = false })
				}
				m.mu.Unlock()
				return
			}
		}
		change := api.MembershipChange{}
		if m.warm != nil {
			wctx, cancel := context.WithTimeout(ctx, m.flipTimeout)
			var err error
			change, err = m.warm.Warm(wctx, from, to, func() {
				m.mu.Lock()
				defer m.mu.Unlock()
				if ctx.Err() == nil {
					m.setLocked(func(v *view) { v.warming = to.Version() })
				}
			})
			cancel()
			if err != nil && ctx.Err() == nil {
				m.log.Warn().Err(err).Str("members", to.Version()).Msg("warming up for a new membership failed; going on with it")
			}
		}
		change.From, change.To = from.Version(), to.Version()
		change.WarmSeconds = time.Since(start).Seconds()
		m.mu.Lock()
		if ctx.Err() != nil {
			m.mu.Unlock()
			return // replaced by a newer list, which warms up itself, or closed
		}
		m.setLocked(func(v *view) { v.warming, v.warmed, v.joining = "", to.Version(), false })
		m.mu.Unlock()
		m.log.Info().Str("members", to.Version()).Int("chunks", change.Chunks).Int64("peer_bytes", change.PeerBytes).
			Int64("store_bytes", change.StoreBytes).Float64("warm_ms", change.WarmSeconds*1000).Msg("warmed up for a new membership")
		if !joining {
			change.FlipTimedOut = !m.awaitGainers(ctx, to, start)
			// Kept before it is reported, so that the cluster never
			// agrees on a version it has not kept (kept.go); a store that
			// refuses is tried again in the background, not waited for.
			kctx, cancel := context.WithTimeout(ctx, m.flipTimeout)
			_ = m.kept.keepOnce(kctx, to)
			cancel()
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		change.FlipSeconds = time.Since(start).Seconds()
		if m.view.Load().agreed.Version() == to.Version() {
			change.AgreeSeconds = change.FlipSeconds
		}
		m.change.Store(&change)
		m.metrics.changed(change)
		m.setLocked(func(v *view) { v.warmed = "" })
		if !joining {
			m.reportLocked(to)
		}
	})
}

// runLocked runs f on a tracked goroutine once the Tracker is started
// (a change found by the first list, at New, warms up from Start); m.mu
// is held.
func (m *Tracker) runLocked(f func()) {
	if m.started {
		m.part.Go(func(context.Context) { f() }) // nothing once the part stops
		return
	}
	m.pending = append(m.pending, f)
}

// setLocked changes this node's place in a change — the version it
// warms up for (State.Warming), the one it has warmed up for and waits to
// report (State.Warmed), whether it has just started and has yet to learn
// whether it joins a running cluster (State.Joining); m.mu is held.
func (m *Tracker) setLocked(f func(v *view)) {
	v := *m.view.Load()
	f(&v)
	m.storeLocked(v)
}

// before is the membership the cluster a node joins with to was read
// under before it came: what most of its live peers warm for what they
// report say (not those joining too), once every other member of to has
// answered a probe or is down; to if none says one (a cluster starting
// together). Bounded by the flip timeout.
func (m *Tracker) before(ctx context.Context, to *cluster.Membership) *cluster.Membership {
	deadline := time.Now().Add(m.flipTimeout)
	var counts map[string]int
	for {
		counts = map[string]int{}
		pending := false
		for _, u := range to.Members() {
			k := m.peers.Slot(u)
			if u == m.self || k < 0 {
				continue
			}
			switch st, up := m.peers.State(k), m.peers.Up(k); {
			case st == nil && up:
				pending = true
			case st != nil && up && st.Members != "" && warm(st):
				// A node joining too reports to at once: it tells
				// nothing of what the cluster was read under.
				counts[st.Members]++
			}
		}
		if !pending || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return to
		case <-time.After(m.probe / 4):
		}
	}
	base := to
	best, most := "", 0
	for ver, c := range counts {
		if c > most || c == most && ver < best {
			best, most = ver, c
		}
	}
	if ms, ok := m.history.Peek(best); ok {
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
func (m *Tracker) awaitGainers(ctx context.Context, to *cluster.Membership, start time.Time) bool {
	grace := m.poll + 2*m.probe
	for {
		var warming []string
		for _, u := range to.Members() {
			k := m.peers.Slot(u)
			if k < 0 || u == m.self {
				continue
			}
			st := m.peers.State(k)
			unseen := st != nil && st.Members != to.Version() && st.Warmed != to.Version() && !st.Leaving && time.Since(start) < grace
			if st == nil || m.peers.Up(k) && (st.Joining || st.Warming == to.Version() || unseen) {
				warming = append(warming, u)
			}
		}
		if len(warming) == 0 {
			return true
		}
		if time.Since(start) > m.flipTimeout {
			m.log.Warn().Str("members", to.Version()).Strs("warming", warming).Dur("flip_timeout", m.flipTimeout).
				Msg("members gaining chunks are still warming up past the flip timeout; reporting the new membership anyway (they read what they lack from the store)")
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(max(m.probe/4, time.Millisecond)):
		}
	}
}

// Leave tells this node's peers that it leaves (State.Leaving): each
// lists its members without it, loads from it the chunks it gains that
// the jobs need soon, and reports the membership without it once warm.
// This node serves them meanwhile, and Leave returns when every live
// member reads by a membership without it (State.Agreed: its own view
// agreeing is not enough, for a member whose view has not flipped yet
// would find it down and read its chunks along the old ranking, from a
// node that lacks them), at most the flip timeout after this node's view
// agreed; when no other member is up and staying (the whole cluster
// stops); or with ctx's error when ctx ends first (the caller's bound).
// A node that is not in a cluster of others returns at once.
func (m *Tracker) Leave(ctx context.Context) error {
	if m.leaving.Swap(true) {
		return errors.New("membership: Leave called twice")
	}
	m.metrics.leaving.Set(1)
	m.log.Info().Msg("leaving the cluster: handing this node's chunks over to their next owners")
	m.relist()
	var agreedAt time.Time // when this node's view first agreed without it
	for {
		// No heir first, whatever this node's view agrees on: with no
		// member up and staying there is no one to hand its chunks to,
		// and a view that flipped before this look (the change started
		// above reports the members without this node at once when it
		// has nothing to warm up) would otherwise wait for members that
		// leave too, up to the flip timeout.
		if !m.heirs() {
			m.log.Info().Msg("no other member is up and staying to hand this node's chunks to")
			return nil
		}
		if v := m.view.Load(); v.agreed.Index(m.self) < 0 || v.agreed.Len() == 1 {
			if agreedAt.IsZero() {
				agreedAt = time.Now()
				m.log.Info().Str("members", v.agreed.Version()).Msg("the cluster agrees on a membership without this node")
			}
			states := map[string]*nodestate.State{}
			m.live(v, func(k int, st *nodestate.State) { states[m.peers.URL(k)] = st })
			waiting := stillReading(m.self, v.agreed, states, m.history.Peek)
			if len(waiting) == 0 {
				return nil
			}
			if time.Since(agreedAt) > m.flipTimeout {
				m.log.Warn().Strs("waiting", waiting).Dur("flip_timeout", m.flipTimeout).
					Msg("members still read by a membership with this node past the flip timeout; leaving anyway (they read what this node held from the store)")
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(m.probe/4, time.Millisecond)):
		}
	}
}

// stillReading returns the members among states (the live ones'
// last states, by URL) that still read chunks by a membership self is a
// member of (State.Agreed), agreed being the one self's view agrees on;
// known finds a version's membership. A member of a build that does not
// say is not waited for.
func stillReading(self string, agreed *cluster.Membership, states map[string]*nodestate.State, known func(string) (*cluster.Membership, bool)) []string {
	var out []string
	for u, st := range states {
		if st.Agreed == "" || st.Agreed == agreed.Version() {
			continue
		}
		if ms, ok := known(st.Agreed); ok && ms.Index(self) < 0 {
			continue // a later membership without this node
		}
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// heirs reports whether a member of the source's list other than this
// node is up and not leaving: one that may take this node's chunks. When
// the whole cluster stops, or the others are gone, there is none, and a
// leaving node need not wait.
func (m *Tracker) heirs() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sourced == nil {
		return false
	}
	for _, u := range m.sourced.Members() {
		if k := m.peers.Slot(u); k >= 0 && u != m.self && m.peers.Up(k) && !m.leavingLocked(u) {
			return true
		}
	}
	return false
}

// reportLocked makes ms the version this node reports; m.mu is held.
func (m *Tracker) reportLocked(ms *cluster.Membership) {
	v := *m.view.Load()
	changed := v.reported.Version() != ms.Version()
	v.reported = ms
	m.storeLocked(v)
	m.metrics.show("reported", ms, changed)
	m.refreshLocked()
	if m.kept != nil {
		m.runLocked(func() { _ = m.kept.keep(m.ctx, ms) }) // at once, if a change did not keep it before
	}
}
