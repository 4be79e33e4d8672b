// Package snapshots keeps a job's importance snapshots in the store of
// the dataset they score (docs/importance.md §10): each version an
// immutable object at importance.ObjectKey, and per sealed epoch a
// write-once pointer naming its version, so that every replica finds
// what a job's rank 0 sealed. Reads are bounded and checked against the
// index they score.
//
// It is the seals' own room: the gateway's seals (internal/job/feedback)
// and `brand plan` read and write through it, and neither links the
// tools that build datasets (package dataset).
package snapshots

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/s3backend"
)

// maxSnapshotBytes bounds an object read as a snapshot: 4 bytes a sample
// of at most 2^32 samples, and a header.
const maxSnapshotBytes = 1<<34 + 1<<16

// SealedKey is the key of the pointer to the version sealed for an epoch
// of a job.
func SealedKey(job string, epoch uint64) string {
	return epochsDir(job) + strconv.FormatUint(epoch, 10)
}

// epochsDir is the folder of a job's epoch pointers.
func epochsDir(job string) string {
	return importance.KeyPrefix + job + "/epochs/"
}

// Read reads snapshot version of job and checks it against ix: its
// checksum, its index and sample count, and that it is the version and job
// its key names. A missing one wraps s3backend.ErrNotFound; one that fails
// a check wraps importance.ErrCorrupt or importance.ErrMismatch.
func Read(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, job, version string) (*importance.Snapshot, error) {
	key := importance.ObjectKey(job, version)
	b, err := stored.ReadWhole(ctx, st, key, maxSnapshotBytes, "seal an epoch of the job to make one")
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

// Write writes snap under its version and, unless its epoch has
// a pointer already, the pointer to it, created only if absent
// (s3backend.Store.PutIfAbsent): whichever of many writers, on one node
// or many, creates the pointer first wins, and the epoch's version never
// changes after. It returns the version the pointer names and whether
// this call wrote it. A writer that lost removes the snapshot it wrote,
// unless it is the winner's: no pointer can name it, since a snapshot's
// bytes, and so its version, include its epoch.
func Write(ctx context.Context, st s3backend.Store, snap *importance.Snapshot) (version string, written bool, err error) {
	b := snap.MarshalBinary()
	key := importance.ObjectKey(snap.Job(), snap.Version())
	if _, err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		return "", false, fmt.Errorf("dataset: writing %s: %w", key, err)
	}
	ptr := []byte(snap.Version() + "\n")
	_, err = st.PutIfAbsent(ctx, SealedKey(snap.Job(), snap.Epoch()), bytes.NewReader(ptr), int64(len(ptr)))
	switch {
	case err == nil:
		return snap.Version(), true, nil
	case !errors.Is(err, s3backend.ErrExists):
		return "", false, fmt.Errorf("dataset: writing the pointer of epoch %d: %w", snap.Epoch(), err)
	}
	won, err := Sealed(ctx, st, snap.Job(), snap.Epoch())
	if err != nil {
		return "", false, err
	}
	if won != snap.Version() {
		if err := st.Delete(ctx, key); err != nil {
			return "", false, fmt.Errorf("dataset: removing %s, which lost the race to seal epoch %d: %w", key, snap.Epoch(), err)
		}
	}
	return won, false, nil
}

// Sealed returns the version sealed for an epoch of job. Before the
// seal the error wraps s3backend.ErrNotFound.
func Sealed(ctx context.Context, st s3backend.Store, job string, epoch uint64) (string, error) {
	key := SealedKey(job, epoch)
	b, err := stored.ReadWhole(ctx, st, key, 64, "the epoch is not sealed yet")
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if len(v) != 16 || strings.Trim(v, "0123456789abcdef") != "" {
		return "", fmt.Errorf("dataset: %s holds %q, not a snapshot version: %w", key, v, importance.ErrCorrupt)
	}
	return v, nil
}

// SealedEpochs lists the epochs of job that have a pointer, newest
// first.
func SealedEpochs(ctx context.Context, st s3backend.Store, job string) ([]uint64, error) {
	objs, err := st.List(ctx, epochsDir(job))
	if err != nil {
		return nil, fmt.Errorf("dataset: listing the sealed epochs of job %s: %w", job, err)
	}
	var epochs []uint64
	for _, o := range objs {
		if e, err := strconv.ParseUint(strings.TrimPrefix(o.Key, epochsDir(job)), 10, 64); err == nil {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)
	slices.Reverse(epochs)
	return epochs, nil
}

// Collect keeps what the last keep sealed epochs of job need and
// deletes the rest: the pointers of older epochs, then every snapshot of
// an epoch older than those kept that no kept pointer names (left by an
// earlier release, which rewrote pointers, or by a seal that stopped
// between its two writes). A snapshot of a kept epoch or a newer one is
// never deleted, even if no pointer names it yet: a seal of that epoch
// may be about to write its pointer. It returns the keys deleted; a
// failure leaves the rest for the next collection.
func Collect(ctx context.Context, st s3backend.Store, job string, keep int) ([]string, error) {
	epochs, err := SealedEpochs(ctx, st, job)
	if err != nil || len(epochs) <= keep || keep < 1 {
		return nil, err
	}
	oldest := epochs[keep-1] // the oldest epoch kept
	named := map[string]bool{}
	for _, e := range epochs[:keep] {
		v, err := Sealed(ctx, st, job, e)
		if err != nil {
			return nil, err
		}
		named[importance.ObjectKey(job, v)] = true
	}
	objs, err := st.List(ctx, importance.KeyPrefix+job+"/")
	if err != nil {
		return nil, fmt.Errorf("dataset: listing the snapshots of job %s: %w", job, err)
	}
	var stale []string
	for _, e := range epochs[keep:] {
		stale = append(stale, SealedKey(job, e))
	}
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, importance.Ext) || named[o.Key] {
			continue
		}
		if e, ok := snapshotEpoch(ctx, st, o); ok && e < oldest {
			stale = append(stale, o.Key)
		}
	}
	var deleted []string
	for _, key := range stale { // pointers first: no pointer names a deleted snapshot
		if err := st.Delete(ctx, key); err != nil {
			return deleted, fmt.Errorf("dataset: collecting %s: %w", key, err)
		}
		deleted = append(deleted, key)
	}
	return deleted, nil
}

// snapshotHead bounds what snapshotEpoch reads: the header of a snapshot
// (docs/importance.md §10) with an index ID of up to 4 KB.
const snapshotHead = 4 << 10

// snapshotEpoch reads the epoch from a snapshot object's header, which
// is all of it a collection needs; false if the object does not start as
// a snapshot of this format does.
func snapshotEpoch(ctx context.Context, st s3backend.Store, o s3backend.ObjectInfo) (uint64, bool) {
	b := make([]byte, min(o.Size, snapshotHead))
	if err := st.ReadRange(ctx, o.Key, o.ETag, 0, b); err != nil {
		return 0, false
	}
	const head = len(importance.Magic) + 4 // magic, format version
	if len(b) < head+2 || string(b[:len(importance.Magic)]) != importance.Magic ||
		binary.LittleEndian.Uint32(b[len(importance.Magic):]) != importance.FormatVersion {
		return 0, false
	}
	at := head
	for range 2 { // the index ID, then the job, each after its uint16 length
		if len(b) < at+2 {
			return 0, false
		}
		at += 2 + int(binary.LittleEndian.Uint16(b[at:]))
	}
	if len(b) < at+8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[at:]), true
}
