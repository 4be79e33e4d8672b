package s3backend

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// errStalled marks a GET abandoned because no byte arrived for the idle
// timeout. It is transient: the read is retried from where it stopped.
var errStalled = errors.New("s3backend: no bytes within the idle timeout")

// idleWatch cancels one GET that has delivered nothing for d: the headers,
// or the next bytes of the body. A nil *idleWatch watches nothing.
type idleWatch struct {
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

// watchIdle starts watching; cancel ends the GET. d <= 0 returns nil.
func watchIdle(d time.Duration, cancel func()) *idleWatch {
	if d <= 0 {
		return nil
	}
	w := &idleWatch{d: d}
	w.t = time.AfterFunc(d, func() {
		w.fired.Store(true)
		cancel()
	})
	return w
}

// idleKey carries a GET's idleWatch in its request's context, to the
// Pacer: the time a request waits there for the budget is not time the
// store kept it idle, since the store has not been asked yet.
type idleKey struct{}

// within returns ctx carrying w, for the request it watches.
func (w *idleWatch) within(ctx context.Context) context.Context {
	if w == nil {
		return ctx
	}
	return context.WithValue(ctx, idleKey{}, w)
}

// idleOf is the idleWatch ctx carries, or nil.
func idleOf(ctx context.Context) *idleWatch {
	w, _ := ctx.Value(idleKey{}).(*idleWatch)
	return w
}

// pause stops the clock while the request waits to be sent; resume
// starts it afresh once it is sent. A watch that already fired stays
// fired: its request is cancelled.
func (w *idleWatch) pause() {
	if w != nil {
		w.t.Stop()
	}
}

func (w *idleWatch) resume() {
	if w != nil && !w.fired.Load() {
		w.t.Reset(w.d)
	}
}

// touch says bytes arrived: the clock starts again.
func (w *idleWatch) touch() {
	if w != nil {
		w.t.Reset(w.d)
	}
}

func (w *idleWatch) stop() {
	if w != nil {
		w.t.Stop()
	}
}

// explain turns the error of a GET the watch cancelled into errStalled, so
// that it is retried rather than taken for the caller's cancellation.
func (w *idleWatch) explain(err error) error {
	if w == nil || err == nil || !w.fired.Load() {
		return err
	}
	return fmt.Errorf("%w (%s): %v", errStalled, w.d, err)
}
