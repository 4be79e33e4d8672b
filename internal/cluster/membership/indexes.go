package membership

import (
	"slices"
	"time"

	"github.com/brandgw/brand/internal/cluster/nodestate"
)

// The index versions of each dataset the cluster serves: every node
// tells its peers in its state which versions it holds (nodestate.State), and
// the cluster agrees on one per dataset as it agrees on a membership.

// current is the version of a dataset this node serves, "" if none.
func (m *Tracker) current(name string) string {
	if held := m.held(name); len(held) > 0 {
		return held[0]
	}
	return ""
}

// checkSkew tells Skew when a peer serves another current version of a
// dataset than this node.
func (m *Tracker) checkSkew(st *nodestate.State) {
	for _, d := range st.Datasets {
		if cur := m.current(d.Name); cur != "" && d.Current != cur {
			now := time.Now().UnixNano()
			if last := m.lastSkew.Load(); now-last > int64(time.Second) && m.lastSkew.CompareAndSwap(last, now) {
				m.skew()
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
func (m *Tracker) Agreed(name string) string {
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
	add(m.held(name))
	m.live(m.view.Load(), func(_ int, st *nodestate.State) {
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
	best, most := "", 0
	for id, c := range counts {
		if c > most || c == most && id < best {
			best, most = id, c
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
func (m *Tracker) Holders(name, id string, self bool) []string {
	var out []string
	if self {
		out = append(out, m.self)
	}
	m.live(m.view.Load(), func(k int, st *nodestate.State) {
		if st.Holds(name, id) {
			out = append(out, m.peers.URL(k))
		}
	})
	return out
}
