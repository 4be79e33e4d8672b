package usetable_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/disktier"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/shuffle"
)

// diskLoader is a run's loader with a disk tier below the cache, as
// catalog.Loader.WithDisk is (chunkcache.TieredLoader and Spiller): a
// chunk the tier holds is read from it, its bytes checked against the
// store's, any other read from the store; what the store gave is offered
// to the tier.
type diskLoader struct {
	r    *policyRun
	tier *disktier.Tier
}

func newDiskLoader(t *testing.T, r *policyRun, capacity int64, distance func(chunkcache.Key) int64) *diskLoader {
	t.Helper()
	tier, err := disktier.Open(disktier.Config{Dirs: []string{t.TempDir()}, Capacity: capacity, Distance: distance, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tier.Close)
	return &diskLoader{r: r, tier: tier}
}

// errWrongBytes is a chunk from the disk whose bytes are not the store's.
var errWrongBytes = errors.New("the disk's bytes are not the store's")

func (l *diskLoader) LoadTiered(ctx context.Context, k chunkcache.Key, buf []byte) (bool, error) {
	want := make([]byte, len(buf))
	storeBytes(k, want)
	verify := func(b []byte) error {
		if !bytes.Equal(b, want) {
			l.r.t.Errorf("chunk %s from the disk has the wrong bytes", k.Object)
			return errWrongBytes
		}
		return nil
	}
	if l.tier.Read(ctx, k, buf, verify) {
		l.r.mu.Lock()
		l.r.counts(l.r.epoch).disk += int64(len(buf))
		l.r.mu.Unlock()
		return true, nil
	}
	return false, l.r.fromStore(ctx, k, buf)
}

func (l *diskLoader) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	_, err := l.LoadTiered(ctx, k, buf)
	return err
}

func (l *diskLoader) Spill(k chunkcache.Key, data []byte, release func()) {
	l.tier.Spill(k, data, release)
}
func (l *diskLoader) Wants(k chunkcache.Key) bool { return l.tier.Wants(k) }

// diskRun reads epochs of one job over a dataset of 32 chunks through a
// cache of a quarter of it under policy, with a disk tier of disk bytes
// below it (none if 0), and returns the run and the dataset's bytes.
func diskRun(t *testing.T, policy string, disk func(total int64) int64, epochs int) (*policyRun, int64) {
	ds := catalog.NewDataset("d", "", nil, usetable.IndexOf(t, 32, 8))
	total := ds.Index.TotalBytes()
	r := newPolicyRun(t, ds, total/4, policy, 0, disk(total))
	r.jobs([]api.Job{{Params: shuffle.Params{BatchSize: 8, World: 1, Window: 2, Seed: 42}}}, epochs, 0)
	return r, total
}

// TestDiskTierHoldsFourTimesTheCache: with a RAM cache a quarter of the
// dataset and a disk tier that holds it, the first epoch reads the whole
// dataset from the store and the warm epochs at most a hundredth of it
// (without the tier, about three quarters), under either policy; the
// tier serves only the store's bytes, drops no file and fails no write.
func TestDiskTierHoldsFourTimesTheCache(t *testing.T) {
	for _, policy := range []string{"schedule", "lru"} {
		t.Run(policy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, total := diskRun(t, policy, func(total int64) int64 { return 2 * total }, 3)
				for e := range uint64(3) {
					c := r.stats[e]
					t.Logf("epoch %d: %.3f of the dataset from the store, %.3f from the disk", e, float64(c.bytes)/float64(total), float64(c.disk)/float64(total))
					if e == 0 && c.bytes < total {
						t.Errorf("epoch 0 read %d bytes of %d from the store: the first epoch must read everything", c.bytes, total)
					}
					if e > 0 && (c.bytes > total/100 || c.disk == 0) {
						t.Errorf("epoch %d read %.3f of the dataset from the store and %d bytes from the disk, want at most 0.01 and some", e, float64(c.bytes)/float64(total), c.disk)
					}
				}
				if st := r.cache.Stats(); st.LoadsBelow == 0 {
					t.Errorf("the cache counts no load from below: %+v", st)
				}
				tier := r.loader.(*diskLoader).tier
				if st := tier.Stats(); st.Reads == 0 || st.Errors != 0 || st.Dropped != 0 {
					t.Errorf("disk stats %+v", st)
				}
			})
		})
	}
}

// TestDiskTierWithoutRoomKeepsTheSoonest: a disk that holds half the
// dataset beside a RAM cache of a quarter still saves a quarter of the
// store reads of RAM alone in the warm epochs: it keeps the chunks
// needed soonest.
func TestDiskTierWithoutRoomKeepsTheSoonest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		warm := func(disk func(int64) int64) (n int64, total int64) {
			r, total := diskRun(t, "schedule", disk, 4)
			for e := uint64(1); e < 4; e++ {
				n += r.stats[e].bytes
			}
			return n, total
		}
		ram, total := warm(func(int64) int64 { return 0 })
		disk, _ := warm(func(total int64) int64 { return total / 2 })
		t.Logf("warm epochs' store reads: RAM only %.3f, RAM + disk %.3f datasets", float64(ram)/float64(total), float64(disk)/float64(total))
		if disk >= ram*3/4 {
			t.Errorf("a disk of half the dataset saved too little: %d bytes against %d with RAM only", disk, ram)
		}
	})
}
