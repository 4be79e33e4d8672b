package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// readVerifiedEpoch reads epoch e whole in batches of 8 and checks that
// every sample comes once, byte for byte as packed.
func readVerifiedEpoch(t *testing.T, f *fixture, url string, e int) {
	t.Helper()
	n := f.index.NumSamples()
	seen := map[string]int{}
	for m := range (n + 7) / 8 {
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?batch_size=8", url, e, m))
		if resp.StatusCode != 200 {
			t.Fatalf("epoch %d batch %d: %d %s", e, m, resp.StatusCode, body)
		}
		f.verify(t, readTar(t, body), seen)
	}
	exactlyOnce(t, seen, n, fmt.Sprintf("epoch %d", e))
}

// settleDisk waits until g's disk tier holds at least chunks chunks and
// no write has been in flight for three polls: writes finish after the
// batches that caused them.
func settleDisk(t *testing.T, g *gateway.Gateway, chunks int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for quiet := 0; quiet < 3; time.Sleep(20 * time.Millisecond) {
		if quiet++; g.DiskStats().Chunks < chunks || g.DiskStats().Writing > 0 {
			quiet = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("disk cache %+v, want %d chunks and no write in flight", *g.DiskStats(), chunks)
		}
	}
}

func datasetBytes(f *fixture) (total int64) {
	for c := range f.index.NumChunks() {
		total += f.index.Chunk(c).Size
	}
	return total
}

// TestDiskTierWarmRestart: a gateway restarted on the same disk cache
// keeps every file its index still describes (pruneDisk) and reads at
// most a hundredth of the dataset from the store in its first epoch,
// which /stats tells from the bytes read from the disk. (What the loader
// serves from a tier opened again, and never from a damaged file:
// internal/job/catalog's TestLoaderThroughTheDisk; warm epochs from a disk
// four times the cache, and one that holds half the dataset:
// internal/cache/usetable's TestDiskTierHoldsFourTimesTheCache and
// TestDiskTierWithoutRoomKeepsTheSoonest.)
func TestDiskTierWarmRestart(t *testing.T) {
	f := newFixture(t, 32, 8)
	total := datasetBytes(f)
	dir := t.TempDir()
	cfg := func(c *gateway.Config) {
		c.CacheSize = total / 4
		c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{dir}, Size: 2 * total}
	}
	g, srv := start(t, f.store, cfg)
	readVerifiedEpoch(t, f, srv.URL, 0)
	settleDisk(t, g, int64(f.index.NumChunks()))
	srv.Close()
	g.Close()

	store := s3test.Wrap(f.store)
	g, srv = start(t, store, cfg)
	if st := g.DiskStats(); st.Found != int64(f.index.NumChunks()) || st.Chunks != st.Found {
		t.Fatalf("restarted gateway's disk stats %+v: want all %d chunks found and kept", *st, f.index.NumChunks())
	}
	readVerifiedEpoch(t, f, srv.URL, 1)
	if got := store.Take().Under("chunks/").Sum().Bytes; got > total/100 {
		t.Fatalf("the restarted gateway's first epoch read %.3f of the dataset from the store, want at most 0.01", float64(got)/float64(total))
	}
	if st := g.DiskStats(); st.Reads == 0 || st.Errors != 0 || st.Dropped != 0 {
		t.Errorf("disk stats %+v", *st)
	}
	// Epoch 2's figures may have begun: prefetch reads ahead.
	if es := g.EpochStats(); es[0].Epoch != 1 || es[0].BackendBytes > total/100 || es[0].DiskBytes == 0 {
		t.Errorf("/stats' epochs %+v: want epoch 1's bytes from the disk, at most a hundredth of the dataset from the store", es)
	}
}

// TestClusterOwnersServePeersFromDisk: on a cluster each owner keeps its
// chunks on its own disk, so warm epochs read nothing from the store
// although no node's RAM holds its share, and peers are answered from
// either tier. It stays here: that an owner's disk is written by the
// loads it makes for its peers' requests and read for them later is a
// composition of the peer protocol, the visit and the reader that only
// nodes answering each other show.
func TestClusterOwnersServePeersFromDisk(t *testing.T) {
	f := newFixture(t, 32, 8)
	total := datasetBytes(f)
	dirs := []string{t.TempDir(), t.TempDir()}
	nodes := startCluster(t, f, 2, nil, func(c *gateway.Config) {
		c.CacheSize = total / 8 // a quarter of each node's half
		c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{dirs[c.Cluster.Self]}, Size: total}
	})
	for e := range 3 {
		readVerifiedEpoch(t, f, nodes[e%2].srv.URL, e)
		for _, n := range nodes {
			settleDisk(t, n.g, 0)
		}
		var got int64
		for _, n := range nodes {
			got += n.store.Take().Under("chunks/").Sum().Bytes
		}
		t.Logf("epoch %d: %.3f of the dataset from the store", e, float64(got)/float64(total))
		if e > 0 && got > total/100 {
			t.Fatalf("epoch %d read %.3f of the dataset from the store, want at most 0.01", e, float64(got)/float64(total))
		}
	}
	var diskReads int64
	for _, n := range nodes {
		diskReads += n.g.DiskStats().Reads
	}
	if diskReads == 0 {
		t.Fatal("no chunk was read from a node's disk")
	}
}
