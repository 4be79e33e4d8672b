// Package premade holds work made before its request comes: the next
// batch's samples fetched from peers (internal/cluster/route), the next batch
// read and transformed (internal/batch/visit). A batch's order is known, so
// once batch m of a rank is served, batch m+1 can be made in the
// background, to wait here under a key that names it exactly (its ETag)
// until its request takes it.
//
// # Claim, finish, take
//
// The work is claimed (Claim) before the request that starts it ends, so
// that a request for the same batch, however soon it comes, waits for
// the work under way (Take) rather than doing it again. The work then
// finishes (Finish, or Abandon if it made nothing), and its request takes
// what it made, or, if it gives up waiting, leaves it to be given back.
//
// # Bounds
//
// What is held is bounded in entries (claimed or finished) and in bytes,
// and the oldest claim is dropped first when nobody comes for it: a
// claim past Config.Entries drops the oldest, and a finished entry whose
// bytes the Budget cannot reserve drops older entries until it can (or
// itself, when it is the oldest). Only finished entries still held count
// bytes: an entry under way holds nothing yet, and one taken, or dropped
// before it finished, never counts. A value dropped unused is given back
// (Config.Release), once and by whoever sees it last: the dropper if it
// had finished, else its worker.
//
// # Figures
//
// Work is counted when its request takes it (Stats.Taken), never when it
// is made: work dropped unused was not served.
//
// # Requests that came first
//
// With Config.Remember, the keys the last Remember Takes asked for are
// remembered and never claimed: a client that reads ahead itself asks for
// batch m+1 before batch m is served, and making m+1 again once m is
// served would do every batch's work twice.
//
// A Store is safe for concurrent use.
package premade

import (
	"context"
	"sync"
)

// Budget is where a Store takes the bytes of the work it holds: Reserve
// takes n bytes if they fit and reports whether it did; Release gives
// back n bytes reserved before. Both are called with the Store's lock
// held, so they may not call the Store.
type Budget interface {
	Reserve(n int64) bool
	Release(n int64)
}

// Config configures a Store.
type Config[T any] struct {
	// Entries bounds the entries held, claimed or finished.
	Entries int
	// Budget bounds their bytes; nil: the Store holds nothing (every
	// Claim is refused).
	Budget Budget
	// Release gives back what a value holds when it is dropped unused;
	// nil: nothing to give back. It may not call the Store.
	Release func(T)
	// Remember is how many of the most recent keys asked for (Take) are
	// never claimed; 0: none.
	Remember int
}

// Stats are a Store's figures.
type Stats struct {
	Claimed, Taken, Dropped int64 // work claimed, taken made by its request, dropped unused
	Bytes                   int64 // bytes held now
}

// Store holds work made before its request, by key.
type Store[T any] struct {
	cfg Config[T]

	mu      sync.Mutex
	entries map[string]*Claim[T]
	fifo    []*Claim[T] // in claim order; may name entries gone
	bytes   int64
	asked   map[string]struct{}
	askedQ  []string // asked's keys, oldest first
	stats   Stats
}

// Claim is one key's work: claimed, then made or abandoned.
type Claim[T any] struct {
	key  string
	done chan struct{} // closed when the work ends
	v    T
	size int64
	// Under Store.mu: made (v is set), finished (done is closing),
	// counted (size is reserved), taken (a request has it), gone (dropped,
	// or its request gave up: whoever sees it finished releases v).
	made, finished, counted, taken, gone bool
}

// New returns a Store.
func New[T any](c Config[T]) *Store[T] {
	return &Store[T]{cfg: c, entries: map[string]*Claim[T]{}, asked: map[string]struct{}{}}
}

// Claim registers work for key; false if work is there already, its
// request came first, or the Store holds nothing. The caller then
// finishes the claim, whatever happens: Finish or Abandon.
func (s *Store[T]) Claim(key string) (*Claim[T], bool) {
	if s.cfg.Budget == nil {
		return nil, false
	}
	s.mu.Lock()
	if _, ok := s.entries[key]; ok {
		s.mu.Unlock()
		return nil, false
	}
	if _, ok := s.asked[key]; ok {
		s.mu.Unlock()
		return nil, false
	}
	c := &Claim[T]{key: key, done: make(chan struct{})}
	s.entries[key] = c
	s.fifo = append(s.fifo, c)
	s.stats.Claimed++
	var drop []T
	for len(s.entries) > s.cfg.Entries {
		drop = s.dropOldestLocked(drop)
	}
	s.compactLocked()
	s.mu.Unlock()
	s.release(drop)
	return c, true
}

// Finish records what c's work made, of size bytes. If c is still held
// its bytes are reserved now, older entries dropped to make room (or c
// itself, if none is older); if it was dropped or its request gave up
// meanwhile, v is given back at once.
func (s *Store[T]) Finish(c *Claim[T], v T, size int64) {
	s.mu.Lock()
	var drop []T
	if !c.gone && !c.taken {
		for !c.gone && !s.cfg.Budget.Reserve(size) {
			if len(s.fifo) == 0 { // c is in it while held: never so
				s.dropLocked(c, nil)
				break
			}
			drop = s.dropOldestLocked(drop)
		}
		if !c.gone {
			c.size, c.counted = size, true
			s.bytes += size
		}
	}
	c.v, c.made, c.finished = v, true, true
	if c.gone {
		drop = append(drop, v)
	}
	s.mu.Unlock()
	close(c.done)
	s.release(drop)
}

// Abandon records that c's work made nothing: its request, when it
// comes, does the work itself. The entry stays until then, or until it is
// dropped, so that the work is not claimed again meanwhile.
func (s *Store[T]) Abandon(c *Claim[T]) {
	s.mu.Lock()
	c.finished = true
	s.mu.Unlock()
	close(c.done)
}

// Take removes key's work and returns what it made, waiting for it if it
// is under way: ok is false if there is none, or it made nothing, and
// err is ctx's if ctx ended first (the work is then given back when it
// finishes). The key is remembered as asked for.
func (s *Store[T]) Take(ctx context.Context, key string) (v T, ok bool, err error) {
	if s.cfg.Budget == nil {
		return v, false, nil
	}
	s.mu.Lock()
	c, found := s.entries[key]
	if found {
		s.removeLocked(c)
		c.taken = true
	}
	s.askLocked(key)
	s.mu.Unlock()
	if !found {
		return v, false, nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		s.mu.Lock()
		c.gone = true
		fin := c.finished && c.made
		s.mu.Unlock()
		if fin {
			s.release([]T{c.v})
		}
		return v, false, ctx.Err()
	}
	if !c.made {
		return v, false, nil
	}
	s.mu.Lock()
	s.stats.Taken++
	s.mu.Unlock()
	return c.v, true, nil
}

// Close drops everything held, giving back what was made; work still
// under way gives back what it makes when it finishes. Call it once the
// work has ended, or is told to.
func (s *Store[T]) Close() {
	s.mu.Lock()
	var drop []T
	for _, c := range s.entries {
		drop = s.dropLocked(c, drop)
	}
	s.fifo = nil
	s.mu.Unlock()
	s.release(drop)
}

// Stats returns the Store's figures.
func (s *Store[T]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Bytes = s.bytes
	return st
}

// dropOldestLocked drops the oldest entry held, appending its value to
// drop if it had been made.
func (s *Store[T]) dropOldestLocked(drop []T) []T {
	for len(s.fifo) > 0 {
		c := s.fifo[0]
		s.fifo = s.fifo[1:]
		if e, ok := s.entries[c.key]; ok && e == c {
			s.stats.Dropped++
			return s.dropLocked(c, drop)
		}
	}
	return drop
}

func (s *Store[T]) dropLocked(c *Claim[T], drop []T) []T {
	s.removeLocked(c)
	c.gone = true
	if c.finished && c.made {
		drop = append(drop, c.v)
	}
	return drop
}

func (s *Store[T]) removeLocked(c *Claim[T]) {
	delete(s.entries, c.key)
	if c.counted {
		s.cfg.Budget.Release(c.size)
		s.bytes -= c.size
		c.counted = false
	}
}

// compactLocked forgets the keys of entries taken or dropped once they
// outnumber those held.
func (s *Store[T]) compactLocked() {
	if len(s.fifo) <= 2*max(s.cfg.Entries, len(s.entries)) {
		return
	}
	live := s.fifo[:0]
	for _, c := range s.fifo {
		if e, ok := s.entries[c.key]; ok && e == c {
			live = append(live, c)
		}
	}
	clear(s.fifo[len(live):])
	s.fifo = live
}

// askLocked remembers that key's request came, forgetting the oldest
// past Config.Remember.
func (s *Store[T]) askLocked(key string) {
	if s.cfg.Remember <= 0 {
		return
	}
	if _, ok := s.asked[key]; ok {
		return
	}
	s.asked[key] = struct{}{}
	s.askedQ = append(s.askedQ, key)
	if len(s.askedQ) > s.cfg.Remember {
		delete(s.asked, s.askedQ[0])
		s.askedQ = s.askedQ[1:]
	}
}

func (s *Store[T]) release(vs []T) {
	if s.cfg.Release == nil {
		return
	}
	for _, v := range vs {
		s.cfg.Release(v)
	}
}

// Bytes is a Budget of a fixed number of bytes. Safe for concurrent use.
type Bytes struct {
	mu          sync.Mutex
	limit, used int64
}

// NewBytes returns a Budget of limit bytes.
func NewBytes(limit int64) *Bytes { return &Bytes{limit: limit} }

// Reserve takes n bytes if used and n fit in the limit.
func (b *Bytes) Reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// Release gives back n bytes.
func (b *Bytes) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Limit is the Budget's bound.
func (b *Bytes) Limit() int64 { return b.limit }
