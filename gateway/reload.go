package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
)

// reloader swaps in a dataset's new index when the stored one changes: a
// poll of the index object's ETag every Config.IndexPoll, a kick when a
// chunk read finds its object changed, or an explicit Reload (SIGHUP in
// `brand serve`).
//
// The swap replaces the catalog's *loadedDataset pointer and nothing else.
// A batch already laid out holds the old pointer and finishes on the old
// version: its chunk keys carry the old ETags, which the catalog still
// resolves through the version it replaced (catalog.chunk), and cache keys
// include object ETags, so chunks of the two versions never mix. A batch
// laid out after the swap uses the new index, and its ETag, which hashes
// the index's identity, differs from the old batch's.
type reloader struct {
	mu   sync.Mutex        // one check at a time
	seen map[string]string // dataset → the index ETag last looked at

	kick chan struct{} // a chunk changed: check now

	pollMu sync.Mutex // Load may still be starting the poller when Close runs
	closed bool
	stop   context.CancelFunc
	done   chan struct{}
}

func newReloader() *reloader {
	return &reloader{seen: map[string]string{}, kick: make(chan struct{}, 1)}
}

// poke asks the poller for a check soon; it never blocks.
func (r *reloader) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// startPolling checks every interval, and when poked, until stopPolling.
func (g *Gateway) startPolling(interval time.Duration) {
	r := g.reload
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	if r.closed || r.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-r.kick:
			}
			if _, err := g.Reload(ctx); err != nil && ctx.Err() == nil {
				g.log.Warn().Err(err).Msg("checking the dataset indexes for a new version")
			}
		}
	}()
}

// stopPolling ends the poller, if it runs, and waits for it.
func (g *Gateway) stopPolling() {
	r := g.reload
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.closed = true
	if r.stop != nil {
		r.stop()
		<-r.done
	}
}

// Reload checks every dataset's stored index and swaps in those that
// changed, returning the names of the datasets reloaded. A dataset whose
// index cannot be read keeps serving the version it has; the first such
// error is returned after the others are checked.
func (g *Gateway) Reload(ctx context.Context) ([]string, error) {
	if !g.Ready() {
		return nil, ErrNotReady
	}
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	var reloaded []string
	var first error
	for _, name := range g.catalog.names {
		ok, err := g.reloadDataset(ctx, name)
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
func (g *Gateway) reloadDataset(ctx context.Context, name string) (bool, error) {
	cur, err := g.catalog.get(name)
	if err != nil {
		return false, err
	}
	info, err := cur.store.Stat(ctx, chunkindex.IndexKey)
	if err != nil {
		return false, fmt.Errorf("dataset %s: %w", name, err)
	}
	seen, ok := g.reload.seen[name]
	if !ok {
		seen = cur.indexETag
	}
	if info.ETag == seen {
		return false, nil
	}
	ix, err := dataset.ReadIndex(ctx, cur.store)
	if err != nil {
		return false, fmt.Errorf("dataset %s: reading its new index: %w", name, err)
	}
	g.reload.seen[name] = info.ETag
	if ix.ID() == cur.index.ID() {
		return false, nil // rewritten with the same content
	}
	next := newLoadedDataset(name, cur.url, cur.store, ix)
	next.indexETag, next.version = info.ETag, cur.version+1
	g.catalog.replace(next)
	g.metrics.indexReloads.WithLabelValues(name).Inc()
	g.metrics.indexInfo.DeleteLabelValues(name, cur.index.ID(), cur.indexETag)
	g.metrics.indexInfo.WithLabelValues(name, ix.ID(), next.indexETag).Set(1)
	g.log.Info().Str("dataset", name).Str("old_index", cur.index.ID()).Str("index", ix.ID()).
		Int("version", next.version).Int("chunks", ix.NumChunks()).Int("samples", ix.NumSamples()).
		Msg("dataset index changed: reloaded; batches in flight finish on the old version")
	return true, nil
}
