package editproto

import (
	"context"
	"sync"
	"time"
)

// Holds are the promises a node made to other members taking edits of
// its jobs (a stored schedule's steps, a chain's positions): for each
// key, nothing from the first point held on is laid out until every edit
// that asked has been made or refused (Release) or Hold has passed since
// the last one asked, whichever comes first. The edit's node releases
// the hold as soon as it is done, so that a job is not stalled for Hold
// by an edit refused or made at once; the time bounds a release that
// never comes (the edit's node gone, a lost message).
//
// A node's reads of what an edit of k may change are settled again only
// once k's holds have ended (Settled): the edit's node releases them
// before it answers its client, so a node that reads again what is not
// settled tells every client what that answer told.
//
// Points are compared by before; K names what is held. Safe for
// concurrent use.
type Holds[K comparable, P any] struct {
	before func(a, b P) bool // a is before b

	mu   sync.Mutex
	held map[K]*held[P]
	// settled[k] is when k's last hold ended, or ends if never released.
	settled map[K]time.Time
	// released are the edits (by ID) whose release came while they held
	// nothing here, each until Hold after it: a question heard after its
	// release (this node paused while the edit asked, and refused) makes
	// no hold.
	released map[string]time.Time
}

type held[P any] struct {
	from  P
	until time.Time
	edits map[string]int // edits that asked and have not released, by ID ("": unnamed)
	done  chan struct{}  // closed when the last of them releases
}

// NewHolds returns an empty set of holds whose points are ordered by
// before.
func NewHolds[K comparable, P any](before func(a, b P) bool) *Holds[K, P] {
	return &Holds[K, P]{before: before, held: map[K]*held[P]{}, settled: map[K]time.Time{}, released: map[string]time.Time{}}
}

// Add promises edit's node, at now, that nothing of k from from on is
// laid out until it releases (Release) or Hold passes. Holds of edits
// asking at once (two nodes taking edits of one job) are one hold from
// the earlier point, released by the last of them. An edit whose release
// was heard already (Release before Add) is held for nothing. edit is
// the edit's ID; "" names none (a question from a node that sends none),
// each such question released by any unnamed release.
func (h *Holds[K, P]) Add(k K, from P, now time.Time, edit string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if until, ok := h.released[edit]; ok && edit != "" && now.Before(until) {
		return
	}
	if end := now.Add(Hold); end.After(h.settled[k]) {
		h.settled[k] = end
	}
	if c := h.live(k, now); c != nil {
		if h.before(from, c.from) {
			c.from = from
		}
		c.until = now.Add(Hold)
		c.edits[edit]++
		return
	}
	h.held[k] = &held[P]{from: from, until: now.Add(Hold), edits: map[string]int{edit: 1}, done: make(chan struct{})}
}

// Release ends edit's hold of k at now: the edit is made or refused.
// The hold ends when every edit that asked has released it. A release of
// a named edit that holds nothing of k (its question not heard yet) is
// kept for Hold, so that the question, heard late, holds nothing.
func (h *Holds[K, P]) Release(k K, now time.Time, edit string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for e, until := range h.released {
		if !now.Before(until) {
			delete(h.released, e)
		}
	}
	c := h.live(k, now)
	if c == nil || c.edits[edit] == 0 {
		if edit != "" {
			h.released[edit] = now.Add(Hold)
		}
		return
	}
	if c.edits[edit]--; c.edits[edit] == 0 {
		delete(c.edits, edit)
	}
	if len(c.edits) == 0 {
		close(c.done)
		delete(h.held, k)
		h.settled[k] = now
	}
}

// Settled reports whether what a node read, in a read begun at read, of
// what an edit of k may change still stands as far as edits made on
// other nodes go: not if an edit's node was promised a hold of k (Add)
// that has not ended, or ended after read. Between edits, every read
// stands.
func (h *Holds[K, P]) Settled(k K, read time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	end, ok := h.settled[k]
	return !ok || !read.Before(end)
}

// Wait is how long what is laid out of k up to p (its end, past its
// last position or step) waits at now, and a channel closed if the hold
// is released before: 0 and nil if no hold covers it (the hold's first
// point is not before p).
func (h *Holds[K, P]) Wait(k K, p P, now time.Time) (time.Duration, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.live(k, now)
	if c == nil || !h.before(c.from, p) {
		return 0, nil
	}
	return c.until.Sub(now), c.done
}

// Holding reports whether k is held at now.
func (h *Holds[K, P]) Holding(k K, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live(k, now) != nil
}

// live is k's hold if it has not ended at now (one that has is
// dropped); h.mu held.
func (h *Holds[K, P]) live(k K, now time.Time) *held[P] {
	c, ok := h.held[k]
	if !ok {
		return nil
	}
	if !now.Before(c.until) {
		close(c.done)
		delete(h.held, k)
		return nil
	}
	return c
}

// Forget drops k's hold, if any (a job forgotten).
func (h *Holds[K, P]) Forget(k K) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.held[k]; ok {
		close(c.done)
		delete(h.held, k)
	}
	delete(h.settled, k)
}

// WaitOut waits d, or until released is closed or ctx ends.
func WaitOut(ctx context.Context, d time.Duration, released <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
