package route

import (
	"context"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
)

// Solo is a single gateway's router: one node, this one, which reads
// every chunk itself. Code that reads samples asks its router where to
// read and never checks whether there is a cluster.
type Solo struct{}

// Nodes is 1.
func (Solo) Nodes() int { return 1 }

// Local is always true: a single gateway reads every chunk itself.
func (Solo) Local(*catalog.Dataset, int) bool { return true }

// ReadRemote leaves every sample to this node.
func (Solo) ReadRemote(_ context.Context, smp layout.Samples, _ *transport.Origin, _, _ [][]byte) (local, missing []int, err error) {
	local = make([]int, len(smp.IDs))
	for i := range local {
		local[i] = i
	}
	return local, nil, nil
}

// FetchNext has nothing to fetch.
func (Solo) FetchNext(string, func(context.Context) ([]Fetch, error)) {}

// TakeNext finds nothing.
func (Solo) TakeNext(context.Context, string) [][][]byte { return nil }

// Delivered counts nothing: every byte is this node's.
func (Solo) Delivered(home, peer int64) {}
