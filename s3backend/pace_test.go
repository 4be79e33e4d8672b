package s3backend

import (
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// answering is a transport that answers every request with status, and
// counts them.
type answering struct {
	status atomic.Int32
	n      atomic.Int64
}

func (a *answering) RoundTrip(req *http.Request) (*http.Response, error) {
	a.n.Add(1)
	return &http.Response{StatusCode: int(a.status.Load()), Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func get(t *testing.T, rt http.RoundTripper, rng string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://store/b/k", nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestPacerHoldsTheBudget sends 60 GETs from 4 goroutines at a budget of
// 200 a second (a burst of 10, 190 a second): they take at least the 50
// after the burst over the rate, and PUTs are not paced.
func TestPacerHoldsTheBudget(t *testing.T) {
	a := &answering{}
	a.status.Store(200)
	p := NewPacer(Budget{GETs: 200}, a)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 15 {
				get(t, p, "")
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took < 260*time.Millisecond {
		t.Fatalf("60 GETs at 200 a second took %v, want at least 0.27 s", took)
	}
	req, _ := http.NewRequest(http.MethodPut, "http://store/b/k", nil)
	start = time.Now()
	for range 50 {
		if _, err := p.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("50 PUTs took %v: paced", took)
	}
}

// TestPacerBytes paces ranged reads by their length.
func TestPacerBytes(t *testing.T) {
	a := &answering{}
	a.status.Store(206)
	p := NewPacer(Budget{Bytes: 8 << 20}, a) // 7 MiB a second, bursts of 1 MiB
	start := time.Now()
	for range 4 {
		get(t, p, "bytes=0-1048575") // 1 MiB each
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("4 MiB at 7 MiB a second after a burst of 1 took %v, want at least 0.4 s", took)
	}
}

// TestPacerAIMD: throttled answers halve the rate once per burst, down to
// the floor; each quiet second adds a sixteenth back; a share splits it.
func TestPacerAIMD(t *testing.T) {
	a := &answering{}
	a.status.Store(503)
	p := NewPacer(Budget{GETs: 6400}, a)
	clock := time.Unix(1e9, 0)
	p.now = func() time.Time { return clock }
	for range 5 {
		get(t, p, "") // one burst: one cut
	}
	if s := p.Stats(); s.GETs != 6400*cutTo || s.Throttled != 5 || s.Cuts != 1 {
		t.Fatalf("after a burst of 5 throttled answers: %+v, want 4480 a second, 1 cut", s)
	}
	for range 20 {
		clock = clock.Add(cutEvery)
		get(t, p, "")
	}
	if s := p.Stats(); s.GETs != 100 {
		t.Fatalf("after 21 cuts: %v a second, want the floor 6400/64 = 100", s.GETs)
	}
	a.status.Store(200)
	clock = clock.Add(3 * time.Second)
	if s := p.Stats(); math.Abs(s.GETs-(100+3*640)) > 1e-9 {
		t.Fatalf("3 quiet seconds later: %v a second, want 2020", s.GETs)
	}
	clock = clock.Add(time.Minute)
	p.SetShare(0.25)
	if s := p.Stats(); s.GETs != 1600 || s.Share != 0.25 {
		t.Fatalf("a quarter share: %+v", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://store/b/k", nil)
	p2 := NewPacer(Budget{GETs: 1}, a)
	p2.RoundTrip(req) // takes the one token
	if _, err := p2.RoundTrip(req); err == nil {
		t.Fatal("a paced request whose context ended was sent")
	}
}
