package memory

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/server/admit"
)

// An Account is one share of the budget that callers reserve bytes of
// (Manager.Copies, Manager.Decodes): a wait for room is bounded, and a
// reservation is given back by the function it returns. Safe for
// concurrent use.
//
// Request bodies hold it too, below everything else (Hold).
type Account struct {
	part    string
	gate    *admit.Gate
	busy    error
	pool    *pool
	held    atomic.Int64
	refused atomic.Int64
	waiting atomic.Int64 // Reserves waiting in the gate's queue
	bodies  bodies
}

func newAccount(part, what string, size int64, wait time.Duration, busy error, p *pool) *Account {
	a := &Account{part: part, gate: admit.New(size, wait, what, busy), busy: busy, pool: p}
	a.bodies.init(a)
	return a
}

// free is the share's bytes not reserved now.
func (a *Account) free() int64 { return a.Size() - a.Held() }

// given is what gives back n bytes reserved by give: the request bodies
// waiting for room hear of it.
func (a *Account) given(n int64, give func()) func() {
	return func() {
		a.held.Add(-n)
		give()
		a.bodies.wake()
	}
}

// Size is the share's bytes: a reservation of more takes all of it.
func (a *Account) Size() int64 { return a.gate.Size() }

// Held is the bytes reserved now.
func (a *Account) Held() int64 { return a.held.Load() }

// Refused is how many reservations waited past the bound and were
// refused.
func (a *Account) Refused() int64 { return a.refused.Load() }

// Reserve waits for n bytes, at most the manager's wait, and returns what
// gives them back; past the wait, an error wrapping Config.Busy that
// names the share. A reservation of more than Size waits for all of it.
// It never waits on a request body: one that finds no room has the
// bodies still being read give it theirs (Hold), and no body takes room
// while it waits.
func (a *Account) Reserve(ctx context.Context, n int64) (release func(), err error) {
	n = max(n, 0)
	give, ok := a.gate.TryAcquire(n)
	if !ok {
		a.waiting.Add(1)
		a.bodies.yield(n)
		give, err = a.gate.Acquire(ctx, n)
		a.waiting.Add(-1)
		a.bodies.wake()
		if err != nil {
			if ctx.Err() == nil {
				a.refused.Add(1)
			}
			return nil, err
		}
	}
	a.held.Add(n)
	return a.given(n, give), nil
}

// TryReserve takes n bytes if they are free now.
func (a *Account) TryReserve(n int64) (release func(), ok bool) {
	n = max(n, 0)
	give, ok := a.gate.TryAcquire(n)
	if !ok {
		return nil, false
	}
	a.held.Add(n)
	return a.given(n, give), true
}

// Buffer reserves n bytes and returns an empty buffer of capacity at
// least n from the manager's pools, and what gives both back.
func (a *Account) Buffer(ctx context.Context, n int64) ([]byte, func(), error) {
	release, err := a.Reserve(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	buf := a.pool.get(n)
	return buf, func() { a.pool.put(buf); release() }, nil
}

// TryBuffer is Buffer if the share has room now.
func (a *Account) TryBuffer(n int64) ([]byte, func(), bool) {
	release, ok := a.TryReserve(n)
	if !ok {
		return nil, nil, false
	}
	buf := a.pool.get(n)
	return buf, func() { a.pool.put(buf); release() }, true
}

// Stalled reports whether callers wait and none has been let through for
// d.
func (a *Account) Stalled(d time.Duration) bool { return a.gate.Stalled(d) }

// Within returns a budget of at most limit bytes of the share, each
// reservation taken only if it is free now: what a store of work made
// ahead holds (premade.Budget), which must never wait nor hold more than
// its own bound.
func (a *Account) Within(limit int64) *Within { return &Within{a: a, limit: limit} }

// Within is a bounded share of an Account (Account.Within). Safe for
// concurrent use.
type Within struct {
	a     *Account
	limit int64

	mu   sync.Mutex
	used int64
}

// Reserve takes n bytes if they fit in the share's bound and are free in
// the share now.
func (w *Within) Reserve(n int64) bool {
	n = max(n, 0)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.used+n > w.limit {
		return false
	}
	if _, ok := w.a.gate.TryAcquire(n); !ok {
		return false
	}
	w.used += n
	w.a.held.Add(n)
	return true
}

// Release gives back n bytes reserved before.
func (w *Within) Release(n int64) {
	n = max(n, 0)
	w.mu.Lock()
	w.used -= n
	w.mu.Unlock()
	w.a.held.Add(-n)
	w.a.gate.Give(n)
	w.a.bodies.wake()
}

// Limit is the share's bound.
func (w *Within) Limit() int64 { return w.limit }
