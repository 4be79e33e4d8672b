package hedge

import (
	"sync"
	"testing"
	"time"
)

// clock is a Config.Now the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestDeadline: Config.Cold (the ceiling unless set) until enough answers
// are observed, then the
// quantile of the latest latencies times the factor, within the floor
// and the ceiling, following the latencies as they change.
func TestDeadline(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		c    Config
		lat  []time.Duration // observed, in order
		want time.Duration
	}{
		{"nothing observed: the ceiling", Config{Ceiling: 500 * ms}, nil, 500 * ms},
		{"too few observed: the ceiling", Config{Ceiling: 500 * ms}, repeat(5*ms, minObserved-1), 500 * ms},
		{"nothing observed: the cold deadline", Config{Ceiling: 3 * time.Second, Cold: 250 * ms}, nil, 250 * ms},
		{"too few observed: the cold deadline", Config{Ceiling: 3 * time.Second, Cold: 250 * ms}, repeat(2*time.Second, minObserved-1), 250 * ms},
		{"enough observed: learnt, past the cold deadline", Config{Ceiling: 3 * time.Second, Cold: 250 * ms, Floor: ms}, repeat(200*ms, minObserved), 600 * ms},
		{"a cold deadline held to the ceiling", Config{Ceiling: 100 * ms, Cold: 250 * ms}, nil, 100 * ms},
		{"a cold deadline held to the floor", Config{Floor: 100 * ms, Cold: 10 * ms}, nil, 100 * ms},
		{"the quantile times the factor", Config{Quantile: 0.9, Factor: 2, Floor: ms}, append(repeat(5*ms, 90), repeat(30*ms, 10)...), 10 * ms},
		{"a slow tail past the quantile", Config{Quantile: 0.9, Factor: 2, Floor: ms}, append(repeat(5*ms, 88), repeat(30*ms, 16)...), 60 * ms},
		{"held to the floor", Config{Floor: 50 * ms}, repeat(1*ms, 100), 50 * ms},
		{"held to the ceiling: a loaded machine's answers", Config{Ceiling: 300 * ms}, repeat(400*ms, 100), 300 * ms},
		{"the latest window only", Config{Window: 32, Factor: 2, Floor: ms}, append(repeat(400*ms, 100), repeat(10*ms, 40)...), 20 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.c)
			for _, d := range tc.lat {
				p.Observe(d)
				p.Deadline() // as a fetch asks, between answers
			}
			if got := p.Deadline(); got != tc.want {
				t.Errorf("Deadline() = %s, want %s", got, tc.want)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestBudget: a flood of hedges gets the burst at once and then Rate a
// second, whatever is asked; the rest are refused and counted.
func TestBudget(t *testing.T) {
	tests := []struct {
		name        string
		rate        float64
		burst       int
		asks        int           // hedges asked each tick
		tick        time.Duration // between ticks
		ticks       int
		wantStarted int64
	}{
		{"burst, then the rate", 10, 5, 100, 100 * time.Millisecond, 20, 5 + 10*2 - 1}, // 19 ticks after the first
		{"asking less than the rate: every hedge", 10, 5, 1, 200 * time.Millisecond, 10, 10},
		{"off", -1, 0, 10, time.Second, 3, 0},
		{"burst defaults to the rate", 4, 0, 50, time.Second, 3, 4 + 4 + 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1e9, 0)}
			p := New(Config{Rate: tc.rate, Burst: tc.burst, Now: clk.now})
			for i := range tc.ticks {
				if i > 0 {
					clk.add(tc.tick)
				}
				for range tc.asks {
					p.Allow()
				}
			}
			c := p.Counts()
			if c.Started != tc.wantStarted || c.Started+c.Refused != int64(tc.asks*tc.ticks) {
				t.Errorf("started %d, refused %d of %d asked; want %d started", c.Started, c.Refused, tc.asks*tc.ticks, tc.wantStarted)
			}
		})
	}
}

// TestBudgetConcurrent: asked from many goroutines at one instant, the
// budget starts no more than its burst.
func TestBudgetConcurrent(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	p := New(Config{Rate: 3, Burst: 7, Now: clk.now})
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 10 {
				p.Allow()
			}
		})
	}
	wg.Wait()
	if c := p.Counts(); c.Started != 7 || c.Refused != 640-7 {
		t.Errorf("counts %+v, want 7 started and the rest refused", c)
	}
}
