// Package admit bounds how much of something is held at once — bytes of
// copies out of the cache, batches being assembled, feedback bodies being
// decoded, seals being merged — with waits that are themselves bounded
// and observed: a caller that cannot get room within the gate's wait is
// refused (an error wrapping the gate's busy sentinel, which the gateway
// answers 503 with Retry-After) rather than queued without bound, and
// Stalled tells /readyz when callers wait and none has been let through
// for a while.
package admit

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Gate admits holders of at most Size units in all. Safe for concurrent
// use.
type Gate struct {
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
	what string // what a holder holds, for the refusal
	busy error  // the sentinel a refusal wraps

	waiting   atomic.Int64
	lastGrant atomic.Int64 // unix nanoseconds
}

// New returns a gate of size units (at least 1) whose callers wait at most
// wait, refused with an error wrapping busy that names what.
func New(size int64, wait time.Duration, what string, busy error) *Gate {
	g := &Gate{sem: semaphore.NewWeighted(max(size, 1)), size: max(size, 1), wait: wait, what: what, busy: busy}
	g.lastGrant.Store(time.Now().UnixNano())
	return g
}

// Size is the gate's units.
func (g *Gate) Size() int64 { return g.size }

// clamp is n within what the gate can ever grant: a holder of more than
// the whole gate takes all of it.
func (g *Gate) clamp(n int64) int64 { return min(max(n, 1), g.size) }

// Acquire waits for n units, at most the gate's wait, and returns what
// gives them back.
func (g *Gate) Acquire(ctx context.Context, n int64) (release func(), err error) {
	n = g.clamp(n)
	release = func() { g.sem.Release(n) }
	if g.sem.TryAcquire(n) {
		g.lastGrant.Store(time.Now().UnixNano())
		return release, nil
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	wctx, cancel := context.WithTimeout(ctx, g.wait)
	defer cancel()
	if err := g.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: all %d taken, and not enough given back within %s; retry later", g.busy, g.what, g.size, g.wait)
	}
	g.lastGrant.Store(time.Now().UnixNano())
	return release, nil
}

// TryAcquire takes n units if they are free now.
func (g *Gate) TryAcquire(n int64) (release func(), ok bool) {
	n = g.clamp(n)
	if !g.sem.TryAcquire(n) {
		return nil, false
	}
	g.lastGrant.Store(time.Now().UnixNano())
	return func() { g.sem.Release(n) }, true
}

// Give gives back n units taken before by Acquire or TryAcquire of n,
// for a holder that keeps a count rather than the function they return.
func (g *Gate) Give(n int64) { g.sem.Release(g.clamp(n)) }

// Stalled reports whether callers wait and none has been let through for
// d.
func (g *Gate) Stalled(d time.Duration) bool {
	return g.waiting.Load() > 0 && time.Since(time.Unix(0, g.lastGrant.Load())) > d
}
