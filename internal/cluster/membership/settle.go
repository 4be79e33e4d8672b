package membership

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/brandgw/brand/internal/job/catalog"
)

// Settled reports why this node, able to serve, should not report ready
// yet, or nil once it may — as a cluster starts, or a node comes back,
// until each other member of the membership the cluster agrees on either
//
//   - is up in this node's view, and its last state does not name this
//     node among those it sees down (nodestate.State.Down), or
//   - cannot be reached at all (nothing listens at its URL: when it
//     starts, its own readiness waits for this node to see it).
//
// A node that reported ready while it saw a starting peer down, or while
// that peer saw it down, read the peer's chunks from the store itself
// (route.Router.Source), and the peer read them too: a job started once
// every node said it was ready read some chunks of its cold epoch two or
// three times. Until every pair of nodes has seen each other up, no
// chunk's owner is certain. A member that answers but never settles (it
// stays not ready) holds this node back for at most the flip timeout
// from the first question. Once nil, always nil: a member lost later
// never takes a serving node out of service.
func (m *Tracker) Settled() error {
	if m.settled.Load() {
		return nil
	}
	now := time.Now()
	m.settling.CompareAndSwap(0, now.UnixNano())
	v := m.view.Load()
	var waiting []string
	for i, u := range v.agreed.Members() {
		if u == m.self {
			continue
		}
		k := v.agreedSlots[i]
		if st := m.peers.State(k); m.peers.Up(k) && st != nil && !slices.Contains(st.Down, m.self) || !m.peers.Up(k) && m.peers.Unreached(k) {
			continue
		}
		waiting = append(waiting, u)
	}
	if len(waiting) == 0 {
		if m.settled.CompareAndSwap(false, true) {
			m.log.Info().Str("members", v.agreed.Version()).Dur("after", time.Duration(now.UnixNano()-m.settling.Load())).
				Msg("settled: this node and every member see each other up")
		}
		return nil
	}
	if since := time.Duration(now.UnixNano() - m.settling.Load()); since > m.flipTimeout {
		m.log.Warn().Strs("members", waiting).Dur("flip_timeout", m.flipTimeout).
			Msg("members still not seen up, or not seeing this node up, past the flip timeout: reporting ready anyway (until they are, some chunks are read by nodes that do not own them)")
		m.settled.Store(true)
		return nil
	}
	return fmt.Errorf("%w: this node and %s have yet to see each other up: a job started now would have some chunks read by two nodes",
		catalog.ErrNotReady, strings.Join(waiting, ", "))
}
