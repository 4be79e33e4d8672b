package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultProbeAfter is Options.ProbeAfter when zero.
const DefaultProbeAfter = 3 * time.Second

// probeTimeout bounds one health probe. A live gateway answers /healthz
// from memory, whatever its batches are waiting for.
const probeTimeout = time.Second

// errNoAnswer is the cause of an attempt abandoned because its node sent
// no response headers and did not answer a health probe either.
var errNoAnswer = errors.New("no response headers, and no answer to a health probe")

// errBodyStopped is the cause of an attempt abandoned because its node
// stopped sending the body and did not answer a health probe either.
var errBodyStopped = errors.New("the body stopped, and no answer to a health probe")

// watch guards an attempt on a node of a cluster while it waits for
// response headers. Every ProbeAfter without them it probes the node's
// health URL (GET /healthz) on the client's http.Client, unauthenticated,
// with a timeout of probeTimeout. A probe that gets any answer means the
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
	go func() {
		defer close(exited)
		timer := time.NewTimer(t.opts.ProbeAfter)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if t.probe(ctx, health) || ctx.Err() != nil {
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
func (t *transport) doWatched(req *http.Request, abandon context.CancelCauseFunc, health string) (*http.Response, error) {
	stop := t.watch(req.Context(), abandon, health)
	resp, err := t.hc.Do(req)
	if !stop() {
		return resp, err
	}
	if err == nil {
		drainClose(resp.Body) // the headers came as the probe failed: too late
	}
	return nil, fmt.Errorf("%s %q: %w (probed every %v, waiting %v for an answer)",
		req.Method, req.URL, errNoAnswer, t.opts.ProbeAfter, probeTimeout)
}

// probe reports whether the node at health answers within probeTimeout,
// with any status: an answer of any kind comes from a running process.
func (t *transport) probe(ctx context.Context, health string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
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
// Every ProbeAfter without a byte read the node is probed; a probe that
// gets no answer abandons the attempt with errBodyStopped, which ends the
// read. Closing the returned body ends the watch.
func (t *transport) watchBody(ctx context.Context, abandon context.CancelCauseFunc, health string, body io.ReadCloser) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	wb := &watchedBody{ReadCloser: body, stop: cancel, exited: make(chan struct{})}
	go func() {
		defer close(wb.exited)
		timer := time.NewTimer(t.opts.ProbeAfter)
		defer timer.Stop()
		var seen int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if n := wb.read.Load(); n != seen || t.probe(ctx, health) || ctx.Err() != nil {
				seen = n
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
