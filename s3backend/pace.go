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
	// liftAfter is how long a bound learned from the store's throttling
	// (no GET budget) stands at its top without a cut before it is
	// lifted: the store's limit then was a passing one (other clients'
	// load).
	liftAfter = time.Minute
	// liftFloorAfter is how long a learned bound no higher than its floor
	// stands without a cut: the store refused while it answered next to
	// nothing (an outage), which teaches no rate, and once it answers
	// again the node reads as it did before.
	liftFloorAfter = time.Second
	// learnedTop is the most of a learned rate the bound grows back to:
	// the store took the learned rate and throttled past it, so growing
	// back to it would meet its limit again and again (a store counting
	// whole seconds throttles every read of the rest of a second,
	// retries too).
	learnedTop = 0.9
)

// Pacer is an http.RoundTripper that paces the GETs and HEADs of every
// store sharing it (Config.Transport) under this node's share of a Budget,
// and lowers its rate when the store says it is throttling. Requests of
// other methods pass unpaced. A read that waits is slowed, never failed:
// its context's deadline is the only bound, and the time it waits here is
// not time the store kept it idle (Config.IdleTimeout's clock stops).
//
// With no GET budget its GETs go unpaced until the store throttles; then
// the rate the store answered them at stands for the budget (learned.go),
// cut and grown back as a budget's would be, up to 0.9 of it, never below
// a floor (MinLearnedGETs, or a quarter of the most GETs the store
// answered in a second lately), and after a minute at its top without a
// cut the bound is lifted (a bound at its floor, an outage's, a second
// after its last cut). A refusal now and then (under a tenth of the
// GETs of the last second or two) teaches no bound and keeps none at its
// floor: it says nothing of the rate, and the store client's retry takes
// it; a learned rate above its floor is cut by every refusal. A store's
// own throttling is met with a slower read, not with errors once the
// store client's retries run out; an outage, every GET refused, cannot
// teach a rate that starves the reads after it.
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
	// With no GET budget: the GETs the store answered lately, and the
	// rate it answered at when it began to throttle, which stands for the
	// budget (the node's own: share does not apply); 0 while unbound.
	answered answered
	learned  float64
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
		if p.budget.GETs == 0 {
			r = max(p.learned*p.factor, p.answered.floor(p.now()))
		}
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
// change, up to the whole budget or learnedTop of a learned rate.
func (p *Pacer) growLocked() {
	at := p.now()
	top := 1.0
	if p.budget.GETs == 0 {
		top = learnedTop
	}
	if p.factor >= top {
		p.liftLocked(at)
		return
	}
	steps := int(at.Sub(p.changed) / time.Second)
	if steps == 0 {
		return
	}
	p.factor = min(top, p.factor+float64(steps)*growStep)
	if p.factor > top-1e-9 { // tenths added in floating point
		p.factor = top
	}
	p.changed = p.changed.Add(time.Duration(steps) * time.Second)
	p.setLocked()
}

// liftLocked lifts a learned bound (no GET budget) that has stood at its
// top for liftAfter without a cut, or one no higher than its floor (the
// lesson of an outage: learned.go) a second after its last cut.
func (p *Pacer) liftLocked(at time.Time) {
	if p.budget.GETs != 0 || p.gets == nil {
		return
	}
	after := liftAfter
	if p.learned <= p.answered.floor(at) {
		after = liftFloorAfter
	}
	if at.Sub(p.changed) < after {
		return
	}
	p.gets, p.learned = nil, 0
	p.stats.GETs, p.stats.BurstGETs = 0, 0
}

// leastFactorLocked is the least factor a cut leaves: minFactor of a
// budget's share, or of a learned rate the part its floor is.
func (p *Pacer) leastFactorLocked(at time.Time) float64 {
	if p.budget.GETs != 0 || p.learned == 0 {
		return minFactor
	}
	return min(learnedTop, max(minFactor, p.answered.floor(at)/p.learned))
}

// answer takes the status the store answered a GET or HEAD with (0: no
// answer): a 503 or 429 lowers the rate; with no GET budget, any other
// answer counts toward the rate the store takes, should it throttle, and
// a failure (a proxy's 502 while its store is down, no answer) toward
// its being down (learned.go).
func (p *Pacer) answer(status int) {
	switch {
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		p.throttled()
	case p.budget.GETs != 0:
	case status == 0 || status >= http.StatusInternalServerError:
		p.mu.Lock()
		p.answered.fail(p.now())
		p.mu.Unlock()
	default:
		p.mu.Lock()
		p.answered.add(p.now())
		p.mu.Unlock()
	}
}

// throttled is the store's answer that it throttles: the rate is cut
// (with no GET budget, learned first, when the store refuses a share of
// the GETs, not one now and then: learned.go).
func (p *Pacer) throttled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Throttled++
	at := p.now()
	if p.budget.GETs == 0 {
		// A refusal now and then teaches nothing and keeps no bound at
		// its floor up; once a rate is learned above it, every refusal
		// cuts it, as a budget's (the store took less than it taught).
		p.answered.refuse(at)
		if !p.answered.limiting(at) && (p.gets == nil || p.learned <= p.answered.floor(at)) {
			return
		}
	}
	if p.gets == nil && p.budget.GETs == 0 {
		// No budget: the rate the store answered at when it began to
		// throttle stands for one, never under the floor (an outage
		// answers nothing and would teach nothing but the floor).
		p.learned = p.answered.floor(at)
		if !p.answered.down(at) {
			p.learned = max(p.learned, p.answered.rate(at))
		}
		p.gets = rate.NewLimiter(0, 1)
		p.factor = 1
	} else if at.Sub(p.changed) < cutEvery && p.stats.Cuts > 0 && p.factor < 1 {
		return
	}
	p.factor = max(p.leastFactorLocked(at), p.factor*cutTo)
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
	now := p.now() // not after growLocked's: a limiter set at a later time would not take now
	p.mu.Lock()
	p.growLocked()
	gets, bytes := p.gets, p.bytes
	p.mu.Unlock()
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
// and the burst. A read's idle clock (Config.IdleTimeout) stands still
// while it waits here: the store has not been asked yet.
func (p *Pacer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return p.next.RoundTrip(req)
	}
	n, ranged := rangeLength(req.Header.Get("Range"))
	if err := p.waitNotIdle(req.Context(), true, n); err != nil {
		return nil, err
	}
	resp, err := p.next.RoundTrip(req)
	if err != nil {
		if req.Context().Err() == nil { // not the caller's leaving
			p.answer(0)
		}
		return resp, err
	}
	p.answer(resp.StatusCode)
	if resp.StatusCode == http.StatusOK && !ranged && req.Method == http.MethodGet && resp.ContentLength > 0 && p.bytes != nil {
		// A whole object's size is known once it answers: its bytes are
		// waited for before they are read.
		if err := p.waitNotIdle(req.Context(), false, resp.ContentLength); err != nil {
			resp.Body.Close()
			return nil, err
		}
	}
	return resp, nil
}

// waitNotIdle is wait with the idle clock of the read ctx carries, if
// any, stopped: a wait for the budget longer than the idle timeout would
// otherwise abandon a request the store never saw, and a read retried
// into the same wait gives up (the fault suite's reads after 9 attempts).
func (p *Pacer) waitNotIdle(ctx context.Context, get bool, n int64) error {
	idle := idleOf(ctx)
	idle.pause()
	defer idle.resume()
	return p.wait(ctx, get, n)
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
