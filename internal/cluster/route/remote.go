package route

import (
	"context"
	"sync"
	"time"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/peerreq"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// ReadRemote fills data[i] for the positions of smp whose chunk's source
// is another node, one request per node, and returns the positions this
// node reads itself and those their owner left out (their chunk is
// damaged at rest). A node that fails is skipped and its samples asked of
// the next node of their chunks' rankings, ending with this node, which
// reads the store: a peer's loss costs time, never the read. Samples
// fetched before the read (fetched, by position; see TakeNext) are used
// first. A node the request's client found silent (WithUnanswered) and
// that has not answered this node since is skipped from the start.
//
// A node that has not answered within the hedge deadline (Config.Hedge:
// learnt from the answers observed) is hedged, if the budget allows: its
// samples are asked of the next node of their rankings as if it had
// failed, while its own fetch goes on; whichever answers a sample first
// fills it, and the fetches left with nothing to fill are cancelled. A
// sample whose next node is this one is read here once ReadRemote
// returns, and the fetch it hedged is cancelled then: the store read is
// the reader's, after the route's.
func (r *Router) ReadRemote(ctx context.Context, smp layout.Samples, origin *transport.Origin, fetched [][]byte, data [][]byte) (local, missing []int, err error) {
	skip := map[int]bool{}
	if k, since := r.unansweredSlot(ctx); k >= 0 && !r.answers(ctx, k) {
		// Its client found it silent, and so has this node since.
		skip[k] = true
		r.suspects.late(k, since)
	}
	// since is when the first fetch hedged was sent (zero: none yet). A
	// peer that has answered nothing since is not asked in a hedge's
	// stead: a node cut off from its peers would find each one out by a
	// deadline of its own, and its requests, cancelled, wait in their
	// connections to be served when the cut heals.
	var since time.Time
	skipped := func(k int) bool {
		return skip[k] || !since.IsZero() && k != r.self && r.peers.Answered(k).Before(since)
	}
	src := make([]int, len(smp.Chunks))
	remote := false
	for i, c := range smp.Chunks {
		src[i] = r.Source(smp.DS, c, skipped)
		remote = remote || src[i] != r.self
	}
	if remote && len(fetched) == len(data) {
		n := 0
		for i, d := range fetched {
			if d != nil {
				data[i] = d
				n++
			}
		}
		r.nextUsed.Add(int64(n))
	}
	rc := &race{data: data, gone: make([]bool, len(data))} // gone: left out by their owner
	for remote {
		failed := r.fetchFrom(ctx, rc, smp, origin, src, true)
		if len(failed) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			r.end(rc)
			return nil, nil, err
		}
		for k := range failed {
			skip[k] = true
		}
		rc.mu.Lock()
		for _, t := range rc.stragglers {
			if since.IsZero() || t.sent.Before(since) {
				since = t.sent
			}
		}
		rc.mu.Unlock()
		for i, c := range smp.Chunks {
			if failed[src[i]] {
				src[i] = r.Source(smp.DS, c, skipped)
			}
		}
	}
	r.grace(ctx, rc, smp, src)
	r.end(rc)
	for i := range data {
		switch {
		case rc.gone[i]:
			missing = append(missing, i)
		case src[smp.Slot[i]] == r.self && data[i] == nil:
			local = append(local, i)
		}
	}
	return local, missing, nil
}

// grace gives the fetches hedged and still under way a little longer
// (half the hedge deadline, a quarter where each is of a suspect peer:
// suspect.go) when what they would fill is left to this
// node and its cache lacks a chunk of it: that hedge is a store read of
// the whole chunk, the dearest there is, and a peer that was only late (a
// loaded machine, a peer just taken back up) answers meanwhile. A peer
// that does not answer at all costs the read half a deadline more.
func (r *Router) grace(ctx context.Context, rc *race, smp layout.Samples, src []int) {
	rc.mu.Lock()
	var wait []*try
	suspect := true // every fetch waited for is of a suspect peer
	for _, t := range rc.stragglers {
		if !rc.coveredLocked(t) && r.readsStore(smp, src, t.pos) {
			wait = append(wait, t)
			suspect = suspect && t.suspect
		}
	}
	rc.mu.Unlock()
	if len(wait) == 0 {
		return
	}
	grace := r.hedge.Deadline() / 2
	if suspect {
		// Late lately (suspect.go): a peer only late was given its
		// chance in its last fetch.
		grace /= 2
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for _, t := range wait {
		select {
		case <-t.done:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// readsStore reports whether reading here any of the positions pos lists
// reads a chunk this node's cache does not hold (Config.Holds).
func (r *Router) readsStore(smp layout.Samples, src []int, pos [][]int) bool {
	for _, ps := range pos {
		for _, i := range ps {
			if slot := smp.Slot[i]; src[slot] == r.self && (r.holds == nil || !r.holds(smp.DS, smp.Chunks[slot])) {
				return true
			}
		}
	}
	return false
}

// race is one read's fetches: the positions they fill (data, gone), and
// every fetch under way, hedged ones (stragglers) included, which may
// fill what is still empty. Every fetch's goroutine is counted in wg, and
// none outlives the read (Router.end).
type race struct {
	data [][]byte
	gone []bool

	mu         sync.Mutex // guards data, gone, closed, tries
	closed     bool       // the read has ended: nothing more is filled
	tries      []*try
	stragglers []*try // fetches hedged and left running
	wg         sync.WaitGroup
}

// try is one fetch of a read: node k asked for the samples at positions
// pos (per requested ID, the positions it fills).
type try struct {
	k      int
	sent   time.Time
	pos    [][]int
	cancel context.CancelFunc
	done   chan error // its Fetch's error, once it ends
	filled int        // positions it filled first; under race.mu
	// suspect: its node was suspect as it was sent (suspect.go), and
	// waited for a quarter of the hedge deadline.
	suspect bool
}

// fill writes t's reply into the positions still empty, and cancels the
// fetches under way left with nothing to fill.
func (rc *race) fill(t *try, rep transport.Reply) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.closed {
		return
	}
	for j, ps := range t.pos {
		for _, i := range ps {
			if rc.data[i] == nil && !rc.gone[i] {
				rc.data[i] = rep.Data[j]
				rc.gone[i] = rep.Data[j] == nil
				t.filled++
			}
		}
	}
	for _, o := range rc.tries {
		if o != t && rc.coveredLocked(o) {
			o.cancel() // the loser
		}
	}
}

// covered reports whether every position t was asked for is filled.
func (rc *race) covered(t *try) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.coveredLocked(t)
}

func (rc *race) coveredLocked(t *try) bool {
	for _, ps := range t.pos {
		for _, i := range ps {
			if rc.data[i] == nil && !rc.gone[i] {
				return false
			}
		}
	}
	return true
}

// end closes the read's race: the fetches still under way are cancelled
// and waited for, and each fetch hedged is told to the peers by how it
// ended (transport.Nodes.Hedged): answering first for some position, or
// lost to its hedge.
func (r *Router) end(rc *race) {
	rc.mu.Lock()
	rc.closed = true
	for _, t := range rc.tries {
		t.cancel()
	}
	rc.mu.Unlock()
	rc.wg.Wait()
	for _, t := range rc.stragglers {
		if t.filled > 0 {
			r.peers.Hedged(t.k, t.sent, false)
			continue
		}
		r.hedge.Won()
		r.peers.Hedged(t.k, t.sent, true)
	}
}

// fetchFrom asks each source node, at once, for the samples at positions
// of smp it is the source of and that are not filled yet, and returns the
// nodes whose fetch failed — or, with hedging, was hedged (fetchOne).
func (r *Router) fetchFrom(ctx context.Context, rc *race, smp layout.Samples, origin *transport.Origin, src []int, hedging bool) (failed map[int]bool) {
	byNode := map[int]*fetch{}
	at := map[int]int{} // sample ID → its index in its node's request
	rc.mu.Lock()
	for i, id := range smp.IDs {
		k := src[smp.Slot[i]]
		if k == r.self || rc.data[i] != nil || rc.gone[i] {
			continue
		}
		f := byNode[k]
		if f == nil {
			f = &fetch{req: transport.Request{DS: peerreq.Dataset(smp.DS), Origin: origin}}
			byNode[k] = f
		}
		// A sample drawn twice (importance) is asked for once.
		j, ok := at[id]
		if !ok {
			j = len(f.req.IDs)
			at[id] = j
			f.req.IDs = append(f.req.IDs, id)
			f.req.Info = append(f.req.Info, smp.Info[i])
			f.pos = append(f.pos, nil)
		}
		f.pos[j] = append(f.pos[j], i)
	}
	rc.mu.Unlock()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k, f := range byNode {
		f.req.Origin = r.originFor(k, origin, len(f.req.IDs))
		wg.Go(func() {
			if r.fetchOne(ctx, rc, k, f, hedging) {
				return
			}
			mu.Lock()
			if failed == nil {
				failed = map[int]bool{}
			}
			failed[k] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	return failed
}

// fetch is one node's request of a read, and the positions each of its
// IDs fills.
type fetch struct {
	req transport.Request
	pos [][]int
}

// fetchOne asks node k for f's samples and reports whether its positions
// are filled. A fetch not answered within the hedge deadline (a quarter
// of it from a peer late lately and silent since: suspect.go; a fetch
// late makes its peer suspect in turn) is, with
// hedging and a hedge from the budget, left running (a straggler, which
// may still answer first) and reported unfilled, for the read to ask the
// next nodes too; without hedging (a next batch's fetch, whose samples
// the read fetches if they are missing) it is cancelled; with the budget
// spent it is waited for, up to the peer's timeout, as before hedges.
func (r *Router) fetchOne(ctx context.Context, rc *race, k int, f *fetch, hedging bool) bool {
	tctx, cancel := context.WithCancel(ctx)
	t := &try{k: k, sent: time.Now(), pos: f.pos, cancel: cancel, done: make(chan error, 1), suspect: r.suspects.suspect(k, r.peers.Answered(k))}
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		cancel()
		return false
	}
	rc.tries = append(rc.tries, t)
	rc.mu.Unlock()
	rc.wg.Go(func() {
		rep, err := r.peers.Fetch(tctx, k, f.req)
		if err == nil {
			r.hedge.Observe(time.Since(t.sent))
			rc.fill(t, rep)
		}
		t.done <- err
	})
	wait := r.hedge.Deadline()
	if t.suspect {
		wait /= 4
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case err = <-t.done:
	case <-timer.C:
		r.suspects.late(k, t.sent)
		switch {
		case !hedging:
			// Nothing waits on it but the read, which fetches what is
			// missing, hedged: a loss is counted there, once.
			cancel()
			<-t.done
			return false
		case r.hedge.Allow():
			rc.mu.Lock()
			rc.stragglers = append(rc.stragglers, t)
			rc.mu.Unlock()
			return false
		}
		err = <-t.done
	}
	cancel()
	if err == nil {
		r.peers.Hedged(k, t.sent, false) // it answered, needing no hedge
	}
	return err == nil || rc.covered(t)
}

// Fetch is one part of a next batch to fetch: its samples and the job
// stream and position they are for.
type Fetch struct {
	Samples layout.Samples
	Origin  *transport.Origin
}

// FetchNext starts fetching, in the background, the remote samples of
// the batch next lays out (the same rank's next batch), part by part, to
// be found under key by TakeNext; nothing if they are being fetched
// already. The key is claimed before FetchNext returns, so that a read
// of that batch that starts before the fetch ends waits for it rather
// than fetching the same samples again. Failures are left to the read,
// which fetches what is missing with failover; so is a node that has not
// answered within the hedge deadline: its fetch is cancelled (no hedge,
// no budget), for the read waits for this fetch.
//
// Laying the batch out is bounded by the peer timeout; each fetch by its
// own (transport.Nodes.Fetch), so that a peer that does not answer in
// time is counted, logged and held down as on a batch's read — a bound
// of the whole around the fetches would end them first and leave the
// peer to fail every batch in turn.
func (r *Router) FetchNext(key string, next func(ctx context.Context) ([]Fetch, error)) {
	c, ok := r.next.Claim(key)
	if !ok {
		return
	}
	started := r.part.Go(func(ctx context.Context) {
		var data [][][]byte
		var size int64
		lctx, cancel := context.WithTimeout(ctx, r.timeout)
		parts, err := next(lctx)
		cancel()
		if err == nil {
			data = make([][][]byte, len(parts))
			none := func(int) bool { return false }
			for p, f := range parts {
				smp := f.Samples
				src := make([]int, len(smp.Chunks))
				for i, c := range smp.Chunks {
					src[i] = r.Source(smp.DS, c, none)
				}
				data[p] = make([][]byte, len(smp.IDs))
				rc := &race{data: data[p], gone: make([]bool, len(smp.IDs))}
				r.fetchFrom(ctx, rc, smp, f.Origin, src, false)
				r.end(rc)
				for _, d := range data[p] {
					size += int64(len(d))
				}
			}
		}
		r.next.Finish(c, data, size)
	})
	if !started {
		r.next.Abandon(c)
	}
}

// TakeNext returns the samples fetched under key (FetchNext), per part of the
// batch, waiting for a fetch still under way (until ctx ends); nil if
// there are none.
func (r *Router) TakeNext(ctx context.Context, key string) [][][]byte {
	data, _, _ := r.next.Take(ctx, key)
	return data
}
