package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/cluster/nodestate"
)

// nodes are the other nodes as the membership sees them (Peers): by
// slot, each one's URL, liveness and last state; slot 0 is this node
// (newNodes). A node asked for a membership version answers the
// lists in lists.
type nodes struct {
	mu     sync.Mutex
	urls   []string
	up     []bool
	far    []bool // unreached: no answer to its last probe
	states []*nodestate.State
	lists  map[string]*cluster.Membership
}

// newNodes returns the nodes of a cluster seen from self.
func newNodes(self string) *nodes {
	n := &nodes{lists: map[string]*cluster.Membership{}}
	n.Slot(self)
	return n
}

func (n *nodes) Slot(url string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if k := slices.Index(n.urls, url); k >= 0 {
		return k
	}
	n.urls, n.up, n.far, n.states = append(n.urls, url), append(n.up, true), append(n.far, false), append(n.states, nil)
	return len(n.urls) - 1
}

func (n *nodes) URL(k int) string     { n.mu.Lock(); defer n.mu.Unlock(); return n.urls[k] }
func (n *nodes) Up(k int) bool        { n.mu.Lock(); defer n.mu.Unlock(); return k == 0 || n.up[k] }
func (n *nodes) Unreached(k int) bool { n.mu.Lock(); defer n.mu.Unlock(); return k != 0 && n.far[k] }
func (n *nodes) State(k int) *nodestate.State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.states[k]
}

func (n *nodes) Probe(urls []string, _ nodestate.Watcher) []int {
	var out []int
	for _, u := range urls {
		if k := n.Slot(u); k != 0 && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (n *nodes) AskMembers(_ context.Context, k int, version string) (*cluster.Membership, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ms, ok := n.lists[version]; ok && n.up[k] {
		return ms, nil
	}
	return nil, errors.New("not kept")
}

// set records what the node at url last said of itself.
func (n *nodes) set(url string, up bool, st *nodestate.State) {
	k := n.Slot(url)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.up[k], n.states[k] = up, st
}

// TestAgreed: the version a cluster serves is the one most live nodes
// serve, a version a node has reloaded past counting for its successor;
// ties go to the smallest ID; a node down does not count. Holders names
// the live nodes that hold it (where a node that does not is told to send
// a client: gateway's 409), this node first if asked; a peer heard to
// serve another current version than this node's is told to Skew (a
// reload soon). (gateway/clustertest's TestIndexSkewNeverServesAMixedEpoch read two
// epochs over four nodes, one of them skewed, for these.)
func TestAgreed(t *testing.T) {
	type node struct {
		held []string // current first; nil: no state yet
		up   bool
	}
	tests := []struct {
		name    string
		self    []string
		peers   []node
		want    string
		holders []int // the peers (from 1) that hold want
		skew    bool
	}{
		{"all agree", []string{"a"}, []node{{[]string{"a"}, true}, {[]string{"a"}, true}}, "a", []int{1, 2}, false},
		{"one skewed node", []string{"a"}, []node{{[]string{"b"}, true}, {[]string{"a"}, true}, {[]string{"a"}, true}}, "a", []int{2, 3}, true},
		{"the skewed node itself", []string{"b"}, []node{{[]string{"a"}, true}, {[]string{"a"}, true}, {[]string{"a"}, true}}, "a", []int{1, 2, 3}, true},
		{"a tie goes to the smallest", []string{"b"}, []node{{[]string{"a"}, true}}, "a", []int{1}, true},
		{"a down node does not count", []string{"b"}, []node{{[]string{"a"}, false}, {[]string{"a"}, false}}, "b", nil, true},
		{"no state yet does not count", []string{"b"}, []node{{nil, true}, {nil, true}}, "b", nil, false},
		{"this node reloaded first", []string{"c", "a"}, []node{{[]string{"a"}, true}, {[]string{"a"}, true}, {[]string{"a"}, true}}, "c", nil, true},
		{"a peer reloaded first", []string{"a"}, []node{{[]string{"c", "a"}, true}, {[]string{"a"}, true}, {[]string{"b"}, true}}, "c", []int{1}, true},
		{"a restore while others reload: the majority", []string{"a", "c"}, []node{{[]string{"c", "a"}, true}, {[]string{"c", "a"}, true}}, "c", []int{1, 2}, true},
		{"a chain of reloads", []string{"a"}, []node{{[]string{"b", "a"}, true}, {[]string{"c", "b"}, true}}, "c", []int{2}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			peers := make([]string, len(tc.peers)+1)
			for k := range peers {
				peers[k] = fmt.Sprintf("http://node%d.invalid", k)
			}
			ns := newNodes(peers[0])
			var skewed atomic.Int64
			s := New(Config{Self: peers[0], Members: Static(peers), Peers: ns, Probe: time.Second, Registry: prometheus.NewRegistry(),
				Log: zerolog.Nop(), Held: func(string) []string { return tc.self }, Skew: func() { skewed.Add(1) }})
			defer s.Close()
			var states []*nodestate.State
			for i, p := range tc.peers {
				var st *nodestate.State
				if p.held != nil {
					st = &nodestate.State{Self: i + 1, Ready: true, Datasets: []nodestate.DatasetState{{Name: "d", Current: p.held[0], Held: p.held}}}
				}
				ns.set(peers[i+1], p.up, st)
				states = append(states, st)
			}
			if got := s.Agreed("d"); got != tc.want {
				t.Fatalf("Agreed = %q, want %q", got, tc.want)
			}
			var holders []string
			for _, k := range tc.holders {
				holders = append(holders, peers[k])
			}
			if got := s.Holders("d", tc.want, false); !slices.Equal(got, holders) {
				t.Errorf("Holders of %s = %v, want %v", tc.want, got, holders)
			}
			if got := s.Holders("d", tc.want, true); !slices.Equal(got, append([]string{peers[0]}, holders...)) {
				t.Errorf("Holders of %s with this node = %v, want it first", tc.want, got)
			}
			for i, st := range states {
				if st != nil {
					s.Changed(i+1, nil, st) // each peer's state heard
				}
			}
			if got := skewed.Load() > 0; got != tc.skew {
				t.Errorf("Skew told: %t, want %t", got, tc.skew)
			}
		})
	}
}
