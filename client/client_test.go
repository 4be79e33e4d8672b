package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

func ptr[T any](v T) *T { return &v }

// newClient returns a client of g that records its retry waits instead of
// sleeping them.
func newClient(t *testing.T, g *fakeGateway, opts client.Options) (*client.Client, *waits) {
	t.Helper()
	c, err := client.New(g.URL, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w := &waits{}
	client.SetSleep(c, w.sleep)
	return c, w
}

type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		url  string
		opts client.Options
		ok   bool
	}{
		{"plain", "http://127.0.0.1:8080", client.Options{}, true},
		{"https with prefix", "https://lb.example/brand/", client.Options{}, true},
		{"rank within world", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{World: 4, Rank: 3}}}, true},
		{"negative ahead disables read-ahead", "http://h", client.Options{Ahead: -1, MaxRetries: -1}, true},
		{"no scheme", "127.0.0.1:8080", client.Options{}, false},
		{"ftp", "ftp://h", client.Options{}, false},
		{"no host", "http://", client.Options{}, false},
		{"query", "http://h/?seed=1", client.Options{}, false},
		{"fragment", "http://h/#x", client.Options{}, false},
		{"unparsable", "http://h:port", client.Options{}, false},
		{"negative batch size", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{BatchSize: -1}}}, false},
		{"negative window", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{Window: -2}}}, false},
		{"negative world", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{World: -1}}}, false},
		{"negative rank", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{Rank: -1}}}, false},
		{"rank outside world", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{World: 2, Rank: 2}}}, false},
		{"rank without world", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{Rank: 2}}}, false},
		{"offset in options", "http://h", client.Options{Job: api.Job{Params: shuffle.Params{Offset: 64}}}, false},
		{"negative backoff", "http://h", client.Options{Backoff: -time.Second}, false},
		{"negative max backoff", "http://h", client.Options{MaxBackoff: -time.Second}, false},
		{"named and weighted", "http://h", client.Options{Job: api.Job{Name: "lr-0.1", Weight: 2.5}}, true},
		{"name of an importance job", "http://h", client.Options{Job: api.Job{Name: "j", Importance: api.Importance{Job: "j"}}}, true},
		{"two names", "http://h", client.Options{Job: api.Job{Name: "j", Importance: api.Importance{Job: "k"}}}, false},
		{"bad name", "http://h", client.Options{Job: api.Job{Name: "a b"}}, false},
		{"weight over 100", "http://h", client.Options{Job: api.Job{Weight: 101}}, false},
		{"negative weight", "http://h", client.Options{Job: api.Job{Weight: -1}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(tt.url, tt.opts)
			if tt.ok {
				if err != nil || c == nil {
					t.Fatalf("New(%q) = %v, %v; want a client", tt.url, c, err)
				}
				return
			}
			if !errors.Is(err, client.ErrInvalid) {
				t.Fatalf("New(%q) error = %v; want ErrInvalid", tt.url, err)
			}
		})
	}
}

func TestNegativePositionsRejectedLocally(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{})
	ctx := context.Background()
	if _, err := c.Batch(ctx, -1, 0); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Batch(-1, 0) = %v; want ErrInvalid", err)
	}
	if _, err := c.Manifest(ctx, 0, -1); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Manifest(0, -1) = %v; want ErrInvalid", err)
	}
	if _, _, err := c.BatchRaw(ctx, 0, -3, io.Discard); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("BatchRaw(0, -3) = %v; want ErrInvalid", err)
	}
	if _, err := c.EpochInfo(ctx, -2); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("EpochInfo(-2) = %v; want ErrInvalid", err)
	}
	if n := len(g.requests()); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
}

// TestQueryParameters checks the query string each Options produces, and
// that the fake (which rejects unknown parameters) accepts it.
func TestQueryParameters(t *testing.T) {
	tests := []struct {
		name string
		opts client.Options
		want string
	}{
		{"zero options send seed and drop_last", client.Options{}, "drop_last=false&seed=0"},
		{"dataset", client.Options{Job: api.Job{Dataset: "val"}}, "dataset=val&drop_last=false&seed=0"},
		{"max seed", client.Options{Job: api.Job{Params: shuffle.Params{Seed: 18446744073709551615}}}, "drop_last=false&seed=18446744073709551615"},
		{"batch size", client.Options{Job: api.Job{Params: shuffle.Params{BatchSize: 3}}}, "batch_size=3&drop_last=false&seed=0"},
		{"window", client.Options{Job: api.Job{Params: shuffle.Params{Window: 5}}}, "drop_last=false&seed=0&window=5"},
		{"world sends rank 0", client.Options{Job: api.Job{Params: shuffle.Params{World: 2}}}, "drop_last=false&rank=0&seed=0&world=2"},
		{"world and rank", client.Options{Job: api.Job{Params: shuffle.Params{World: 3, Rank: 2}}}, "drop_last=false&rank=2&seed=0&world=3"},
		{"drop_last true", client.Options{Job: api.Job{Params: shuffle.Params{DropLast: true}}}, "drop_last=true&seed=0"},
		{"everything", client.Options{Job: api.Job{Dataset: "toy", Params: shuffle.Params{Seed: 99, BatchSize: 2, Window: 1, World: 2, Rank: 1, DropLast: true}}},
			"batch_size=2&dataset=toy&drop_last=true&rank=1&seed=99&window=1&world=2"},
		{"retry and read-ahead options are not sent", client.Options{Ahead: 7, MaxRetries: 1, Backoff: time.Second}, "drop_last=false&seed=0"},
		{"name and weight", client.Options{Job: api.Job{Name: "lr-3", Weight: 2}}, "drop_last=false&job=lr-3&seed=0&weight=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway(t)
			c, _ := newClient(t, g, tt.opts)
			if _, err := c.Batch(context.Background(), 0, 0); err != nil {
				t.Fatalf("Batch: %v", err)
			}
			if _, err := c.Manifest(context.Background(), 0, 0); err != nil {
				t.Fatalf("Manifest: %v", err)
			}
			reqs := g.requests()
			if len(reqs) != 2 {
				t.Fatalf("requests = %q; want 2", reqs)
			}
			if got := query(t, reqs[0]).Encode(); got != tt.want {
				t.Errorf("batch query = %q; want %q", got, tt.want)
			}
			mq := query(t, reqs[1])
			if mq.Get("format") != "json" {
				t.Errorf("manifest query %q lacks format=json", reqs[1])
			}
			mq.Del("format")
			// From the first answer on, the client names the index
			// version it reads.
			if got := mq.Get("index"); got == "" || got != c.Index() {
				t.Errorf("manifest query %q names index %q; the client reads %q", reqs[1], got, c.Index())
			}
			mq.Del("index")
			if got := mq.Encode(); got != tt.want {
				t.Errorf("manifest query = %q; want %q plus format=json and index", got, tt.want)
			}
		})
	}
}

func TestBaseURLPathPrefix(t *testing.T) {
	g := newFakeGateway(t)
	outer := http.NewServeMux()
	outer.Handle("/brand/", http.StripPrefix("/brand", http.HandlerFunc(g.serve)))
	srv := newServer(t, outer)
	for _, base := range []string{srv.URL + "/brand", srv.URL + "/brand/"} {
		c, err := client.New(base, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Batch(context.Background(), 1, 2); err != nil {
			t.Errorf("base %q: %v", base, err)
		}
	}
	for _, r := range g.requests() {
		if r != "/epoch/1/batch/2?drop_last=false&seed=0" {
			t.Errorf("gateway saw %q; want /epoch/1/batch/2?drop_last=false&seed=0", r)
		}
	}
}

// answer is one scripted response of a fault-injecting hook.
type answer struct {
	status     int
	retryAfter string
	body       string // for non-2xx; default is the gateway's JSON error
}

// script answers the first requests from answers and lets the real gateway
// answer the rest.
func script(answers ...answer) func(w http.ResponseWriter, r *http.Request) bool {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) bool {
		i := int(n.Add(1)) - 1
		if i >= len(answers) {
			return false
		}
		a := answers[i]
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		if a.body != "" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(a.status)
			io.WriteString(w, a.body)
			return true
		}
		fakeError(w, a.status, fmt.Sprintf("scripted %d", a.status))
		return true
	}
}

func TestRetries(t *testing.T) {
	unavailable := answer{status: 503}
	tests := []struct {
		name     string
		opts     client.Options
		answers  []answer
		requests int
		wantErr  int             // status of the APIError expected, 0 for success
		waits    []time.Duration // exact waits expected; nil means "check by backoff bounds"
	}{
		{"503 then 200", client.Options{}, []answer{unavailable}, 2, 0, nil},
		{"502 504 503 then 200", client.Options{}, []answer{{status: 502}, {status: 504}, unavailable}, 4, 0, nil},
		{"Retry-After honoured", client.Options{}, []answer{{status: 503, retryAfter: "3"}}, 2, 0, []time.Duration{3 * time.Second}},
		{"Retry-After capped", client.Options{MaxBackoff: 2 * time.Second}, []answer{{status: 503, retryAfter: "3600"}}, 2, 0, []time.Duration{2 * time.Second}},
		{"Retry-After as HTTP date in the past falls back to backoff", client.Options{}, []answer{{status: 503, retryAfter: "Mon, 02 Jan 2006 15:04:05 GMT"}}, 2, 0, nil},
		{"400 not retried", client.Options{}, []answer{{status: 400}}, 1, 400, []time.Duration{}},
		{"404 not retried", client.Options{}, []answer{{status: 404}}, 1, 404, []time.Duration{}},
		{"429 not retried", client.Options{}, []answer{{status: 429, retryAfter: "1"}}, 1, 429, []time.Duration{}},
		{"500 not retried", client.Options{}, []answer{{status: 500}}, 1, 500, []time.Duration{}},
		{"gives up after MaxRetries", client.Options{MaxRetries: 2}, []answer{unavailable, unavailable, unavailable, unavailable}, 3, 503, nil},
		{"negative MaxRetries disables retries", client.Options{MaxRetries: -1}, []answer{unavailable}, 1, 503, []time.Duration{}},
		{"proxy page on 502", client.Options{}, []answer{{status: 502, body: "<html>bad gateway</html>"}}, 2, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway(t)
			g.setHook(script(tt.answers...))
			c, w := newClient(t, g, tt.opts)
			b, err := c.Batch(context.Background(), 0, 1)
			if n := len(g.requests()); n != tt.requests {
				t.Errorf("%d requests; want %d", n, tt.requests)
			}
			if tt.wantErr == 0 {
				if err != nil || len(b.Samples) == 0 {
					t.Fatalf("Batch = %v, %v; want a batch", b, err)
				}
			} else {
				var apiErr *client.APIError
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.wantErr {
					t.Fatalf("error %v; want an APIError with status %d", err, tt.wantErr)
				}
				want := fmt.Sprintf("%d %s: scripted %d", tt.wantErr, http.StatusText(tt.wantErr), tt.wantErr)
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			got := w.get()
			if len(got) != tt.requests-1 {
				t.Errorf("waited %v; want %d waits", got, tt.requests-1)
			}
			if tt.waits != nil {
				if fmt.Sprint(got) != fmt.Sprint(tt.waits) {
					t.Errorf("waits = %v; want %v", got, tt.waits)
				}
				return
			}
			for i, d := range got {
				hi := min(client.DefaultBackoff<<i, client.DefaultMaxBackoff)
				if tt.opts.Backoff != 0 {
					t.Fatal("bounds check assumes the default backoff")
				}
				if d < hi/2 || d > hi {
					t.Errorf("wait %d = %v; want within [%v, %v]", i, d, hi/2, hi)
				}
			}
		})
	}
}

func TestAPIErrorFromGateway(t *testing.T) {
	g := newFakeGateway(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		opts    client.Options
		batch   int
		status  int
		message string
	}{
		{"batch out of range states the range", client.Options{}, 5, 404, "batch 5 out of range: epoch 0 has batches 0..4"},
		{"unknown dataset", client.Options{Job: api.Job{Dataset: "nope"}}, 0, 404, `unknown dataset "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, w := newClient(t, g, tt.opts)
			_, err := c.Batch(ctx, 0, tt.batch)
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not an APIError", err)
			}
			if apiErr.StatusCode != tt.status || !strings.Contains(apiErr.Message, tt.message) {
				t.Errorf("APIError = %d %q; want %d containing %q", apiErr.StatusCode, apiErr.Message, tt.status, tt.message)
			}
			if !strings.Contains(err.Error(), tt.message) || !strings.Contains(err.Error(), fmt.Sprint(tt.status)) {
				t.Errorf("Error() = %q lacks status or message", err)
			}
			if len(w.get()) != 0 {
				t.Errorf("a %d was retried", tt.status)
			}
		})
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	c, err := client.New("http://h", client.Options{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	transport := errors.New("connection reset")
	for attempt, hi := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		hi *= time.Millisecond
		for range 50 {
			if d := client.BackoffFor(c, attempt, transport); d < hi/2 || d > hi {
				t.Fatalf("attempt %d: wait %v outside [%v, %v]", attempt, d, hi/2, hi)
			}
		}
	}
	if d := client.BackoffFor(c, 200, transport); d < 500*time.Millisecond || d > time.Second {
		t.Errorf("attempt 200: wait %v; want the cap, not an overflow", d)
	}
	retryAfter := fmt.Errorf("wrapped: %w", &client.APIError{StatusCode: 503, RetryAfter: 700 * time.Millisecond})
	if d := client.BackoffFor(c, 3, retryAfter); d != 700*time.Millisecond {
		t.Errorf("Retry-After 700ms gave wait %v", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"2", 2 * time.Second},
		{" 7 ", 7 * time.Second},
		{"soon", 0},
		{"99999999999999999", 365 * 24 * time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := client.ParseRetryAfter(tt.v, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v; want %v", tt.v, got, tt.want)
		}
	}
}

// flakyTransport fails the first n round trips as a dropped connection
// would, then delegates.
type flakyTransport struct {
	fail  atomic.Int64
	calls atomic.Int64
	next  http.RoundTripper
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return f.next.RoundTrip(r)
}

func TestTransportErrorRetried(t *testing.T) {
	g := newFakeGateway(t)
	ft := &flakyTransport{next: http.DefaultTransport}
	ft.fail.Store(2)
	c, w := newClient(t, g, client.Options{HTTPClient: &http.Client{Transport: ft}})
	if _, err := c.Batch(context.Background(), 0, 0); err != nil {
		t.Fatalf("Batch: %v", err)
	}
	if ft.calls.Load() != 3 || len(w.get()) != 2 {
		t.Errorf("%d round trips, %d waits; want 3 and 2", ft.calls.Load(), len(w.get()))
	}

	ft.fail.Store(100)
	ft.calls.Store(0)
	c, _ = newClient(t, g, client.Options{HTTPClient: &http.Client{Transport: ft}, MaxRetries: 3})
	_, err := c.Batch(context.Background(), 0, 0)
	if err == nil || !strings.Contains(err.Error(), "connection reset") || !strings.Contains(err.Error(), "attempt 4 of 4") {
		t.Errorf("error %v; want the transport error after 4 attempts", err)
	}
	if ft.calls.Load() != 4 {
		t.Errorf("%d round trips; want 4", ft.calls.Load())
	}
}

// truncate answers the first n batch requests with the real headers
// (including the full Content-Length) but only half of the body, as a
// connection dropped mid-transfer does.
func truncate(g *fakeGateway, n int64) func(w http.ResponseWriter, r *http.Request) bool {
	var count atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) bool {
		if count.Add(1) > n {
			return false
		}
		rec := g.render(r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		body := rec.Body.Bytes()
		w.Write(body[:len(body)/2])
		return true
	}
}

func TestShortBodyRetried(t *testing.T) {
	g := newFakeGateway(t)
	g.setHook(truncate(g, 1))
	c, w := newClient(t, g, client.Options{})
	b, err := c.Batch(context.Background(), 0, 0)
	if err != nil {
		t.Fatalf("Batch: %v", err)
	}
	p := g.defaults
	p.seed = 0 // the client always sends its seed
	if want := g.expectedKeys("toy", p, 0, 0); fmt.Sprint(keys(b.Samples)) != fmt.Sprint(want) {
		t.Errorf("keys %v; want %v", keys(b.Samples), want)
	}
	if len(g.requests()) != 2 || len(w.get()) != 1 {
		t.Errorf("%d requests, %d waits; want 2 and 1", len(g.requests()), len(w.get()))
	}

	g.setHook(truncate(g, 100))
	c, _ = newClient(t, g, client.Options{MaxRetries: 1})
	_, err = c.Batch(context.Background(), 0, 0)
	if !errors.Is(err, client.ErrShortBody) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v; want ErrShortBody wrapping io.ErrUnexpectedEOF", err)
	}
}

func TestContextCancelledDuringRequest(t *testing.T) {
	g := newFakeGateway(t)
	release := released(t)
	arrived := make(chan struct{}, 1)
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	c, w := newClient(t, g, client.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	done := make(chan error, 1)
	go func() {
		_, err := c.Batch(ctx, 0, 0)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Batch did not return within 10s of its context being cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want context.Canceled", err)
	}
	if len(g.requests()) != 1 || len(w.get()) != 0 {
		t.Errorf("%d requests, %d waits after cancellation; want 1 and 0", len(g.requests()), len(w.get()))
	}
}

// notifyTransport signals after each response's headers have arrived.
type notifyTransport struct {
	next http.RoundTripper
	got  chan struct{}
}

func (n *notifyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(r)
	if err == nil {
		n.got <- struct{}{}
	}
	return resp, err
}

func TestContextCancelledDuringBackoff(t *testing.T) {
	g := newFakeGateway(t)
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Retry-After", "30")
		fakeError(w, 503, "warming up")
		return true
	})
	nt := &notifyTransport{next: &http.Transport{}, got: make(chan struct{}, 1)}
	// The real sleep, which the cancellation must end.
	c, err := client.New(g.URL, client.Options{HTTPClient: &http.Client{Transport: nt}, MaxBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-nt.got
		time.Sleep(20 * time.Millisecond) // most likely into the 30s wait
		cancel()
	}()
	done := make(chan error, 1)
	go func() {
		_, err := c.Batch(ctx, 0, 0)
		done <- err
	}()
	select {
	case err := <-done:
		var apiErr *client.APIError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &apiErr) || apiErr.RetryAfter != 30*time.Second {
			t.Errorf("error %v; want context.Canceled and the 503 that caused the wait", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Batch still waiting to retry 10s after its context was cancelled")
	}
	if n := len(g.requests()); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
}

func TestSleepContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- client.SleepContext(ctx, time.Hour) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("SleepContext = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SleepContext ignored its cancelled context")
	}
	if err := client.SleepContext(context.Background(), time.Millisecond); err != nil {
		t.Errorf("SleepContext(1ms) = %v", err)
	}
}

func TestDeadlineBeforeRetryReturnsGatewayError(t *testing.T) {
	g := newFakeGateway(t)
	g.setHook(script(answer{status: 503, retryAfter: "30"}))
	c, w := newClient(t, g, client.Options{MaxBackoff: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Batch(ctx, 0, 0)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v; want the 503, not a deadline", err)
	}
	if len(w.get()) != 0 {
		t.Errorf("waited %v although the deadline comes first", w.get())
	}
}

func TestConcurrentUse(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Params: shuffle.Params{BatchSize: 2}}})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for m := range 10 {
		wg.Go(func() {
			b, err := c.Batch(context.Background(), 1, m)
			if err == nil && fmt.Sprint(keys(b.Samples)) != fmt.Sprint(g.expectedKeys("toy", fakeParams{batchSize: 2, window: 2, world: 1}, 1, m)) {
				err = fmt.Errorf("batch %d has the wrong samples", m)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func keys(samples []client.Sample) []string {
	out := make([]string, len(samples))
	for i, s := range samples {
		out[i] = s.Key
	}
	return out
}

func TestNonJSONErrorBody(t *testing.T) {
	g := newFakeGateway(t)
	g.setHook(script(answer{status: 502, body: "<html>upstream gone</html>\n"}))
	c, _ := newClient(t, g, client.Options{MaxRetries: -1})
	_, err := c.Batch(context.Background(), 0, 0)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Message != "<html>upstream gone</html>" {
		t.Errorf("error %v; want a 502 APIError carrying the proxy's text", err)
	}
}

func newServer(t testing.TB, h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func TestShortJSONRetried(t *testing.T) {
	g := newFakeGateway(t)
	c, w := newClient(t, g, client.Options{})
	g.setHook(truncate(g, 1))
	if _, err := c.Manifest(context.Background(), 0, 0); err != nil {
		t.Errorf("Manifest after a cut-off answer: %v", err)
	}
	g.setHook(truncate(g, 1))
	if _, err := c.EpochInfo(context.Background(), 0); err != nil {
		t.Errorf("EpochInfo after a cut-off answer: %v", err)
	}
	if len(w.get()) != 2 {
		t.Errorf("%d retries; want 2", len(w.get()))
	}
}

// TestDroppedChunkedResponseRetried covers a body without Content-Length
// (say, re-chunked by a proxy) whose connection drops mid-stream.
func TestDroppedChunkedResponseRetried(t *testing.T) {
	g := newFakeGateway(t)
	var n atomic.Int64
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if n.Add(1) > 1 {
			return false
		}
		rec := g.render(r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		body := rec.Body.Bytes()
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return true
		}
		conn.Close()
		return true
	})
	c, w := newClient(t, g, client.Options{})
	b, err := c.Batch(context.Background(), 0, 0)
	if err != nil || len(b.Samples) != 4 {
		t.Fatalf("Batch = %v, %v; want the batch after a retry", b, err)
	}
	if len(w.get()) != 1 {
		t.Errorf("%d retries; want 1", len(w.get()))
	}
}
