package integration

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// faultKind is one kind of failure the fault proxy injects.
type faultKind int

const (
	faultNone     faultKind = iota
	faultSlowDown           // 503 SlowDown, before the request reaches the store
	faultCut                // the body stops halfway and the connection drops
	faultEmpty              // 200 with the headers and an empty body
	faultFlip               // one byte of the body flipped on the way
	faultStall              // the body stops halfway and the connection stays open
	faultLatency            // the answer comes 50-200 ms late
	numFaultKinds
)

var faultNames = [...]string{"none", "slowdown", "cut", "empty", "flip", "stall", "latency"}

func (k faultKind) String() string { return faultNames[k] }

// faultProxy is a reverse proxy between a gateway and S3 that injects
// failures into chunk GETs on a seeded schedule: every `every`-th chunk GET
// (counted in the order they arrive) gets a fault, the kinds taking turns
// in an order the seed shuffles, and each fault's byte position coming from
// a generator seeded with the seed and the GET's number. Which chunk a GET
// is depends on the clients' timing; how many faults of each kind a run of
// N chunk GETs gets does not.
//
// The store it forwards to can change (setTarget), so that a restarted
// server on a new port stays behind the same address. Signed requests
// keep their Host header, so that their signatures still hold.
type faultProxy struct {
	*httptest.Server
	seed  uint64
	every int64
	order []faultKind

	target    atomic.Pointer[url.URL]
	transport *http.Transport
	armed     atomic.Bool
	gets      atomic.Int64 // chunk GETs seen while armed

	mu       sync.Mutex
	injected map[faultKind]int
	down     int // requests refused because the store was down
}

func newFaultProxy(target string, seed uint64, every int64) *faultProxy {
	p := &faultProxy{seed: seed, every: every, injected: map[faultKind]int{},
		transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}
	for k := faultSlowDown; k < numFaultKinds; k++ {
		p.order = append(p.order, k)
	}
	rand.New(rand.NewPCG(seed, 0)).Shuffle(len(p.order), func(i, j int) { p.order[i], p.order[j] = p.order[j], p.order[i] })
	p.setTarget(target)
	p.Server = httptest.NewServer(p)
	return p
}

func (p *faultProxy) setTarget(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	p.target.Store(u)
}

// schedule is the fault for the n-th chunk GET (1-based) and its generator.
func (p *faultProxy) schedule(n int64) (faultKind, *rand.Rand) {
	r := rand.New(rand.NewPCG(p.seed, uint64(n)))
	if n%p.every != 0 {
		return faultNone, r
	}
	return p.order[(n/p.every-1)%int64(len(p.order))], r
}

func (p *faultProxy) count(k faultKind) {
	p.mu.Lock()
	p.injected[k]++
	p.mu.Unlock()
}

// counts returns the faults injected so far by kind, and the requests
// refused while the store was down.
func (p *faultProxy) counts() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, n := range p.injected {
		out[k.String()] = n
	}
	return out, p.down
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, rng := faultNone, (*rand.Rand)(nil)
	if p.armed.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/chunks/") {
		kind, rng = p.schedule(p.gets.Add(1))
	}
	switch kind {
	case faultSlowDown:
		p.count(kind)
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><Resource>` +
			r.URL.Path + `</Resource><RequestId>faultproxy</RequestId></Error>`
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, body)
		return
	case faultLatency:
		p.count(kind)
		time.Sleep(time.Duration(50+rng.IntN(150)) * time.Millisecond)
	}

	out := r.Clone(r.Context())
	t := p.target.Load()
	out.URL.Scheme, out.URL.Host = t.Scheme, t.Host
	out.Host = r.Host // the host the request was signed for
	out.RequestURI = ""
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.mu.Lock()
		p.down++
		p.mu.Unlock()
		http.Error(w, "fault proxy: store unreachable: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	ok := resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if !ok || kind == faultNone || kind == faultLatency {
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}
	p.count(kind)
	half := resp.ContentLength / 2
	switch kind {
	case faultEmpty:
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(resp.StatusCode)
	case faultFlip:
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		if len(body) > 0 {
			body[rng.IntN(len(body))] ^= 1 << rng.IntN(8)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	case faultCut, faultStall:
		w.WriteHeader(resp.StatusCode)
		_, _ = io.CopyN(w, resp.Body, half)
		w.(http.Flusher).Flush()
		if kind == faultStall {
			select { // until the reader gives up on it
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		}
		panic(http.ErrAbortHandler) // drop the connection mid-body
	default:
		panic(fmt.Sprintf("fault proxy: unknown fault %d", kind))
	}
}
