package gopcache

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Budget is the memory the cache's frames take (memory.Within over the
// node's decodes: a *memory.Within has these methods): a reservation is
// taken only if it is free now, never waited for.
type Budget interface {
	Reserve(n int64) bool
	Release(n int64)
}

// Config configures a Cache.
type Config struct {
	// Limit bounds the bytes of frames held, decoded GOPs' and spare
	// buffers' together; 0 holds none (every batch decodes its own).
	Limit int64
	// Budget is what the bytes are reserved from; nil counts them
	// against Limit alone.
	Budget Budget
}

// Cache holds decoded GOPs' frames by its Book: a GOP a batch wants is
// decoded once (one fill, however many batches ask at once) and held for
// the batches of its horizon that want it after, until the last of them
// is served or a GOP wanted sooner needs the room. Frame buffers are
// reused from GOP to GOP (a fresh one costs its pages' faults). Safe for
// concurrent use.
type Cache struct {
	limit  int64
	budget Budget

	mu    sync.Mutex
	book  *Book
	held  map[Key]*frames
	spare map[int64][][]byte // reserved buffers not in use, by size
	spareBytes,
	reserved, peak int64

	hits, kept, alone, short, evicted, dropped atomic.Int64
}

// frames are one entry's frames: its buffers by PTS, and when its fill
// ends.
type frames struct {
	pts  []int64
	bufs [][]byte
	size int64
	done chan struct{} // closed when filled or aborted
}

// New returns a cache of c.
func New(c Config) *Cache {
	return &Cache{limit: max(c.Limit, 0), budget: c.Budget, book: NewBook(max(c.Limit, 0)), held: map[Key]*frames{}, spare: map[int64][][]byte{}}
}

// Lease is a batch's hold on one GOP (Acquire).
type Lease struct {
	c   *Cache
	key Key
	// Hit: the frames are held; Frame gives them until Release.
	Hit bool
	// Decode are, on a miss, the frames to decode, ascending: Put each
	// as it is decoded, then Done.
	Decode []int64
	f      *frames // a hit's, or a kept fill's
}

// Stats are the cache's counts since it started.
type Stats struct {
	// Limit and Held are its bound and the bytes it holds (spare
	// buffers too), Peak the most it has held; Entries the GOPs held.
	Limit, Held, Peak int64
	Entries           int
	// Hits are GOPs a batch took from the cache; Kept the fills held for
	// later batches, Alone those decoded for their batch alone (no
	// later sample of the horizon wants them, or no room), Short of
	// those the ones held without a frame the batch wants
	// (Decision.Short);
	// Evicted the GOPs dropped for room before every sample that wanted
	// them was served, Dropped those dropped once it was.
	Hits, Kept, Alone, Short, Evicted, Dropped int64
}

// Stats returns the counts now.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	held, peak, n := c.reserved, c.peak, c.book.Len()
	c.mu.Unlock()
	return Stats{Limit: c.limit, Held: held, Peak: peak, Entries: n, Hits: c.hits.Load(), Kept: c.kept.Load(), Alone: c.alone.Load(),
		Short: c.short.Load(), Evicted: c.evicted.Load(), Dropped: c.dropped.Load()}
}

// Acquire takes GOP k for a batch whose samples own want it (Book.Acquire):
// a hit (waiting for a fill under way), or a miss saying what to decode.
// can says which frames the batch can decode (the GOPs it read).
func (c *Cache) Acquire(ctx context.Context, h *Horizon, k Key, own []Use, can func(pts int64) bool, frameBytes int64) (*Lease, error) {
	for {
		c.mu.Lock()
		d := c.book.Acquire(h, k, own, can, frameBytes)
		if d.Hit {
			f := c.held[k]
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				c.release(k)
				return nil, ctx.Err()
			}
			c.mu.Lock()
			ok := c.held[k] == f
			c.mu.Unlock()
			if !ok {
				continue // its fill failed: decide again
			}
			c.hits.Add(1)
			return &Lease{c: c, key: k, Hit: true, f: f}, nil
		}
		c.free(d.Evicted, &c.evicted)
		if !d.Keep {
			c.mu.Unlock()
			c.alone.Add(1)
			if d.Short {
				c.short.Add(1)
			}
			return &Lease{c: c, key: k, Decode: d.Frames}, nil
		}
		f, ok := c.buffers(d.Frames, frameBytes)
		if !ok {
			// The budget has not the room the book counted (others hold
			// the share): decode for this batch alone.
			c.book.Abort(k)
			c.mu.Unlock()
			c.alone.Add(1)
			return &Lease{c: c, key: k, Decode: union(nil, own)}, nil
		}
		c.held[k] = f
		c.mu.Unlock()
		c.kept.Add(1)
		return &Lease{c: c, key: k, Decode: d.Frames, f: f}, nil
	}
}

// Frame returns a held frame of pts (a hit's, or one Put during a kept
// fill), nil if the lease holds none. Valid until Release or Done.
func (l *Lease) Frame(pts int64) []byte {
	if l.f == nil {
		return nil
	}
	i, ok := slices.BinarySearch(l.f.pts, pts)
	if !ok {
		return nil
	}
	return l.f.bufs[i]
}

// Keeps reports whether a miss's frames are held for later batches: Put
// them.
func (l *Lease) Keeps() bool { return !l.Hit && l.f != nil }

// Put copies a decoded frame of pts into a kept fill's buffers.
func (l *Lease) Put(pts int64, rgb []byte) error {
	i, ok := slices.BinarySearch(l.f.pts, pts)
	if !ok || len(rgb) != int(l.f.size) {
		return fmt.Errorf("gopcache: a frame of pts %d, %d bytes, not one of the %d of %d bytes the fill holds", pts, len(rgb), len(l.f.pts), l.f.size)
	}
	copy(l.f.bufs[i], rgb)
	return nil
}

// Done ends a miss: a kept fill's frames are held (err nil) or dropped,
// and the lease let go.
func (l *Lease) Done(err error) {
	if l.f == nil {
		return
	}
	c := l.c
	c.mu.Lock()
	if err == nil {
		c.book.Filled(l.key)
		if c.book.Release(l.key) {
			c.dropped.Add(1)
			c.recycle(l.key)
		}
	} else {
		c.book.Abort(l.key)
		c.recycle(l.key)
	}
	c.mu.Unlock()
	close(l.f.done)
	l.f = nil
}

// Release lets a hit's frames go.
func (l *Lease) Release() {
	if l.Hit && l.f != nil {
		l.c.release(l.key)
		l.f = nil
	}
}

func (c *Cache) release(k Key) {
	c.mu.Lock()
	if c.book.Release(k) {
		c.dropped.Add(1)
		c.recycle(k)
	}
	c.mu.Unlock()
}

// Served records that the samples at positions pos of horizon h were
// served: a GOP no later sample wants is dropped.
func (c *Cache) Served(h *Horizon, pos []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.free(c.book.Served(h, pos), &c.dropped)
	if c.book.Len() == 0 {
		c.trim(0)
	} else {
		c.trim(c.limit / 4)
	}
}

// free recycles the buffers of entries the book dropped, counting them in
// n. c.mu is held.
func (c *Cache) free(keys []Key, n *atomic.Int64) {
	for _, k := range keys {
		n.Add(1)
		c.recycle(k)
	}
}

// recycle puts entry k's buffers among the spares. c.mu is held.
func (c *Cache) recycle(k Key) {
	f := c.held[k]
	if f == nil {
		return
	}
	delete(c.held, k)
	c.spare[f.size] = append(c.spare[f.size], f.bufs...)
	c.spareBytes += int64(len(f.bufs)) * f.size
	f.bufs = nil
}

// buffers returns n buffers of size bytes for frames pts, from the spares
// or newly reserved; false if the budget has not the room. c.mu is held.
func (c *Cache) buffers(pts []int64, size int64) (*frames, bool) {
	f := &frames{pts: pts, size: size, done: make(chan struct{})}
	need := len(pts)
	take := min(need, len(c.spare[size]))
	s := c.spare[size]
	f.bufs = append(f.bufs, s[len(s)-take:]...)
	c.spare[size] = s[:len(s)-take]
	c.spareBytes -= int64(take) * size
	if more := int64(need-take) * size; more > 0 {
		if !c.reserve(more) {
			c.trim(0) // the spares of other sizes make room
			if !c.reserve(more) {
				c.spare[size] = append(c.spare[size], f.bufs...)
				c.spareBytes += int64(take) * size
				return nil, false
			}
		}
		for range need - take {
			f.bufs = append(f.bufs, make([]byte, size))
		}
	}
	return f, true
}

func (c *Cache) reserve(n int64) bool {
	if c.reserved+n > c.limit {
		return false
	}
	if c.budget != nil && !c.budget.Reserve(n) {
		return false
	}
	c.reserved += n
	c.peak = max(c.peak, c.reserved)
	return true
}

// trim gives back spare buffers past keep bytes. c.mu is held.
func (c *Cache) trim(keep int64) {
	for size, bufs := range c.spare {
		for len(bufs) > 0 && c.spareBytes > keep {
			bufs[len(bufs)-1] = nil
			bufs = bufs[:len(bufs)-1]
			c.spareBytes -= size
			c.reserved -= size
			if c.budget != nil {
				c.budget.Release(size)
			}
		}
		c.spare[size] = bufs
	}
}
