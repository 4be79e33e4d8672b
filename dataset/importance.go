package dataset

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/s3backend"
)

// Importance snapshots live next to the dataset they score
// (docs/importance.md §10): each version an immutable object at
// importance.ObjectKey, and per sealed epoch a pointer naming its version,
// so that every replica finds what a job's rank 0 sealed.

// maxSnapshotBytes bounds an object read as a snapshot: 4 bytes a sample
// of at most 2^32 samples, and a header.
const maxSnapshotBytes = 1<<34 + 1<<16

// SealedKey is the key of the pointer to the version sealed for an epoch
// of a job.
func SealedKey(job string, epoch uint64) string {
	return fmt.Sprintf("_brand/importance/%s/epochs/%d", job, epoch)
}

// ReadSnapshot reads snapshot version of job and checks it against ix: its
// checksum, its index and sample count, and that it is the version and job
// its key names. A missing one wraps s3backend.ErrNotFound; one that fails
// a check wraps importance.ErrCorrupt or importance.ErrMismatch.
func ReadSnapshot(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, job, version string) (*importance.Snapshot, error) {
	key := importance.ObjectKey(job, version)
	b, err := readWhole(ctx, st, key, maxSnapshotBytes, "seal an epoch of the job to make one")
	if err != nil {
		return nil, err
	}
	snap, err := importance.Decode(b, ix)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", key, err)
	}
	if snap.Version() != version || snap.Job() != job {
		return nil, fmt.Errorf("dataset: %s holds version %s of job %s: %w", key, snap.Version(), snap.Job(), importance.ErrCorrupt)
	}
	return snap, nil
}

// WriteSnapshot writes snap under its version and points its epoch at it.
// Writing the same snapshot again writes the same bytes.
func WriteSnapshot(ctx context.Context, st s3backend.Store, snap *importance.Snapshot) error {
	b := snap.MarshalBinary()
	key := importance.ObjectKey(snap.Job(), snap.Version())
	if _, err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("dataset: writing %s: %w", key, err)
	}
	ptr := []byte(snap.Version() + "\n")
	if _, err := st.Put(ctx, SealedKey(snap.Job(), snap.Epoch()), bytes.NewReader(ptr), int64(len(ptr))); err != nil {
		return fmt.Errorf("dataset: writing the pointer of epoch %d: %w", snap.Epoch(), err)
	}
	return nil
}

// ReadSealed returns the version sealed for an epoch of job. Before the
// seal the error wraps s3backend.ErrNotFound.
func ReadSealed(ctx context.Context, st s3backend.Store, job string, epoch uint64) (string, error) {
	key := SealedKey(job, epoch)
	b, err := readWhole(ctx, st, key, 64, "the epoch is not sealed yet")
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if len(v) != 16 || strings.Trim(v, "0123456789abcdef") != "" {
		return "", fmt.Errorf("dataset: %s holds %q, not a snapshot version: %w", key, v, importance.ErrCorrupt)
	}
	return v, nil
}
