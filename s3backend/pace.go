package s3backend

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/internal/errkind"
	"golang.org/x/time/rate"
)

// Budget is what a store takes from a gateway, or a cluster of them: GETs
// (and HEADs) a second and bytes a second read, each 0 for no bound. S3
// answers 503 SlowDown past about 5,500 GETs a second per prefix; other
// stores answer 429 past their own limits, and every store bills
// requests and bytes.
type Budget struct {
	GETs  float64
	Bytes float64
}

// The least budgets a store may be given: a node reads its index and its
// chunks' tables through the budget before it is ready, at first at
// 1/64 of its share, so a budget under these would keep it from being
// ready for minutes, saying nothing.
const (
	MinBudgetGETs  = 1
	MinBudgetBytes = 1 << 20
)

// Check refuses a budget no store can be read under: a rate that is not
// a number, below 0, or above 0 and below the least (MinBudgetGETs,
// MinBudgetBytes). Zero is no bound.
func (b Budget) Check() error {
	for _, c := range []struct {
		name string
		v    float64
		min  float64
		unit string
	}{{"GETs", b.GETs, MinBudgetGETs, "GET"}, {"bytes", b.Bytes, MinBudgetBytes, "bytes"}} {
		switch {
		case math.IsNaN(c.v) || math.IsInf(c.v, 0) || c.v < 0:
			return fmt.Errorf("%w: the store's budget of %s a second is %v: give a number ≥ 0 (0: no bound)", ErrBudget, c.name, c.v)
		case c.v > 0 && c.v < c.min:
			return fmt.Errorf("%w: the store's budget of %s a second is %v, under the least of %v %s a second: a node reads its index through it before it is ready, at first at 1/64 of its share (0: no bound)", ErrBudget, c.name, c.v, c.min, c.unit)
		}
	}
	return nil
}

// ErrBudget marks a store budget that cannot be paced.
var ErrBudget = errkind.New(errkind.Invalid, "s3backend: store budget")

// The pacer's rule, AIMD: a throttled answer (503, 429) multiplies the
// rate in force by cutTo at once (CUBIC's β), at most once per cutEvery
// (the answers of one burst cut it once), never below minFactor of the
// node's share; each second without one adds growStep of the share back,
// up to the whole share.
const (
	cutEvery  = 250 * time.Millisecond
	cutTo     = 0.7
	minFactor = 1.0 / 64
	growStep  = 1.0 / 10
	// burstShare is the part of a second's budget a burst may take: the
	// rate is the share itself, and no second carries more than the
	// share and one burst (a token bucket of the burst's size).
	burstShare = 0.05
	// minByteBurst is the least byte burst: a request's bytes are waited
	// for in pieces of at most the burst.
	minByteBurst = 1 << 20
)

// Pacer is an http.RoundTripper that paces the GETs and HEADs of every
// store sharing it (Config.Transport) under this node's share of a Budget,
// and lowers its rate when the store says it is throttling. Requests of
// other methods pass unpaced. A read that waits is slowed, never failed:
// its context's deadline is the only bound.
//
// A cluster's nodes split the budget by the membership they agree on
// (SetShare): no coordination beyond what the cluster already has, and
// the total stays within the budget as long as each node paces its own.
type Pacer struct {
	budget Budget
	next   http.RoundTripper
	now    func() time.Time

	mu      sync.Mutex
	share   float64 // this node's part of the budget: 1/members
	factor  float64 // the rate in force is budget × share × factor
	changed time.Time
	gets    *rate.Limiter // nil: no bound
	bytes   *rate.Limiter
	stats   PaceStats
}

// PaceStats are a Pacer's counts since it was made, and the rates in
// force now.
type PaceStats struct {
	// Throttled counts answers 503 or 429; Cuts the halvings they made.
	Throttled, Cuts int64
	// Waits counts requests that waited for the budget, WaitSeconds
	// their waits.
	Waits       int64
	WaitSeconds float64
	// GETs and Bytes are the rates in force (0: no bound); Share the
	// node's part of the budget; BurstGETs and BurstBytes the most a
	// second carries beyond the rate.
	GETs, Bytes, Share    float64
	BurstGETs, BurstBytes int
}

// NewPacer paces requests through next (http.DefaultTransport if nil)
// under budget, this node taking all of it until SetShare says otherwise.
func NewPacer(budget Budget, next http.RoundTripper) *Pacer {
	if next == nil {
		next = http.DefaultTransport
	}
	p := &Pacer{budget: budget, next: next, now: time.Now, share: 1, factor: 1}
	if budget.GETs > 0 {
		p.gets = rate.NewLimiter(0, 1)
	}
	if budget.Bytes > 0 {
		p.bytes = rate.NewLimiter(0, minByteBurst)
	}
	p.changed = p.now()
	p.setLocked()
	return p
}

// SetShare makes this node's part of the budget share (a cluster of n
// agreed members: 1/n).
func (p *Pacer) SetShare(share float64) {
	if share <= 0 || share > 1 {
		share = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.share = share
	p.setLocked()
}

// Stats are the pacer's counts and rates now.
func (p *Pacer) Stats() PaceStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.growLocked()
	return p.stats
}

// setLocked sets the limiters to the rate in force.
func (p *Pacer) setLocked() {
	f := p.share * p.factor
	p.stats.Share = p.share
	// The rate is the share: a token bucket of the burst's size lets
	// any window of a second carry at most the share and the burst.
	if p.gets != nil {
		r := p.budget.GETs * f
		burst := max(1, int(r*burstShare))
		setRate(p.gets, p.now(), r, burst)
		p.stats.GETs, p.stats.BurstGETs = r, burst
	}
	if p.bytes != nil {
		r := p.budget.Bytes * f
		burst := max(minByteBurst, int(r*burstShare))
		setRate(p.bytes, p.now(), r, burst)
		p.stats.Bytes, p.stats.BurstBytes = r, burst
	}
}

// setRate sets l to r with burst at the time at, keeping the times it
// gave the requests that wait on it: a limiter owing tokens has sent
// them into the future at its old rate, and at a higher one the next
// reservation would fall among them (the old rate and the new together
// for a while). Its debt grows by the ratio of the rates, so what comes
// next is paced after them. A fall leaves the debt as it is: the next
// request waits a little past the backlog, never among it.
func setRate(l *rate.Limiter, at time.Time, r float64, burst int) {
	old := float64(l.Limit())
	owed := -l.TokensAt(at)
	l.SetLimitAt(at, rate.Limit(r))
	l.SetBurstAt(at, burst)
	if owed <= 0 || old <= 0 || math.IsInf(old, 1) || r <= old {
		return
	}
	for more := owed * (r/old - 1); more > 0; {
		k := min(burst, int(math.Ceil(more)))
		l.ReserveN(at, k)
		more -= float64(k)
	}
}

// growLocked adds back growStep for each whole second since the last
// change.
func (p *Pacer) growLocked() {
	if p.factor >= 1 {
		return
	}
	at := p.now()
	steps := int(at.Sub(p.changed) / time.Second)
	if steps == 0 {
		return
	}
	p.factor = min(1, p.factor+float64(steps)*growStep)
	p.changed = p.changed.Add(time.Duration(steps) * time.Second)
	p.setLocked()
}

// throttled is the store's answer that it throttles: the rate is halved.
func (p *Pacer) throttled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Throttled++
	at := p.now()
	if at.Sub(p.changed) < cutEvery && p.stats.Cuts > 0 && p.factor < 1 {
		return
	}
	p.factor = max(minFactor, p.factor*cutTo)
	p.changed = at
	p.stats.Cuts++
	p.setLocked()
}

// wait waits for one request (get) and for n bytes.
func (p *Pacer) wait(ctx context.Context, get bool, n int64) error {
	for {
		d, rest, cancel := p.reserve(get, n)
		if d > time.Millisecond {
			p.mu.Lock()
			p.stats.Waits++
			p.stats.WaitSeconds += d.Seconds()
			p.mu.Unlock()
		}
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				cancel()
				return ctx.Err()
			}
		}
		if rest == 0 {
			return nil
		}
		get, n = false, rest
	}
}

// reserve takes, at the clock's now, a request's GET (get) and as many of
// its n bytes as one burst holds: how long to wait before sending them,
// the bytes left for the next reservation, and how to give the
// reservation back (a request that leaves before it is sent).
func (p *Pacer) reserve(get bool, n int64) (wait time.Duration, rest int64, cancel func()) {
	p.mu.Lock()
	p.growLocked()
	gets, bytes := p.gets, p.bytes
	p.mu.Unlock()
	now := p.now()
	var rs []*rate.Reservation
	if gets != nil && get {
		r := gets.ReserveN(now, 1)
		rs = append(rs, r)
		wait = r.DelayFrom(now)
	}
	if bytes != nil && n > 0 {
		piece := min(n, int64(bytes.Burst()))
		r := bytes.ReserveN(now, int(piece))
		rs = append(rs, r)
		wait = max(wait, r.DelayFrom(now))
		rest = n - piece
	}
	return wait, rest, func() {
		for _, r := range rs {
			r.CancelAt(now)
		}
	}
}

// RoundTrip paces a GET or HEAD, then sends it; a 503 or 429 answer
// lowers the rate (the store's client retries it, under the lowered
// rate). The rate in force is the budget's share, with a burst of 5 % of
// it (at least one GET, or a MiB): no second carries more than the share
// and the burst.
func (p *Pacer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return p.next.RoundTrip(req)
	}
	n, ranged := rangeLength(req.Header.Get("Range"))
	if err := p.wait(req.Context(), true, n); err != nil {
		return nil, err
	}
	resp, err := p.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		p.throttled()
	case http.StatusOK:
		if !ranged && req.Method == http.MethodGet && resp.ContentLength > 0 && p.bytes != nil {
			// A whole object's size is known once it answers: its bytes
			// are waited for before they are read.
			if err := p.wait(req.Context(), false, resp.ContentLength); err != nil {
				resp.Body.Close()
				return nil, err
			}
		}
	}
	return resp, nil
}

// rangeLength is a "bytes=a-b" Range's length.
func rangeLength(h string) (int64, bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return 0, false
	}
	a, b, ok := strings.Cut(spec, "-")
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || hi < lo {
		return 0, false
	}
	return hi - lo + 1, true
}
