// Package throttlefront is an S3 front for tests: a reverse proxy on
// loopback over a real S3 server (MinIO) that answers GETs and HEADs past
// a rate a second per prefix as S3 does past its limits (503 SlowDown) or
// as other stores do (429), and counts every request by second, so that a
// test sees what a store would have billed and refused.
//
// Requests pass with their Host header unchanged, so that the signatures
// the client made for the front's address hold at the server behind it.
package throttlefront

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Config is a front's limit: GETs (and HEADs) a second per prefix,
// counted in whole wall-clock seconds (0: none); the status answered past
// it (http.StatusServiceUnavailable, as S3's SlowDown, or
// http.StatusTooManyRequests); and how many path segments after the bucket
// name a prefix (default 1).
type Config struct {
	Rate   int
	Status int
	Depth  int
}

// Front is a running front. Its counts are safe for concurrent use.
type Front struct {
	URL string
	srv *httptest.Server
	cfg Config

	mu     sync.Mutex
	window map[string]int // this second's GETs, by prefix
	second int64
	counts Counts
	bySec  map[int64]int // GETs answered (not throttled) by second
	byPath map[string]Counts
}

// Counts are a front's requests: GETs and HEADs seen (Heads of them
// HEADs), those throttled, bytes answered (a body's: a HEAD answers
// none), and requests of other methods.
type Counts struct {
	Gets, Heads, Throttled, Other int64
	Bytes                         int64
}

// Start starts a front over the S3 server at target (http://host:port).
func Start(target string, cfg Config) (*Front, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if cfg.Status == 0 {
		cfg.Status = http.StatusServiceUnavailable
	}
	if cfg.Depth == 0 {
		cfg.Depth = 1
	}
	f := &Front{cfg: cfg, window: map[string]int{}, bySec: map[int64]int{}, byPath: map[string]Counts{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // the signature names the front's host
		},
		// A request its client gave up on (a hedged or cancelled read) is
		// no error of the front's.
		ErrorLog: log.New(io.Discard, "", 0),
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodHead {
				return nil
			}
			f.mu.Lock()
			f.counts.Bytes += max(0, resp.ContentLength)
			c := f.byPath[resp.Request.URL.Path]
			c.Bytes += max(0, resp.ContentLength)
			f.byPath[resp.Request.URL.Path] = c
			f.mu.Unlock()
			return nil
		},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			f.mu.Lock()
			f.counts.Other++
			f.mu.Unlock()
			proxy.ServeHTTP(w, r)
			return
		}
		if !f.admit(r.URL.Path, prefixOf(r.URL.Path, cfg.Depth), r.Method == http.MethodHead) {
			f.refuse(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	f.URL = f.srv.URL
	return f, nil
}

// prefixOf is a path's bucket and its first depth segments.
func prefixOf(path string, depth int) string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", depth+2)
	return strings.Join(parts[:min(len(parts), depth+1)], "/")
}

// admit counts a GET, and reports whether it is within the rate.
func (f *Front) admit(path, prefix string, head bool) bool {
	now := time.Now().Unix()
	f.mu.Lock()
	defer f.mu.Unlock()
	if now != f.second {
		f.second, f.window = now, map[string]int{}
	}
	f.counts.Gets++
	c := f.byPath[path]
	c.Gets++
	if head {
		f.counts.Heads++
		c.Heads++
	}
	defer func() { f.byPath[path] = c }()
	if f.cfg.Rate > 0 && f.window[prefix] >= f.cfg.Rate {
		f.counts.Throttled++
		c.Throttled++
		return false
	}
	f.window[prefix]++
	f.bySec[now]++
	return true
}

// refuse answers as a throttling store does.
func (f *Front) refuse(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "1")
	if f.cfg.Status == http.StatusTooManyRequests {
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><Resource>` + r.URL.Path + `</Resource></Error>`))
	}
}

// Counts are the front's counts so far.
func (f *Front) Counts() Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// ByPath are the front's GETs and HEADs, those throttled and the bytes
// answered, by the request's path (/bucket/key).
func (f *Front) ByPath() map[string]Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]Counts, len(f.byPath))
	for p, c := range f.byPath {
		out[p] = c
	}
	return out
}

// PerSecond are the GETs answered in each whole second seen, by Unix
// second.
func (f *Front) PerSecond() map[int64]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int64]int, len(f.bySec))
	for k, v := range f.bySec {
		out[k] = v
	}
	return out
}

// Close stops the front.
func (f *Front) Close() { f.srv.Close() }
