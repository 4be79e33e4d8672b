package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/cluster/hedge"
)

// DefaultProbeAfter is Options.ProbeAfter when zero.
const DefaultProbeAfter = 3 * time.Second

// probeTimeout bounds one health probe. A live gateway answers /healthz
// from memory, whatever its batches are waiting for.
const probeTimeout = time.Second

// The learnt deadline's floor, and the shortest a probe after it waits:
// a loaded gateway answers /healthz within a few milliseconds, and
// abandoning an attempt on a live node costs a second request.
const (
	lagFloor      = 100 * time.Millisecond
	minProbeAfter = 250 * time.Millisecond
)

// coldDeadline is the deadline before the client has seen enough answers
// to learn one (a new client, a new DataLoader worker). Waiting
// ProbeAfter there cost a step 3 s and a probe's second on a node gone
// silent early in an epoch; probing a live node early costs a /healthz
// it answers at once, and a hedge, within the budget.
const coldDeadline = 250 * time.Millisecond

// newLag is the learnt time to headers of a client whose ProbeAfter is
// ceiling (internal/cluster/hedge: the peers' deadline, learnt the same
// way), and the budget of its hedges (hedge.DefaultRate a second).
func newLag(ceiling time.Duration) *hedge.Policy {
	return hedge.New(hedge.Config{Floor: min(lagFloor, ceiling), Ceiling: ceiling, Cold: min(coldDeadline, ceiling)})
}

// firstProbe is how long an attempt waits for headers before the node is
// first probed, and how long that probe waits for an answer (see
// Options.ProbeAfter).
func (t *transport) firstProbe() (after, wait time.Duration) {
	after = t.lag.Deadline()
	return after, min(max(after, minProbeAfter), probeTimeout)
}

// errNoAnswer is the cause of an attempt abandoned because its node sent
// no response headers and did not answer a health probe either.
var errNoAnswer = errors.New("no response headers, and no answer to a health probe")

// errBodyStopped is what a *bodyStopped wraps: an attempt abandoned
// because its node stopped sending the body (see watchBody).
var errBodyStopped = errors.New("the body stopped")

// watch guards an attempt on a node of a cluster while it waits for
// response headers. After the learnt deadline (firstProbe), then every
// ProbeAfter, without them it probes the node's health URL (GET /healthz)
// on the client's http.Client, unauthenticated, the first probe waiting
// as long as firstProbe says, the others probeTimeout. A probe that gets
// any answer means the node is alive and the batch slow (a cold batch
// read from the store) or its connection stalled (a link that flaps
// drops the request's resends in step with its outages): the attempt
// goes on waiting (doWatched has hedged it meanwhile). A probe that gets
// none means a stopped, wedged or unreachable node, and the attempt is
// abandoned through abandon with errNoAnswer, so that the request fails
// over at once rather than after the transport's ResponseHeaderTimeout.
// A probe cut short by stop or by ctx abandons nothing.
func (t *transport) watch(ctx context.Context, abandon context.CancelCauseFunc, health string) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, exited: make(chan struct{}), first: make(chan struct{})}
	after, wait := t.firstProbe()
	go func() {
		defer close(w.exited)
		first := w.first
		defer func() {
			if first != nil {
				close(first)
			}
		}()
		timer := time.NewTimer(after)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if t.probe(ctx, health, wait) || ctx.Err() != nil {
				if first != nil && ctx.Err() == nil {
					w.answered.Store(true)
					close(first)
					first = nil
				}
				wait = probeTimeout
				timer.Reset(t.opts.ProbeAfter)
				continue
			}
			w.abandoned.Store(true)
			abandon(errNoAnswer)
			return
		}
	}()
	return w
}

// watcher is a watch under way (transport.watch).
type watcher struct {
	cancel              context.CancelFunc
	exited              chan struct{}
	first               chan struct{} // closed once the first probe has an outcome, or the watch ended
	answered, abandoned atomic.Bool   // a probe answered; the attempt was abandoned
}

// stop ends the watch, waiting for a probe in flight, and reports whether
// the attempt was abandoned; call it as soon as the headers arrive (or
// the attempt failed).
func (w *watcher) stop() bool {
	w.cancel()
	<-w.exited
	return w.abandoned.Load()
}

// settle waits for the first probe's outcome, then stops the watch, and
// reports whether the attempt was abandoned (its node did not answer).
func (w *watcher) settle() bool {
	<-w.first
	return w.stop()
}

// doWatched sends req, whose context abandon cancels, under a watch of its
// node's health (see watch) until the response headers arrive. The time
// to headers of an attempt answered is learnt (t.lag).
//
// With hedge (a node of the cluster after req's: see router.next), an
// attempt that has sent no headers for the learnt deadline is hedged as
// its node is first probed: hedge's request is sent too, within the
// budget (t.lag.Allow), telling its node that req's (name) has not
// answered for the deadline (api.HeaderUnanswered), and the first to
// send headers wins; the other is cancelled through its context. won is
// true when hedge's request answered. A hedge that wins before req's
// node has answered a probe passes that node over at once (passOver, as
// a failed node is), and the probe, left to finish, takes it back
// (passOver's undo) if it answers: a node that answers its probe is
// alive — a cold batch read from the store, or a request stalled in a
// connection whose resends a flapping link drops — and a cold batch
// still comes from the home if it is the first.
//
// The hedge used to wait for the probe's answer and the deadline once
// more: a node gone silent cost a step the deadline and the probe's
// wait (up to a second) before its request went elsewhere, which with
// batches of MiBs (a deadline of 0.4 s and more) was most of a step's
// second (issue 98, item 12).
func (t *transport) doWatched(req *http.Request, abandon context.CancelCauseFunc, health string, hedge *http.Request, cancelHedge context.CancelCauseFunc, name string, passOver func() (undo func())) (resp *http.Response, won bool, err error) {
	after, _ := t.firstProbe()
	// The watch ends when stopped (every path below stops it), not with
	// req: a probe left to finish after a hedge won outlives the attempt.
	w := t.watch(context.WithoutCancel(req.Context()), abandon, health)
	type answer struct {
		resp  *http.Response
		err   error
		hedge bool
	}
	answers := make(chan answer, 2)
	send := func(r *http.Request, hedge bool) {
		sent := time.Now()
		resp, err := t.hc.Do(r)
		if err == nil {
			t.lag.Observe(time.Since(sent))
		}
		answers <- answer{resp, err, hedge}
	}
	go send(req, false)
	inFlight := 1
	var hedgeAt <-chan time.Time
	if hedge != nil {
		timer := time.NewTimer(after)
		defer timer.Stop()
		hedgeAt = timer.C
	}
	var a answer
	for {
		select {
		case <-hedgeAt:
			hedgeAt = nil
			if t.lag.Allow() {
				// The hedge's node is told which node it stands in for,
				// and how long that one was waited for.
				(&unanswered{name: name, waited: after}).tell(hedge)
				inFlight++
				go send(hedge, true)
			}
			continue
		case a = <-answers:
		}
		inFlight--
		if a.err != nil && inFlight > 0 {
			continue // the other may still answer
		}
		break
	}
	if inFlight > 0 {
		// The loser's answer, if it comes, closed.
		go func() {
			if l := <-answers; l.err == nil {
				drainClose(l.resp.Body)
			}
		}()
	}
	if a.hedge && a.err == nil {
		t.lag.Won()
		if !w.answered.Load() {
			// req's node has answered neither req nor a probe yet:
			// passed over now, taken back if its probe answers.
			undo := passOver()
			go func() {
				if !w.settle() {
					undo()
				}
				abandon(errLostToHedge)
			}()
			return a.resp, true, nil
		}
		w.stop()
		abandon(errLostToHedge)
		return a.resp, true, nil
	}
	abandoned := w.stop()
	if inFlight > 0 {
		cancelHedge(errLostToHedge) // req answered first
	}
	if a.hedge {
		// Both failed, the hedge last.
		if abandoned {
			passOver()
		}
		return nil, true, a.err
	}
	if !abandoned {
		return a.resp, false, a.err
	}
	if a.err == nil {
		drainClose(a.resp.Body) // the headers came as the probe failed: too late
	}
	return nil, false, fmt.Errorf("%s %q: %w (probed after %v, then every %v)",
		req.Method, req.URL, errNoAnswer, after.Round(time.Millisecond), t.opts.ProbeAfter)
}

// errLostToHedge is the cause of an attempt cancelled because its hedge,
// or the attempt it hedged, sent headers first.
var errLostToHedge = errors.New("another node answered first")

// probe reports whether the node at health answers within wait, with
// any status: an answer of any kind comes from a running process.
func (t *transport) probe(ctx context.Context, health string, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := t.hc.Do(req)
	if err != nil {
		return false
	}
	drainClose(resp.Body)
	return true
}

// watchBody guards the reading of an attempt's body as watch guards the
// wait for its headers: a node stopped or cut off while it wrote a batch
// leaves the read waiting for bytes, which the transport's timeouts do not
// bound. A node answers a batch's headers only once the batch is read
// whole (internal/batch/reader), so a body that sends no byte for the
// learnt deadline (at least minProbeAfter: stallAfter) is not a node at
// work but a node gone silent or a stalled connection (a link that flaps,
// dropping the resends in step with its outages): the attempt is abandoned
// at once with a *bodyStopped, which ends the read, and the request goes
// to the next node, told which node stopped and for how long
// (api.HeaderUnanswered), as a request without headers is hedged there at
// the deadline. The node is not probed first: whether it answers a probe
// or not, its body has stopped. (It was: the deadline, then a probe's
// wait unanswered or the deadline again, before the request went on; in
// the partition suite a body stalled in a flapping link's down phase cost
// a step over a second, issue 98, item 12.) Closing the returned body
// ends the watch.
func (t *transport) watchBody(ctx context.Context, abandon context.CancelCauseFunc, body io.ReadCloser) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	wb := &watchedBody{ReadCloser: body, stop: cancel, exited: make(chan struct{})}
	after := t.stallAfter()
	wb.last.Store(time.Now().UnixNano())
	go func() {
		defer close(wb.exited)
		timer := time.NewTimer(after)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			quiet := time.Since(time.Unix(0, wb.last.Load()))
			if quiet < after {
				// A byte came since: the deadline from that byte.
				timer.Reset(after - quiet)
				continue
			}
			abandon(&bodyStopped{after: after, stopped: quiet})
			return
		}
	}()
	return wb
}

// stallAfter is how long a body may send no byte before its attempt is
// abandoned (watchBody): the learnt deadline, at least minProbeAfter — a
// loaded machine pauses a reader for tens of milliseconds, and a single
// resend after a lost packet takes 200 ms.
func (t *transport) stallAfter() time.Duration {
	return max(t.lag.Deadline(), minProbeAfter)
}

// bodyStopped is the cause of an attempt abandoned because its body sent
// no byte for after (watchBody); stopped is how long it had sent none.
type bodyStopped struct {
	after, stopped time.Duration
}

func (e *bodyStopped) Error() string {
	return fmt.Sprintf("%v (no byte for %v, the deadline learnt from its answers)", errBodyStopped, e.stopped.Round(time.Millisecond))
}

func (e *bodyStopped) Unwrap() error { return errBodyStopped }

// watchedBody is a body under watchBody: it notes when a byte was last
// read.
type watchedBody struct {
	io.ReadCloser
	last   atomic.Int64 // Unix nanoseconds
	stop   context.CancelFunc
	exited chan struct{}
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if n > 0 {
		w.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (w *watchedBody) Close() error {
	w.stop()
	<-w.exited
	return w.ReadCloser.Close()
}
