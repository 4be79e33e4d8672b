package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/s3backend"
)

// loadedDataset is one version of a dataset's index, loaded: everything a
// request needs to map samples to chunks and chunks to cache keys. It is
// immutable once built, so any goroutine may read it without locking; only
// the damaged flags change, atomically. A reload builds a new one.
type loadedDataset struct {
	name, url  string
	store      s3backend.Store
	index      *chunkindex.Index
	indexETag  string         // of the index object when it was read; "" if unknown
	loadedAt   time.Time      // when this version was loaded
	version    int            // 1 for the index loaded at start, +1 per reload
	counts     []int          // samples per chunk: the shuffle's input
	chunkByKey map[string]int // chunk object key → chunk ID
	maxChunk   int64          // every chunk's buffer is this big, so buffers are interchangeable
	damaged    []atomic.Bool  // per chunk: its last read found it damaged at rest

	// In a cluster: the index's ownership key and each chunk's owner,
	// computed once for the gateway's node count.
	key        uint64
	ownersOnce sync.Once
	owner      []int
}

// clusterKey is the index's part of every chunk's ownership score.
func (d *loadedDataset) clusterKey() uint64 { return d.key }

// owners returns each chunk's owning node in a cluster of nodes nodes. A
// gateway's node count never changes, so the first call fixes it.
func (d *loadedDataset) owners(nodes int) []int {
	d.ownersOnce.Do(func() { d.owner = cluster.Balanced(d.key, d.counts, nodes) })
	return d.owner
}

func newLoadedDataset(name, url string, store s3backend.Store, ix *chunkindex.Index) *loadedDataset {
	ds := &loadedDataset{name: name, url: url, store: store, index: ix, loadedAt: time.Now(), version: 1,
		counts: ix.SampleCounts(), chunkByKey: make(map[string]int, ix.NumChunks()),
		damaged: make([]atomic.Bool, ix.NumChunks()), key: cluster.IndexKey(ix.ID())}
	for c := range ix.NumChunks() {
		ds.chunkByKey[ix.Chunk(c).Key] = c
		ds.maxChunk = max(ds.maxChunk, ix.Chunk(c).Size)
	}
	return ds
}

// chunkKey is chunk c's cache key. It carries the object's ETag, so a chunk
// rewritten in the store is a different key: the cache never serves bytes
// of one version of an object for another.
func (d *loadedDataset) chunkKey(c int) chunkcache.Key {
	ch := d.index.Chunk(c)
	return chunkcache.Key{Dataset: d.name, Object: ch.Key, ETag: ch.ETag}
}

// isDamaged reports whether chunk c's last read found it damaged at rest.
func (d *loadedDataset) isDamaged(c int) bool { return d.damaged[c].Load() }

// chunkRequest is what the cache needs to load chunk c.
func (d *loadedDataset) chunkRequest(c int) chunkcache.Request {
	return chunkcache.Request{Key: d.chunkKey(c), Size: d.index.Chunk(c).Size, Alloc: d.maxChunk}
}

// chunkOf is the chunk ID a cache key names, if it is a chunk of this
// version of the dataset.
func (d *loadedDataset) chunkOf(k chunkcache.Key) (int, bool) {
	c, ok := d.chunkByKey[k.Object]
	if !ok || k.Dataset != d.name || d.index.Chunk(c).ETag != k.ETag {
		return 0, false
	}
	return c, true
}

// catalog holds the gateway's loaded datasets by name. Until the gateway
// is ready, lookups fail with ErrNotReady wrapped with what loading is
// doing: Load says so at each step (see waitFor and markReady).
type catalog struct {
	names       []string // as configured
	defaultName string
	waiting     atomic.Pointer[string] // why the gateway is not ready; nil once it is

	mu     sync.RWMutex
	byName map[string]*loadedDataset
	prev   map[string]*loadedDataset // the version each reload replaced
}

func newCatalog(names []string, defaultName string) *catalog {
	c := &catalog{names: names, defaultName: defaultName, byName: map[string]*loadedDataset{}, prev: map[string]*loadedDataset{}}
	c.waitFor("dataset indexes are still loading")
	return c
}

// waitFor records why the gateway is not ready yet; clients read it in
// their 503s.
func (c *catalog) waitFor(why string) { c.waiting.Store(&why) }

// markReady lets lookups through.
func (c *catalog) markReady() { c.waiting.Store(nil) }

// notReady is nil once the gateway is ready, and otherwise ErrNotReady
// saying what it is waiting for.
func (c *catalog) notReady() error {
	if why := c.waiting.Load(); why != nil {
		return fmt.Errorf("%w: %s", ErrNotReady, *why)
	}
	return nil
}

func (c *catalog) add(ds *loadedDataset) {
	c.mu.Lock()
	c.byName[ds.name] = ds
	c.mu.Unlock()
}

// replace swaps in a new version of a dataset. The version it replaces
// still resolves chunk keys, so that batches laid out on it finish.
func (c *catalog) replace(ds *loadedDataset) {
	c.mu.Lock()
	c.prev[ds.name] = c.byName[ds.name]
	c.byName[ds.name] = ds
	c.mu.Unlock()
}

// get returns a loaded dataset by name.
func (c *catalog) get(name string) (*loadedDataset, error) {
	if err := c.notReady(); err != nil {
		return nil, err
	}
	c.mu.RLock()
	ds, ok := c.byName[name]
	c.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: unknown dataset %q (serving: %v)", ErrNotFound, name, c.names)
	}
	return ds, nil
}

// chunk resolves a cache key to its dataset and chunk ID.
func (c *catalog) chunk(k chunkcache.Key) (*loadedDataset, int, error) {
	ds, err := c.get(k.Dataset)
	if err != nil {
		return nil, 0, err
	}
	id, ok := ds.chunkOf(k)
	if !ok {
		// A batch laid out before a reload may still need the old
		// version's chunks.
		c.mu.RLock()
		prev := c.prev[k.Dataset]
		c.mu.RUnlock()
		if prev != nil {
			if id, ok := prev.chunkOf(k); ok {
				return prev, id, nil
			}
		}
		return nil, 0, fmt.Errorf("%w: chunk %q (ETag %s) is not in dataset %q", ErrNotFound, k.Object, k.ETag, k.Dataset)
	}
	return ds, id, nil
}

// all returns the loaded datasets in configuration order.
func (c *catalog) all() ([]*loadedDataset, error) {
	out := make([]*loadedDataset, 0, len(c.names))
	for _, name := range c.names {
		ds, err := c.get(name)
		if err != nil {
			return nil, err
		}
		out = append(out, ds)
	}
	return out, nil
}

// loadDataset opens a dataset's store and reads its index. Transient store
// errors are retried with backoff until ctx ends; a missing or invalid
// index fails at once, since waiting will not fix it.
func loadDataset(ctx context.Context, spec DatasetSpec, bcfg s3backend.Config, log zerolog.Logger) (*loadedDataset, error) {
	store := spec.Store
	if store == nil {
		var err error
		if store, err = s3backend.Open(ctx, spec.URL, bcfg); err != nil {
			return nil, fmt.Errorf("dataset %s: %w", spec.Name, err)
		}
	}
	backoff := 250 * time.Millisecond
	for {
		// The ETag first: if the index changes in between, the next
		// poll sees a newer ETag and reads it again. Without one (a
		// failed Stat), the first poll reads the index again.
		info, _ := store.Stat(ctx, chunkindex.IndexKey)
		ix, err := dataset.ReadIndex(ctx, store)
		if err == nil {
			ds := newLoadedDataset(spec.Name, spec.URL, store, ix)
			ds.indexETag = info.ETag
			return ds, nil
		}
		if !errors.Is(err, s3backend.ErrUnavailable) {
			return nil, fmt.Errorf("dataset %s (%s): %w", spec.Name, spec.URL, err)
		}
		log.Warn().Err(err).Str("dataset", spec.Name).Float64("retry_in_ms", millis(backoff)).Msg("index not reachable yet")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dataset %s: %w (last error: %w)", spec.Name, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}
