package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// inflightTransport counts batch requests from the moment they are sent
// until their body is closed, on the client side, where "in flight" is
// exact.
type inflightTransport struct {
	next     *http.Transport
	now, max atomic.Int64
}

func newInflightTransport() *inflightTransport {
	return &inflightTransport{next: &http.Transport{MaxIdleConnsPerHost: 32}}
}

func (t *inflightTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.Contains(r.URL.Path, "/batch/") {
		return t.next.RoundTrip(r)
	}
	n := t.now.Add(1)
	for m := t.max.Load(); n > m && !t.max.CompareAndSwap(m, n); m = t.max.Load() {
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		t.now.Add(-1)
		return nil, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: func() { t.now.Add(-1) }}
	return resp, nil
}

// doneBody calls done once when the body is closed.
type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *doneBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

func TestEpochOrderAndCompleteness(t *testing.T) {
	tests := []struct {
		name      string
		world     int
		batchSize int
		dropLast  bool
		ahead     int
	}{
		{"one rank, default read-ahead", 1, 4, false, 0},
		{"three ranks, ahead 3", 3, 2, false, 3},
		{"two ranks, drop_last, ahead 1", 2, 3, true, 1},
		{"no read-ahead", 1, 5, false, -1},
		{"ahead beyond the epoch", 4, 1, false, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway(t)
			seed := uint64(77)
			p := fakeParams{seed: seed, batchSize: tt.batchSize, window: 2, world: tt.world, dropLast: tt.dropLast}
			wantBatches := p.numBatches(20)
			seen := map[string]int{}
			for rank := range tt.world {
				tr := newInflightTransport()
				c, _ := newClient(t, g, client.Options{HTTPClient: &http.Client{Transport: tr}, Ahead: tt.ahead, Job: api.Job{Params: shuffle.Params{Seed: seed, BatchSize: tt.batchSize, World: tt.world, Rank: rank, DropLast: tt.dropLast}}})
				next := 0
				for b, err := range c.Epoch(context.Background(), 5) {
					if err != nil {
						t.Fatalf("rank %d: %v", rank, err)
					}
					if b.Index != next || b.Epoch != 5 || b.EpochBatches != wantBatches {
						t.Fatalf("rank %d: got batch %d of epoch %d (%d batches); want batch %d of epoch 5 (%d)",
							rank, b.Index, b.Epoch, b.EpochBatches, next, wantBatches)
					}
					p.rank = rank
					if want := g.expectedKeys("toy", p, 5, b.Index); fmt.Sprint(keys(b.Samples)) != fmt.Sprint(want) {
						t.Errorf("rank %d batch %d: keys %v; want %v", rank, b.Index, keys(b.Samples), want)
					}
					for _, s := range b.Samples {
						seen[s.Key]++
					}
					next++
				}
				if next != wantBatches {
					t.Errorf("rank %d: %d batches; want %d", rank, next, wantBatches)
				}
				limit := int64(max(tt.ahead, 1))
				if tt.ahead == 0 {
					limit = client.DefaultAhead
				}
				if m := tr.max.Load(); m > limit {
					t.Errorf("rank %d: %d batch requests in flight; want at most %d", rank, m, limit)
				}
			}
			wantSamples := 20
			if tt.dropLast {
				wantSamples -= 20 % (tt.batchSize * tt.world)
			}
			total := 0
			for k, n := range seen {
				if n != 1 {
					t.Errorf("sample %s served %d times in one epoch", k, n)
				}
				total += n
			}
			if total != wantSamples {
				t.Errorf("epoch covered %d samples over all ranks; want %d", total, wantSamples)
			}
		})
	}
}

// batchNumber returns M of a /epoch/N/batch/M request, or -1.
func batchNumber(r *http.Request) int {
	i := strings.LastIndex(r.URL.Path, "/batch/")
	if i < 0 {
		return -1
	}
	m, err := strconv.Atoi(r.URL.Path[i+len("/batch/"):])
	if err != nil {
		return -1
	}
	return m
}

// TestEpochReadsAhead holds batches 0, 1 and 2 at the gateway until all
// three have arrived: with Ahead 3 they must, as all three are requested
// before the caller sees anything.
func TestEpochReadsAhead(t *testing.T) {
	g := newFakeGateway(t)
	var arrivals atomic.Int64
	all := make(chan struct{})
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if m := batchNumber(r); m < 0 || m > 2 {
			return false
		}
		if arrivals.Add(1) == 3 {
			close(all)
		}
		select {
		case <-all:
			return false
		case <-time.After(10 * time.Second):
			fakeError(w, 500, "batches 0, 1 and 2 were not all requested before batch 0 was answered")
			return true
		}
	})
	tr := newInflightTransport()
	c, _ := newClient(t, g, client.Options{HTTPClient: &http.Client{Transport: tr}, Ahead: 3})
	n := 0
	for _, err := range c.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 5 {
		t.Errorf("%d batches; want 5", n)
	}
	if m := tr.max.Load(); m != 3 {
		t.Errorf("at most %d batch requests in flight; want exactly Ahead = 3", m)
	}
}

// waitFor polls cond for up to 10 seconds, for conditions that settle
// asynchronously (handlers noticing a closed connection).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkNoGoroutineLeak waits (bounded) until no more goroutines run than
// before, closing idle connections, whose goroutines are not a leak.
func checkNoGoroutineLeak(t *testing.T, before int, tr *http.Transport) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr.CloseIdleConnections()
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("%d goroutines, %d before:\n%s", n, before, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runEpoch consumes an epoch in another goroutine, stopping after stopAfter
// batches (negative: never), and fails the test if the iteration does not
// return within 10 seconds.
func runEpoch(t *testing.T, c *client.Client, ctx context.Context, epoch, stopAfter int, onBatch func(*client.Batch)) (indices []int, errs []error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b, err := range c.Epoch(ctx, epoch) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			indices = append(indices, b.Index)
			if onBatch != nil {
				onBatch(b)
			}
			if len(indices) == stopAfter {
				break
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Epoch did not return within 10s")
	}
	return indices, errs
}

func TestEpochBreakCancelsOutstanding(t *testing.T) {
	g := newFakeGateway(t)
	release := released(t)
	var mu sync.Mutex
	arrived, cancelled := map[int]bool{}, map[int]bool{}
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		m := batchNumber(r)
		if m < 1 {
			return false
		}
		mu.Lock()
		arrived[m] = true
		mu.Unlock()
		select {
		case <-r.Context().Done():
			mu.Lock()
			cancelled[m] = true
			mu.Unlock()
		case <-release:
		}
		return true
	})
	before := runtime.NumGoroutine()
	tr := &http.Transport{}
	c, _ := newClient(t, g, client.Options{HTTPClient: &http.Client{Transport: tr}, Ahead: 3})
	indices, errs := runEpoch(t, c, context.Background(), 0, 1, nil)
	if fmt.Sprint(indices) != "[0]" || len(errs) != 0 {
		t.Fatalf("got batches %v, errors %v; want batch 0 only", indices, errs)
	}
	waitFor(t, "every blocked batch request to see its cancellation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrived) == len(cancelled)
	})
	mu.Lock()
	for m := range arrived {
		if m > 3 {
			t.Errorf("batch %d was requested; with Ahead 3 and a break after batch 0, at most 1..3 may be", m)
		}
	}
	mu.Unlock()
	checkNoGoroutineLeak(t, before, tr)
}

func TestEpochStopsAtFirstError(t *testing.T) {
	g := newFakeGateway(t)
	g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if batchNumber(r) == 2 {
			fakeError(w, 404, "batch 2 is gone")
			return true
		}
		return false
	})
	before := runtime.NumGoroutine()
	tr := &http.Transport{}
	c, _ := newClient(t, g, client.Options{HTTPClient: &http.Client{Transport: tr}, Ahead: 2})
	indices, errs := runEpoch(t, c, context.Background(), 0, -1, nil)
	var apiErr *client.APIError
	if fmt.Sprint(indices) != "[0 1]" || len(errs) != 1 || !errors.As(errs[0], &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("got batches %v, errors %v; want 0, 1, then the 404", indices, errs)
	}
	if !strings.Contains(errs[0].Error(), "epoch 0 batch 2") {
		t.Errorf("error %q does not say which batch failed", errs[0])
	}
	checkNoGoroutineLeak(t, before, tr)
}

func TestEpochParentCancelled(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Ahead: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	indices, errs := runEpoch(t, c, ctx, 0, -1, func(b *client.Batch) {
		if b.Index == 1 {
			cancel()
		}
	})
	if fmt.Sprint(indices) != "[0 1]" || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Errorf("got batches %v, errors %v; want 0, 1, then context.Canceled", indices, errs)
	}
}

func TestEpochPlanError(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Dataset: "missing"}})
	indices, errs := runEpoch(t, c, context.Background(), 0, -1, nil)
	var apiErr *client.APIError
	if len(indices) != 0 || len(errs) != 1 || !errors.As(errs[0], &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("got batches %v, errors %v; want only the 404", indices, errs)
	}
}

func TestEpochEmpty(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Dataset: "val", Params: shuffle.Params{BatchSize: 8, DropLast: true}}})
	indices, errs := runEpoch(t, c, context.Background(), 0, -1, nil)
	if len(indices) != 0 || len(errs) != 0 {
		t.Errorf("got batches %v, errors %v; want nothing", indices, errs)
	}
	if reqs := g.requests(); len(reqs) != 1 {
		t.Errorf("requests %q; want only the epoch plan", reqs)
	}
}

// TestEpochPinsParameters checks that an epoch's batches are requested
// with every parameter of the plan, not the gateway's defaults.
func TestEpochPinsParameters(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Params: shuffle.Params{BatchSize: 6}}})
	if _, errs := runEpoch(t, c, context.Background(), 2, -1, nil); len(errs) != 0 {
		t.Fatal(errs)
	}
	reqs := g.requests()
	if len(reqs) != 5 || reqs[0] != "/epoch/2?batch_size=6&drop_last=false&seed=0" {
		t.Fatalf("requests %q; want the plan then 4 batches", reqs)
	}
	// The plan's index version is pinned too.
	want := "batch_size=6&dataset=toy&drop_last=false&index=" + c.Index() + "&rank=0&seed=0&window=2&world=1"
	for i, r := range slices.Sorted(slices.Values(reqs[1:])) {
		if !strings.HasPrefix(r, fmt.Sprintf("/epoch/2/batch/%d?", i)) || query(t, r).Encode() != want {
			t.Errorf("batch request %q; want /epoch/2/batch/%d?%s", r, i, want)
		}
	}
}

// TestEpochKeepsColumns: the fields a job selects (columns=) are asked
// for with every batch of an epoch: a plan does not echo them, and the
// pinned query once dropped them, so that an epoch read every field of a
// dataset served in place.
func TestEpochKeepsColumns(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Columns: []string{"image", "label"}, Params: shuffle.Params{BatchSize: 6}}})
	if _, errs := runEpoch(t, c, context.Background(), 2, -1, nil); len(errs) != 0 {
		t.Fatal(errs)
	}
	reqs := g.requests()
	if len(reqs) != 5 {
		t.Fatalf("requests %q; want the plan then 4 batches", reqs)
	}
	for _, r := range reqs {
		if q := query(t, r); q.Get("columns") != "image,label" {
			t.Errorf("request %q: columns %q, want image,label", r, q.Get("columns"))
		}
	}
}

func TestEpochDetectsChangedPlan(t *testing.T) {
	tests := []struct {
		header, value string
	}{
		{"Brand-Epoch-Batches", "9"},
		{"Brand-Epoch-Samples", "21"},
		{"Brand-Index", "0123456789abcdef"},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			g := newFakeGateway(t)
			g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				if batchNumber(r) != 1 {
					return false
				}
				rec := g.render(r)
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.Header().Set(tt.header, tt.value)
				w.Write(rec.Body.Bytes())
				return true
			})
			c, _ := newClient(t, g, client.Options{})
			indices, errs := runEpoch(t, c, context.Background(), 0, -1, nil)
			if fmt.Sprint(indices) != "[0]" || len(errs) != 1 || !errors.Is(errs[0], client.ErrBadResponse) {
				t.Errorf("got batches %v, errors %v; want batch 0 then ErrBadResponse", indices, errs)
			}
		})
	}
}

// TestEpochRelease: an epoch whose batches are released as soon as they are
// read delivers exactly what one without releases does, so a released
// buffer is never handed out while its batch is still being filled or
// read; a released batch has no samples, and releasing twice (or nil) is
// harmless.
func TestEpochRelease(t *testing.T) {
	g := newFakeGateway(t)
	seed := uint64(5)
	read := func(release bool) []string {
		c, _ := newClient(t, g, client.Options{Ahead: 3, Job: api.Job{Params: shuffle.Params{Seed: seed, BatchSize: 3}}})
		var out []string
		for e := range 3 {
			for b, err := range c.Epoch(context.Background(), e) {
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, renderSamples(b.Samples))
				if release {
					b.Release()
					if b.Samples != nil {
						t.Fatalf("batch %d keeps %d samples after Release", b.Index, len(b.Samples))
					}
					b.Release()
				}
			}
		}
		return out
	}
	want, got := read(false), read(true)
	if !slices.Equal(got, want) {
		t.Errorf("with releases the epochs read\n%s\nwithout\n%s", strings.Join(got, "--\n"), strings.Join(want, "--\n"))
	}
	var nilBatch *client.Batch
	nilBatch.Release()
}

// TestEpochKeepsTheJobsName: the requests of an epoch spell out every
// parameter of its plan, and carry the job's name and weight too: the
// gateway follows the job by them.
func TestEpochKeepsTheJobsName(t *testing.T) {
	g := newFakeGateway(t)
	c, _ := newClient(t, g, client.Options{Job: api.Job{Name: "lr-3", Weight: 0.5}})
	for _, err := range c.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
	}
	batches := 0
	for _, r := range g.requests() {
		if !strings.Contains(r, "/batch/") {
			continue
		}
		batches++
		if q := query(t, r); q.Get("job") != "lr-3" || q.Get("weight") != "0.5" {
			t.Errorf("request %s lacks job=lr-3&weight=0.5", r)
		}
	}
	if batches == 0 {
		t.Fatal("no batch requests")
	}
}
