// Package preload loads cache entries before they are asked for when no
// job stream's order names them: a batch's later parts while its first is
// read, the next chunks of a dataset the S3 face reads in chunk order,
// the next blocks of a read-through object. (What an order names next is
// the use table's prefetch, internal/cache/usetable.)
//
// A preload is a bet, never worth waiting for: at most Config.Limit
// loads run at once, and one that finds no free slot is dropped rather
// than queued. The loads run on a part of the gateway's stopper
// (internal/server/stopper): their context ends when it stops, which waits for
// them.
package preload

import (
	"context"
	"time"

	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/server/stopper"
)

// Cache is what a Set needs of the chunk cache.
type Cache interface {
	Contains(k chunkcache.Key) bool
	Prefetch(ctx context.Context, r chunkcache.Request, admit func(victim chunkcache.Key) bool) (chunkcache.PrefetchResult, error)
}

// Config configures a Set.
type Config struct {
	// Group runs the loads, and ends them when it stops (nil: a part of
	// the Set's own, stopped by Close); Limit bounds those running at
	// once, and may be shared with other parts' work ahead (nil: a limit
	// of Slots, at least 1).
	Group *stopper.Group
	Limit *stopper.Limit
	Slots int
	// Cache is where Load reads entries into.
	Cache Cache
	// Timeout bounds one Load (a store read that hangs); 0: none but
	// the part's stop.
	Timeout time.Duration
}

// Set is a bounded, tracked set of loads ahead of need. Safe for concurrent
// use.
type Set struct {
	cache   Cache
	timeout time.Duration
	part    *stopper.Group
	limit   *stopper.Limit
}

// New returns a Set.
func New(c Config) *Set {
	s := &Set{cache: c.Cache, timeout: c.Timeout, part: stopper.Own(c.Group, "preload: loads"), limit: c.Limit}
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
