package peer

import (
	"context"
	"errors"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/order"
)

// Solo is a single gateway's view of its cluster: one node, this one,
// which reads every chunk itself.
type Solo struct {
	// Held returns the index versions this gateway holds of a dataset,
	// the one it serves first.
	Held func(dataset string) []string
}

// Self implements the cluster views: node 0.
func (Solo) Self() int { return 0 }

// Nodes is 1.
func (Solo) Nodes() int { return 1 }

// Source is always this node.
func (Solo) Source(*catalog.Dataset, int, func(int) bool) int { return 0 }

// Local is always true: a single gateway reads every chunk itself.
func (Solo) Local(*catalog.Dataset, int) bool { return true }

// Fetch is never called: no chunk's source is another node.
func (Solo) Fetch(context.Context, int, Request) (Reply, error) {
	return Reply{}, errors.New("peer: a single gateway has no peers to fetch from")
}

// Delivered counts nothing: every byte is this node's.
func (Solo) Delivered(home, peer int64) {}

// ReadRemote leaves every sample to this node.
func (Solo) ReadRemote(_ context.Context, smp order.Samples, _ *Origin, _, _ [][]byte) (local, missing []int, err error) {
	local = make([]int, len(smp.IDs))
	for i := range local {
		local[i] = i
	}
	return local, nil, nil
}

// FetchAhead has nothing to fetch.
func (Solo) FetchAhead(string, func(context.Context) ([]Fetch, error)) {}

// TakeAhead finds nothing.
func (Solo) TakeAhead(context.Context, string) [][][]byte { return nil }

// Agreed is the version this gateway serves.
func (s Solo) Agreed(name string) string {
	if held := s.Held(name); len(held) > 0 {
		return held[0]
	}
	return ""
}

// Holders: no other node holds anything.
func (Solo) Holders(string, string, bool) []string { return nil }

// View is a cluster of this node alone, unnamed.
func (Solo) View(world int, _ []string) api.Cluster {
	c := api.Cluster{Nodes: []api.ClusterNode{{Up: true}}}
	if world > 0 {
		c.Homes = make([]int, world)
	}
	return c
}

// Stats is nil: /stats shows no cluster.
func (Solo) Stats([]string) *api.ClusterStats { return nil }

// Heard and Served record nothing.
func (Solo) Heard(int)         {}
func (Solo) Served(int, int64) {}

// Leave has no cluster to leave.
func (Solo) Leave(context.Context) error { return nil }

// Start and Close have nothing to run.
func (Solo) Start() {}
func (Solo) Close() {}

// URL is "": a single gateway is not named.
func (Solo) URL(int) string { return "" }

// Feedback is never called: a single gateway's feedback is its own.
func (Solo) Feedback(context.Context, int, *catalog.Dataset, string, uint64) ([]byte, error) {
	return nil, errors.New("peer: a single gateway has no peers")
}

// Slot is -1: a single gateway takes no peer's request.
func (Solo) Slot(string) int { return -1 }

// Members is nil: a single gateway lays every batch out alone, whatever
// membership a request names.
func (Solo) Members(context.Context, string) (*cluster.Membership, error) { return nil, nil }

// Known keeps no membership.
func (Solo) Known(string) (*cluster.Membership, bool) { return nil, false }

// Describe has no cluster to describe.
func (Solo) Describe(*State) {}

// Peers is none: a single gateway's feedback is its own.
func (Solo) Peers() []int { return nil }
