package feedback

import (
	"context"
	"errors"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/importance/snapshots"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// snapshotKey names a loaded snapshot.
type snapshotKey struct {
	dataset, index, job, version string
}

// snapshotMemo holds the importance snapshots requests name, read from the
// store once each (4 bytes a sample).
type snapshotMemo struct {
	memo   *lru.Cache[snapshotKey, *importance.Snapshot]
	flight singleflight.Group
}

// maxSnapshots bounds the snapshots held: a job's epochs each name one.
const maxSnapshots = 8

func newSnapshots() *snapshotMemo {
	m, _ := lru.New[snapshotKey, *importance.Snapshot](maxSnapshots)
	return &snapshotMemo{memo: m}
}

func snapKey(ds *catalog.Dataset, job, version string) snapshotKey {
	return snapshotKey{ds.Name, ds.ID(), job, version}
}

// Get returns a loaded snapshot without touching the store: the orders
// ask under the schedule's lock.
func (s *State) Get(ds *catalog.Dataset, job, version string) (*importance.Snapshot, bool) {
	return s.snaps.memo.Get(snapKey(ds, job, version))
}

// Snapshot returns a snapshot, reading and checking it from the store if
// it is not held. An unknown version is catalog.ErrUnknown; a damaged one
// catalog.ErrCorrupt.
func (s *State) Snapshot(ctx context.Context, ds *catalog.Dataset, job, version string) (*importance.Snapshot, error) {
	k := snapKey(ds, job, version)
	if snap, ok := s.snaps.memo.Get(k); ok {
		return snap, nil
	}
	v, err, _ := s.snaps.flight.Do(fmt.Sprint(k), func() (any, error) {
		snap, err := snapshots.Read(ctx, ds.Store, ds.Index, job, version)
		switch {
		case errors.Is(err, s3backend.ErrNotFound):
			return nil, fmt.Errorf("%w: no importance snapshot %s for job %s of dataset %s (seal an epoch to make one)", catalog.ErrUnknown, version, job, ds.Name)
		case errors.Is(err, importance.ErrCorrupt):
			return nil, fmt.Errorf("%w: %w", catalog.ErrCorrupt, err)
		case err != nil:
			return nil, err
		}
		s.snaps.memo.Add(k, snap)
		return snap, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*importance.Snapshot), nil
}
