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
	"time"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/internal/stopper"
)

// Cache is what a Set needs of the chunk cache.
type Cache interface {
	Contains(k chunkcache.Key) bool
	Prefetch(ctx context.Context, r chunkcache.Request, admit func(victim chunkcache.Key) bool) (chunkcache.PrefetchResult, error)
}

// Config configures a Set.
type Config struct {
	// Part runs the loads, and ends them when it stops (nil: a part of
	// the Set's own, stopped by Close); Limit bounds those running at
	// once, and may be shared with other parts' work ahead (nil: a limit
	// of Slots, at least 1).
	Part  *stopper.Part
	Limit *stopper.Limit
	Slots int
	// Cache is where Load reads entries into.
	Cache Cache
	// Timeout bounds one Load (a store read that hangs); 0: none but
	// the part's stop.
	Timeout time.Duration
}

// Set is a bounded, tracked set of background loads. Safe for concurrent
// use.
type Set struct {
	cache   Cache
	timeout time.Duration
	part    *stopper.Part
	limit   *stopper.Limit
}

// New returns a Set.
func New(c Config) *Set {
	s := &Set{cache: c.Cache, timeout: c.Timeout, part: stopper.Own(c.Part, "work ahead"), limit: c.Limit}
	if s.limit == nil {
		s.limit = stopper.NewLimit(c.Slots)
	}
	return s
}

// Load starts reading r into the cache unless it is resident, being
// read, or no slot is free; done, if not nil, is told what the cache did
// once the read ends (not on an error). It never waits, and never evicts
// for r what the cache's policy would not (chunkcache.Cache.Prefetch).
func (s *Set) Load(r chunkcache.Request, done func(chunkcache.PrefetchResult)) bool {
	if s.cache.Contains(r.Key) {
		return false
	}
	return s.part.TryGo(s.limit, func(ctx context.Context) {
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

// Close stops the Set's part: the running loads' contexts end and they
// are waited for; later Load calls run nothing. Idempotent.
func (s *Set) Close() { s.part.Stop() }
