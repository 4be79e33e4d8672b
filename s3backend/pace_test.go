package s3backend

import (
	"context"
	"io"
	"math"
	"net/http"
	"slices"
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
// 200 a second (a burst of 10): they take at least the 50 after the
// burst over the rate, 0.25 s, and PUTs are not paced.
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
	if took := time.Since(start); took < 245*time.Millisecond {
		t.Fatalf("60 GETs at 200 a second took %v, want at least 0.25 s", took)
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
	p := NewPacer(Budget{Bytes: 8 << 20}, a) // 8 MiB a second, bursts of 1 MiB
	start := time.Now()
	for range 4 {
		get(t, p, "bytes=0-1048575") // 1 MiB each
	}
	if took := time.Since(start); took < 370*time.Millisecond {
		t.Fatalf("4 MiB at 8 MiB a second after a burst of 1 took %v, want at least 0.375 s", took)
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

// paced sends requests one after another on a clock of its own, each of
// bytes (0: a GET of no known length), for span of that clock: when each
// was let go, and what it carried (a GET or bytes).
func paced(t *testing.T, p *Pacer, bytes int64, span time.Duration) (at []time.Time, n []float64) {
	t.Helper()
	clock := time.Unix(1e9, 0)
	p.now = func() time.Time { return clock }
	p.mu.Lock()
	p.setLocked() // the limiters' times from the clock
	p.mu.Unlock()
	start := clock
	for clock.Sub(start) < span {
		get, rest := true, bytes
		for {
			d, left, _ := p.reserve(get, rest)
			clock = clock.Add(d)
			carried := float64(rest - left)
			if bytes == 0 {
				carried = 1
			}
			at, n = append(at, clock), append(n, carried)
			if left == 0 {
				break
			}
			get, rest = false, left
		}
	}
	return at, n
}

// busiestSecond is the most any window of a second of at carried.
func busiestSecond(at []time.Time, n []float64) float64 {
	most, sum, lo := 0.0, 0.0, 0
	for hi := range at {
		sum += n[hi]
		for at[hi].Sub(at[lo]) >= time.Second {
			sum -= n[lo]
			lo++
		}
		most = max(most, sum)
	}
	return most
}

// TestPacerPacesAtItsShare: a node's paced rate is its share of the
// budget, and no window of a second carries more than the share and the
// stated burst. The reproduction: --store-bytes-per-sec 1MiB paced about
// 0.5 MiB a second (the burst subtracted from the rate) while one second
// carried 1.5 MiB, and a GET share of 2.5 a second paced at 1.5.
func TestPacerPacesAtItsShare(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget Budget
		share  float64
		bytes  int64
		rate   float64
	}{
		{"1 MiB a second, reads of 256 KiB", Budget{Bytes: 1 << 20}, 1, 256 << 10, 1 << 20},
		{"1 MiB a second, reads of 4 MiB", Budget{Bytes: 1 << 20}, 1, 4 << 20, 1 << 20},
		{"a quarter of 64 MiB a second", Budget{Bytes: 64 << 20}, 0.25, 1 << 20, 16 << 20},
		{"2.5 GETs a second", Budget{GETs: 5}, 0.5, 0, 2.5},
		{"200 GETs a second", Budget{GETs: 200}, 1, 0, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPacer(c.budget, &answering{})
			p.SetShare(c.share)
			at, n := paced(t, p, c.bytes, 60*time.Second)
			s := p.Stats()
			burst := float64(s.BurstGETs)
			if c.bytes > 0 {
				burst = float64(s.BurstBytes)
			}
			var total float64
			for _, x := range n {
				total += x
			}
			// After the first burst, the rate.
			got := (total - burst) / at[len(at)-1].Sub(at[0]).Seconds()
			if math.Abs(got-c.rate)/c.rate > 0.01 {
				t.Errorf("paced %.3f a second, want the share's %.3f", got, c.rate)
			}
			if most := busiestSecond(at, n); most > c.rate+burst {
				t.Errorf("a second carried %.0f, over the share %.0f and the burst %.0f", most, c.rate, burst)
			}
		})
	}
}

// TestPacerRiseKeepsItsBacklog: requests waiting on the pacer hold times
// it gave them at the old rate; a rise (a member left, or a cut grown
// back) paces what comes next after them at the new rate, so no window of
// a second carries the old rate and the new one together. The
// reproduction, integration TestStoreBudgetAcrossAJoin: after a leave a
// second saw 159 GETs of a budget of 150, the members' new reservations
// falling among those their backlog already held.
func TestPacerRiseKeepsItsBacklog(t *testing.T) {
	for _, c := range []struct {
		name       string
		budget     Budget
		bytes      int64
		from, to   float64
		rate       float64 // after the rise
		queued     int     // requests waiting at the rise
		afterwards int
	}{
		{"GETs, a third to a half", Budget{GETs: 150}, 0, 1.0 / 3, 0.5, 75, 150, 300},
		{"GETs, a quarter to all", Budget{GETs: 40}, 0, 0.25, 1, 40, 30, 120},
		{"bytes, a half to all", Budget{Bytes: 8 << 20}, 1 << 20, 0.5, 1, 8 << 20, 12, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPacer(c.budget, &answering{})
			clock := time.Unix(1e9, 0)
			p.now = func() time.Time { return clock }
			p.SetShare(c.from)
			var at []time.Time
			var n []float64
			reserve := func() {
				get, rest := true, c.bytes
				for {
					d, left, _ := p.reserve(get, rest)
					carried := float64(rest - left)
					if c.bytes == 0 {
						carried = 1
					}
					at, n = append(at, clock.Add(d)), append(n, carried)
					if left == 0 {
						return
					}
					get, rest = false, left
				}
			}
			// The queue: requests that all asked at once, each told when.
			for range c.queued {
				reserve()
			}
			clock = clock.Add(500 * time.Millisecond)
			p.SetShare(c.to)
			for range c.afterwards {
				reserve()
				// The next asks when this one is sent, or now if later.
				clock = slices.MaxFunc([]time.Time{clock, at[len(at)-1]}, time.Time.Compare)
			}
			slices.SortStableFunc(at, time.Time.Compare) // n is uniform per case
			s := p.Stats()
			burst := float64(s.BurstGETs)
			if c.bytes > 0 {
				burst = float64(s.BurstBytes)
			}
			if most := busiestSecond(at, n); most > c.rate+burst {
				t.Errorf("a second carried %.0f, over the new share %.0f and the burst %.0f", most, c.rate, burst)
			}
		})
	}
}

// TestPacerLearnsTheStoresLimit: with no budget, GETs go unpaced until
// the store refuses a tenth of them; then the rate they were answered at
// stands for the budget (cut at once, grown back a tenth a second to 0.9 of it), and a
// minute there without a throttled answer the bound is lifted. The
// reproduction (issue 91, item 12; issue 98, item 13): with no budget
// set, a store that throttled sent 503s on to plain HTTP ranks once the
// store client's retries ran out (4–5 errors in three epochs), its rate
// never lowered.
func TestPacerLearnsTheStoresLimit(t *testing.T) {
	a := &answering{}
	a.status.Store(200)
	p := NewPacer(Budget{}, a)
	clock := time.Unix(1e9, 0)
	p.now = func() time.Time { return clock }
	for range 400 { // 400 GETs a second, unpaced
		get(t, p, "")
		clock = clock.Add(2500 * time.Microsecond)
	}
	if s := p.Stats(); s.GETs != 0 || s.Waits != 0 {
		t.Fatalf("no budget, no throttling: %+v, want no bound and no waits", s)
	}
	a.status.Store(503)
	for range 44 { // under a tenth of the second's GETs: passing refusals
		get(t, p, "")
	}
	if s := p.Stats(); s.Throttled != 44 || s.GETs != 0 {
		t.Fatalf("44 refused after 400 answered: %+v, want no bound", s)
	}
	for range 3 { // the 45th a tenth: one burst of throttled answers, one cut
		get(t, p, "")
	}
	if s := p.Stats(); s.Throttled != 47 || s.Cuts != 1 || math.Abs(s.GETs-400*cutTo) > 1e-9 {
		t.Fatalf("throttled at 400 GETs a second: %+v, want paced at %v, one cut", s, 400*cutTo)
	}
	a.status.Store(200)
	var wait time.Duration
	burst := p.Stats().BurstGETs
	for range burst + 28 { // at one instant: paced at 280 a second
		wait, _, _ = p.reserve(true, 0)
	}
	// The bound starts with one GET in hand; the two throttled GETs after
	// the cut took their places in it.
	if want := time.Duration(float64(2+burst+28-1) / (400 * cutTo) * float64(time.Second)); wait < want-time.Millisecond || wait > want+time.Millisecond {
		t.Fatalf("the %d-th GET at once waits %v, want %v", burst+28, wait, want)
	}
	clock = clock.Add(time.Second)
	if s := p.Stats(); math.Abs(s.GETs-400*(cutTo+growStep)) > 1e-9 {
		t.Fatalf("a quiet second later: %v a second, want %v", s.GETs, 400*(cutTo+growStep))
	}
	clock = clock.Add(2 * time.Second)
	if s := p.Stats(); s.GETs != 400*learnedTop {
		t.Fatalf("grown back: %v a second, want %v of the rate the store throttled at", s.GETs, learnedTop)
	}
	clock = clock.Add(liftAfter - time.Second)
	if s := p.Stats(); s.GETs != 400*learnedTop {
		t.Fatalf("%v at its top: %v a second, want %v", liftAfter-time.Second, s.GETs, 400*learnedTop)
	}
	clock = clock.Add(time.Second)
	if s := p.Stats(); s.GETs != 0 {
		t.Fatalf("%v at its top: %v a second, want the bound lifted", liftAfter, s.GETs)
	}
}

// TestPacerLearnedFloor: a rate learned from the store's throttling never
// holds a node under MinLearnedGETs or a quarter of the most GETs the
// store answered in a second lately, however long every GET is refused,
// and grows back from there once the store answers again (a bound at its
// floor, an outage's lesson, is lifted); a refusal now and then teaches
// nothing. The reproduction (issue 98, item 13): the
// fault suite's MinIO restart answered every GET 503, the rate answered
// over the last second (a GET or less) became the bound and its cuts took
// it to 1/64 of that; 7 s after the store came back it paced at 0.7 GETs
// a second (the outage rows fail so before the floor).
func TestPacerLearnedFloor(t *testing.T) {
	tests := []struct {
		name      string
		answered  int           // GETs the store answered in the second before
		lull      time.Duration // then nothing asked for this long
		refused   time.Duration // then a GET each 10 ms for this long (0: one),
		every     int           // every one of this many refused (negative: the others failed, 502)
		wantLeast float64       // the least rate in force while refused (0: never bound)
		wantAfter float64       // 7 s after, the store answering (0: lifted)
	}{
		{"a limit met at 400 a second", 400, 0, 500 * time.Millisecond, 1, 400 * cutTo, 400 * learnedTop},
		{"an outage after 400 a second", 400, 0, 5 * time.Second, 1, 400 * floorOfPeak, 400 * learnedTop},
		{"an outage after 400 a second and a lull", 400, 3 * time.Second, 5 * time.Second, 1, 400 * floorOfPeak, 0},
		{"an outage from the start", 0, 0, 5 * time.Second, 1, MinLearnedGETs, 0},
		{"an outage after 20 a second", 20, 0, 5 * time.Second, 1, MinLearnedGETs, 20 * learnedTop},
		{"one in 18 refused at 100 a second", 100, 0, 5 * time.Second, 18, 0, 0},
		{"one refused after a lull", 400, 3 * time.Second, 0, 1, 0, 0},
		{"down after 400 a second, one in 18 refused", 400, 0, 5 * time.Second, -18, 400 * floorOfPeak, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPacer(Budget{}, nil)
			clock := time.Unix(1e9, 0)
			p.now = func() time.Time { return clock }
			for i := range tc.answered {
				clock = time.Unix(1e9, 0).Add(time.Duration(i) * time.Second / time.Duration(tc.answered))
				p.answer(http.StatusOK)
			}
			clock = time.Unix(1e9+1, 0).Add(tc.lull)
			least := math.Inf(1)
			for i, end := 1, clock.Add(tc.refused); ; i, clock = i+1, clock.Add(10*time.Millisecond) {
				switch {
				case i%tc.every == 0:
					p.answer(http.StatusServiceUnavailable)
				case tc.every < 0:
					p.answer(http.StatusBadGateway)
				default:
					p.answer(http.StatusOK)
				}
				if r := p.Stats().GETs; r > 0 {
					least = min(least, r)
				}
				if !clock.Before(end) {
					break
				}
			}
			if math.IsInf(least, 1) {
				least = 0
			}
			if math.Abs(least-tc.wantLeast) > 1e-9 {
				t.Errorf("the least rate in force while refused: %v GETs a second, want %v", least, tc.wantLeast)
			}
			for range 7 {
				clock = clock.Add(time.Second)
				for range 5 {
					p.answer(http.StatusOK)
				}
				if s := p.Stats(); s.GETs != 0 && s.GETs < least-1e-9 { // 0: no bound
					t.Fatalf("the store answering again: %v GETs a second, under the %v in force while refused", s.GETs, least)
				}
			}
			if s := p.Stats(); math.Abs(s.GETs-tc.wantAfter) > 1e-9 {
				t.Errorf("7 s after: %v GETs a second, want %v", s.GETs, tc.wantAfter)
			}
		})
	}
}
