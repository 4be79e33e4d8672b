package membership

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/cluster/nodestate"
	"github.com/brandgw/brand/internal/job/catalog"
)

// TestSettled: a node of a cluster that can serve says it is ready once
// each other member is up and does not name it among the nodes it sees
// down, or cannot be reached at all; a member up with no state yet, one
// that answers it is not ready, or one that sees this node down holds it
// back, at most the flip timeout; once ready, it stays so.
func TestSettled(t *testing.T) {
	type member struct {
		up, unreached bool
		state         bool // it has told its state
		seesSelfDown  bool // its state names this node down
	}
	settled := member{up: true, state: true}
	tests := []struct {
		name    string
		members []member
		waitFor []int // the members named in the wait; nil: settled
	}{
		{"every member up and seeing this node up", []member{settled, settled, settled}, nil},
		{"a member sees this node down", []member{settled, {up: true, state: true, seesSelfDown: true}, settled}, []int{2}},
		{"a member has not told its state yet", []member{settled, {up: true}, settled}, []int{2}},
		{"a member answers it is not ready", []member{{}, settled, settled}, []int{1}},
		{"a member that cannot be reached is not waited for", []member{settled, settled, {unreached: true}}, nil},
		{"each waited for", []member{{up: true}, {}, {up: true, state: true, seesSelfDown: true}}, []int{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			urls := make([]string, len(tc.members)+1)
			for k := range urls {
				urls[k] = fmt.Sprintf("http://node%d.invalid", k)
			}
			ns := newNodes(urls[0])
			m := New(Config{Self: urls[0], Members: Static(urls), Peers: ns, Probe: time.Second, FlipTimeout: time.Hour,
				Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
			defer m.Close()
			for i, mb := range tc.members {
				var st *nodestate.State
				if mb.state {
					st = &nodestate.State{Self: i + 1, Ready: true}
					if mb.seesSelfDown {
						st.Down = []string{urls[0]}
					}
				}
				ns.set(urls[i+1], mb.up, st)
				ns.mu.Lock()
				ns.far[i+1] = mb.unreached
				ns.mu.Unlock()
			}
			err := m.Settled()
			if tc.waitFor == nil {
				if err != nil {
					t.Fatalf("Settled = %v, want nil", err)
				}
				// Ready once, ready for good: a member lost later does not
				// take a serving node out of service.
				ns.set(urls[1], false, nil)
				if err := m.Settled(); err != nil {
					t.Fatalf("after a member's loss: Settled = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, catalog.ErrNotReady) {
				t.Fatalf("Settled = %v, want ErrNotReady", err)
			}
			for k := 1; k < len(urls); k++ {
				if named := strings.Contains(err.Error(), urls[k]); named != slices.Contains(tc.waitFor, k) {
					t.Errorf("member %d named in %q: %v", k, err, named)
				}
			}
		})
	}
}

// TestSettledBounded: a member that never settles holds this node back
// for at most the flip timeout from the first question.
func TestSettledBounded(t *testing.T) {
	urls := []string{"http://node0.invalid", "http://node1.invalid"}
	ns := newNodes(urls[0])
	m := New(Config{Self: urls[0], Members: Static(urls), Peers: ns, Probe: time.Second, FlipTimeout: time.Millisecond,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer m.Close()
	ns.set(urls[1], false, nil) // answers that it is not ready
	if err := m.Settled(); err == nil {
		t.Fatal("Settled = nil with a member not ready, at the first question")
	}
	time.Sleep(5 * time.Millisecond)
	if err := m.Settled(); err != nil {
		t.Fatalf("Settled = %v past the flip timeout, want nil", err)
	}
}
