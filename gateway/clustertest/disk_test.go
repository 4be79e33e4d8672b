package clustertest_test

import (
	"testing"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

// TestClusterOwnersServePeersFromDisk: on a cluster each owner keeps its
// chunks on its own disk, so warm epochs read nothing from the store
// although no node's RAM holds its share, and peers are answered from
// either tier: that an owner's disk is written by the loads it makes for
// its peers' requests and read for them later is a composition of the
// peer protocol, the visit and the reader that only nodes answering each
// other show.
func TestClusterOwnersServePeersFromDisk(t *testing.T) {
	f := gatewaytest.NewFixture(t, 32, 8)
	total := f.Bytes()
	dirs := []string{t.TempDir(), t.TempDir()}
	nodes := gatewaytest.StartCluster(t, f.Store, 2, nil, func(c *gateway.Config) {
		c.CacheSize = total / 8 // a quarter of each node's half
		c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{dirs[c.Cluster.Self]}, Size: total}
	})
	for e := range 3 {
		f.ReadEpoch(t, nodes[e%2].Srv.URL, e)
		for _, n := range nodes {
			gatewaytest.SettleDisk(t, n.G, 0)
		}
		var got int64
		for _, n := range nodes {
			got += n.Store.Take().Under("chunks/").Sum().Bytes
		}
		t.Logf("epoch %d: %.3f of the dataset from the store", e, float64(got)/float64(total))
		if e > 0 && got > total/100 {
			t.Fatalf("epoch %d read %.3f of the dataset from the store, want at most 0.01", e, float64(got)/float64(total))
		}
	}
	var diskReads int64
	for _, n := range nodes {
		diskReads += n.G.DiskStats().Reads
	}
	if diskReads == 0 {
		t.Fatal("no chunk was read from a node's disk")
	}
}
