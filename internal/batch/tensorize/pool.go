package tensorize

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/transform"
)

// pool is the stage's workers: a fixed number of goroutines, each with
// its own transform.Scratch (the decode and resample buffers, reused
// image after image), taking samples in the order they are submitted. It
// bounds the CPU and the decode memory of every transform on the node —
// requests', peers', and work ahead — and its part's stop waits for its
// workers.
type pool struct {
	tasks chan task
	part  *stopper.Group
	quit  <-chan struct{} // the part's context's: closed when it stops, queued tasks are skipped

	queued  atomic.Int64 // samples submitted and not yet done: the backlog
	running atomic.Int64 // samples being transformed now
	workers int
}

// task is one sample's work: run, unless its request or the pool ended,
// then done.
type task struct {
	ctx  context.Context
	run  func(*transform.Scratch)
	done func(ran bool)
}

func newPool(workers int, part *stopper.Group) *pool {
	p := &pool{tasks: make(chan task), part: part, quit: part.Context().Done(), workers: max(workers, 1)}
	for range p.workers {
		part.Go(func(context.Context) { p.work() })
	}
	return p
}

func (p *pool) work() {
	sc := new(transform.Scratch)
	for {
		var t task
		select {
		case t = <-p.tasks:
		case <-p.quit:
			return
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

// run calls f(i, scratch) for i in [0, n) on the workers and returns once
// every call has returned or been skipped. It returns ErrClosed if the
// pool closed before every call ran, ctx's error if ctx ended first.
func (p *pool) run(ctx context.Context, n int, f func(i int, sc *transform.Scratch)) error {
	select {
	case <-p.quit:
		return ErrClosed
	default:
	}
	p.queued.Add(int64(n))
	var wg sync.WaitGroup
	var skipped atomic.Bool
	sent := 0
submit:
	for ; sent < n; sent++ {
		i := sent
		wg.Add(1)
		t := task{ctx: ctx, run: func(sc *transform.Scratch) { f(i, sc) }, done: func(ran bool) {
			if !ran {
				skipped.Store(true)
			}
			wg.Done()
		}}
		select {
		case p.tasks <- t:
		case <-ctx.Done():
			wg.Done()
			break submit
		case <-p.quit:
			wg.Done()
			break submit
		}
	}
	p.queued.Add(-int64(n - sent))
	wg.Wait()
	switch {
	case sent == n && !skipped.Load():
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
