package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
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

// settleDisk waits until the disk tier holds chunks chunks: writes finish
// after the batches that caused them.
func settleDisk(t *testing.T, g *gateway.Gateway, chunks int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for g.DiskStats().Chunks < chunks {
		if time.Now().After(deadline) {
			t.Fatalf("disk cache holds %+v, want %d chunks", *g.DiskStats(), chunks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func datasetBytes(f *fixture) (total int64) {
	for c := range f.index.NumChunks() {
		total += f.index.Chunk(c).Size
	}
	return total
}

// TestDiskTierHoldsADatasetFourTimesTheCache: with a RAM cache a quarter
// of the dataset and a disk tier that holds it, warm epochs read at most
// a hundredth of the dataset from the store (without the tier, about
// three quarters), under either policy.
func TestDiskTierHoldsADatasetFourTimesTheCache(t *testing.T) {
	f := newFixture(t, 32, 8)
	total := datasetBytes(f)
	for _, policy := range []string{"schedule", "lru"} {
		t.Run(policy, func(t *testing.T) {
			store := newCountingStore(f.store)
			g, srv := start(t, store, func(c *gateway.Config) {
				c.CacheSize = total / 4
				c.CachePolicy = policy
				c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{t.TempDir()}, Size: 2 * total}
			})
			for e := range 3 {
				readVerifiedEpoch(t, f, srv.URL, e)
				settleDisk(t, g, int64(f.index.NumChunks()))
				got, _ := store.take()
				t.Logf("epoch %d: %.3f of the dataset from the store; disk %+v", e, float64(got)/float64(total), *g.DiskStats())
				if e == 0 && got < total {
					t.Fatalf("epoch 0 read %d bytes of %d from the store: the first epoch must read everything", got, total)
				}
				if e > 0 && got > total/100 {
					t.Fatalf("epoch %d read %.3f of the dataset from the store, want at most 0.01", e, float64(got)/float64(total))
				}
			}
			if st := g.DiskStats(); st.Reads == 0 || st.Errors != 0 || st.Dropped != 0 {
				t.Fatalf("disk stats %+v", *st)
			}
			// /stats tells the store's bytes from the disk's, per epoch.
			for _, es := range g.EpochStats() {
				if es.Epoch > 0 && (es.BackendBytes > total/100 || es.DiskBytes == 0) {
					t.Fatalf("epoch %d: /stats says %d bytes from the store, %d from disk", es.Epoch, es.BackendBytes, es.DiskBytes)
				}
			}
		})
	}
}

// TestDiskTierWithoutRoomForAllKeepsTheSoonest: a disk that holds half
// the dataset beside a RAM cache of a quarter still saves store reads
// against RAM alone, and never serves a wrong byte.
func TestDiskTierWithoutRoomForAllKeepsTheSoonest(t *testing.T) {
	f := newFixture(t, 32, 8)
	total := datasetBytes(f)
	run := func(disk bool) int64 {
		store := newCountingStore(f.store)
		_, srv := start(t, store, func(c *gateway.Config) {
			c.CacheSize = total / 4
			if disk {
				c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{t.TempDir()}, Size: total / 2}
			}
		})
		var warm int64
		for e := range 4 {
			readVerifiedEpoch(t, f, srv.URL, e)
			time.Sleep(50 * time.Millisecond) // let the writes of the epoch end
			got, _ := store.take()
			if e > 0 {
				warm += got
			}
		}
		return warm
	}
	ram, disk := run(false), run(true)
	t.Logf("warm epochs' store reads: RAM only %.3f, RAM + disk %.3f datasets", float64(ram)/float64(total), float64(disk)/float64(total))
	if disk >= ram*3/4 {
		t.Fatalf("a disk of half the dataset saved too little: %d bytes against %d with RAM only", disk, ram)
	}
}

// fillDisk runs a gateway with a RAM cache of a quarter of the dataset
// and a disk tier that holds it through epoch 0, waits for its writes and
// stops it; it returns the disk cache's directory and the configuration.
func fillDisk(t *testing.T, f *fixture, total int64) (string, func(*gateway.Config)) {
	t.Helper()
	dir := t.TempDir()
	cfg := func(c *gateway.Config) {
		c.CacheSize = total / 4
		c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{dir}, Size: 2 * total}
	}
	g, srv := start(t, newCountingStore(f.store), cfg)
	readVerifiedEpoch(t, f, srv.URL, 0)
	settleDisk(t, g, int64(f.index.NumChunks()))
	srv.Close()
	g.Close()
	return dir, cfg
}

// TestDiskTierWarmRestart: a gateway restarted on the same disk cache
// keeps every file its index still describes (pruneDisk) and reads at
// most a hundredth of the dataset from the store in its first epoch.
// (What the loader serves from a tier opened again, and never from a
// damaged file: internal/catalog's TestLoaderThroughTheDisk.)
func TestDiskTierWarmRestart(t *testing.T) {
	f := newFixture(t, 32, 8)
	total := datasetBytes(f)
	_, cfg := fillDisk(t, f, total)
	store := newCountingStore(f.store)
	g, srv := start(t, store, cfg)
	if st := g.DiskStats(); st.Found != int64(f.index.NumChunks()) || st.Chunks != st.Found {
		t.Fatalf("restarted gateway's disk stats %+v: want all %d chunks found and kept", *st, f.index.NumChunks())
	}
	readVerifiedEpoch(t, f, srv.URL, 1)
	if got, _ := store.take(); got > total/100 {
		t.Fatalf("the restarted gateway's first epoch read %.3f of the dataset from the store, want at most 0.01", float64(got)/float64(total))
	}
}

// TestClusterOwnersServePeersFromDisk: on a cluster each owner keeps its
// chunks on its own disk, so warm epochs read nothing from the store
// although no node's RAM holds its share, and peers are answered from
// either tier.
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
		for _, n := range nodes { // let the epoch's writes end
			quiet := 0
			for deadline := time.Now().Add(20 * time.Second); quiet < 3; time.Sleep(20 * time.Millisecond) {
				if quiet++; n.g.DiskStats().Writing > 0 {
					quiet = 0
				}
				if time.Now().After(deadline) {
					t.Fatalf("disk writes still in flight: %+v", *n.g.DiskStats())
				}
			}
		}
		var got int64
		for _, n := range nodes {
			b, _ := n.store.take()
			got += b
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
