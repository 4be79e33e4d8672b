// Package hedge decides when a read that has not been answered is also
// asked elsewhere (a hedged request, as in "The Tail at Scale"), and
// bounds how often: a deadline learnt from the latencies of the answers
// observed, and a budget of hedges a second.
//
// # Why
//
// A peer that stops answering (cut off, its requests dropped, its
// machine stalled) used to cost a whole --peer-timeout (10 s) before its
// samples were read elsewhere: a synchronous job's step waited on it.
// A fixed shorter timeout would fail healthy peers on a loaded machine.
// The deadline here is learnt from what peers take now — a high
// quantile of the recent answers times a factor, within a floor and a
// ceiling — so it grows with load and never waits the timeout.
//
// # Costs
//
// A hedge asks a second node for samples the first may still send: up to
// twice a request's bytes on the network, and a store read of the chunk
// where the next holder is this node or a node that does not hold it.
// The budget (Config.Rate hedges a second, Config.Burst at once, a token
// bucket) bounds that extra load whatever the peers do: with every peer
// slow, at most Burst + Rate·t hedges start in t seconds; the rest wait
// for their peer as before, up to its timeout.
//
// # Concurrency
//
// A Policy is safe for concurrent use. Its clock is Config.Now, so that
// tests drive the budget without sleeping.
package hedge

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a Config's fields left zero.
const (
	DefaultQuantile = 0.95
	DefaultFactor   = 3.0
	DefaultFloor    = 50 * time.Millisecond
	DefaultCeiling  = time.Second
	DefaultRate     = 20.0 // hedges a second
	DefaultWindow   = 256  // latencies kept
	// minObserved is how many answers are observed before the deadline
	// is learnt from them; until then it is Config.Cold.
	minObserved = 16
	// relearn is how many new answers make the quantile computed again.
	relearn = 8
)

// Config configures a Policy. Zero fields take the defaults above.
type Config struct {
	// Quantile of the recent latencies, times Factor, is the deadline,
	// held within [Floor, Ceiling].
	Quantile       float64
	Factor         float64
	Floor, Ceiling time.Duration
	// Cold is the deadline until enough answers are observed to learn
	// one (the Ceiling if 0; held within [Floor, Ceiling]).
	Cold time.Duration
	// Rate is the budget's hedges a second and Burst how many may start
	// at once (Rate rounded up, at least 1, if 0). A negative Rate turns
	// hedging off: every hedge is refused.
	Rate  float64
	Burst int
	// Window is how many of the latest latencies the quantile is of.
	Window int
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Policy is the learnt deadline, the budget and their counts.
type Policy struct {
	c Config

	mu       sync.Mutex
	lat      []time.Duration // a ring of the latest Window latencies
	next     int             // where the next latency goes in lat
	fresh    int             // latencies observed since deadline was computed
	deadline time.Duration
	learnt   bool // deadline is of observed latencies, not Config.Cold
	tokens   float64
	last     time.Time // when tokens was last refilled

	started, won, refused atomic.Int64
}

// New returns a Policy of c, its budget full.
func New(c Config) *Policy {
	if c.Quantile <= 0 || c.Quantile > 1 {
		c.Quantile = DefaultQuantile
	}
	if c.Factor <= 0 {
		c.Factor = DefaultFactor
	}
	if c.Floor <= 0 {
		c.Floor = DefaultFloor
	}
	if c.Ceiling <= 0 {
		c.Ceiling = DefaultCeiling
	}
	c.Ceiling = max(c.Ceiling, c.Floor)
	if c.Cold <= 0 {
		c.Cold = c.Ceiling
	}
	c.Cold = min(max(c.Cold, c.Floor), c.Ceiling)
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Burst <= 0 {
		c.Burst = max(1, int(math.Ceil(c.Rate)))
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Policy{c: c, lat: make([]time.Duration, 0, c.Window), deadline: c.Cold, tokens: float64(c.Burst), last: c.Now()}
}

// Observe records the latency of a request answered (a hedge's loser,
// cancelled, is not one: only answers tell what the peers take).
func (p *Policy) Observe(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lat) < p.c.Window {
		p.lat = append(p.lat, d)
	} else {
		p.lat[p.next] = d
	}
	p.next = (p.next + 1) % p.c.Window
	p.fresh++
}

// Deadline is how long a request may go unanswered before it is hedged:
// Config.Cold until enough answers are observed, then Quantile of the
// latest latencies times Factor, within [Floor, Ceiling].
func (p *Policy) Deadline() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lat) >= minObserved && (p.fresh >= relearn || !p.learnt) {
		s := slices.Clone(p.lat)
		slices.Sort(s)
		q := s[min(len(s)-1, int(math.Ceil(p.c.Quantile*float64(len(s))))-1)]
		p.deadline = min(max(time.Duration(float64(q)*p.c.Factor), p.c.Floor), p.c.Ceiling)
		p.fresh, p.learnt = 0, true
	}
	return p.deadline
}

// Allow takes a hedge from the budget: true counts a hedge started,
// false one refused (the request waits for its first node).
func (p *Policy) Allow() bool {
	if p.c.Rate < 0 {
		p.refused.Add(1)
		return false
	}
	p.mu.Lock()
	now := p.c.Now()
	if el := now.Sub(p.last); el > 0 {
		p.tokens = min(float64(p.c.Burst), p.tokens+el.Seconds()*p.c.Rate)
		p.last = now
	}
	ok := p.tokens >= 1
	if ok {
		p.tokens--
	}
	p.mu.Unlock()
	if ok {
		p.started.Add(1)
	} else {
		p.refused.Add(1)
	}
	return ok
}

// Won counts a hedge that answered before the request it hedged.
func (p *Policy) Won() { p.won.Add(1) }

// Counts are a Policy's hedges started, won and refused by the budget.
type Counts struct{ Started, Won, Refused int64 }

// Counts returns the hedges counted so far.
func (p *Policy) Counts() Counts {
	return Counts{Started: p.started.Load(), Won: p.won.Load(), Refused: p.refused.Load()}
}

// Counters returns the counts' atomics, by outcome, for a registry to
// read (brand_peer_hedges_total).
func (p *Policy) Counters() map[string]*atomic.Int64 {
	return map[string]*atomic.Int64{"started": &p.started, "won": &p.won, "refused": &p.refused}
}
