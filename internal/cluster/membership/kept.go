package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/job/catalog"
)

// A membership version is a pure function of its member list
// (cluster.MembershipVersion), so its list can be kept anywhere and found
// again by the version alone. A node keeps each version it reports in the
// store of every dataset it serves, beside the index (KeptPrefix and the
// version: the members, one a line, sorted): after a change before it
// reports the new version, so that the cluster never agrees on a version
// it has not kept; at start, and when it joins, as soon as its datasets
// are loaded. A request that pins a version no node it can reach
// remembers — every node has restarted since its job pinned it, or more
// than 64 versions have passed — finds the list there, on any node, one
// that never was a member of it too.

// KeptPrefix is where a dataset's store keeps membership lists: a few
// hundred bytes a version, never removed (a job that pinned one may come
// back to it after any number of changes).
const KeptPrefix = "_brand/memberships/"

// maxKeptBytes bounds a kept list read back: members of a cluster of the
// largest size.
const maxKeptBytes = 1 << 20

// errNotKept means no store keeps a version's list.
var errNotKept = errors.New("no store keeps its member list")

// kept writes and reads the membership lists kept in the datasets'
// stores. A nil kept keeps nothing. Safe for concurrent use.
type kept struct {
	datasets func() ([]*catalog.Dataset, error)
	log      zerolog.Logger

	mu      sync.Mutex
	written map[string]bool      // versions this node has kept
	missing map[string]time.Time // versions no store kept when last read, until when not to read again
}

// missingFor is how long a version no store keeps is not looked for
// again: a request that pins a version that never was costs the stores
// one read per dataset at most that often.
const missingFor = 5 * time.Second

// keptOf returns the lists kept in the stores of datasets' datasets; nil
// if datasets is.
func keptOf(datasets func() ([]*catalog.Dataset, error), log zerolog.Logger) *kept {
	if datasets == nil {
		return nil
	}
	return &kept{datasets: datasets, log: log, written: map[string]bool{}, missing: map[string]time.Time{}}
}

// keep writes ms's list to the datasets' stores until one takes it,
// waiting for the datasets to be loaded and retrying with back-off until
// ctx ends.
func (k *kept) keep(ctx context.Context, ms *cluster.Membership) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Minute) {
		err := k.keepOnce(ctx, ms)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// keepOnce writes ms's list to every dataset's store, once (nothing if it
// did before), waiting for the datasets to be loaded until ctx ends. A
// version kept in one store is kept: every node serves the same datasets,
// and reads them all.
func (k *kept) keepOnce(ctx context.Context, ms *cluster.Membership) error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	done := k.written[ms.Version()]
	k.mu.Unlock()
	if done {
		return nil
	}
	datasets, err := k.datasets()
	for errors.Is(err, catalog.ErrNotReady) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("keeping membership %s: the datasets are not loaded: %w", ms.Version(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		datasets, err = k.datasets()
	}
	if err != nil {
		return err
	}
	key, body := KeptPrefix+ms.Version(), []byte(strings.Join(ms.Members(), "\n")+"\n")
	var failed []error
	for _, ds := range datasets {
		if _, err := ds.Store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
			failed = append(failed, fmt.Errorf("dataset %s: %w", ds.Name, err))
		}
	}
	err = errors.Join(failed...)
	if len(failed) == len(datasets) {
		k.log.Warn().Err(err).Str("members", ms.Version()).
			Msg("keeping a membership's list in the datasets' stores failed (retried): if every node restarts, jobs pinned to it cannot go on")
		return fmt.Errorf("keeping membership %s: %w", ms.Version(), err)
	}
	if err != nil {
		k.log.Warn().Err(err).Str("members", ms.Version()).Msg("keeping a membership's list in a dataset's store")
	}
	k.mu.Lock()
	k.written[ms.Version()] = true
	k.mu.Unlock()
	return nil
}

// find reads version's list from the first dataset store that keeps it
// and checks that it hashes to version.
func (k *kept) find(ctx context.Context, version string) (*cluster.Membership, error) {
	if k == nil {
		return nil, errNotKept
	}
	k.mu.Lock()
	until, missing := k.missing[version]
	k.mu.Unlock()
	if missing && time.Now().Before(until) {
		return nil, errNotKept
	}
	datasets, err := k.datasets()
	if err != nil {
		return nil, err
	}
	key := KeptPrefix + version
	for _, ds := range datasets {
		info, err := ds.Store.Stat(ctx, key)
		if err != nil || info.Size > maxKeptBytes {
			continue
		}
		buf := make([]byte, info.Size)
		if err := ds.Store.ReadRange(ctx, key, info.ETag, 0, buf); err != nil {
			continue
		}
		ms, err := cluster.NewMembership(strings.Fields(string(buf)))
		if err == nil && ms.Version() == version {
			return ms, nil
		}
		k.log.Warn().Str("dataset", ds.Name).Str("key", key).Msg("a kept membership list that is not its version's; ignored")
	}
	k.mu.Lock()
	if len(k.missing) >= 1024 {
		clear(k.missing)
	}
	k.missing[version] = time.Now().Add(missingFor)
	k.mu.Unlock()
	return nil, errNotKept
}
