package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
)

// readFunc consumes a 2xx response. An error it wraps with retryable is
// retried; any other error ends the call.
type readFunc func(resp *http.Response) error

// get sends GET path?q to the client's rank's node (see router) and hands
// a 2xx response to read, retrying 502, 503 and 504 answers, transport
// errors, and read errors marked retryable, up to MaxRetries times. It
// returns the name of the node that answered.
func (t *transport) get(ctx context.Context, path string, q url.Values, accept string, read readFunc) (node string, err error) {
	r, err := t.routes(ctx)
	if err != nil {
		return "", err
	}
	return t.getVia(ctx, r, path, q, accept, read)
}

// body is what a POST sends. Brand's POSTs (importance feedback and
// seals) are idempotent, so they are retried as GETs are.
type body struct {
	data        []byte
	contentType string
}

// post sends POST path?q with b, as get sends a GET.
func (t *transport) post(ctx context.Context, path string, q url.Values, b body, read readFunc) error {
	r, err := t.routes(ctx)
	if err != nil {
		return err
	}
	_, err = t.sendVia(ctx, r, path, q, "application/json", &b, read)
	return err
}

// getVia is get through the router r. A retry goes to the node r picks:
// on a cluster, the next node after one that failed, at once if this call
// has not tried it yet (it has no reason to be down too); otherwise, and
// always with a single gateway, after jittered exponential backoff (or the
// gateway's Retry-After). It never retries once ctx is done.
//
// A request about an epoch (/epoch/N…) names the membership version the
// client pinned for that epoch (see Client.Members), and its answer pins
// one if none is. A version no node knows any more is ErrMembersUnknown
// (sendVia): the client never moves an epoch to another version.
func (t *transport) getVia(ctx context.Context, r *router, path string, q url.Values, accept string, read readFunc) (string, error) {
	epoch, ok := epochOf(path)
	if !ok {
		return t.sendVia(ctx, r, path, q, accept, nil, read)
	}
	// q may be shared by the epoch's requests read ahead: pin on a copy.
	q = maps.Clone(q)
	if q == nil {
		q = url.Values{}
	}
	t.pinMembers(q, epoch)
	return t.sendVia(ctx, r, path, q, accept, nil, func(resp *http.Response) error {
		t.learnMembers(epoch, resp.Header.Get(api.HeaderMembers))
		return read(resp)
	})
}

// sendVia is getVia for a GET (b nil) or a POST of b.
func (t *transport) sendVia(ctx context.Context, r *router, path string, q url.Values, accept string, b *body, read readFunc) (string, error) {
	tried := make([]bool, len(r.nodes))
	waits := 0 // backoff grows with the waits, not with failovers
	k := r.pick()
	var silent *unanswered // the node the last attempt found silent
	for attempt := 0; ; attempt++ {
		tried[k] = true
		at := target{k: k, u: r.endpoint(k, path, q), name: r.nodes[k].name, after: silent}
		var hedge *target // a single gateway is not probed, nor hedged: there is nowhere else to go
		h := -1
		if len(r.nodes) > 1 {
			at.health = r.endpoint(k, "/healthz", nil)
			if h = r.next(k); h >= 0 {
				hedge = &target{u: r.endpoint(h, path, q)}
			}
		}
		began := time.Now()
		retry, won, err := t.attempt(ctx, at, hedge, accept, b, read, func() func() {
			mark := r.fail(at.k)
			return func() { r.unfail(at.k, mark) }
		})
		if won {
			// The hedge's node answered: what follows is of its answer.
			k = h
			tried[k] = true
		}
		silent = nil
		var stopped *bodyStopped
		switch {
		case errors.Is(err, errNoAnswer):
			silent = &unanswered{name: at.name, waited: time.Since(began)}
		case errors.As(err, &stopped):
			// Its body stopped: silent since its last byte.
			silent = &unanswered{name: r.nodes[k].name, waited: stopped.stopped}
		}
		if err == nil {
			return r.nodes[k].name, nil
		}
		if refused := versionRefused(err, path); refused != nil {
			// The node does not hold the index version or know the
			// membership version this job reads; another node may. It is
			// not down: try the next one not tried yet, and say so if none
			// holds it.
			if next := r.untried(tried); next >= 0 {
				k = next
				continue
			}
			return "", fmt.Errorf("%w: %w", refused, err)
		}
		if len(r.nodes) > 1 {
			err = fmt.Errorf("node %d (%s): %w", k, r.nodes[k].name, err)
		}
		if attempt > 0 {
			err = fmt.Errorf("attempt %d of %d: %w", attempt+1, t.maxRetries+1, err)
		}
		if cerr := ctx.Err(); cerr != nil {
			// The caller gave up; the node did not fail.
			if !errors.Is(err, cerr) {
				err = fmt.Errorf("%w (%w)", err, cerr)
			}
			return "", err
		}
		if !retry {
			return "", err
		}
		r.fail(k)
		if attempt >= t.maxRetries {
			return "", err
		}
		k = r.pick()
		if !tried[k] {
			continue
		}
		wait := t.backoff(waits, err)
		waits++
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would only end in DeadlineExceeded; the gateway's
			// answer is the more useful error.
			return "", fmt.Errorf("%w (not retried: the context deadline comes before the next attempt)", err)
		}
		if serr := t.sleep(ctx, wait); serr != nil {
			return "", fmt.Errorf("%w (while waiting to retry after: %w)", serr, err)
		}
		// A node's mark may have ended during the wait.
		k = r.pick()
	}
}

// target is where an attempt is sent: the request's URL on node k
// (name, as the peer list spells it), the node's health URL ("" for a
// single gateway, which is not probed), and the node the attempt before
// found silent, if any.
type target struct {
	k               int
	u, health, name string
	after           *unanswered
}

// unanswered is a node that did not answer a request (the node named,
// for waited), told to the node the request goes to next
// (api.HeaderUnanswered): that node has not seen the silence yet, and
// reads the silent node's chunks elsewhere at once rather than wait on
// it first (internal/cluster/route.WithUnanswered).
type unanswered struct {
	name   string
	waited time.Duration
}

// tell sets u's headers on req (none for nil).
func (u *unanswered) tell(req *http.Request) {
	if u == nil {
		return
	}
	req.Header.Set(api.HeaderUnanswered, u.name)
	req.Header.Set(api.HeaderUnansweredFor, strconv.FormatInt(max(1, u.waited.Milliseconds()), 10))
}

// attempt makes one request and reports whether its error may be retried.
// With a health URL (a node of a cluster), the node is probed while the
// request waits for headers, and the attempt abandoned, as a retryable
// failure, if the probe gets no answer; with hedge too, a node that
// does not answer within the learnt deadline is hedged there (see watch
// and doWatched), won reports that hedge's node answered, and passOver
// passes at's node over when the hedge answered before it answered the
// request or a probe (its undo takes it back if the probe answers).
// The body that follows is watched too: one that stops is abandoned, as
// a retryable failure (watchBody).
func (t *transport) attempt(ctx context.Context, at target, hedge *target, accept string, b *body, read readFunc, passOver func() (undo func())) (retry, won bool, err error) {
	newRequest := func(ctx context.Context, u string) (*http.Request, error) {
		method, data := http.MethodGet, io.Reader(nil)
		if b != nil {
			method, data = http.MethodPost, bytes.NewReader(b.data)
		}
		req, err := http.NewRequestWithContext(ctx, method, u, data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if b != nil {
			req.Header.Set("Content-Type", b.contentType)
		}
		req.Header.Set("Accept", accept)
		req.Header.Set("User-Agent", userAgent)
		if t.opts.Token != "" {
			req.Header.Set("Authorization", "Bearer "+t.opts.Token)
		}
		return req, nil
	}
	req, err := newRequest(ctx, at.u)
	if err != nil {
		return false, false, err
	}
	at.after.tell(req)
	var resp *http.Response
	var actx context.Context
	if at.health != "" {
		// The attempt's own context, which the watches cancel to abandon
		// it; it lasts until the body is read. A hedge has one of its
		// own, cancelled when the attempt wins.
		var abandon context.CancelCauseFunc
		actx, abandon = context.WithCancelCause(ctx)
		defer abandon(nil)
		var hreq *http.Request
		var hctx context.Context
		var habandon context.CancelCauseFunc
		if hedge != nil {
			hctx, habandon = context.WithCancelCause(ctx)
			defer habandon(nil)
			if hreq, err = newRequest(hctx, hedge.u); err != nil {
				return false, false, err
			}
		}
		resp, won, err = t.doWatched(req.WithContext(actx), abandon, at.health, hreq, habandon, at.name, passOver)
		if won {
			req, actx, abandon = hreq, hctx, habandon
		}
		if err == nil {
			resp.Body = t.watchBody(actx, abandon, resp.Body)
		}
	} else {
		resp, err = t.hc.Do(req)
	}
	if err != nil {
		// Refused or reset connections, timeouts and the like may clear up;
		// a certificate the client distrusts will not.
		var certErr *tls.CertificateVerificationError
		return !errors.As(err, &certErr), won, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return retryableStatus(resp.StatusCode), won, readAPIError(resp, time.Now())
	}
	if err := t.answered(resp.Header); err != nil {
		return false, won, err
	}
	if err := read(resp); err != nil {
		var stopped *bodyStopped
		if actx != nil && errors.As(context.Cause(actx), &stopped) {
			return true, won, fmt.Errorf("%s %q: %w: %w", req.Method, req.URL, stopped, err)
		}
		var r *retryableError
		return errors.As(err, &r), won, err
	}
	return false, won, nil
}

// versionRefused returns, for a gateway's 409 to a job's request (an
// epoch, a batch, a sample), what it refused: ErrMembersUnknown when it
// knows no longer the membership version the request pins (it names the
// current one, Brand-Members), else ErrIndexChanged (it does not hold the
// index version asked for); nil for any other error.
func versionRefused(err error, path string) error {
	var apiErr *APIError
	switch {
	case !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict ||
		!strings.HasPrefix(path, "/epoch/") && !strings.HasPrefix(path, "/samples/"):
		return nil
	case apiErr.ScheduleVersion != "":
		return nil // the caller re-pins the schedule's version
	case apiErr.Members != "":
		return ErrMembersUnknown
	default:
		return ErrIndexChanged
	}
}

// backoff returns the wait before retry number attempt+1. A Retry-After
// from the gateway is honoured as given (it knows when it will be ready);
// otherwise the wait doubles from Backoff and is drawn from [d/2, d] so
// that workers started together spread out. MaxBackoff caps both.
func (t *transport) backoff(attempt int, err error) time.Duration {
	limit := t.opts.MaxBackoff
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		return min(apiErr.RetryAfter, limit)
	}
	d := t.opts.Backoff
	for i := 0; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

// sleepContext waits for d or until ctx is done.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// drainClose reads a little of what is left of a body before closing it, so
// that the connection can be reused when only a trailer remains, without
// reading megabytes of a batch nobody wants.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	_ = body.Close()
}

// countingReader counts the bytes read from a response body and remembers
// the first error other than io.EOF. A decoder on top turns a broken
// connection into a format error (io.ErrUnexpectedEOF inside a tar member);
// err tells the two apart: set means the connection failed, not the format.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// shortBody describes a body cut off after n bytes. size is the
// Content-Length, -1 if unknown.
func shortBody(n, size int64, err error) error {
	if size < 0 {
		return fmt.Errorf("%w: connection failed after %d bytes: %w", ErrShortBody, n, err)
	}
	return fmt.Errorf("%w: received %d of %d bytes: %w", ErrShortBody, n, size, err)
}
