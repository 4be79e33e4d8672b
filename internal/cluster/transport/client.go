package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/errkind"
)

// Client is this node's client of one other node. Every internal request
// goes through one call path (call): built, signed (peercred.Credentials.Sign),
// sent under its bound, its status classified (statusError); what it
// sends and how its reply is read are the request's own (protocol.go).
type Client struct {
	t   *transport
	url string
}

// transport is what every Client of a node shares.
type transport struct {
	http *http.Client
	cred peercred.Credentials
	self string // this node's URL as the members are listed
	// boots are the other nodes' boots, by URL, as each last named its
	// own (peercred.HeaderPeerBoot): what a credential is signed for.
	boots sync.Map
	// serving says whether this node serves now (Config.Serving; nil:
	// always): a request sent while it does not says so
	// (HeaderNotServing).
	serving func() bool
	// timeout bounds a request that moves data (samples, a chunk,
	// feedback, a question about chunks); quick a state probe or a
	// question for a membership's members.
	timeout, quick time.Duration
	maxReply       int64 // a reply of transformed samples, in bytes
}

// minProbeTimeout is the shortest a probe waits for an answer.
const minProbeTimeout = 2 * time.Second

func newTransport(c Config) *transport {
	t := &transport{cred: c.Credentials, self: c.Self, serving: c.Serving, timeout: c.Timeout, quick: max(c.Probe, minProbeTimeout), maxReply: c.MaxReplyBytes,
		http: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // peers are reached directly, never through a proxy
			DialContext:         dialDropping,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}}}
	if t.maxReply <= 0 {
		t.maxReply = 1<<63 - 1
	}
	return t
}

// dialDropping dials a peer over a connection whose close drops what
// the peer has not acknowledged (SO_LINGER 0: a reset, not a FIN behind
// the unsent bytes). The transport closes a request's connection when
// the asker gives the request up (a hedge answered first, its client went
// away, its bound passed); bytes of it still queued here, behind a link
// cut one way or a peer that stopped reading, would otherwise be
// delivered when the link came back, and the peer would serve, and read
// the store for, a fetch nobody waits for. A reset tells a peer that is
// sending a reply to stop at once, too. Nothing is lost that is wanted:
// a connection is closed only when its request is done with or given up,
// or idle.
func dialDropping(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// to is the client of the node at url.
func (t *transport) to(url string) Client { return Client{t: t, url: url} }

// request is what one internal request sends.
type request struct {
	method, path string
	query        neturl.Values
	body         []byte // nil: none
	quick        bool   // bounded by the probe's timeout, not the fetch's
}

// call sends r to the node and, if it answers 200, hands the response to
// read before the body is closed. Not reaching the node is ErrDown; a
// status other than 200 is classified by statusError. A credential the
// node refuses as signed for another of its boots (it restarted, or this
// node has not asked it yet) is signed again for the boot its refusal
// names and sent once more, within the same bound: the refusal came
// before the node read anything of the request.
//
// What ends a request early is told apart: the node not answering within
// the request's bound is the node's failure (ErrDown and ErrTimeout: a
// fetch that times out holds the node down as any other failure), while
// the asker's own context ending first (its client went away, or its own
// bound passed) says nothing of the node (errGaveUp).
func (c Client) call(ctx context.Context, r request, read func(*http.Response) error) error {
	timeout := c.t.timeout
	if r.quick {
		timeout = c.t.quick
	}
	bounded, cancel := context.WithTimeoutCause(ctx, timeout, errOverdue)
	defer cancel()
	err := c.send(bounded, r, read)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", errGaveUp, err)
	case errors.Is(context.Cause(bounded), errOverdue):
		return fmt.Errorf("%w: %w: %s did not answer within %s: %w", ErrDown, ErrTimeout, c.url, timeout, err)
	}
	return err
}

// send is call's request, under the bound ctx holds.
func (c Client) send(ctx context.Context, r request, read func(*http.Response) error) error {
	target := c.url + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, r.method, target, bytes.NewReader(r.body))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		if r.body != nil {
			req.Header.Set("Content-Type", ReplyType)
		}
		if c.t.serving != nil && !c.t.serving() {
			req.Header.Set(HeaderNotServing, "true")
		}
		boot, _ := c.t.boots.Load(c.url)
		signed, _ := boot.(string)
		c.t.cred.Sign(req, c.t.self, c.url, signed, r.body)
		resp, err := c.t.http.Do(req)
		if err != nil {
			return fmt.Errorf("%w: %w: %s: %w", ErrDown, errNoAnswer, c.url, err)
		}
		if now := resp.Header.Get(peercred.HeaderPeerBoot); resp.StatusCode == http.StatusUnauthorized && now != "" && now != signed && try == 0 {
			c.t.boots.Store(c.url, now)
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			continue
		}
		defer resp.Body.Close()
		if err := statusError(resp, c.url); err != nil {
			return err
		}
		return read(resp)
	}
}

// Errors of a request, by what they cost the peer (see the package doc).
var (
	// ErrDown: the peer did not answer, answered 503, or sent bytes that
	// are not what it was asked for. It is held down.
	ErrDown = errkind.New(errkind.Internal, "peer down")
	// ErrRefused: the peer answered, but could not serve the samples (a
	// store error on its side, a 4xx). It stays up.
	ErrRefused = errkind.New(errkind.Internal, "peer refused")
	// ErrVersion: the peer does not hold the index version asked for
	// (409). It stays up, and is not asked for that version again until
	// its state says it holds it.
	ErrVersion = errkind.New(errkind.Internal, "peer holds another index version")
	// ErrNotHeld is a chunk's old owner's answer when its cache does not
	// hold the chunk asked for (404): the asker reads the store.
	ErrNotHeld = errkind.New(errkind.Internal, "chunk not held by the peer")
	// ErrPeerStoreUnreachable marks an ErrRefused from a node that
	// cannot reach the store now, and so could not read the samples its
	// cache does not hold (HeaderStoreUnreachable).
	ErrPeerStoreUnreachable = errkind.New(errkind.Internal, "the peer cannot reach the store")
	// ErrTimeout marks an ErrDown for which no whole answer came within
	// the request's bound (--peer-timeout for a fetch, the probe's for a
	// probe): the node, or the path to it, is down or too slow to ask.
	ErrTimeout = errkind.New(errkind.Internal, "peer did not answer in time")
	// errNoAnswer marks an ErrDown for which no answer came at all:
	// nothing listens at the node's URL, or it did not answer in time
	// (Nodes.Unreached).
	errNoAnswer = errors.New("no answer")
	// errGaveUp marks a request the asker ended itself (its context was
	// done before the node's bound): nothing is known of the node.
	errGaveUp = errors.New("the asker gave up")
	// errOverdue is the cause of a request's own bound passing.
	errOverdue = errors.New("the request's bound passed")
)

// statusError classifies a reply's status, reading its body for the
// message.
func statusError(resp *http.Response, peer string) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	err := fmt.Errorf("%s answered %s: %s", peer, resp.Status, strings.TrimSpace(string(msg)))
	switch {
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w: %w", ErrVersion, err)
	case resp.StatusCode == http.StatusNotFound && resp.Header.Get(HeaderHeld) == "false":
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(HeaderStoreUnreachable) == "true":
		// Up, serving what its cache holds, but cut off from the store.
		return fmt.Errorf("%w: %w: %w", ErrRefused, ErrPeerStoreUnreachable, err)
	case resp.StatusCode == http.StatusUnauthorized && resp.Header.Get(peercred.HeaderNotMember) != "":
		// Up, but its source does not list this node yet.
		return fmt.Errorf("%w: %w: %w", ErrRefused, peercred.ErrNotMember, err)
	case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusUnauthorized,
		resp.StatusCode == http.StatusNotFound && strings.Contains(string(msg), "no such endpoint"):
		// Not ready, busy, rejecting our credentials, or an older
		// release that does not know the endpoint: not a peer to ask.
		return fmt.Errorf("%w: %w", ErrDown, err)
	default:
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
}
