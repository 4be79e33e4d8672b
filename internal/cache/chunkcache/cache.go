package chunkcache

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/server/stopper"
)

// ErrTooLarge reports a request that needs more bytes pinned at once than the
// whole cache holds; it can never be served and waiting would not help.
var ErrTooLarge = errkind.Named(errkind.Invalid, "too_large", "chunkcache: request needs more bytes than the cache holds")

// ErrBusy reports an Acquire refused because the queue for room was full
// (Config.MaxWaiting) or because it waited longer than Config.MaxWait: the
// cache cannot serve it soon, and the caller should come back later rather
// than hold a connection and a goroutine in a queue that does not move.
var ErrBusy = errkind.Named(errkind.Busy, "cache_busy", "chunkcache: busy: too many requests waiting for room")

// ErrClosed is returned for loads cut short because the cache was closed.
var ErrClosed = errkind.New(errkind.Internal, "chunkcache: cache closed")

// Key identifies one version of one cache entry: a dataset's chunk, or a
// block of an object served as it is (Space). Including the ETag means an
// object rewritten in the store is a different key: stale bytes are never
// served for a new version.
type Key struct {
	Space   Keyspace
	Dataset string // a chunk's dataset, an object's bucket; entries of different ones never collide
	Object  string // object key, relative to the dataset's or bucket's root
	ETag    string // the version read: the one the index describes, or the store reported
	Offset  int64  // an object block's first byte in the object; 0 for a chunk
	// Select names the fields a chunk of a dataset served in place was
	// decoded with (package format; "" for every field, and for a tar
	// chunk): the same chunk read with other fields is another entry.
	Select string
}

func (k Key) String() string {
	if k.Space == Object {
		return fmt.Sprintf("object %s/%s@%s+%d", k.Dataset, k.Object, k.ETag, k.Offset)
	}
	if k.Select != "" {
		return k.Dataset + "/" + k.Object + "@" + k.ETag + "[" + k.Select + "]"
	}
	return k.Dataset + "/" + k.Object + "@" + k.ETag
}

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
	// is memory overhead beyond Capacity, at most Alloc−Size per chunk. A
	// buffer is reused only for requests whose Alloc is at least its
	// capacity, so a dataset of small chunks never holds another dataset's
	// large buffers.
	Alloc int64
	// Reuse, if larger than Alloc, is the largest capacity of a buffer
	// already held — free, or an evicted chunk's — that the chunk may
	// take when none of at most Alloc is there: the class its dataset's
	// buffers were preallocated in, for a chunk read in a form smaller
	// than that (a dataset served in place read with some of its fields,
	// whose buffers were preallocated for all of them). Such a buffer is
	// held, and its pages touched, whether or not the chunk takes it, so
	// taking it holds no more memory than allocating would, and spares
	// faulting new pages in. New buffers are still allocated at Alloc.
	Reuse int64
}

// bufCap is the largest buffer capacity r may be given.
func (r Request) bufCap() int64 { return max(r.Size, r.Alloc) }

// Loader fills buf (len(buf) == the requested size) with a chunk's bytes and
// verifies them. It is called without the cache lock held, concurrently for
// different keys, and never twice at once for one key. The context ends
// only when the cache is closed: a load outlives the request that started
// it, since other requests may be waiting for the same chunk, so a Loader
// must bound its own time.
type Loader interface {
	Load(ctx context.Context, k Key, buf []byte) error
}

// A TieredLoader is a Loader that may fill a chunk from a tier below the
// cache (a local disk) instead of the store, and says which: the cache
// counts the two apart (Lease.Below, Stats.LoadsBelow) and offers a
// Spiller only what came from the store.
type TieredLoader interface {
	Loader
	LoadTiered(ctx context.Context, k Key, buf []byte) (below bool, err error)
}

// Spiller is a Loader that wants the bytes of each chunk it loaded once
// the cache holds them: a disk tier below the cache keeps a copy of what
// the store gave (internal/cache/disktier). Spill is called after every
// successful load, without the cache's lock, with the chunk pinned: its
// bytes stay valid, and the chunk resident and counted, until Spill calls
// release, which it must do exactly once. A slow Spill holds that pin,
// so it must bound its own time.
//
// Wants is asked, after an Acquire pinned it, of each chunk that was
// resident already: if it says yes, the chunk is offered with Spill then
// (a disk that could not keep up when the chunk was loaded catches up
// while it is still in memory). It is called without the cache's lock
// and must be cheap.
type Spiller interface {
	Loader
	Spill(k Key, data []byte, release func())
	Wants(k Key) bool
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
	// MaxWaiting bounds the Acquire calls queued for room to pin their
	// chunks; one more fails at once with ErrBusy. 0 means no bound.
	MaxWaiting int
	// MaxWait bounds how long an Acquire waits in that queue (not for its
	// loads, which the loader's own timeouts bound); past it, ErrBusy. 0
	// means no bound.
	MaxWait time.Duration
	// Recycler, if set, takes the buffers the cache gives up — an evicted
	// chunk's that fits no load it makes room for — for other uses (the
	// node's memory manager's pools); otherwise the collector takes them.
	Recycler Recycler
	// Tasks runs the loads, which outlive the requests that start them
	// (others may wait for the same chunk), and the spills of resident
	// chunks to a Spiller; nil: tasks of the cache's own, ended by Close.
	Tasks Tasks
}

// Tasks runs a cache's background work and ends it (a part of the
// gateway's internal/server/stopper): Go runs f on a goroutine of its own unless
// the tasks are stopping, and reports whether it does; Context, the
// context of every f, ends when they start to stop; Stop ends them and
// waits for every f to return.
type Tasks interface {
	Go(f func(ctx context.Context)) bool
	Context() context.Context
	Stop()
}

// Recycler takes buffers the cache will not use again.
type Recycler interface {
	Put(b []byte)
}

// Stats are cumulative counters and current sizes.
type Stats struct {
	Hits        int64 `json:"hits"`   // demand lookups (Acquire) that found the chunk resident or loading
	Misses      int64 `json:"misses"` // demand lookups that had to load it
	Evictions   int64 `json:"evictions"`
	Loads       int64 `json:"loads"` // backend loads started by demand or prefetch
	LoadErrors  int64 `json:"load_errors"`
	LoadedBytes int64 `json:"loaded_bytes"`
	// LoadsBelow counts the loads a tier below the cache served
	// (TieredLoader) instead of the store; they are in Loads too.
	LoadsBelow       int64 `json:"loads_below,omitempty"`
	PrefetchLoads    int64 `json:"prefetch_loads"`    // loads started by Prefetch
	PrefetchRejected int64 `json:"prefetch_rejected"` // Prefetch calls that found no room they were allowed to make
	// PrefetchUnused counts chunks a prefetch read that were evicted
	// before any request used them: reads wasted.
	PrefetchUnused int64 `json:"prefetch_unused"`
	// Grown counts loads that found their chunk needed more room than
	// requested and grew it (GrowError).
	Grown       int64 `json:"grown,omitempty"`
	Bytes       int64 `json:"bytes"`        // resident bytes now (ready and loading)
	Pinned      int64 `json:"pinned"`       // entries pinned now
	PinnedBytes int64 `json:"pinned_bytes"` // their bytes
	Waiting     int64 `json:"waiting"`      // requests queued for room to pin their chunks
	Entries     int64 `json:"entries"`
	// BufferBytes is the capacity of every chunk buffer the cache holds,
	// in use or free: the memory the cache occupies.
	BufferBytes int64 `json:"buffer_bytes"`
}

type entry struct {
	key   Key
	size  int64
	data  []byte
	pins  int
	ready bool
	// prefetched marks a chunk read by Prefetch that no Acquire has
	// pinned yet.
	prefetched bool
	// below marks a chunk its load read from a tier below the cache
	// (TieredLoader), not from the store.
	below bool
	done  chan struct{} // closed when the load ends, either way
	err   error         // set before done is closed
}

// Cache is a byte-bounded cache of whole chunks. It is safe for concurrent
// use.
type Cache struct {
	capacity   int64
	loader     Loader
	recycler   Recycler // nil: none
	maxWaiting int
	maxWait    time.Duration
	// tasks run the loads and spills; ctx, their context, is every
	// load's.
	tasks Tasks
	ctx   context.Context

	mu          sync.Mutex
	entries     map[Key]*entry
	policy      Policy // only unpinned, ready entries
	used        int64  // bytes of the entries in the map
	pinned      int64  // entries with pins > 0
	pinnedBytes int64  // their bytes, including failed entries still pinned
	// queue holds the tickets of Acquire calls waiting for room to pin
	// their chunks, first come first served; changed is closed (and
	// replaced) whenever pins are released or the queue moves, waking
	// them to check again.
	queue      []uint64
	nextTicket uint64
	changed    chan struct{}
	admitted   time.Time // when the queue last let a request through
	// free holds chunk buffers no entry uses: preallocated ones, and those
	// of loads that failed. bufBytes is the capacity of all buffers held.
	free     [][]byte
	bufBytes int64

	hits, misses, evictions, loads, loadErrors, loadedBytes atomic.Int64
	grown                                                   atomic.Int64
	prefetchLoads, prefetchRejected, prefetchUnused         atomic.Int64
	loadsBelow                                              atomic.Int64
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
	if cfg.Tasks == nil {
		cfg.Tasks = stopper.New().Group("chunkcache: loads")
	}
	return &Cache{
		capacity:   cfg.Capacity,
		loader:     cfg.Loader,
		recycler:   cfg.Recycler,
		maxWaiting: cfg.MaxWaiting,
		maxWait:    cfg.MaxWait,
		tasks:      cfg.Tasks,
		ctx:        cfg.Tasks.Context(),
		entries:    make(map[Key]*entry),
		policy:     cfg.Policy,
		changed:    make(chan struct{}),
	}
}

// Close cancels the loads in flight and waits for them to return (a
// Loader bounds its time by its context); requests waiting for them fail
// with ErrClosed. Chunks already resident stay readable; a load started
// after Close fails at once, its context being done.
func (c *Cache) Close() { c.tasks.Stop() }

// startLoad runs load(e) in the background, tracked by the cache's tasks;
// once they are stopping, the load runs here and fails at once, its
// context being done.
func (c *Cache) startLoad(e *entry) {
	if !c.tasks.Go(func(context.Context) { c.load(e) }) {
		c.load(e)
	}
}

// Capacity returns the byte bound.
func (c *Cache) Capacity() int64 { return c.capacity }

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	st := Stats{Bytes: c.used, Pinned: c.pinned, PinnedBytes: c.pinnedBytes, Waiting: int64(len(c.queue)),
		Entries: int64(len(c.entries)), BufferBytes: c.bufBytes}
	c.mu.Unlock()
	st.Hits, st.Misses, st.Evictions = c.hits.Load(), c.misses.Load(), c.evictions.Load()
	st.Loads, st.LoadErrors, st.LoadedBytes = c.loads.Load(), c.loadErrors.Load(), c.loadedBytes.Load()
	st.PrefetchLoads, st.PrefetchRejected, st.PrefetchUnused = c.prefetchLoads.Load(), c.prefetchRejected.Load(), c.prefetchUnused.Load()
	st.LoadsBelow, st.Grown = c.loadsBelow.Load(), c.grown.Load()
	return st
}

// Contains reports whether k is resident and ready.
func (c *Cache) Contains(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	return ok && e.ready
}

// Resident pins k if it is resident and ready, without loading it, and
// returns its bytes and the release of the pin, which the caller must
// call exactly once; ok is false if the cache does not hold k. A node
// hands a chunk it holds to the chunk's next owner with it, and never
// reads the store for another node (internal/cluster/handover). It counts as
// neither a hit nor a miss.
func (c *Cache) Resident(k Key) (data []byte, release func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !e.ready {
		return nil, nil, false
	}
	c.pinLocked(e)
	var once sync.Once
	return e.data, func() { once.Do(func() { c.unpin(e) }) }, true
}

// MustEvict reports whether acquiring reqs now would have to evict: the
// bytes of those of its chunks not resident or loading exceed the room
// left free.
func (c *Cache) MustEvict(reqs []Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing int64
	for _, r := range reqs {
		if _, ok := c.entries[r.Key]; !ok {
			missing += r.Size
		}
	}
	return missing > 0 && missing > c.capacity-c.used
}

// Lease is a set of chunks pinned for one request. Their bytes stay valid and
// resident until Release; after Release they must not be touched, because
// the buffer may be reused for another chunk.
type Lease struct {
	c       *Cache
	entries []*entry // in request order; duplicates share an entry
	uniq    []*entry // each entry once
	loaded  int
	loadedB int64
	below   int
	belowB  int64
	// Per entry of uniq: the first request it answers, and whether this
	// Acquire loaded it (for LoadedIn).
	first []int
	fresh []bool
	once  sync.Once
}

// Loaded reports how many of the lease's chunks this Acquire loaded, and
// their bytes: the misses. Chunks that were resident or already loading
// count as hits. Those a tier below the cache served are in Below too; the
// rest cost store traffic.
func (l *Lease) Loaded() (chunks int, bytes int64) { return l.loaded, l.loadedB }

// Below reports how many of the chunks Loaded counts a tier below the
// cache served (TieredLoader) rather than the store, and their bytes.
func (l *Lease) Below() (chunks int, bytes int64) { return l.below, l.belowB }

// LoadedIn is Loaded and Below for the requests [from, to) alone: the
// chunks first requested there that this Acquire loaded, and their bytes,
// and of those the ones a tier below the cache served. A caller that
// acquired several reads' chunks together (a mixture batch's parts) tells
// each read's figures apart with it.
func (l *Lease) LoadedIn(from, to int) (chunks int, bytes int64, below int, belowB int64) {
	for j, e := range l.uniq {
		if !l.fresh[j] || l.first[j] < from || l.first[j] >= to {
			continue
		}
		chunks++
		bytes += e.size
		if e.below {
			below++
			belowB += e.size
		}
	}
	return chunks, bytes, below, belowB
}

// StoreLoads yields, in request order, each request of [from, to) whose
// chunk this Acquire loaded from the store: not resident or loading
// already, nor served by a tier below the cache; each such chunk once, at
// its first request. A caller whose chunks cost the store other bytes than
// they take in the cache (a chunk decoded from ranges of an object) counts
// the store's traffic by them.
func (l *Lease) StoreLoads(from, to int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for j, e := range l.uniq {
			if i := l.first[j]; l.fresh[j] && !e.below && i >= from && i < to && !yield(i) {
				return
			}
		}
	}
}

// Len returns the number of requests the lease answers.
func (l *Lease) Len() int { return len(l.entries) }

// Bytes returns the bytes of the i-th requested chunk.
func (l *Lease) Bytes(i int) []byte { return l.entries[i].data }

// Release unpins the chunks. It is idempotent.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.c.mu.Lock()
		for _, e := range l.uniq {
			if e != nil { // a failed Acquire releases what it pinned so far
				l.c.unpinLocked(e)
			}
		}
		l.c.mu.Unlock()
	})
}

// Acquire pins every requested chunk, loading those not resident, and
// returns them as a Lease that the caller must Release. Duplicate keys are
// allowed.
//
// Pinned bytes never exceed the capacity: a chunk that some other request
// already pins costs nothing more, and a request whose other chunks do not
// fit beside what is pinned waits, in FIFO order with other requests,
// until enough is released. It then pins all its chunks at once, so no two
// requests can deadlock each holding part of what they need. The chunks it
// has to load are read concurrently; if ctx ends first, Acquire returns
// but the loads go on, since other requests may be waiting for them.
func (c *Cache) Acquire(ctx context.Context, reqs []Request) (*Lease, error) {
	uniq := make([]Request, 0, len(reqs))
	idx := make(map[Key]int, len(reqs))
	slot := make([]int, len(reqs))
	var first []int
	var need int64
	for i, r := range reqs {
		if r.Size < 0 {
			return nil, fmt.Errorf("chunkcache: negative size %d for %s", r.Size, r.Key)
		}
		j, dup := idx[r.Key]
		if !dup {
			j = len(uniq)
			idx[r.Key] = j
			uniq = append(uniq, r)
			first = append(first, i)
			need += r.Size
		}
		slot[i] = j
	}
	if need > c.capacity {
		return nil, fmt.Errorf("%w: %d chunks of %d bytes in all, cache capacity is %d bytes", ErrTooLarge, len(uniq), need, c.capacity)
	}

	c.mu.Lock()
	if err := c.waitForRoomLocked(ctx, uniq); err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("chunkcache: waiting for cache space: %w", err)
	}
	l := &Lease{c: c, entries: make([]*entry, len(reqs)), uniq: make([]*entry, len(uniq)), first: first, fresh: make([]bool, len(uniq))}
	// Pin what is resident or loading first, so that making room for the
	// rest cannot evict it.
	var missing []int
	for j, r := range uniq {
		if e, ok := c.entries[r.Key]; ok {
			c.pinLocked(e)
			e.prefetched = false
			l.uniq[j] = e
		} else {
			missing = append(missing, j)
		}
	}
	loads := make([]*entry, 0, len(missing))
	for _, j := range missing {
		e, err := c.insertLocked(uniq[j], nil)
		if err != nil {
			c.mu.Unlock()
			l.Release()
			for _, e := range loads {
				c.startLoad(e) // others may already wait for them
			}
			return nil, err
		}
		c.pinLocked(e) // the lease's pin; insertLocked's is the load's
		l.uniq[j] = e
		l.fresh[j] = true
		loads = append(loads, e)
		l.loaded++
		l.loadedB += uniq[j].Size
	}
	c.mu.Unlock()
	if sp, ok := c.loader.(Spiller); ok && len(missing) < len(uniq) {
		c.offerResident(sp, l.uniq, loads)
	}
	c.hits.Add(int64(len(uniq) - len(missing)))
	c.misses.Add(int64(len(missing)))
	for _, e := range loads {
		c.startLoad(e)
	}
	for i := range reqs {
		l.entries[i] = l.uniq[slot[i]]
	}
	for _, e := range l.uniq {
		select {
		case <-e.done:
		case <-ctx.Done():
			l.Release()
			return nil, ctx.Err()
		}
		if e.err != nil {
			l.Release()
			return nil, e.err
		}
	}
	for _, e := range loads {
		if e.below { // set before done was closed
			l.below++
			l.belowB += e.size
		}
	}
	return l, nil
}

// offerResident offers sp the ready chunks of pinned that this Acquire did
// not load, if it wants them, each pinned again until sp releases it.
func (c *Cache) offerResident(sp Spiller, pinned, loads []*entry) {
	for _, e := range pinned {
		if slices.Contains(loads, e) || !sp.Wants(e.key) {
			continue
		}
		c.mu.Lock()
		if !e.ready || c.entries[e.key] != e {
			c.mu.Unlock()
			continue
		}
		c.pinLocked(e)
		c.mu.Unlock()
		release := func() { c.unpin(e) }
		if !c.tasks.Go(func(context.Context) { sp.Spill(e.key, e.data, release) }) {
			release()
		}
	}
}

// waitForRoomLocked queues the caller and returns, with c.mu held, once it
// is first in line and its chunks fit beside those already pinned.
func (c *Cache) waitForRoomLocked(ctx context.Context, reqs []Request) error {
	if len(c.queue) == 0 && c.pinnedBytes+c.unpinnedBytesLocked(reqs) <= c.capacity {
		c.admitted = time.Now()
		return nil
	}
	if c.maxWaiting > 0 && len(c.queue) >= c.maxWaiting {
		return fmt.Errorf("%w: %d requests already queued", ErrBusy, len(c.queue))
	}
	var expired <-chan time.Time
	if c.maxWait > 0 {
		t := time.NewTimer(c.maxWait)
		defer t.Stop()
		expired = t.C
	}
	ticket := c.nextTicket
	c.nextTicket++
	c.queue = append(c.queue, ticket)
	leave := func(err error) error {
		c.queue = slices.DeleteFunc(c.queue, func(t uint64) bool { return t == ticket })
		c.broadcastLocked()
		return err
	}
	for {
		if c.queue[0] == ticket && c.pinnedBytes+c.unpinnedBytesLocked(reqs) <= c.capacity {
			c.queue = c.queue[1:]
			c.admitted = time.Now()
			c.broadcastLocked() // the next in line may fit too
			return nil
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
			c.mu.Lock()
		case <-ctx.Done():
			c.mu.Lock()
			return leave(ctx.Err())
		case <-expired:
			c.mu.Lock()
			return leave(fmt.Errorf("%w: waited %s for room", ErrBusy, c.maxWait))
		}
	}
}

// Stalled reports whether requests are waiting for room and none has been
// let through for d: the cache is making no progress, because what is
// pinned is not being released (slow readers holding their chunks, or
// loads that hang).
func (c *Cache) Stalled(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) > 0 && time.Since(c.admitted) > d
}

// unpinnedBytesLocked is what pinning reqs would add to the pinned bytes:
// the sizes of the chunks nobody pins now.
func (c *Cache) unpinnedBytesLocked(reqs []Request) int64 {
	var n int64
	for _, r := range reqs {
		if e, ok := c.entries[r.Key]; !ok || e.pins == 0 {
			n += r.Size
		}
	}
	return n
}

func (c *Cache) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// insertLocked makes room for r and registers a loading entry pinned once
// for its load. admit, if non-nil, vetoes victims (prefetch must not evict
// what the present needs); with a veto the call may fail for lack of room.
// The caller must have made sure the pinned bytes leave room for r.
func (c *Cache) insertLocked(r Request, admit func(Key) bool) (*entry, error) {
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
			// Admission guarantees room; reaching here is a bug, but a
			// loud error beats a panic in a server.
			return nil, fmt.Errorf("chunkcache: internal: no room for %s (%d bytes): %d used of %d, %d bytes pinned", r.Key, need, c.used, c.capacity, c.pinnedBytes)
		}
		return nil, errNoRoom
	}
	// A victim's buffer that fits is reused (steady state allocates
	// nothing); failing that and a free one that fits, one r may reuse
	// (Request.Reuse). The others are dropped.
	fit, reuse := -1, -1
	for i, k := range victims {
		if v := c.entries[k]; fits(v.data, r) {
			fit = i
			break
		} else if reuse < 0 && reusable(v.data, r) {
			reuse = i
		}
	}
	if fit < 0 && c.freeIndexLocked(r, fits) < 0 {
		fit = reuse
	}
	var buf []byte
	for i, k := range victims {
		v := c.entries[k]
		delete(c.entries, k)
		c.policy.Remove(k)
		c.used -= v.size
		c.evictions.Add(1)
		if v.prefetched {
			c.prefetchUnused.Add(1)
		}
		if i == fit {
			buf = v.data[:r.Size]
		} else {
			c.dropLocked(v.data)
		}
	}
	if buf == nil {
		buf = c.takeFreeLocked(r)
	}
	e := &entry{key: r.Key, size: need, data: buf, done: make(chan struct{})}
	c.entries[r.Key] = e
	c.used += need
	c.pinLocked(e)
	c.loads.Add(1)
	return e, nil
}

var errNoRoom = errors.New("chunkcache: no room")

// fits reports whether buffer b may hold r's chunk: large enough, and no
// larger than r allows, so a small chunk never occupies a large buffer.
func fits(b []byte, r Request) bool {
	return int64(cap(b)) >= r.Size && int64(cap(b)) <= r.bufCap()
}

// reusable reports whether r may take buffer b, held already, when none
// fits (Request.Reuse).
func reusable(b []byte, r Request) bool {
	return int64(cap(b)) >= r.Size && int64(cap(b)) <= max(r.bufCap(), r.Reuse)
}

// freeIndexLocked is the index of the last free buffer ok for r, or -1.
func (c *Cache) freeIndexLocked(r Request, ok func([]byte, Request) bool) int {
	for i := len(c.free) - 1; i >= 0; i-- {
		if ok(c.free[i], r) {
			return i
		}
	}
	return -1
}

// takeFreeLocked returns a buffer for r from the free list — one that
// fits, else one r may reuse — or a new one.
func (c *Cache) takeFreeLocked(r Request) []byte {
	i := c.freeIndexLocked(r, fits)
	if i < 0 {
		i = c.freeIndexLocked(r, reusable)
	}
	if i >= 0 {
		b := c.free[i]
		c.free = slices.Delete(c.free, i, i+1)
		return b[:r.Size]
	}
	b := newBuffer(r.Size, r.bufCap())
	c.bufBytes += int64(cap(b))
	return b
}

// dropLocked gives up a buffer no entry will reuse: an evicted entry's,
// unpinned, which nothing refers to any more.
func (c *Cache) dropLocked(b []byte) {
	c.bufBytes -= int64(cap(b))
	if c.recycler != nil {
		c.recycler.Put(b)
	}
}

// load runs the loader for a freshly inserted entry into its buffer,
// publishes the result and drops the load's pin. On failure the entry
// leaves the cache and its buffer returns to the free list.
func (c *Cache) load(e *entry) {
	below, err := c.loadOnce(e)
	var g *GrowError
	if errors.As(err, &g) && c.ctx.Err() == nil {
		// The chunk needs more room than its request said: the load
		// grows the entry, if the cache can make room without its pinned
		// bytes passing capacity, and loads it again; else the error
		// goes to the requesters, who ask again sized anew.
		c.mu.Lock()
		grown := c.growLocked(e, g.Need)
		c.mu.Unlock()
		if grown {
			below, err = c.loadOnce(e)
		}
	}
	if err != nil && c.ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.mu.Lock()
	if err != nil {
		c.loadErrors.Add(1)
		e.err = fmt.Errorf("chunkcache: loading %s: %w", e.key, err)
		c.free = append(c.free, e.data)
		e.data = nil
		delete(c.entries, e.key)
		c.used -= e.size
		close(e.done)
		c.unpinLocked(e) // waiters drop their pins when they see the error
		c.mu.Unlock()
		return
	}
	c.loadedBytes.Add(int64(len(e.data)))
	if below {
		c.loadsBelow.Add(1)
	}
	e.below = below
	e.ready = true
	close(e.done)
	sp, ok := c.loader.(Spiller)
	if !ok || below {
		c.unpinLocked(e)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	// The load's pin stays until the spiller is done with the bytes.
	sp.Spill(e.key, e.data, func() { c.unpin(e) })
}

// unpin is unpinLocked for a caller without the lock.
// loadOnce runs the loader over e's buffer.
func (c *Cache) loadOnce(e *entry) (below bool, err error) {
	if tl, ok := c.loader.(TieredLoader); ok {
		return tl.LoadTiered(c.ctx, e.key, e.data)
	}
	return false, c.loader.Load(c.ctx, e.key, e.data)
}

// growLocked grows loading entry e to need bytes, evicting unpinned
// chunks for the room, and reports whether it could: not when the pinned
// bytes would pass the capacity, or the unpinned chunks free too little.
func (c *Cache) growLocked(e *entry, need int64) bool {
	extra := need - e.size
	if extra <= 0 || need > c.capacity || c.pinnedBytes+extra > c.capacity {
		return false
	}
	var victims []Key
	free := c.capacity - c.used
	for k := range c.policy.Victims() {
		if free >= extra {
			break
		}
		victims = append(victims, k)
		free += c.entries[k].size
	}
	if free < extra {
		return false
	}
	for _, k := range victims {
		v := c.entries[k]
		delete(c.entries, k)
		c.policy.Remove(k)
		c.used -= v.size
		c.evictions.Add(1)
		c.free = append(c.free, v.data)
	}
	c.free = append(c.free, e.data)
	e.data = c.takeFreeLocked(Request{Key: e.key, Size: need})
	c.used += extra
	c.pinnedBytes += extra
	e.size = need
	c.grown.Add(1)
	return true
}

// GrowError is what a Loader returns when a chunk needs Need bytes, more
// than its request said (a chunk decoded in place whose metadata could
// only guess its size): the cache grows the entry and loads it again when
// it can, else the error (Err) reaches the requesters.
type GrowError struct {
	Need int64
	Err  error
}

func (e *GrowError) Error() string { return e.Err.Error() }
func (e *GrowError) Unwrap() error { return e.Err }

func (c *Cache) unpin(e *entry) {
	c.mu.Lock()
	c.unpinLocked(e)
	c.mu.Unlock()
}

func (c *Cache) pinLocked(e *entry) {
	if e.pins == 0 {
		c.pinned++
		c.pinnedBytes += e.size
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
	c.pinnedBytes -= e.size
	if e.ready && c.entries[e.key] == e {
		c.policy.Touch(e.key)
	}
	if len(c.queue) > 0 {
		c.broadcastLocked()
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
	// PrefetchLoadedBelow: this call read the chunk into the cache from a
	// tier below it (TieredLoader), not from the store.
	PrefetchLoadedBelow
)

// Prefetch makes a chunk resident ahead of demand if it can do so without
// waiting: it returns PrefetchResident at once if the chunk is resident or
// loading, and PrefetchRejected without loading if requests are queued for
// room, if the chunk does not fit beside the pinned bytes, or if room
// cannot be made by evicting only chunks that admit accepts. admit sees
// candidate victims in the policy's order; nil admits all. A resident
// chunk is touched so that the policy sees it as about to be used.
// Otherwise Prefetch loads the chunk and returns when the load ends; ctx
// only bounds how long the caller waits for it.
func (c *Cache) Prefetch(ctx context.Context, r Request, admit func(victim Key) bool) (PrefetchResult, error) {
	c.mu.Lock()
	if e, ok := c.entries[r.Key]; ok {
		if e.ready && e.pins == 0 {
			c.policy.Touch(r.Key)
		}
		c.mu.Unlock()
		return PrefetchResident, nil
	}
	if len(c.queue) > 0 || c.pinnedBytes+r.Size > c.capacity {
		c.mu.Unlock()
		c.prefetchRejected.Add(1)
		return PrefetchRejected, nil
	}
	e, err := c.insertLocked(r, admit)
	if err == nil {
		e.prefetched = true
	}
	c.mu.Unlock()
	if errors.Is(err, errNoRoom) {
		c.prefetchRejected.Add(1)
		return PrefetchRejected, nil
	}
	if err != nil {
		return PrefetchRejected, err
	}
	c.prefetchLoads.Add(1)
	c.startLoad(e)
	select {
	case <-e.done:
	case <-ctx.Done():
		return PrefetchLoaded, ctx.Err()
	}
	if e.err != nil {
		return PrefetchRejected, e.err
	}
	if e.below {
		return PrefetchLoadedBelow, nil
	}
	return PrefetchLoaded, nil
}

// Preallocate adds n free chunk buffers of size bytes to the cache and
// touches every page of them, so that loads into them never wait for the
// kernel to fault memory in. Training reads the whole dataset every epoch,
// so a cache up to the dataset's size fills during the first epoch anyway;
// preallocating does that work before the first request instead of during
// it, and a machine without the memory fails at start rather than hours
// into a run. Buffers are reused for chunks whose Request.Alloc is size.
// The memory counts toward no limit but the caller's: pass n so that
// n × size stays within the capacity.
func (c *Cache) Preallocate(ctx context.Context, size int64, n int) error {
	page := os.Getpagesize()
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := newBuffer(size, size)
		for i := 0; i < len(b); i += page {
			b[i] = 0 // a write, not a read: reads map the shared zero page
		}
		c.mu.Lock()
		c.free = append(c.free, b)
		c.bufBytes += int64(cap(b))
		c.mu.Unlock()
	}
	return nil
}
