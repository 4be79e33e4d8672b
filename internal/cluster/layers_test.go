package cluster

import (
	"testing"

	"github.com/brandgw/brand/internal/testsupport/layertest"
)

// TestRoomsReadDownward holds the cluster's rooms to the layers they sit
// in ("Layers that read downward"): who the members are knows nothing of
// how the nodes are reached, and the protocol that reaches them carries
// bytes, not the batch's stages or the job's rooms.
func TestRoomsReadDownward(t *testing.T) {
	layertest.Never(t, "internal/cluster/membership",
		"etcd's membership knows no transport: it reads what nodes say of themselves (internal/cluster/nodestate) and takes its peers through its own Peers interface",
		"internal/cluster/transport")
	layertest.Never(t, "internal/cluster/nodestate",
		"what a node says of itself lies below the membership and the transport that share it",
		"internal/cluster/membership", "internal/cluster/transport", "internal/batch", "internal/job")
	layertest.Never(t, "internal/cluster/transport",
		"the peer protocol carries bytes and wire types of its own: what a request means to the node serving it (the parameter table, the catalog, the layout) is internal/cluster/peerreq's",
		"internal/batch", "internal/job")
}
