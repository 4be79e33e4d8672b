package tensorize

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/transform"
)

// pool is the stage's workers: a fixed number of goroutines, each with
// its own transform.Scratch (the decode and resample buffers, reused
// image after image), taking the queued work in turn. It bounds the CPU
// and the decode memory of every transform on the node — requests',
// peers', and work ahead — and its part's stop waits for its workers.
//
// The queue serves calls in the order they came, except that a call's
// work goes ahead of the queued work of its own job's later batches
// (Place): the batches a trainer's loaders ask for at once — its
// workers' first batches and their read-ahead, all at a cold gateway
// after a resume — are made in step order, so the step the trainer waits
// for is not the last made. Work of other jobs keeps its place.
type pool struct {
	part *stopper.Group
	quit <-chan struct{} // the part's context's: closed when it stops, queued tasks are skipped

	mu    sync.Mutex
	queue []*task       // waiting for a worker, in the order they are taken
	wake  chan struct{} // a token for each worker to look at the queue again

	queued  atomic.Int64 // samples submitted and not yet done: the backlog
	running atomic.Int64 // samples being transformed now
	workers int
}

// Place is where a call's work stands in the pool's queue: ahead of the
// queued work of the same job at later positions, behind everything
// else queued before it.
type Place struct {
	// Job names the job's order and epoch: any comparable value, equal
	// for every batch of one epoch of one order; nil takes the place of
	// arrival (behind everything queued).
	Job any
	// Pos is the batch's first position in the epoch, across the ranks:
	// a rank's batch m of world W comes before rank r+1's and before its
	// own batch m+1.
	Pos int
}

// task is one sample's work: run, unless its request or the pool ended,
// then done.
type task struct {
	ctx   context.Context
	place Place
	run   func(*transform.Scratch)
	done  func(ran bool)
	taken func() // nil, or called as a worker takes it, under the queue's lock
}

func newPool(workers int, part *stopper.Group) *pool {
	p := &pool{part: part, quit: part.Context().Done(), workers: max(workers, 1)}
	p.wake = make(chan struct{}, p.workers)
	for range p.workers {
		part.Go(func(context.Context) { p.work() })
	}
	return p
}

// work takes the queue's first task until the pool stops; once it has,
// the tasks still queued are taken and skipped, and the worker returns
// when the queue is empty.
func (p *pool) work() {
	sc := new(transform.Scratch)
	for {
		t := p.take()
		if t == nil {
			select {
			case <-p.wake:
				continue
			case <-p.quit:
				if t = p.take(); t == nil {
					return
				}
			}
		}
		ran := false
		select {
		case <-p.quit:
		default:
			if t.ctx.Err() == nil {
				p.running.Add(1)
				t.run(sc)
				p.running.Add(-1)
				ran = true
			}
		}
		p.queued.Add(-1)
		t.done(ran)
	}
}

// take removes and returns the queue's first task, nil if it is empty.
func (p *pool) take() *task {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		return nil
	}
	t := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	if t.taken != nil {
		t.taken()
	}
	return t
}

// put queues ts (one call's, of one place) at their place, in their
// order, and wakes the workers; queued, if not nil, runs first under the
// queue's lock.
func (p *pool) put(ts []*task, queued func()) {
	p.mu.Lock()
	if queued != nil {
		queued()
	}
	at := len(p.queue)
	if pl := ts[0].place; pl.Job != nil {
		for i, q := range p.queue {
			if q.place.Job == pl.Job && q.place.Pos > pl.Pos {
				at = i
				break
			}
		}
	}
	p.queue = slices.Insert(p.queue, at, ts...)
	p.mu.Unlock()
	for range min(len(ts), p.workers) {
		select {
		case p.wake <- struct{}{}:
		default: // every worker has a token to look again
		}
	}
}

// withdraw removes those of ts still queued and returns them; those a
// worker took are its to finish.
func (p *pool) withdraw(ts []*task) []*task {
	mine := make(map[*task]bool, len(ts))
	for _, t := range ts {
		mine[t] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*task
	kept := p.queue[:0]
	for _, q := range p.queue {
		if mine[q] {
			out = append(out, q)
			continue
		}
		kept = append(kept, q)
	}
	clear(p.queue[len(kept):])
	p.queue = kept
	return out
}

// run calls f(i, scratch) for i in [0, n) on the workers, its tasks
// queued at place, and returns once every call has returned or been
// skipped. It returns ErrClosed if the pool closed before every call
// ran, ctx's error if ctx ended first (its calls not yet taken by a
// worker are withdrawn).
func (p *pool) run(ctx context.Context, place Place, n int, f func(i int, sc *transform.Scratch)) error {
	return p.runCalls(ctx, calls{place: place, n: n, f: f})
}

// calls are one call's work for runCalls: f(i, scratch) for i in [0, n),
// queued at place. queued, if not nil, runs under the queue's lock just
// before the tasks are queued, so calls are queued in the order their
// hooks ran; taken(i), if not nil, as a worker takes task i, under the
// same lock, so in the queue's order.
type calls struct {
	place  Place
	n      int
	f      func(i int, sc *transform.Scratch)
	queued func()
	taken  func(i int)
}

// runCalls is run of c, with its hooks.
func (p *pool) runCalls(ctx context.Context, c calls) error {
	place, n, f := c.place, c.n, c.f
	select {
	case <-p.quit:
		return ErrClosed
	default:
	}
	if n == 0 {
		if c.queued != nil {
			p.mu.Lock()
			c.queued()
			p.mu.Unlock()
		}
		return nil
	}
	all := make(chan struct{})
	var left atomic.Int64
	left.Store(int64(n))
	var skipped atomic.Bool
	done := func(ran bool) {
		if !ran {
			skipped.Store(true)
		}
		if left.Add(-1) == 0 {
			close(all)
		}
	}
	ts := make([]*task, n)
	for i := range ts {
		ts[i] = &task{ctx: ctx, place: place, run: func(sc *transform.Scratch) { f(i, sc) }, done: done}
		if c.taken != nil {
			ts[i].taken = func() { c.taken(i) }
		}
	}
	p.queued.Add(int64(n))
	p.put(ts, c.queued)
	select {
	case <-all:
	case <-ctx.Done():
	case <-p.quit:
	}
	for _, t := range p.withdraw(ts) {
		p.queued.Add(-1)
		t.done(false)
	}
	<-all
	switch {
	case !skipped.Load():
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return ErrClosed
	}
}

// close stops the workers once the tasks handed to them return (those
// queued behind are skipped) and waits for them: the part's stop.
// Idempotent.
func (p *pool) close() { p.part.Stop() }
