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

	// large keeps the buffers made to their size (not of a size class)
	// given back, for the next such buffer to reuse: a chunk of 272 MiB
	// read through into a new buffer each time was garbage that let the
	// heap grow past Go's limit before a collection (1,069–1,112 MiB under
	// a 1 GiB budget; issue 98, item 8). The collector takes back what
	// is not reused, as it would the garbage.
	large sync.Pool
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

// Buffer returns an empty buffer of capacity at least n, and what gives
// it back, having reserved the whole of its capacity: a buffer's pages
// are all resident once the runtime has zeroed it (as it does memory it
// reuses), so the room a buffer takes is its capacity, not what its user
// writes. A buffer of n's size class (a power of two) comes from the
// manager's pools; one whose class would be more than a quarter of the
// share is made of n bytes exactly (bufferSize, lendLarge). Before, n
// was reserved and the class taken: 32 reads of 17 MiB samples through
// 272 MiB chunks under --memory-limit 1GiB held 32 MiB buffers for 17
// MiB of copies and 512 MiB ones for each chunk read through, and the
// node peaked at 1,157–1,175 MiB (issue 98, item 8).
func (a *Account) Buffer(ctx context.Context, n int64) ([]byte, func(), error) {
	size, pooled := a.bufferSize(n)
	release, err := a.Reserve(ctx, size)
	if err != nil {
		return nil, nil, err
	}
	buf, give := a.lend(n, size, pooled, release)
	return buf, give, nil
}

// TryBuffer is Buffer if the share has room now.
func (a *Account) TryBuffer(n int64) ([]byte, func(), bool) {
	size, pooled := a.bufferSize(n)
	release, ok := a.TryReserve(size)
	if !ok {
		return nil, nil, false
	}
	buf, give := a.lend(n, size, pooled, release)
	return buf, give, true
}

// bufferSize is the capacity of a buffer for n bytes, and whether it is
// pooled: n's size class, or n itself where the class is more than a
// quarter of the share (the rounding would then take room other holders
// need, and a pooled buffer would stay resident beside the share).
func (a *Account) bufferSize(n int64) (int64, bool) {
	n = max(n, 0)
	size := max(n, int64(1)<<(class(n)+minClassShift))
	if size > a.Size()/4 {
		return n, false
	}
	return size, true
}

// lend is a buffer of capacity in [n, size], reserved by release, and
// what gives both back: one of the pools' of n's class, or a new one of
// size; or where not pooled, lendLarge's.
func (a *Account) lend(n, size int64, pooled bool, release func()) ([]byte, func()) {
	if !pooled {
		return a.lendLarge(n, size, release)
	}
	buf := a.pool.take(n, size)
	return buf, func() { a.pool.put(buf); release() }
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

// lendLarge is a buffer made to its size, n, with room for size (n)
// reserved by release: one given back before if it holds n and not
// twice as much, and its room beyond size is free now; else a new one.
func (a *Account) lendLarge(n, size int64, release func()) ([]byte, func()) {
	if b, ok := a.large.Get().(*[]byte); ok {
		if c := int64(cap(*b)); c >= n && c <= 2*n {
			if more, ok := a.TryReserve(c - size); ok {
				return (*b)[:0], func() { a.large.Put(b); more(); release() }
			}
		}
		// Not one for this size, or no room for it now: the collector's.
	}
	buf := make([]byte, 0, size)
	return buf, func() { a.large.Put(&buf); release() }
}
