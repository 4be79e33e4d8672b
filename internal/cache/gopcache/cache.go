package gopcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// ends. refs counts the leases on them (c.mu): the book may drop the
// entry (gone) while leases still read or fill them.
type frames struct {
	pts     []int64
	bufs    [][]byte
	size    int64
	done    chan struct{} // closed when filled or failed
	failed  bool          // set before done is closed
	claimed bool          // its batch's task is running, and fills it before it waits on anything (Claim)
	started bool          // its batch's task was taken by a worker: it claims it next, or forgoes it (Start)
	refs    int
	gone    bool
}

// New returns a cache of c.
func New(c Config) *Cache {
	return &Cache{limit: max(c.Limit, 0), budget: c.Budget, book: NewBook(max(c.Limit, 0)), held: map[Key]*frames{}, spare: map[int64][][]byte{}}
}

// Lease is a batch's hold on one GOP (Decide).
type Lease struct {
	c   *Cache
	key Key
	// Hit: the frames are held, or being decoded by an earlier batch:
	// Wait, then Frame gives them until Release.
	Hit bool
	// Decode are, on a miss (or a hit whose fill failed: Wait), the
	// frames to decode, ascending: Put each as it is decoded when the
	// lease Keeps them, then Done.
	Decode []int64
	own    []int64 // the batch's own frames: what a hit whose fill failed decodes
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
	// later sample of the horizon wants them, or no room, or the fill
	// they waited for failed), Short of those the ones held without a
	// frame the batch wants (Decision.Short);
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

// Want is one GOP a batch wants: its key, in horizon Horizon, the uses
// of it by the batch's samples (Own), which of its frames the batch can
// decode (Can: the GOPs it read; nil, every one), each frame's bytes.
type Want struct {
	Horizon    *Horizon
	Key        Key
	Own        []Use
	Can        func(pts int64) bool
	FrameBytes int64
}

// Decide takes a batch's decisions for every GOP it wants, in the order
// given, and then records the batch's samples served (served, by
// horizon): the book's calls a plan makes for the batch (Book.Acquire for
// each GOP, its pin let go at once, Book.Served), so that a node serving
// an epoch's batches one after another decides what the plan predicted,
// however its workers then decode them. The frames a lease holds are kept
// for it (a count of leases on them) until it is done, whatever the book
// drops meanwhile. The leases are worked in any order and at once.
func (c *Cache) Decide(wants []Want, served map[*Horizon][]int) []*Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Lease, len(wants))
	for i, w := range wants {
		own := union(nil, w.Own)
		d := c.book.Acquire(w.Horizon, w.Key, w.Own, w.Can, w.FrameBytes)
		switch {
		case d.Hit:
			f := c.held[w.Key]
			f.refs++
			c.book.Release(w.Key)
			c.hits.Add(1)
			out[i] = &Lease{c: c, key: w.Key, Hit: true, own: own, f: f}
			continue
		case !d.Keep:
			c.alone.Add(1)
			if d.Short {
				c.short.Add(1)
			}
			out[i] = &Lease{c: c, key: w.Key, Decode: d.Frames, own: own}
			continue
		}
		c.gone(d.Evicted, &c.evicted)
		f, ok := c.buffers(d.Frames, w.FrameBytes)
		if !ok {
			// The budget has not the room the book counted (others hold
			// the share): decode for this batch alone.
			c.book.Abort(w.Key)
			c.alone.Add(1)
			out[i] = &Lease{c: c, key: w.Key, Decode: own, own: own}
			continue
		}
		f.refs = 1
		c.held[w.Key] = f
		c.book.Filled(w.Key) // filling, to the book: later batches wait on f.done
		c.book.Release(w.Key)
		c.kept.Add(1)
		out[i] = &Lease{c: c, key: w.Key, Decode: d.Frames, own: own, f: f}
	}
	hs := make([]*Horizon, 0, len(served))
	for h := range served {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *Horizon) int { return strings.Compare(a.ID, b.ID) })
	for _, h := range hs {
		c.gone(c.book.Served(h, served[h]), &c.dropped)
	}
	if c.book.Len() == 0 {
		c.trim(0)
	} else {
		c.trim(c.limit / 4)
	}
	return out
}

// Claim says that the task holding a kept fill's lease runs now and
// fills it before it waits on anything: the batches that want the GOP
// wait for it (Wait). False if another batch claimed it first (Wait): the
// lease is then a hit, to Wait for that batch's fill.
func (l *Lease) Claim() bool {
	if !l.Keeps() {
		return false
	}
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.f.claimed {
		l.Hit, l.Decode = true, nil
		return false
	}
	l.f.claimed = true
	return true
}

// Start says that the task holding a kept fill's lease was taken by a
// worker: it claims the fill next (Claim), waiting on nothing before but
// its memory, and forgoes the fill rather than wait for that (Forgo). A
// worker's queue that is taken in the order the batches were decided
// (Decide) then lets a later batch wait for an earlier one's fill
// (Wait). A no-op on a lease that does not keep.
func (l *Lease) Start() {
	if !l.Keeps() {
		return
	}
	l.c.mu.Lock()
	l.f.started = true
	l.c.mu.Unlock()
}

// Forgo gives a kept fill up before its task claims it (its task cannot
// have its memory now, and will not make the batches that want the GOP
// wait for that): the fill fails — those batches decode their own — and
// the lease decodes its batch's own frames alone. A no-op on a lease that
// does not keep, or whose fill another batch claimed first (the lease is
// then a hit on it: Claim).
func (l *Lease) Forgo() {
	if !l.Keeps() {
		return
	}
	c, f := l.c, l.f
	c.mu.Lock()
	if f.claimed {
		c.mu.Unlock()
		return
	}
	f.failed = true
	if c.held[l.key] == f {
		c.book.Abort(l.key)
		c.gone([]Key{l.key}, nil)
	}
	c.unref(f)
	c.kept.Add(-1)
	c.alone.Add(1)
	c.mu.Unlock()
	close(f.done)
	l.f, l.Decode = nil, l.own
}

// Wait waits for a hit's frames, decoded by another batch's task, and
// reports whether they are held. A fill no task has claimed yet (Claim)
// is not waited for unless its task was taken (Start): the lease claims
// it and becomes that fill (Keeps: Put its frames, then Done) if can
// decodes every frame of it; else, if its task was taken, waits for it,
// and if not, decodes the batch's own frames alone. So a task waits only
// on a fill under way or about to be, which waits on nothing but its
// task's memory (and forgoes the fill rather than wait for that), and
// the workers never all wait on fills queued behind them. A fill that
// failed: the batch's own frames alone too. can is what the batch can
// decode (nil: everything).
func (l *Lease) Wait(ctx context.Context, can func(pts int64) bool) (bool, error) {
	if !l.Hit {
		return false, nil
	}
	c, f := l.c, l.f
	c.mu.Lock()
	if !f.claimed && !f.failed {
		steal := true
		for _, pts := range f.pts {
			if can != nil && !can(pts) {
				steal = false
				break
			}
		}
		if steal {
			f.claimed = true
			l.Hit, l.Decode = false, f.pts
			c.mu.Unlock()
			return false, nil
		}
	}
	wait := (f.claimed || f.started) && !f.failed
	c.mu.Unlock()
	if wait {
		select {
		case <-f.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !wait || f.failed {
		c.unref(f)
		l.Hit, l.f, l.Decode = false, nil, l.own
		c.hits.Add(-1)
		c.alone.Add(1)
		return false, nil
	}
	return true, nil
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

// Done ends a miss: a kept fill's frames are held (err nil) or, failed,
// dropped (the batches waiting for them decode their own), and the lease
// let go.
func (l *Lease) Done(err error) {
	if l.f == nil {
		return
	}
	c, f := l.c, l.f
	c.mu.Lock()
	if err != nil {
		f.failed = true
		if c.held[l.key] == f {
			c.book.Abort(l.key)
			c.gone([]Key{l.key}, nil)
		}
	}
	c.unref(f)
	c.mu.Unlock()
	close(f.done)
	l.f = nil
}

// errClosed fails a fill its batch let go undone (Close).
var errClosed = errors.New("gopcache: the batch let its fill go undone")

// Close lets the lease go if it has not been: a fill not done fails (the
// batches waiting for it decode their own), a hit is released. A no-op
// after Done or Release.
func (l *Lease) Close() {
	switch {
	case l.f == nil:
	case l.Hit:
		l.Release()
	default:
		l.Done(errClosed)
	}
}

// Release lets a hit's frames go.
func (l *Lease) Release() {
	if l.Hit && l.f != nil {
		l.c.mu.Lock()
		l.c.unref(l.f)
		l.c.mu.Unlock()
		l.f = nil
	}
}

// gone takes the entries the book dropped out of the held ones, counting
// them in n (nil: none); their buffers go to the spares once no lease
// holds them. c.mu is held.
func (c *Cache) gone(keys []Key, n *atomic.Int64) {
	for _, k := range keys {
		if n != nil {
			n.Add(1)
		}
		f := c.held[k]
		if f == nil {
			continue
		}
		delete(c.held, k)
		f.gone = true
		if f.refs == 0 {
			c.recycle(f)
		}
	}
}

// unref lets one lease of f go: its buffers go to the spares if the book
// has dropped it and it was the last. c.mu is held.
func (c *Cache) unref(f *frames) {
	if f.refs--; f.refs == 0 && f.gone {
		c.recycle(f)
	}
}

// recycle puts f's buffers among the spares, and gives spares back past
// a quarter of the limit (all of them once no GOP is held). c.mu is held.
func (c *Cache) recycle(f *frames) {
	if f.bufs == nil {
		return
	}
	c.spare[f.size] = append(c.spare[f.size], f.bufs...)
	c.spareBytes += int64(len(f.bufs)) * f.size
	f.bufs = nil
	if c.book.Len() == 0 {
		c.trim(0)
	} else {
		c.trim(c.limit / 4)
	}
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
