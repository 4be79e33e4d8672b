package gateway

import (
	"context"
	"strconv"
	"sync"
)

// peerAhead fetches from peers, in the background, the samples the next
// batch of a rank will need, as the prefetcher reads chunks from the store
// ahead of need: the order is known, so when a node serves batch m of a
// rank it knows which samples of batch m+1 live on other nodes. Fetched
// samples wait here, keyed by the batch's ETag (which names its exact
// samples), until that batch is asked for; they are bounded in bytes and
// dropped oldest first when nobody comes for them.
type peerAhead struct {
	limit int64 // bytes held at most

	mu      sync.Mutex
	entries map[string]*aheadEntry
	fifo    []string
	bytes   int64
}

// aheadEntry is one batch's fetched samples: data[i] for batch position i,
// nil where the sample is read locally or its fetch failed. done closes
// when the fetch ends.
type aheadEntry struct {
	done chan struct{}
	data [][]byte
	size int64
}

// maxAheadEntries bounds the batches fetched ahead whatever their size.
const maxAheadEntries = 256

func newPeerAhead(limit int64) *peerAhead {
	return &peerAhead{limit: limit, entries: map[string]*aheadEntry{}}
}

// claim registers a fetch for the batch etag names; false if one is
// already there.
func (a *peerAhead) claim(etag string) (*aheadEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.entries[etag]; ok {
		return nil, false
	}
	e := &aheadEntry{done: make(chan struct{})}
	a.entries[etag] = e
	a.fifo = append(a.fifo, etag)
	a.trimLocked()
	return e, true
}

// finished records a fetch's size once its data is in.
func (a *peerAhead) finished(e *aheadEntry, size int64) {
	a.mu.Lock()
	e.size = size
	a.bytes += size
	a.trimLocked()
	a.mu.Unlock()
	close(e.done)
}

// take removes and returns the batch's entry, if any.
func (a *peerAhead) take(etag string) *aheadEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[etag]
	if ok {
		delete(a.entries, etag)
		a.bytes -= e.size
	}
	return e
}

// trimLocked drops the oldest entries past the bounds. A dropped entry's
// fetch finishes into nothing.
func (a *peerAhead) trimLocked() {
	for len(a.fifo) > 0 && (a.bytes > a.limit || len(a.fifo) > maxAheadEntries) {
		etag := a.fifo[0]
		a.fifo = a.fifo[1:]
		if e, ok := a.entries[etag]; ok {
			delete(a.entries, etag)
			a.bytes -= e.size
		}
	}
	if len(a.fifo) > 2*maxAheadEntries {
		// Taken entries leave their names behind: compact.
		live := a.fifo[:0]
		for _, etag := range a.fifo {
			if _, ok := a.entries[etag]; ok {
				live = append(live, etag)
			}
		}
		a.fifo = live
	}
}

// fetchAhead starts fetching the remote samples of the batch after b for
// the same rank, if there is one and nobody fetches it yet.
func (g *Gateway) fetchAhead(b *batchLayout) {
	if g.peers == nil || g.ahead == nil || int(b.batch)+1 >= b.batches {
		return
	}
	next, err := layoutBatch(g.orders, b.js.ds, b.job, b.epoch, strconv.FormatUint(b.batch+1, 10))
	if err != nil {
		return
	}
	src := make([]int, len(next.reqs))
	remote := false
	for s, c := range next.chunks {
		src[s] = g.peers.source(next.js.ds, c, nil)
		remote = remote || src[s] != g.peers.self
	}
	if !remote {
		return
	}
	e, ok := g.ahead.claim(next.etag)
	if !ok {
		return
	}
	g.aheadWG.Go(func() {
		ctx, cancel := context.WithTimeout(g.aheadCtx, g.peers.timeout)
		defer cancel()
		e.data = make([][]byte, len(next.ids))
		// Failures are left to the request, which fetches what is
		// missing with failover.
		g.fetchFromPeers(ctx, next, src, e.data, map[int]bool{})
		var size int64
		for _, d := range e.data {
			size += int64(len(d))
		}
		g.ahead.finished(e, size)
	})
}

// fetchedAhead fills data with the samples fetched ahead for b, waiting
// for a fetch still under way.
func (g *Gateway) fetchedAhead(ctx context.Context, b *batchLayout, data [][]byte) {
	if g.ahead == nil {
		return
	}
	e := g.ahead.take(b.etag)
	if e == nil {
		return
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return
	}
	if len(e.data) != len(data) {
		return
	}
	n := 0
	for i, d := range e.data {
		if d != nil {
			data[i] = d
			n++
		}
	}
	g.peers.metrics.aheadUsed.Add(float64(n))
}
