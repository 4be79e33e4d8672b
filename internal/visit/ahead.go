package visit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/order"
)

// Background runs work after a request, bounded and tracked
// (internal/ahead.Set): a task that finds no free slot is not run, and
// Close waits for those that run.
type Background interface {
	TryGo(f func(ctx context.Context)) bool
}

// readAhead holds batches transformed ahead of their requests. The order
// is known, so once a rank's batch m of a job that names a pipeline is
// served, batch m+1 is laid out, read and transformed in the background,
// and waits here under its ETag (which names its exact samples, the
// pipeline and its fingerprint) for its request. The entry is claimed
// before batch m's request ends, so that batch m+1's request, however
// soon it comes, waits for the work under way rather than doing it
// again. What is held is bounded in bytes and in batches, and dropped
// oldest first when nobody comes for it; its memory is the copy budget's.
//
// A batch whose request came first is not made ahead: a client that
// reads ahead itself (the Python client keeps two batches requested
// beyond the one consumed) asks for batch m+1 before batch m is served,
// and making m+1 again once m is served would transform every batch
// twice. The batches asked for are remembered, the most recent
// maxAsked of them.
//
// A batch made ahead is counted (the live figures) when its request takes
// it, never when it is made: a batch dropped unused was not served. Safe
// for concurrent use.
type readAhead struct {
	limit int64

	mu      sync.Mutex
	entries map[string]*aheadEntry
	fifo    []string // keys in claim order; may name entries gone
	bytes   int64
	asked   map[string]struct{} // batches a request has asked for
	askedQ  []string            // their keys, oldest first

	started, hits, dropped atomic.Int64
}

// aheadEntry is one batch made ahead. done closes when the work ends;
// served is nil if it failed (the request then reads the batch itself).
type aheadEntry struct {
	done   chan struct{}
	served *Served
	wait   time.Duration
	size   int64
	// Under readAhead.mu: counted (size is in bytes), finished (served
	// is set), taken (a request has it), gone (dropped, or its request
	// gave up: whoever sees it finished releases it).
	counted, finished, taken, gone bool
}

// maxAheadBatches bounds the batches held ahead whatever their size;
// maxAsked, the batches asked for that are remembered: far more than the
// requests of all ranks in flight at once.
const (
	maxAheadBatches = 256
	maxAsked        = 4096
)

func newReadAhead(limit int64) *readAhead {
	return &readAhead{limit: limit, entries: map[string]*aheadEntry{}, asked: map[string]struct{}{}}
}

// claim registers work ahead for the batch key names; false if some is
// there already, its request came first, or nothing may be held.
func (a *readAhead) claim(key string) (*aheadEntry, bool) {
	if a.limit <= 0 {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.entries[key]; ok {
		return nil, false
	}
	if _, ok := a.asked[key]; ok {
		return nil, false
	}
	e := &aheadEntry{done: make(chan struct{})}
	a.entries[key] = e
	a.fifo = append(a.fifo, key)
	a.started.Add(1)
	a.trimLocked()
	return e, true
}

// unclaim removes an entry whose work did not start.
func (a *readAhead) unclaim(key string, e *aheadEntry) {
	a.finish(key, e, nil, 0)
}

// finish records the work's result. An entry dropped or given up while
// the work ran is released at once; one still held now counts its bytes,
// and older entries may be dropped to make room.
func (a *readAhead) finish(key string, e *aheadEntry, s *Served, wait time.Duration) {
	a.mu.Lock()
	e.served, e.wait, e.finished = s, wait, true
	release := e.gone
	if s != nil && !e.gone && !e.taken {
		e.size = s.Bytes
		e.counted = true
		a.bytes += e.size
		a.trimLocked()
		release = e.gone
	}
	a.mu.Unlock()
	close(e.done)
	if release && s != nil {
		s.Release()
	}
}

// take returns batch key's work ahead, waiting for it if it is under way:
// the batch made, or nil (none, or it failed) for the request to read it
// itself. A request that gives up waiting leaves the entry to be released.
func (a *readAhead) take(ctx context.Context, key string) (*Served, time.Duration, error) {
	if a.limit <= 0 {
		return nil, 0, nil
	}
	a.mu.Lock()
	e, ok := a.entries[key]
	if ok {
		a.removeLocked(key, e)
		e.taken = true
	}
	a.askLocked(key)
	a.mu.Unlock()
	if !ok {
		return nil, 0, nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		a.mu.Lock()
		e.gone = true
		fin := e.finished
		a.mu.Unlock()
		if fin && e.served != nil {
			e.served.Release()
		}
		return nil, 0, ctx.Err()
	}
	if e.served != nil {
		a.hits.Add(1)
	}
	return e.served, e.wait, nil
}

// askLocked remembers that batch key's request came, forgetting the
// oldest past maxAsked.
func (a *readAhead) askLocked(key string) {
	if _, ok := a.asked[key]; ok {
		return
	}
	a.asked[key] = struct{}{}
	a.askedQ = append(a.askedQ, key)
	if len(a.askedQ) > maxAsked {
		delete(a.asked, a.askedQ[0])
		a.askedQ = a.askedQ[1:]
	}
}

func (a *readAhead) removeLocked(key string, e *aheadEntry) {
	delete(a.entries, key)
	if e.counted {
		a.bytes -= e.size
		e.counted = false
	}
}

// trimLocked drops the oldest entries past the bounds; a finished one is
// released now (after the lock: see drop), one under way when it ends.
func (a *readAhead) trimLocked() {
	for len(a.fifo) > 0 && (a.bytes > a.limit || len(a.entries) > maxAheadBatches) {
		key := a.fifo[0]
		a.fifo = a.fifo[1:]
		e, ok := a.entries[key]
		if !ok {
			continue
		}
		a.removeLocked(key, e)
		e.gone = true
		a.dropped.Add(1)
		if e.finished && e.served != nil {
			// Releasing gives back a buffer and budget; neither takes
			// this lock.
			e.served.Release()
		}
	}
	if len(a.fifo) > 2*maxAheadBatches {
		live := a.fifo[:0]
		for _, key := range a.fifo {
			if _, ok := a.entries[key]; ok {
				live = append(live, key)
			}
		}
		a.fifo = live
	}
}

// close releases every batch held. Called once the background work has
// ended.
func (a *readAhead) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, e := range a.entries {
		a.removeLocked(key, e)
		e.gone = true
		if e.finished && e.served != nil {
			e.served.Release()
		}
	}
	a.fifo = nil
}

func (a *readAhead) stats() api.TransformAheadStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return api.TransformAheadStats{Started: a.started.Load(), Hits: a.hits.Load(), Dropped: a.dropped.Load(), Bytes: a.bytes, MaxBytes: a.limit}
}

// readNextAhead starts making, in the background, the rank's next batch
// after b, transformed, unless there is none or it is under way. The
// entry is claimed before this returns, within b's request.
func (v *Batches) readNextAhead(b *order.Batch) {
	next := b.Batch + 1
	if next >= uint64(b.Batches) {
		return
	}
	key := v.orders.ETag(b.Source, b.Job, b.Epoch, next)
	e, ok := v.ahead.claim(key)
	if !ok {
		return
	}
	started := v.background.TryGo(func(ctx context.Context) {
		var s *Served
		var wait time.Duration
		if nb, err := v.orders.Layout(ctx, b.Source, b.Job, b.Epoch, next); err == nil && nb.ETag == key {
			s, wait, _ = v.read(ctx, nb, true)
		}
		v.ahead.finish(key, e, s, wait)
	})
	if !started {
		v.ahead.unclaim(key, e)
	}
}
