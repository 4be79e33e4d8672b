// Package storepath is whether a node of a cluster reaches its datasets'
// store, and what follows when it does not.
//
// A node cut off from the store (a network fault between it and the
// store, not between it and its peers or clients) still answers its
// probes and serves what its cache holds, so nothing else shows its
// trouble: its reads of the store hang until TCP gives up, seconds to
// minutes after the cut heals, and every batch that needs one — its own
// ranks', and its peers' asking it for samples of its chunks — waits for
// them, and a synchronous job with them. A Watch probes the store (a stat
// of an index object, every half probe interval, each bounded by the
// probe's timeout) and, when a probe gets no answer:
//
//   - it ends the store reads under way that run under its Guard (the
//     chunk loads and the sample-table reads of the batch path) and fails
//     new ones at once with ErrUnreachable (a 503 to a client, which
//     fails over to another node; a refusal to a peer, which reads the
//     samples elsewhere), until a probe is answered again;
//   - the node says so in its state (nodestate.State.StoreUnreachable),
//     which its peers show in /cluster, and it routes the reads of its
//     own chunks that its cache does not hold to the next nodes of their
//     rankings (route.Router), which read them for it;
//   - it is counted (brand_store_unreachable_total), shown
//     (brand_store_reachable) and logged, as its return is.
//
// So a store path that does not answer costs a batch at most about a
// probe interval and a probe timeout, not the cut and TCP's back-off.
// On a single gateway there is no other node to read for it, and no
// Watch: its reads wait as they always have.
package storepath

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/s3backend"
)

// ErrUnreachable marks a store read this node did not make, or ended,
// because it cannot reach the store now. It is an s3backend.ErrUnavailable
// (a 503: the client retries, on another node).
var ErrUnreachable = fmt.Errorf("%w: this node cannot reach the store", s3backend.ErrUnavailable)

// Probe asks the store something small (a stat of an index object); an
// error that says the store did not answer (Unanswered) marks it
// unreachable.
type Probe func(ctx context.Context) error

// Unanswered reports whether a store call's error says no answer came:
// the store was not reached, or did not answer within the call's bound,
// retries included. A store that answers — even that an object is
// missing, or that access is denied — is reachable.
func Unanswered(err error) bool {
	return errors.Is(err, s3backend.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// Config configures a Watch.
type Config struct {
	Probe Probe
	// Interval is the probe interval of the node's peers (--probe-interval):
	// the store is probed twice as often, each probe bounded by
	// Timeout (the peers' probe timeout, 2 s at least).
	Interval, Timeout time.Duration
	Group             *stopper.Group // runs the probes (nil: a part of the Watch's own)
	// Returned, if set, runs on the probes' part each time the store
	// answers again after it did not (Returned.Learn, for the chunks
	// the peers read for this node meanwhile).
	Returned func(ctx context.Context)
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// Watch is whether this node reaches its datasets' store (the package
// doc). Safe for concurrent use.
type Watch struct {
	probe             Probe
	returned          func(ctx context.Context)
	interval, timeout time.Duration
	part              *stopper.Group
	log               zerolog.Logger
	down              atomic.Bool
	reachable         prometheus.Gauge
	lost              prometheus.Counter

	mu sync.Mutex
	// cut is canceled, with ErrUnreachable as its cause, when the store
	// is found unreachable; a fresh one replaces it when it answers
	// again. Guarded reads end with it.
	cut    context.Context
	cutOff context.CancelCauseFunc
}

// New returns a Watch that takes the store for reachable until Start's
// probes say otherwise.
func New(c Config) *Watch {
	w := &Watch{probe: c.Probe, returned: c.Returned, interval: c.Interval / 2, timeout: c.Timeout, part: stopper.Own(c.Group, "storepath: probes"), log: c.Log,
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "brand_store_reachable",
			Help: "1 while this node's last probe of its datasets' store was answered; 0 while its peers read the chunks it does not hold for it."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_store_unreachable_total",
			Help: "Times this node found its datasets' store unreachable (a probe not answered within its bound): its store reads under way were ended, and its peers read its chunks until the store answered again."}),
	}
	if w.interval <= 0 {
		w.interval = 500 * time.Millisecond
	}
	if w.timeout <= 0 {
		w.timeout = 2 * time.Second
	}
	w.reachable.Set(1)
	w.cut, w.cutOff = context.WithCancelCause(context.Background())
	c.Registry.MustRegister(w.reachable, w.lost)
	return w
}

// Start probes the store until the Watch's part stops.
func (w *Watch) Start() {
	w.part.Go(func(ctx context.Context) {
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			pctx, cancel := context.WithTimeout(ctx, w.timeout)
			err := w.probe(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			w.set(!Unanswered(err), err)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// Close stops the probes (the Watch's part).
func (w *Watch) Close() { w.part.Stop() }

// set records whether the last probe was answered.
func (w *Watch) set(ok bool, err error) {
	if w.down.Load() == !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down.Load() == !ok {
		return
	}
	if ok {
		w.cut, w.cutOff = context.WithCancelCause(context.Background())
		w.down.Store(false)
		w.reachable.Set(1)
		w.log.Info().Msg("the store answers again: this node reads its own chunks again")
		if w.returned != nil {
			w.part.Go(w.returned)
		}
		return
	}
	w.down.Store(true)
	w.reachable.Set(0)
	w.lost.Inc()
	w.log.Warn().Err(err).Dur("probe_timeout", w.timeout).
		Msg("the store does not answer this node: its store reads are ended, and its peers read the chunks it does not hold for it until it answers")
	w.cutOff(ErrUnreachable)
}

// Down reports whether the store's last probe got no answer.
func (w *Watch) Down() bool { return w.down.Load() }

// Guard returns ctx, also ended (with ErrUnreachable as its cause) when
// the store is found unreachable — at once if it is now — and the func
// that releases it.
func (w *Watch) Guard(ctx context.Context) (context.Context, context.CancelFunc) {
	w.mu.Lock()
	cut := w.cut
	w.mu.Unlock()
	gctx, cancel := context.WithCancelCause(ctx)
	if cut.Err() != nil {
		cancel(context.Cause(cut)) // at once: no read starts
	}
	stop := context.AfterFunc(cut, func() { cancel(context.Cause(cut)) })
	return gctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// Wrap returns err, a store call's made under ctx (from Guard), wrapped
// with ErrUnreachable if that is why it ended; err itself otherwise.
func Wrap(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), ErrUnreachable) || errors.Is(err, ErrUnreachable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}
