// Package ahead runs the work a request leaves behind it — loads of
// cache entries ahead of need, fetches of a later batch's samples — in
// one tracked, bounded set: at most Config.Slots tasks run at once, a
// task that finds no free slot is dropped rather than queued (work ahead
// is a bet, never worth waiting for), every task's context ends at Close,
// and Close returns only once every task has.
//
// The schedule's prefetcher (internal/schedule) reads what the job
// streams' known order needs next; a Set is for what no stream's order
// names: the S3 face's read-ahead of a dataset read in chunk order, the
// next blocks of a read-through object, a later part of a batch.
package ahead

import (
	"context"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkcache"
)

// Cache is what a Set needs of the chunk cache.
type Cache interface {
	Contains(k chunkcache.Key) bool
	Prefetch(ctx context.Context, r chunkcache.Request, admit func(victim chunkcache.Key) bool) (chunkcache.PrefetchResult, error)
}

// Config configures a Set.
type Config struct {
	// Slots bounds the tasks running at once; at least 1.
	Slots int
	// Cache is where Load reads entries into; nil if Load is not used.
	Cache Cache
	// Timeout bounds one Load (a store read that hangs); 0: none but
	// Close.
	Timeout time.Duration
}

// Set is a bounded, tracked set of background tasks. Safe for concurrent
// use.
type Set struct {
	cache   Cache
	timeout time.Duration
	slots   chan struct{}

	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed against wg.Add after Wait began
	closed bool
	wg     sync.WaitGroup
}

// New returns a Set.
func New(c Config) *Set {
	ctx, cancel := context.WithCancel(context.Background())
	return &Set{cache: c.Cache, timeout: c.Timeout, slots: make(chan struct{}, max(c.Slots, 1)), ctx: ctx, cancel: cancel}
}

// TryGo runs f in the background if a slot is free and the set is not
// closed, and reports whether it does. f's context ends at Close.
func (s *Set) TryGo(f func(ctx context.Context)) bool {
	select {
	case s.slots <- struct{}{}:
	default:
		return false
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.slots
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		f(s.ctx)
	}()
	return true
}

// Load starts reading r into the cache unless it is resident, being
// read, or no slot is free; done, if not nil, is told what the cache did
// once the read ends (not on an error). It never waits, and never evicts
// for r what the cache's policy would not (chunkcache.Cache.Prefetch).
func (s *Set) Load(r chunkcache.Request, done func(chunkcache.PrefetchResult)) bool {
	if s.cache.Contains(r.Key) {
		return false
	}
	return s.TryGo(func(ctx context.Context) {
		if s.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.timeout)
			defer cancel()
		}
		res, err := s.cache.Prefetch(ctx, r, nil)
		if err == nil && done != nil {
			done(res)
		}
	})
}

// Close cancels the running tasks' contexts and waits for them to
// return; later TryGo and Load calls run nothing. Idempotent.
func (s *Set) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}
