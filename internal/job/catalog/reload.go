package catalog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/server/stopper"
)

// reloader is the catalog's part that swaps in a dataset's new index when
// the stored one changes: a poll of the index object's ETag every
// interval, a Poke (a chunk read found its object changed, or a peer
// serves another version), or an explicit Reload (SIGHUP in `brand
// serve`).
//
// The swap replaces the catalog's current *Dataset and keeps the one it
// replaced. A batch already laid out holds the old pointer and finishes on
// the old version: its chunk keys carry the old ETags, which the catalog
// still resolves, and cache keys include object ETags, so chunks of the
// two versions never mix. A batch laid out after the swap uses the new
// index, and its ETag, which hashes the index's identity, differs from the
// old batch's.
type reloader struct {
	mu   sync.Mutex        // one check at a time
	seen map[string]string // dataset → the index ETag last looked at

	kick chan struct{} // check now

	polling atomic.Bool // Poll was called
}

func (r *reloader) init() {
	r.seen = map[string]string{}
	r.kick = make(chan struct{}, 1)
}

// Poke asks the poller for a check soon; it never blocks.
func (c *Catalog) Poke() {
	select {
	case c.reload.kick <- struct{}{}:
	default:
	}
}

// Poll checks every interval, and when poked, on a task of part (the
// gateway's), until the part stops. Only the first call polls.
func (c *Catalog) Poll(part *stopper.Group, interval time.Duration) {
	if c.reload.polling.Swap(true) {
		return
	}
	part.Go(func(ctx context.Context) {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-c.reload.kick:
			}
			if _, err := c.Reload(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn().Err(err).Msg("checking the dataset indexes for a new version")
			}
		}
	})
}

// Reload checks every dataset's stored index and swaps in those that
// changed, returning the names of the datasets reloaded. A dataset whose
// index cannot be read keeps serving the version it has; the first such
// error is returned after the others are checked.
func (c *Catalog) Reload(ctx context.Context) ([]string, error) {
	if err := c.NotReady(); err != nil {
		return nil, err
	}
	c.reload.mu.Lock()
	defer c.reload.mu.Unlock()
	var reloaded []string
	var first error
	for _, name := range c.names {
		ok, err := c.reloadDataset(ctx, name)
		if err != nil && first == nil {
			first = err
		}
		if ok {
			reloaded = append(reloaded, name)
		}
	}
	return reloaded, first
}

// reloadDataset swaps in a new version of one dataset if its index object
// has a new ETag and describes another index.
func (c *Catalog) reloadDataset(ctx context.Context, name string) (bool, error) {
	cur, err := c.Get(name)
	if err != nil {
		return false, err
	}
	info, err := cur.Store.Stat(ctx, chunkindex.IndexKey)
	if err != nil {
		return false, fmt.Errorf("dataset %s: %w", name, err)
	}
	seen, ok := c.reload.seen[name]
	if !ok {
		seen = cur.IndexETag
	}
	if info.ETag == seen {
		return false, nil
	}
	ix, err := readIndex(ctx, cur.Store, cur.partition)
	if err != nil {
		return false, fmt.Errorf("dataset %s: reading its new index: %w", name, err)
	}
	if ix.ID() == cur.ID() {
		c.reload.seen[name] = info.ETag
		return false, nil // rewritten with the same content
	}
	next, err := open(ctx, cur.opened, name, cur.URL, cur.Store, ix)
	if err != nil {
		// Not marked seen: the next check opens it again. A dataset
		// served in place has its manifest written after its index, so
		// a check between the two finds them apart.
		return false, fmt.Errorf("dataset %s: opening its new index: %w", name, err)
	}
	c.reload.seen[name] = info.ETag
	next.IndexETag, next.IndexModified, next.Version, next.partition = info.ETag, info.ModTime, cur.Version+1, cur.partition
	c.replace(next)
	c.metrics.indexReloads.WithLabelValues(name).Inc()
	c.log.Info().Str("dataset", name).Str("old_index", cur.ID()).Str("index", ix.ID()).
		Int("version", next.Version).Int("chunks", ix.NumChunks()).Int("samples", ix.NumSamples()).
		Msg("dataset index changed: reloaded; batches in flight and clients that pinned the old version finish on it")
	return true, nil
}
