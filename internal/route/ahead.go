package route

import "sync"

// Ahead holds samples fetched from peers ahead of need: the order is
// known, so when a node serves batch m of a rank it knows which samples of
// batch m+1 live on other nodes, and fetches them in the background as
// the prefetcher reads chunks from the store ahead of need. Fetched
// samples wait here, keyed by the batch's ETag (which names its exact
// samples), one list per part of the batch (a mixture's batch reads
// several), until that batch is asked for; they are bounded in bytes and
// in batches, and dropped oldest first when nobody comes for them.
//
// Bytes counts exactly the samples held: those of entries whose fetch has
// finished and that are still here. An entry still being fetched holds
// nothing yet; one dropped or taken before its fetch ends never counts.
// What is held is memory of the node's budget (Budget): a finished
// fetch is kept only if its bytes are free there now, and gives them
// back when it is taken or dropped. Safe for concurrent use.
type Ahead struct {
	limit  int64 // bytes held at most
	budget Budget

	mu      sync.Mutex
	entries map[string]*AheadEntry
	fifo    []string // keys in claim order; may name entries gone
	bytes   int64
}

// AheadEntry is one batch's fetched samples: Data[p][i] for position i
// of the batch's part p, nil where the sample is read locally or its
// fetch failed. Done closes when the fetch ends; Data may be read only
// after.
type AheadEntry struct {
	Done    chan struct{}
	Data    [][][]byte
	size    int64
	counted bool   // size is in Ahead.bytes
	release func() // of its bytes in the budget, while counted
}

// Budget is the memory work made ahead takes only if it is free now
// (memory.Manager.Copies).
type Budget interface {
	TryReserve(n int64) (release func(), ok bool)
}

// unbounded is a budget that always has room.
type unbounded struct{}

func (unbounded) TryReserve(int64) (func(), bool) { return func() {}, true }

// maxAheadEntries bounds the batches fetched ahead whatever their size.
const maxAheadEntries = 256

// NewAhead returns a store of at most limit bytes, taken from budget (nil:
// no budget but the limit).
func NewAhead(limit int64, budget Budget) *Ahead {
	if budget == nil {
		budget = unbounded{}
	}
	return &Ahead{limit: limit, budget: budget, entries: map[string]*AheadEntry{}}
}

// Claim registers a fetch for the batch key names; false if one is
// already there.
func (a *Ahead) Claim(key string) (*AheadEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.entries[key]; ok {
		return nil, false
	}
	e := &AheadEntry{Done: make(chan struct{})}
	a.entries[key] = e
	a.fifo = append(a.fifo, key)
	a.trimLocked()
	return e, true
}

// Finish records a claimed fetch's result. If the entry is still held and
// its bytes are free in the budget, they now count, and older entries
// may be dropped to make room; otherwise the entry is dropped.
func (a *Ahead) Finish(key string, e *AheadEntry, data [][][]byte) {
	var size int64
	for _, part := range data {
		for _, d := range part {
			size += int64(len(d))
		}
	}
	a.mu.Lock()
	e.Data, e.size = data, size
	if a.entries[key] == e {
		if release, ok := a.budget.TryReserve(size); ok {
			e.counted, e.release = true, release
			a.bytes += size
			a.trimLocked()
		} else {
			delete(a.entries, key)
		}
	}
	a.mu.Unlock()
	close(e.Done)
}

// Take removes and returns the batch's entry, if any.
func (a *Ahead) Take(key string) *AheadEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[key]
	if ok {
		a.removeLocked(key, e)
	}
	return e
}

// Bytes returns the bytes held.
func (a *Ahead) Bytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytes
}

func (a *Ahead) removeLocked(key string, e *AheadEntry) {
	delete(a.entries, key)
	if e.counted {
		a.bytes -= e.size
		e.counted = false
		e.release()
	}
}

// trimLocked drops the oldest entries past the bounds. A dropped entry's
// fetch finishes into nothing.
func (a *Ahead) trimLocked() {
	for len(a.fifo) > 0 && (a.bytes > a.limit || len(a.entries) > maxAheadEntries) {
		key := a.fifo[0]
		a.fifo = a.fifo[1:]
		if e, ok := a.entries[key]; ok {
			a.removeLocked(key, e)
		}
	}
	if len(a.fifo) > 2*maxAheadEntries {
		// Taken entries leave their keys behind: compact.
		live := a.fifo[:0]
		for _, key := range a.fifo {
			if _, ok := a.entries[key]; ok {
				live = append(live, key)
			}
		}
		a.fifo = live
	}
}
