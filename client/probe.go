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

// newLag is the learnt time to headers of a client whose ProbeAfter is
// ceiling (internal/cluster/hedge: the peers' deadline, learnt the same
// way; no budget, since a probe is not a request for data).
func newLag(ceiling time.Duration) *hedge.Policy {
	return hedge.New(hedge.Config{Floor: min(lagFloor, ceiling), Ceiling: ceiling})
}

// firstProbe is how long an attempt waits for headers, or a body for its
// next byte, before the node is first probed, and how long that probe
// waits for an answer (see Options.ProbeAfter).
func (t *transport) firstProbe() (after, wait time.Duration) {
	after = t.lag.Deadline()
	return after, min(max(after, minProbeAfter), probeTimeout)
}

// errNoAnswer is the cause of an attempt abandoned because its node sent
// no response headers and did not answer a health probe either.
var errNoAnswer = errors.New("no response headers, and no answer to a health probe")

// errBodyStopped is the cause of an attempt abandoned because its node
// stopped sending the body and did not answer a health probe either.
var errBodyStopped = errors.New("the body stopped, and no answer to a health probe")

// watch guards an attempt on a node of a cluster while it waits for
// response headers. After the learnt deadline (firstProbe), then every
// ProbeAfter, without them it probes the node's health URL (GET /healthz)
// on the client's http.Client, unauthenticated, the first probe waiting
// as long as firstProbe says, the others probeTimeout. A probe that gets any answer means the
// node is alive and the batch merely slow (a cold batch read from the
// store), so the attempt goes on waiting; a probe that gets none means a
// stopped or wedged node, and the attempt is abandoned through abandon
// with errNoAnswer, so that the request fails over at once rather than
// after the transport's ResponseHeaderTimeout.
//
// stop ends the watch, waiting for a probe in flight, and reports whether
// the attempt was abandoned; call it as soon as the headers arrive (or the
// attempt failed). A probe cut short by stop or by ctx abandons nothing.
func (t *transport) watch(ctx context.Context, abandon context.CancelCauseFunc, health string) (stop func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	abandoned := false
	exited := make(chan struct{})
	after, wait := t.firstProbe()
	go func() {
		defer close(exited)
		timer := time.NewTimer(after)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if t.probe(ctx, health, wait) || ctx.Err() != nil {
				wait = probeTimeout
				timer.Reset(t.opts.ProbeAfter)
				continue
			}
			abandoned = true
			abandon(errNoAnswer)
			return
		}
	}()
	return func() bool {
		cancel()
		<-exited
		return abandoned
	}
}

// doWatched sends req, whose context abandon cancels, under a watch of its
// node's health (see watch) until the response headers arrive.
// The time to headers of an attempt answered is learnt (t.lag).
func (t *transport) doWatched(req *http.Request, abandon context.CancelCauseFunc, health string) (*http.Response, error) {
	after, _ := t.firstProbe()
	stop := t.watch(req.Context(), abandon, health)
	sent := time.Now()
	resp, err := t.hc.Do(req)
	if !stop() {
		if err == nil {
			t.lag.Observe(time.Since(sent))
		}
		return resp, err
	}
	if err == nil {
		drainClose(resp.Body) // the headers came as the probe failed: too late
	}
	return nil, fmt.Errorf("%s %q: %w (probed after %v, then every %v)",
		req.Method, req.URL, errNoAnswer, after.Round(time.Millisecond), t.opts.ProbeAfter)
}

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
// wait for its headers: a node stopped while it wrote a batch leaves the
// read waiting for bytes, which the transport's timeouts do not bound.
// After the learnt deadline without a byte read (then every ProbeAfter
// once a probe was answered) the node is probed; a probe that
// gets no answer abandons the attempt with errBodyStopped, which ends the
// read. Closing the returned body ends the watch.
func (t *transport) watchBody(ctx context.Context, abandon context.CancelCauseFunc, health string, body io.ReadCloser) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	wb := &watchedBody{ReadCloser: body, stop: cancel, exited: make(chan struct{})}
	after, wait := t.firstProbe()
	go func() {
		defer close(wb.exited)
		timer := time.NewTimer(after)
		defer timer.Stop()
		var seen int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if n := wb.read.Load(); n != seen {
				// Bytes came since: wait the learnt deadline again.
				seen = n
				timer.Reset(after)
				continue
			}
			if t.probe(ctx, health, wait) || ctx.Err() != nil {
				wait = probeTimeout
				timer.Reset(t.opts.ProbeAfter)
				continue
			}
			abandon(errBodyStopped)
			return
		}
	}()
	return wb
}

// watchedBody is a body under watchBody: it counts the bytes read.
type watchedBody struct {
	io.ReadCloser
	read   atomic.Int64
	stop   context.CancelFunc
	exited chan struct{}
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	w.read.Add(int64(n))
	return n, err
}

func (w *watchedBody) Close() error {
	w.stop()
	<-w.exited
	return w.ReadCloser.Close()
}
