package chunkcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// ErrTooLarge reports a request that needs more bytes pinned at once than the
// whole cache holds; it can never be served and waiting would not help.
var ErrTooLarge = errors.New("chunkcache: request needs more bytes than the cache holds")

// errAbandoned marks a load whose requester went away; waiters retry it.
var errAbandoned = errors.New("chunkcache: load abandoned by its requester")

// Key identifies one version of one chunk. Including the ETag means a chunk
// rewritten in the store is a different key: stale bytes are never served
// for a new version.
type Key struct {
	Dataset string // dataset name; chunks of different datasets never collide
	Object  string // object key of the chunk, relative to the dataset root
	ETag    string // the version the index describes
}

func (k Key) String() string { return k.Dataset + "/" + k.Object + "@" + k.ETag }

// Request names a chunk and its size in bytes (from the index).
type Request struct {
	Key  Key
	Size int64
	// Alloc, if larger than Size, is the capacity to allocate the chunk's
	// buffer with. Giving every chunk of a dataset the size of its largest
	// chunk makes every evicted buffer fit the next load, so a warm cache
	// never allocates (or, on machines where that is slow, faults in) new
	// memory. The cache accounts Size, not Alloc, so that its decisions are
	// exactly those a simulation over chunk sizes predicts; the difference
	// is memory overhead beyond Capacity, at most Alloc−Size per chunk.
	Alloc int64
}

// Loader fills buf (len(buf) == the requested size) with a chunk's bytes and
// verifies them. It is called without the cache lock held, concurrently for
// different keys, and never twice at once for one key.
type Loader interface {
	Load(ctx context.Context, k Key, buf []byte) error
}

// LoaderFunc adapts a function to Loader.
type LoaderFunc func(ctx context.Context, k Key, buf []byte) error

// Load calls f.
func (f LoaderFunc) Load(ctx context.Context, k Key, buf []byte) error { return f(ctx, k, buf) }

// Config configures a Cache.
type Config struct {
	Capacity int64  // bytes; every resident byte counts, loading or pinned
	Loader   Loader // required
	Policy   Policy // eviction order; default NewLRU()
}

// Stats are cumulative counters and current sizes.
type Stats struct {
	Hits             int64 `json:"hits"`   // demand lookups (Acquire) that found the chunk resident or loading
	Misses           int64 `json:"misses"` // demand lookups that had to load it
	Evictions        int64 `json:"evictions"`
	Loads            int64 `json:"loads"` // backend loads started by demand or prefetch
	LoadErrors       int64 `json:"load_errors"`
	LoadedBytes      int64 `json:"loaded_bytes"`
	PrefetchLoads    int64 `json:"prefetch_loads"`    // loads started by Prefetch
	PrefetchRejected int64 `json:"prefetch_rejected"` // Prefetch calls that found no room they were allowed to make
	Bytes            int64 `json:"bytes"`             // resident bytes now (ready and loading)
	Pinned           int64 `json:"pinned"`            // entries pinned now
	Entries          int64 `json:"entries"`
}

type entry struct {
	key   Key
	size  int64
	data  []byte
	pins  int
	ready bool
	done  chan struct{} // closed when the load ends, either way
	err   error         // set before done is closed
}

// Cache is a byte-bounded cache of whole chunks. It is safe for concurrent
// use.
type Cache struct {
	capacity int64
	loader   Loader
	reserve  *semaphore.Weighted // bytes that may be pinned at once

	mu      sync.Mutex
	entries map[Key]*entry
	policy  Policy // only unpinned, ready entries
	used    int64
	pinned  int64

	hits, misses, evictions, loads, loadErrors, loadedBytes atomic.Int64
	prefetchLoads, prefetchRejected                         atomic.Int64
}

// New returns an empty cache. It panics if Capacity is not positive or
// Loader is nil: both are programmer errors.
func New(cfg Config) *Cache {
	if cfg.Capacity <= 0 {
		panic("chunkcache: Capacity must be positive")
	}
	if cfg.Loader == nil {
		panic("chunkcache: nil Loader")
	}
	if cfg.Policy == nil {
		cfg.Policy = NewLRU()
	}
	return &Cache{
		capacity: cfg.Capacity,
		loader:   cfg.Loader,
		reserve:  semaphore.NewWeighted(cfg.Capacity),
		entries:  make(map[Key]*entry),
		policy:   cfg.Policy,
	}
}

// Capacity returns the byte bound.
func (c *Cache) Capacity() int64 { return c.capacity }

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	bytes, n, pinned := c.used, int64(len(c.entries)), c.pinned
	c.mu.Unlock()
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		Loads: c.loads.Load(), LoadErrors: c.loadErrors.Load(), LoadedBytes: c.loadedBytes.Load(),
		PrefetchLoads: c.prefetchLoads.Load(), PrefetchRejected: c.prefetchRejected.Load(),
		Bytes: bytes, Pinned: pinned, Entries: n,
	}
}

// Contains reports whether k is resident and ready.
func (c *Cache) Contains(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	return ok && e.ready
}

// Lease is a set of chunks pinned for one request. Their bytes stay valid and
// resident until Release; after Release they must not be touched, because
// the buffer may be reused for another chunk.
type Lease struct {
	c        *Cache
	entries  []*entry // in request order; duplicates share an entry
	reserved int64
	loaded   int
	loadedB  int64
	once     sync.Once
}

// Loaded reports how many of the lease's chunks this Acquire read from the
// store, and their bytes: the misses that cost backend traffic. Chunks that
// were resident or already loading count as hits.
func (l *Lease) Loaded() (chunks int, bytes int64) { return l.loaded, l.loadedB }

// Len returns the number of requests the lease answers.
func (l *Lease) Len() int { return len(l.entries) }

// Bytes returns the bytes of the i-th requested chunk.
func (l *Lease) Bytes(i int) []byte { return l.entries[i].data }

// Release unpins the chunks and returns the reservation. It is idempotent.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.c.mu.Lock()
		seen := make(map[*entry]bool, len(l.entries))
		for _, e := range l.entries {
			if e != nil && !seen[e] {
				seen[e] = true
				l.c.unpinLocked(e)
			}
		}
		l.c.mu.Unlock()
		l.c.reserve.Release(l.reserved)
	})
}

// Acquire pins every requested chunk, loading those not resident, and
// returns them as a Lease that the caller must Release. It waits, in FIFO
// order with other requests, until the bytes it needs can be pinned, so the
// cache never holds more than its capacity. Duplicate keys are allowed.
func (c *Cache) Acquire(ctx context.Context, reqs []Request) (*Lease, error) {
	var need int64
	uniq := make(map[Key]int, len(reqs))
	for i, r := range reqs {
		if r.Size < 0 {
			return nil, fmt.Errorf("chunkcache: negative size %d for %s", r.Size, r.Key)
		}
		if _, dup := uniq[r.Key]; !dup {
			uniq[r.Key] = i
			need += r.Size
		}
	}
	if need > c.capacity {
		return nil, fmt.Errorf("%w: %d chunks of %d bytes in all, cache capacity is %d bytes", ErrTooLarge, len(uniq), need, c.capacity)
	}
	if err := c.reserve.Acquire(ctx, need); err != nil {
		return nil, fmt.Errorf("chunkcache: waiting for cache space: %w", err)
	}
	l := &Lease{c: c, entries: make([]*entry, len(reqs)), reserved: need}
	for i, r := range reqs {
		if j := uniq[r.Key]; j != i {
			l.entries[i] = l.entries[j]
			continue
		}
		e, loaded, err := c.pin(ctx, r)
		if err != nil {
			l.Release()
			return nil, err
		}
		l.entries[i] = e
		if loaded {
			l.loaded++
			l.loadedB += r.Size
		}
	}
	return l, nil
}

// pin returns r's entry pinned and ready, loading it if needed, and whether
// this call loaded it. The caller holds a reservation covering r.Size.
func (c *Cache) pin(ctx context.Context, r Request) (*entry, bool, error) {
	counted := false
	for {
		c.mu.Lock()
		if e, ok := c.entries[r.Key]; ok {
			c.pinLocked(e)
			if !counted {
				c.hits.Add(1)
			}
			if e.ready {
				c.mu.Unlock()
				return e, false, nil
			}
			c.mu.Unlock()
			select {
			case <-e.done:
			case <-ctx.Done():
				c.mu.Lock()
				c.unpinLocked(e)
				c.mu.Unlock()
				return nil, false, ctx.Err()
			}
			if e.err == nil {
				return e, false, nil
			}
			c.mu.Lock()
			c.unpinLocked(e)
			c.mu.Unlock()
			if errors.Is(e.err, errAbandoned) && ctx.Err() == nil {
				counted = true
				continue // its requester left; load it ourselves
			}
			return nil, false, e.err
		}
		if !counted {
			c.misses.Add(1)
		}
		e, buf, err := c.insertLocked(r, nil)
		c.mu.Unlock()
		if err != nil {
			return nil, false, err
		}
		if err := c.load(ctx, e, buf); err != nil {
			return nil, false, err
		}
		return e, true, nil
	}
}

// insertLocked makes room for r and registers a loading entry pinned once
// for the caller. admit, if non-nil, vetoes victims (prefetch must not evict
// what the present needs); with a veto the call may fail for lack of room.
func (c *Cache) insertLocked(r Request, admit func(Key) bool) (*entry, []byte, error) {
	var victims []Key
	free := c.capacity - c.used
	need := r.Size
	if free < need {
		for k := range c.policy.Victims() {
			if admit != nil && !admit(k) {
				continue
			}
			victims = append(victims, k)
			free += c.entries[k].size
			if free >= need {
				break
			}
		}
	}
	if free < need {
		if admit == nil {
			// Reservations guarantee room; reaching here is a bug, but a
			// loud error beats a panic in a server.
			return nil, nil, fmt.Errorf("chunkcache: internal: no room for %s (%d bytes): %d used of %d, %d pinned entries", r.Key, need, c.used, c.capacity, c.pinned)
		}
		return nil, nil, errNoRoom
	}
	var buf []byte
	for _, k := range victims {
		v := c.entries[k]
		delete(c.entries, k)
		c.policy.Remove(k)
		c.used -= v.size
		c.evictions.Add(1)
		if buf == nil && int64(cap(v.data)) >= need {
			buf = v.data[:r.Size] // reuse: steady state allocates nothing
		}
	}
	if buf == nil {
		buf = make([]byte, r.Size, max(r.Size, r.Alloc))
	}
	e := &entry{key: r.Key, size: need, done: make(chan struct{})}
	c.entries[r.Key] = e
	c.used += need
	c.pinLocked(e)
	c.loads.Add(1)
	return e, buf, nil
}

var errNoRoom = errors.New("chunkcache: no room")

// load runs the loader for a freshly inserted entry (pinned once for the
// caller) and publishes the result. On failure the entry leaves the cache.
func (c *Cache) load(ctx context.Context, e *entry, buf []byte) error {
	err := c.loader.Load(ctx, e.key, buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.loadErrors.Add(1)
		if ctx.Err() != nil {
			e.err = fmt.Errorf("%w: %w", errAbandoned, err)
		} else {
			e.err = fmt.Errorf("chunkcache: loading %s: %w", e.key, err)
		}
		delete(c.entries, e.key)
		c.used -= e.size
		c.unpinLocked(e) // the caller's pin; waiters drop theirs on wake-up
		close(e.done)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return e.err
	}
	c.loadedBytes.Add(int64(len(buf)))
	e.data = buf
	e.ready = true
	close(e.done)
	return nil
}

func (c *Cache) pinLocked(e *entry) {
	if e.pins == 0 {
		c.pinned++
		if e.ready {
			c.policy.Remove(e.key)
		}
	}
	e.pins++
}

func (c *Cache) unpinLocked(e *entry) {
	e.pins--
	if e.pins > 0 {
		return
	}
	c.pinned--
	if e.ready && c.entries[e.key] == e {
		c.policy.Touch(e.key)
	}
}

// PrefetchResult says what Prefetch did.
type PrefetchResult int

const (
	// PrefetchResident: the chunk was already resident or loading.
	PrefetchResident PrefetchResult = iota
	// PrefetchLoaded: this call read the chunk into the cache.
	PrefetchLoaded
	// PrefetchRejected: no room could be made without waiting or without
	// evicting a chunk admit refused; nothing was read.
	PrefetchRejected
)

// Prefetch makes a chunk resident ahead of demand if it can do so without
// waiting: it returns PrefetchResident at once if the chunk is resident or
// loading, and PrefetchRejected without loading if the pin budget is
// exhausted or room cannot be made by evicting only chunks that admit
// accepts. admit sees candidate victims in the policy's order; nil admits
// all. A resident chunk is touched so that the policy sees it as about to be
// used.
func (c *Cache) Prefetch(ctx context.Context, r Request, admit func(victim Key) bool) (PrefetchResult, error) {
	c.mu.Lock()
	if e, ok := c.entries[r.Key]; ok {
		if e.ready && e.pins == 0 {
			c.policy.Touch(r.Key)
		}
		c.mu.Unlock()
		return PrefetchResident, nil
	}
	c.mu.Unlock()
	if r.Size > c.capacity || !c.reserve.TryAcquire(r.Size) {
		c.prefetchRejected.Add(1)
		return PrefetchRejected, nil
	}
	defer c.reserve.Release(r.Size)
	c.mu.Lock()
	if _, ok := c.entries[r.Key]; ok { // raced with a demand load
		c.mu.Unlock()
		return PrefetchResident, nil
	}
	e, buf, err := c.insertLocked(r, admit)
	c.mu.Unlock()
	if errors.Is(err, errNoRoom) {
		c.prefetchRejected.Add(1)
		return PrefetchRejected, nil
	}
	if err != nil {
		return PrefetchRejected, err
	}
	c.prefetchLoads.Add(1)
	if err := c.load(ctx, e, buf); err != nil {
		return PrefetchRejected, err
	}
	c.mu.Lock()
	c.unpinLocked(e)
	c.mu.Unlock()
	return PrefetchLoaded, nil
}
