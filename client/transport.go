package client

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/cluster/hedge"
)

// transport carries a Client's requests to its gateways and their answers
// back: which node a request goes to (router, Options.Peers and
// Discover), retries and their backoff, probes of a silent node, the
// bearer token, and the membership version each epoch's requests are
// pinned to. It knows paths, queries and bodies, not what they mean: the
// Client builds the request and reads the answer (readFunc), and answered
// is shown every 2xx answer first (the pins the order the job reads).
type transport struct {
	base       *url.URL
	router     *router // the base URL alone, or the Peers
	hc         *http.Client
	opts       Options // the client's, with defaults applied
	maxRetries int     // >= 0
	// lag is the time to headers of this client's attempts on a cluster,
	// learnt: when a silent node is first probed (probe.go).
	lag *hedge.Policy
	// answered sees the headers of every 2xx answer before it is read; an
	// error from it ends the call.
	answered func(http.Header) error

	// With Options.Discover, the router of the discovered cluster, once
	// discovery has succeeded, and the membership version it lists;
	// rediscover is set when an epoch pins another one.
	discoverMu        sync.Mutex
	discovered        *router
	discoveredMembers atomic.Pointer[string]
	rediscover        atomic.Bool

	// members is the membership version pinned for the latest epoch read
	// (see Client.Members).
	members atomic.Pointer[memberPin]

	// sleep waits between attempts; tests replace it to observe waits
	// without spending them.
	sleep func(ctx context.Context, d time.Duration) error
	// now is the clock of the routers' marks of failed nodes; tests
	// replace it to pass HomeRetry without waiting.
	now func() time.Time
}
