package task

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/brandgw/brand/internal/seeded"
)

// Domains of the plan's seeded draws (seeded.Seeds).
const (
	domainDraw    = 0x7461736b64726177 // "taskdraw": draw j of lease L
	domainRevisit = 0x7461736b72657673 // "taskrevs": a retired prompt at a pass's start
)

// maxAdvances bounds the passes one lease may start: with every prompt
// retired and revisits rare, a lease starts at most this many passes
// looking for one.
const maxAdvances = 64

// Where a prompt is.
const (
	inPool    uint8 = iota // in the current pass, not drawn yet
	inFront                // at the front of the plan (its lease expired, or it is behind the pass)
	inNext                 // done with the current pass, waiting for the next
	inLease                // leased
	inRetired              // retired
)

type prompt struct {
	served  uint32 // passes done: the pass it is in is served
	redraws uint16 // drawn again in its pass
	solves  uint16
	where   uint8
	revisit bool  // retired, and drawn again at a pass's start
	hn, hat uint8 // answers in its history, and the slot of the next
}

// openLease is a lease not yet answered whole nor expired.
type openLease struct {
	gen     string
	req     string // the request's ID, if it gave one
	t       uint64 // when made
	step    uint64
	prompts []uint32
	passes  []uint32
	done    []bool
	left    int
}

// Lease status, by lease number.
const (
	leaseOpen uint8 = iota
	leaseAnswered
	leaseExpired
)

// Counted is a counted answer: step s is Counted[s·B : s·B+B].
type Counted struct {
	Prompt, Pass, Version uint32
	Lease                 uint64
	Passes, N             uint16
	scoreN                uint32
	scoreAt               uint64 // in all the scores counted, forgotten ones included
}

// Plan is a task job's plan: the state every decision is made from, a
// pure function of its spec and the records applied to it (Apply). It is
// not safe for concurrent use (Stream guards it).
type Plan struct {
	spec    Spec
	pol     policy
	ttl     uint64
	prompts []prompt
	hist    []float32 // spec.History a prompt
	tree    fenwick
	cur     uint32
	front   []uint32
	fhead   int
	next    []uint32
	retired []uint32 // in the order retired; revisits keep this order

	clock   uint64
	tally   tally
	leases  LeaseBook
	trainer uint64
	steps   StepLog

	stats struct {
		redrawn, rested, expired int
		rows, repeats            int64
		// passCounted are the answers counted since the current pass
		// began, lastPass those of the pass before (-1: none ended).
		passCounted, lastPass int
	}
	digest uint64
}

// NewPlan is the plan of spec (with its defaults, checked) before any
// record: pass 0, every prompt in it.
func NewPlan(spec Spec) *Plan {
	spec = spec.WithDefaults()
	n := spec.Prompts
	p := &Plan{spec: spec, pol: policies[spec.Policy](spec), leases: newLeaseBook(uint64(time.Duration(spec.TTL).Milliseconds())),
		steps: StepLog{b: uint64(spec.Step)}, prompts: make([]prompt, n), hist: make([]float32, n*spec.History)}
	w := make([]uint64, n)
	for i := range w {
		w[i] = fixedWeight(p.pol.weight(nil))
	}
	p.tree = newFenwick(w)
	p.tally = newTally(n, n) // no answer yet: every policy weighs 1
	p.digest = seeded.Mix64(0x7461736b64696765 ^ spec.Seed)
	p.stats.lastPass = -1
	return p
}

// Spec is the plan's spec, with its defaults.
func (p *Plan) Spec() Spec { return p.spec }

// Outcome is what applying a record decided: a lease made, answers
// applied, or the record's refusal.
type Outcome struct {
	Err    error
	Lease  *Lease
	Answer *Answer
}

// Lease is a lease made: its number, generator, step, time made (ms
// since the job was made) and prompts, each with the pass it is for.
type Lease struct {
	ID      uint64
	Gen     string
	Step    uint64
	T       uint64
	Prompts []uint32
	Passes  []uint32
}

// Answer is what a lease's feedback did.
type Answer struct {
	Applied, Counted, Redrawn, Rested, Retired, Repeats int
	Steps                                               []uint64
}

// Apply applies r: time passes to r.T (leases past their deadline expire
// first), then r's request is decided. Its outcome is the same on every
// node that applies the same records in the same order.
func (p *Plan) Apply(r Record) Outcome {
	p.clock = max(p.clock, r.T)
	p.expire()
	switch r.Kind {
	case recLease, recLeaseReq:
		return p.lease(r)
	case recFeedback:
		return p.answer(r)
	case recTrainer:
		p.trainer = max(p.trainer, min(r.Step, p.steps.Full()))
		p.steps.forget(p.trainer, uint64(p.spec.Keep))
	}
	return Outcome{}
}

// Clock is the time of the last record applied, in ms since the job was
// made.
func (p *Plan) Clock() uint64 { return p.clock }

// expire ends the leases whose deadline has passed: their unanswered
// prompts go to the front of the plan, in the order of the leases and of
// each one's prompts.
func (p *Plan) expire() {
	p.leases.expire(p.clock, func(q uint32) {
		p.pushFront(q)
		p.stats.expired++
		p.mix(uint64(q) | 1<<40)
	})
}

// Window is how many prompts may be leased now: up to the trainer's step
// plus ahead steps, beyond those counted and those leased.
func (p *Plan) Window() int {
	allowed := int64(p.trainer+uint64(p.spec.Ahead))*int64(p.spec.Step) - int64(p.steps.Total()) - int64(p.leases.leased)
	return int(max(0, min(allowed, MaxWindow)))
}

// lease decides a lease: the front of the plan first, then draws from
// the pass, starting passes as the last ones run out.
func (p *Plan) lease(r Record) Outcome {
	if l, ok := p.leases.ByRequest(r.Gen, r.Req); ok {
		// Asked again: the lease the request made, not a second.
		return Outcome{Lease: &l}
	}
	k := min(int(r.K), p.spec.MaxLease, p.Window())
	if k == 0 {
		return Outcome{Err: p.nothingToLease()}
	}
	id := p.leases.Made() + 1
	l := &openLease{gen: r.Gen, req: r.Req, t: p.clock, step: (p.steps.Total() + uint64(p.leases.leased)) / uint64(p.spec.Step)}
	for len(l.prompts) < k && p.fhead < len(p.front) {
		q := p.front[p.fhead]
		p.fhead++
		l.prompts = append(l.prompts, q)
	}
	if p.fhead > 1024 && p.fhead*2 > len(p.front) {
		p.front = append(p.front[:0], p.front[p.fhead:]...)
		p.fhead = 0
	}
	advances := 0
	for j := uint64(0); len(l.prompts) < k; j++ {
		if p.tree.sum == 0 {
			if advances == maxAdvances || !p.advance() {
				break
			}
			advances++
			continue
		}
		s1, _ := seeded.Seeds(p.spec.Seed, id, domainDraw, j)
		u, _ := bits.Mul64(s1, p.tree.sum)
		q := uint32(p.tree.find(u))
		p.tree.set(int(q), 0)
		l.prompts = append(l.prompts, q)
	}
	if len(l.prompts) == 0 {
		return Outcome{Err: p.nothingToLease()}
	}
	l.passes = make([]uint32, len(l.prompts))
	l.done = make([]bool, len(l.prompts))
	l.left = len(l.prompts)
	p.mix(id)
	for i, q := range l.prompts {
		p.tally.set(&p.prompts[q].where, inLease)
		l.passes[i] = p.prompts[q].served
		p.mix(uint64(q))
	}
	p.leases.add(l, p.clock)
	return Outcome{Lease: &Lease{ID: id, Gen: l.gen, Step: l.step, T: l.t, Prompts: l.prompts, Passes: l.passes}}
}

// starvedHint is what a refusal adds when the last pass that ended
// counted nothing: every prompt left gives a flat group (dynamic sampling
// rests it) or is retired, and no step fills.
func (p *Plan) starvedHint() string {
	if p.stats.lastPass != 0 {
		return ""
	}
	return fmt.Sprintf("; pass %d counted no prompt: every prompt left gave a flat group (redraws=%d rests it) or is retired — retire what the model solves (curriculum retire=), or lower redraws", p.cur-1, p.spec.Redraws)
}

func (p *Plan) nothingToLease() error {
	if len(p.retired) == len(p.prompts) && p.spec.Revisit == 0 {
		return fmt.Errorf("%w: all %d prompts of the job are retired", ErrDone, len(p.prompts))
	}
	if p.Window() == 0 {
		return fmt.Errorf("%w: the plan is %d steps ahead of its trainer (at step %d): lease again when the trainer moves on or answers come back",
			ErrWindow, p.spec.Ahead, p.trainer)
	}
	return fmt.Errorf("%w: every prompt that is not retired is leased or answered for this pass (%d leased); lease again when answers come back or leases expire",
		ErrWindow, p.leases.leased)
}

// advance starts the next pass, with the prompts done with this one that
// are not leased, and the retired prompts the pass revisits. It reports
// whether the pass has prompts to draw; it starts none while this pass
// has prompts waiting elsewhere and none to start it with.
func (p *Plan) advance() bool {
	revisits := p.spec.Revisit > 0 && len(p.retired) > 0 && p.leases.leased == 0 && p.fhead == len(p.front)
	if len(p.next) == 0 && !revisits {
		return false
	}
	p.cur++
	p.stats.lastPass, p.stats.passCounted = p.stats.passCounted, 0
	for _, q := range p.next {
		if pr := &p.prompts[q]; pr.where == inNext && pr.served == p.cur {
			p.poolAdd(q)
		}
	}
	p.next = p.next[:0]
	if p.spec.Revisit > 0 {
		keep := p.retired[:0]
		limit := p.spec.Revisit * math.Exp2(64)
		for _, q := range p.retired {
			s1, _ := seeded.Seeds(p.spec.Seed, uint64(p.cur), domainRevisit, uint64(q))
			if float64(s1) < limit {
				pr := &p.prompts[q]
				pr.revisit, pr.served = true, p.cur
				p.tally.enter(p.cur)
				p.poolAdd(q)
				continue
			}
			keep = append(keep, q)
		}
		p.retired = keep
	}
	return p.tree.sum > 0
}

// answer applies a lease's feedback.
func (p *Plan) answer(r Record) Outcome {
	if r.Lease == 0 || r.Lease > p.leases.Made() {
		return Outcome{Err: fmt.Errorf("%w: no lease %s of this job", ErrLease, p.LeaseName(r.Lease))}
	}
	l := p.leases.open[r.Lease]
	if l == nil {
		if p.leases.status[r.Lease-1] == leaseExpired {
			return Outcome{Err: &ExpiredError{Lease: p.LeaseName(r.Lease), Deadline: p.Time(p.leases.Deadline(r.Lease))}}
		}
		return Outcome{Answer: &Answer{Repeats: len(r.Rows)}}
	}
	at := make(map[uint32]int, len(l.prompts))
	for i, q := range l.prompts {
		at[q] = i
	}
	for _, w := range r.Rows {
		if _, ok := at[w.Prompt]; !ok {
			return Outcome{Err: fmt.Errorf("%w: prompt %d is not in lease %s", ErrBadAnswer, w.Prompt, p.LeaseName(r.Lease))}
		}
		if err := checkRow(w); err != nil {
			return Outcome{Err: err}
		}
	}
	a := &Answer{}
	for _, w := range r.Rows {
		i := at[w.Prompt]
		if l.done[i] {
			a.Repeats++
			p.stats.repeats++
			continue
		}
		p.leases.answered(r.Lease, l, i)
		a.Applied++
		p.stats.rows++
		p.resolve(w, l.passes[i], r.Lease, a)
	}
	return Outcome{Answer: a}
}

// checkRow refuses an answer out of range.
func checkRow(w Row) error {
	if w.Scores == nil {
		if w.N == 0 || w.Passes > w.N {
			return fmt.Errorf("%w: prompt %d: passes=%d of n=%d: 0 ≤ passes ≤ n, n ≥ 1", ErrBadAnswer, w.Prompt, w.Passes, w.N)
		}
		return nil
	}
	if len(w.Scores) == 0 {
		return fmt.Errorf("%w: prompt %d: no scores", ErrBadAnswer, w.Prompt)
	}
	for _, s := range w.Scores {
		if !(s >= 0 && s <= 1) {
			return fmt.Errorf("%w: prompt %d: score %v: each score is in [0, 1]", ErrBadAnswer, w.Prompt, s)
		}
	}
	return nil
}

// Tally is an answer's pass count of n, and whether its group has no
// variance.
func Tally(w Row, passScore float64) (passes, n int, flat bool) {
	if w.Scores == nil {
		return int(w.Passes), int(w.N), w.Passes == 0 || w.Passes == w.N
	}
	flat = true
	for _, s := range w.Scores {
		if float64(s) >= passScore {
			passes++
		}
		flat = flat && s == w.Scores[0]
	}
	return passes, len(w.Scores), flat
}

// resolve applies one prompt's answer for pass pass: its history and
// solves, then its verdict: counted, drawn again in its pass, or rested
// for it; then where it goes.
func (p *Plan) resolve(w Row, pass uint32, lease uint64, a *Answer) {
	pr := &p.prompts[w.Prompt]
	passes, n, flat := Tally(w, *p.spec.PassScore)
	if p.spec.Flat == FlatPasses {
		flat = passes == 0 || passes == n
	}
	k := p.spec.History
	wasBand := p.weight(w.Prompt) == 1
	p.hist[int(w.Prompt)*k+int(pr.hat)] = float32(float64(passes) / float64(n))
	pr.hat = uint8((int(pr.hat) + 1) % k)
	pr.hn = uint8(min(int(pr.hn)+1, k))
	p.tally.band(wasBand, p.weight(w.Prompt) == 1)
	switch {
	case passes == n:
		pr.solves = uint16(min(int(pr.solves)+1, math.MaxUint16))
	case pr.revisit:
		pr.solves = 0
	}
	pr.revisit = false
	counts := !(p.spec.Redraws > 0 && flat)
	if w.Counts != 0 {
		counts = w.Counts == 2
	}
	verdict := uint64(0)
	switch {
	case counts:
		s := p.steps.add(Counted{Prompt: w.Prompt, Pass: pass, Version: w.Version, Lease: lease, Passes: uint16(passes), N: uint16(n)}, w.Scores)
		if len(a.Steps) == 0 || a.Steps[len(a.Steps)-1] != s {
			a.Steps = append(a.Steps, s)
		}
		a.Counted++
		p.stats.passCounted++
		p.tally.serve(pr.served, pr.served+1)
		pr.served++
		pr.redraws = 0
	case int(pr.redraws) < p.spec.Redraws:
		pr.redraws++
		a.Redrawn++
		p.stats.redrawn++
		verdict = 1
	default:
		p.tally.serve(pr.served, pr.served+1)
		pr.served++
		pr.redraws = 0
		a.Rested++
		p.stats.rested++
		verdict = 2
	}
	if p.pol.retires(int(pr.solves)) {
		p.tally.leave(pr.served)
		p.tally.set(&pr.where, inRetired)
		p.retired = append(p.retired, w.Prompt)
		a.Retired++
		verdict |= 4
	} else {
		p.place(w.Prompt)
	}
	p.mix(uint64(w.Prompt) | verdict<<32 | 1<<41)
}

// place puts a prompt that is not leased where its pass says: behind the
// current pass, at the front; in it, in its pool; done with it, waiting
// for the next.
func (p *Plan) place(q uint32) {
	pr := &p.prompts[q]
	switch {
	case pr.served < p.cur:
		p.pushFront(q)
	case pr.served == p.cur:
		p.poolAdd(q)
	default:
		p.tally.set(&pr.where, inNext)
		p.next = append(p.next, q)
	}
}

func (p *Plan) pushFront(q uint32) {
	p.tally.set(&p.prompts[q].where, inFront)
	p.front = append(p.front, q)
}

func (p *Plan) poolAdd(q uint32) {
	p.tally.set(&p.prompts[q].where, inPool)
	p.tree.set(int(q), fixedWeight(p.weight(q)))
}

// weight is the policy's weight of prompt q now.
func (p *Plan) weight(q uint32) float64 {
	var buf [MaxHistory]float32
	return p.pol.weight(p.rates(q, buf[:0]))
}

// rates is prompt q's history, oldest first, in buf's array when it
// wraps.
func (p *Plan) rates(q uint32, buf []float32) []float32 {
	pr := p.prompts[q]
	k := p.spec.History
	h := p.hist[int(q)*k : int(q)*k+k]
	if int(pr.hn) < k {
		return h[:pr.hn]
	}
	return append(append(buf, h[pr.hat:]...), h[:pr.hat]...)
}

// mix folds a decision into the digest.
func (p *Plan) mix(v uint64) { p.digest = seeded.Mix64(p.digest ^ v) }

// Digest is the digest of every decision made so far.
func (p *Plan) Digest() uint64 { return p.digest }

// Steps are the plan's counted answers, step by step.
func (p *Plan) Steps() *StepLog { return &p.steps }

// Leases are the plan's leases.
func (p *Plan) Leases() *LeaseBook { return &p.leases }

// Trainer is the trainer's step.
func (p *Plan) Trainer() uint64 { return p.trainer }

// LeaseName is lease id's name: the job's tag and its number.
func (p *Plan) LeaseName(id uint64) string { return fmt.Sprintf("%s-%d", p.spec.Tag, id) }

// Time is a plan time as a wall time.
func (p *Plan) Time(t uint64) time.Time { return time.UnixMilli(p.spec.Made + int64(t)) }

// Leasable reports whether a lease now (at t) could be given prompts.
func (p *Plan) Leasable(t uint64) bool {
	if p.leases.ExpiresBy(t) {
		return true
	}
	if p.Window() == 0 {
		return false
	}
	return p.fhead < len(p.front) || p.tree.sum > 0 || len(p.next) > 0 ||
		(p.spec.Revisit > 0 && len(p.retired) > 0 && p.leases.leased == 0)
}

// Counts is where the plan's prompts are, and its answers.
type Counts struct {
	Pass, PassesDone                                 uint32
	Pending, Leased, Front, Waiting, Retired, InBand int
	Counted, Redrawn, Rested, Expired                int
	// LastPassCounted are the answers counted in the last pass that
	// ended (counted from its start to the next's), -1 before one ends.
	LastPassCounted int
	Rows, Repeats   int64
	OpenLeases      int
}

// Count is where the plan's prompts are, and its answers, as kept (tally).
func (p *Plan) Count() Counts {
	t := &p.tally
	return Counts{Pass: p.cur, PassesDone: t.passesDone(p.cur), Counted: int(p.steps.Total()), Redrawn: p.stats.redrawn,
		Rested: p.stats.rested, Expired: p.stats.expired, Rows: p.stats.rows, Repeats: p.stats.repeats, LastPassCounted: p.stats.lastPass,
		OpenLeases: p.leases.OpenCount(), Pending: t.where[inPool], Leased: t.where[inLease], Front: t.where[inFront],
		Waiting: t.where[inNext], Retired: t.where[inRetired], InBand: t.inBand}
}

// InBand reports whether the policy weighs prompt q 1 now, and Retired
// whether it is retired.
func (p *Plan) InBand(q uint32) bool  { return p.weight(q) == 1 }
func (p *Plan) Retired(q uint32) bool { return p.prompts[q].where == inRetired }

// fenwick is a Fenwick tree of integer weights: sums are exact, so every
// node draws alike.
type fenwick struct {
	t   []uint64 // 1-based
	w   []uint64
	sum uint64
	top int // the largest power of 2 ≤ n
}

func newFenwick(w []uint64) fenwick {
	f := fenwick{t: make([]uint64, len(w)+1), w: w}
	for i, v := range w {
		f.t[i+1] += v
		if j := (i + 1) + ((i + 1) & -(i + 1)); j <= len(w) {
			f.t[j] += f.t[i+1]
		}
		f.sum += v
	}
	if len(w) > 0 {
		f.top = 1 << (bits.Len(uint(len(w))) - 1)
	}
	return f
}

// set sets weight i to v.
func (f *fenwick) set(i int, v uint64) {
	d := v - f.w[i] // two's complement: adding d subtracts when v < w
	f.w[i] = v
	f.sum += d
	for j := i + 1; j < len(f.t); j += j & -j {
		f.t[j] += d
	}
}

// find is the index i whose weights' span [prefix(i), prefix(i+1))
// holds u < sum.
func (f *fenwick) find(u uint64) int {
	pos := 0
	for step := f.top; step > 0; step >>= 1 {
		if n := pos + step; n < len(f.t) && f.t[n] <= u {
			pos = n
			u -= f.t[n]
		}
	}
	return pos
}
