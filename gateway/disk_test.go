package gateway_test

import (
	"testing"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// readVerifiedEpoch is gatewaytest.Fixture.ReadEpoch.
func readVerifiedEpoch(t *testing.T, f *fixture, url string, e int) {
	t.Helper()
	f.shared().ReadEpoch(t, url, e)
}

// settleDisk is gatewaytest.SettleDisk.
func settleDisk(t *testing.T, g *gateway.Gateway, chunks int64) {
	t.Helper()
	gatewaytest.SettleDisk(t, g, chunks)
}

// datasetBytes is gatewaytest.Fixture.Bytes.
func datasetBytes(f *fixture) int64 { return f.shared().Bytes() }

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
