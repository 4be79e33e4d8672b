package task

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/brandgw/brand/internal/seeded"
	"github.com/brandgw/brand/shuffle"
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
	inPool     uint8 = iota // in the current pass, not drawn yet
	inFront                 // at the front of the plan (its lease expired, or it is behind the pass)
	inNext                  // done with the current pass, waiting for the next
	inLease                 // leased
	inRetired               // retired
	inExcluded              // excluded (an edit of the job): never leased again
)

type prompt struct {
	served  uint32 // passes done: the pass it is in is served
	local   uint32 // its ID in its domain's dataset
	redraws uint16 // drawn again in its pass
	solves  uint16
	dom     uint16 // its domain
	where   uint8
	revisit bool  // retired, and drawn again at a pass's start
	hn, hat uint8 // answers in its history, and the slot of the next
}

// domain is one prompt dataset of a job (domains.go): its prompts, by
// their IDs in the plan (global: a domain's first prompts are numbered
// after the domains before it, the prompts appended to any domain after
// every prompt before them), and its own passes: the current one's
// pool, its front, those waiting for its next, and its retired prompts.
type domain struct {
	ids     []uint32 // by local ID
	index   string   // the index version its prompts are keys of (an append moves it)
	cur     uint32
	tree    fenwick // the pool's weights, by local ID
	front   []uint32
	fhead   int
	next    []uint32
	retired []uint32 // in the order retired; revisits keep this order
	leased  int      // its prompts in open leases, not answered
	// passCounted are the answers counted since the current pass began,
	// lastPass those of the pass before (-1: none ended).
	passCounted, lastPass int
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
	dom                   uint16
	scoreN                uint32
	scoreAt               uint64 // in its domain's scores counted, forgotten ones included
}

// Plan is a task job's plan: the state every decision is made from, a
// pure function of its spec and the records applied to it (Apply). It is
// not safe for concurrent use (Stream guards it).
type Plan struct {
	promptSet
	spec Spec
	ttl  uint64
	rule *stepRule

	clock   uint64
	leases  LeaseBook
	trainer uint64
	steps   StepLog

	stats struct {
		redrawn, rested, expired, excluded int
		rows, repeats                      int64
	}
	digest uint64
}

// NewPlan is the plan of spec (with its defaults, checked) before any
// record: pass 0, every prompt in it.
func NewPlan(spec Spec) *Plan {
	spec = spec.WithDefaults()
	n := spec.Prompts
	p := &Plan{spec: spec, leases: newLeaseBook(uint64(time.Duration(spec.TTL).Milliseconds())),
		promptSet: promptSet{pol: policies[spec.Policy](spec), history: spec.History, seed: spec.Seed, revisit: spec.Revisit,
			shared: spec.DomainPasses == PassesShared && len(spec.Domains) > 1, prompts: make([]prompt, n), hist: make([]float32, n*spec.History)}}
	sizes, weights := []int{n}, []uint64{1}
	if len(spec.Domains) > 0 {
		sizes, weights = nil, domainWeights(spec.Domains)
		for _, d := range spec.Domains {
			sizes = append(sizes, d.Prompts)
		}
	}
	p.rule, _ = newStepRule(spec.Step, []shuffle.SchedulePhase{{Weights: weights}}) // checked with the spec
	p.steps = newStepLog(uint64(spec.Step), len(sizes), p.rule)
	q := 0
	for d, size := range sizes {
		dm := &domain{ids: make([]uint32, size), lastPass: -1}
		if len(spec.Domains) > 0 {
			dm.index = spec.Domains[d].Index
		} else {
			dm.index = spec.Index
		}
		w := make([]uint64, size)
		for i := range w {
			w[i] = fixedWeight(p.pol.weight(nil))
			dm.ids[i] = uint32(q)
			p.prompts[q].local, p.prompts[q].dom = uint32(i), uint16(d)
			q++
		}
		dm.tree = newFenwick(w)
		p.doms = append(p.doms, dm)
	}
	p.tally = newTally(n, n) // no answer yet: every policy weighs 1
	p.digest = seeded.Mix64(0x7461736b64696765 ^ spec.Seed)
	return p
}

// promptSet is a plan's prompts: each one's place, history and pass,
// its domains' passes, and the policy that weighs them. The plan decides
// what its records ask of them (Plan.Apply); the set keeps where each
// prompt is and draws it.
type promptSet struct {
	pol     policy
	history int     // answers a prompt's history holds
	seed    uint64  // the job's: its draws and revisits
	revisit float64 // a retired prompt's chance to be drawn again at a pass's start
	shared  bool    // a domain whose pass runs out ends the job's (PassesShared)
	prompts []prompt
	hist    []float32 // history a prompt
	doms    []*domain
	tally   tally
}

// Spec is the plan's spec, with its defaults.
func (p *Plan) Spec() Spec { return p.spec }

// Outcome is what applying a record decided: a lease made, answers
// applied, or the record's refusal.
type Outcome struct {
	Err    error
	Lease  *Lease
	Answer *Answer
	Edited *Edited
}

// Lease is a lease made: its number, generator, step, time made (ms
// since the job was made) and prompts, each with the pass it is for.
type Lease struct {
	ID  uint64
	Gen string
	// Req is the request ID the lease was asked with ("" none): a
	// generator whose ask got no answer finds its lease by it.
	Req     string
	Step    uint64
	T       uint64
	Prompts []uint32
	Passes  []uint32
}

// Answer is what a lease's feedback did. Excluded are the answers to
// prompts excluded since their lease was made: taken, never counted.
type Answer struct {
	Applied, Counted, Redrawn, Rested, Retired, Repeats, Excluded int
	Steps                                                         []uint64
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
	case recExclude:
		return p.exclude(r)
	case recAppend:
		return p.append(r)
	case recRatios:
		return p.ratios(r)
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
		p.doms[p.prompts[q].dom].leased--
		if p.prompts[q].where == inExcluded {
			return // excluded while leased: it goes nowhere
		}
		p.pushFront(q)
		p.stats.expired++
		p.mix(uint64(q) | 1<<40)
	})
}

// Window is how many prompts may be leased now: up to the trainer's step
// plus ahead steps, beyond those counted and those leased (of each
// domain, its share of those steps).
func (p *Plan) Window() int {
	var allowed int64
	for d := range p.doms {
		allowed += p.quota(d)
	}
	return int(max(0, min(allowed, MaxWindow)))
}

// quota is how many of domain d's prompts may be leased now: its slots
// in the steps up to the trainer's plus ahead, beyond those counted and
// leased.
func (p *Plan) quota(d int) int64 {
	end := p.rule.before(d, p.trainer+uint64(p.spec.Ahead))
	return max(0, int64(end)-int64(p.steps.doms[d].total())-int64(p.doms[d].leased))
}

// lease decides a lease: prompt by prompt, the domain whose earliest
// slot no counted or leased prompt covers is in the earliest step (of
// one domain: every prompt its), and of it its front of the plan first,
// then draws from its pass, starting passes as the last ones run out.
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
	l := &openLease{gen: r.Gen, req: r.Req, t: p.clock, step: p.firstOpenStep()}
	dr := drawing{id: id}
	quota := make([]int64, len(p.doms))
	slot := make([]uint64, len(p.doms)) // each domain's next slot to cover
	for d := range p.doms {
		quota[d] = p.quota(d)
		slot[d] = p.steps.doms[d].total() + uint64(p.doms[d].leased)
	}
	dry := make([]bool, len(p.doms))
	for len(l.prompts) < k {
		d := -1
		var at uint64
		for e := range p.doms {
			if quota[e] == 0 || dry[e] {
				continue
			}
			if s := p.rule.stepOf(e, slot[e]); d < 0 || s < at {
				d, at = e, s
			}
		}
		if d < 0 {
			break
		}
		q, ok := p.take(d, &dr)
		if !ok {
			dry[d] = true
			continue
		}
		l.prompts = append(l.prompts, q)
		quota[d]--
		slot[d]++
	}
	for _, dm := range p.doms {
		if dm.fhead > 1024 && dm.fhead*2 > len(dm.front) {
			dm.front = append(dm.front[:0], dm.front[dm.fhead:]...)
			dm.fhead = 0
		}
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
		p.doms[p.prompts[q].dom].leased++
		l.passes[i] = p.prompts[q].served
		p.mix(uint64(q))
	}
	p.leases.add(l, p.clock)
	return Outcome{Lease: &Lease{ID: id, Gen: l.gen, Req: l.req, Step: l.step, T: l.t, Prompts: l.prompts, Passes: l.passes}}
}

// firstOpenStep is the step of the earliest slot no counted or leased
// prompt covers: the step a lease is for.
func (p *Plan) firstOpenStep() uint64 {
	if len(p.doms) == 1 {
		return (p.steps.Total() + uint64(p.leases.leased)) / uint64(p.spec.Step)
	}
	first := uint64(math.MaxUint64)
	for d, dm := range p.doms {
		if p.rule.before(d, p.rule.stepOf(d, 0)+1) == 0 {
			continue // a domain no step takes from
		}
		first = min(first, p.rule.stepOf(d, p.steps.doms[d].total()+uint64(dm.leased)))
	}
	return first
}

// drawing is a lease's draws: its number, and the draws made so far
// (draw j of lease L uses splitmix64(seed, L, j)), each pass started
// counted as one.
type drawing struct {
	id       uint64
	j        uint64
	advances int
}

// take is domain d's next prompt for a lease: its front first, then a
// draw from its pass, starting its next pass (or the job's, with shared
// passes) as the last runs out; false when it has none to give.
func (p *promptSet) take(d int, dr *drawing) (uint32, bool) {
	dm := p.doms[d]
	for dm.fhead < len(dm.front) {
		q := dm.front[dm.fhead]
		dm.fhead++
		if p.prompts[q].where == inFront {
			return q, true
		}
		// Excluded while at the front: passed over.
	}
	for {
		if dm.tree.sum == 0 {
			if dr.advances == maxAdvances || !p.advance(d) {
				return 0, false
			}
			dr.advances++
			dr.j++
			continue
		}
		s1, _ := seeded.Seeds(p.seed, dr.id, domainDraw, dr.j)
		dr.j++
		u, _ := bits.Mul64(s1, dm.tree.sum)
		local := dm.tree.find(u)
		dm.tree.set(local, 0)
		return dm.ids[local], true
	}
}

// starvedHint is what a refusal adds when the last pass that ended
// counted nothing: every prompt left gives a flat group (dynamic sampling
// rests it) or is retired, and no step fills.
func (p *Plan) starvedHint() string {
	for d, dm := range p.doms {
		if dm.lastPass != 0 {
			continue
		}
		of := ""
		if len(p.doms) > 1 {
			of = " of domain " + p.spec.Domains[d].Dataset
		}
		return fmt.Sprintf("; pass %d%s counted no prompt: every prompt left gave a flat group (redraws=%d rests it) or is retired — retire what the model solves (curriculum retire=), or lower redraws", dm.cur-1, of, p.spec.Redraws)
	}
	return ""
}

func (p *Plan) nothingToLease() error {
	if p.tally.where[inRetired]+p.tally.where[inExcluded] == len(p.prompts) && p.spec.Revisit == 0 {
		return fmt.Errorf("%w: all %d prompts of the job are retired%s", ErrDone, len(p.prompts), p.excludedNote())
	}
	if p.Window() == 0 {
		return fmt.Errorf("%w: the plan is %d steps ahead of its trainer (at step %d): lease again when the trainer moves on or answers come back",
			ErrWindow, p.spec.Ahead, p.trainer)
	}
	return fmt.Errorf("%w: every prompt that is not retired is leased or answered for this pass (%d leased); lease again when answers come back or leases expire",
		ErrWindow, p.leases.leased)
}

// excludedNote names the excluded among prompts that are all retired.
func (p *Plan) excludedNote() string {
	if n := p.tally.where[inExcluded]; n > 0 {
		return fmt.Sprintf(" or excluded (%d)", n)
	}
	return ""
}

// advance starts domain d's next pass (with shared passes, the job's:
// every domain's), with the prompts done with this one that are not
// leased, and the retired prompts the pass revisits. It reports whether
// d's pass has prompts to draw; it starts none while d's pass has
// prompts waiting elsewhere and none to start it with.
func (p *promptSet) advance(d int) bool {
	dm := p.doms[d]
	revisits := p.revisit > 0 && len(dm.retired) > 0 && dm.leased == 0 && dm.fhead == len(dm.front)
	if len(dm.next) == 0 && !revisits {
		return false
	}
	if p.shared {
		for e := range p.doms {
			if e != d {
				p.endPass(e)
			}
		}
		for e := range p.doms {
			p.startPass(e)
		}
		return dm.tree.sum > 0
	}
	p.startPass(d)
	return dm.tree.sum > 0
}

// endPass ends domain d's pass before it runs out (the job's pass ends,
// shared): the prompts of its pool not drawn yet are of its next pass,
// and stay in its pool.
func (p *promptSet) endPass(d int) {
	dm := p.doms[d]
	for _, q := range dm.ids {
		if pr := &p.prompts[q]; pr.where == inPool && pr.served == dm.cur {
			p.tally.serve(pr.served, pr.served+1)
			pr.served++
		}
	}
}

// startPass starts domain d's next pass: its waiting prompts, and the
// retired ones it revisits.
func (p *promptSet) startPass(d int) {
	dm := p.doms[d]
	dm.cur++
	dm.lastPass, dm.passCounted = dm.passCounted, 0
	for _, q := range dm.next {
		if pr := &p.prompts[q]; pr.where == inNext && pr.served == dm.cur {
			p.poolAdd(q)
		}
	}
	dm.next = dm.next[:0]
	if p.revisit > 0 {
		keep := dm.retired[:0]
		limit := p.revisit * math.Exp2(64)
		for _, q := range dm.retired {
			if p.prompts[q].where != inRetired {
				continue // excluded since
			}
			s1, _ := seeded.Seeds(p.seed, uint64(dm.cur), domainRevisit, uint64(q))
			if float64(s1) < limit {
				pr := &p.prompts[q]
				pr.revisit, pr.served = true, dm.cur
				p.tally.enter(dm.cur)
				p.poolAdd(q)
				continue
			}
			keep = append(keep, q)
		}
		dm.retired = keep
	}
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
		p.doms[p.prompts[w.Prompt].dom].leased--
		a.Applied++
		p.stats.rows++
		if p.prompts[w.Prompt].where == inExcluded {
			// Excluded since its lease was made: taken, never counted.
			a.Excluded++
			p.mix(uint64(w.Prompt) | 1<<44)
			continue
		}
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
		s := p.steps.add(int(pr.dom), Counted{Prompt: w.Prompt, Pass: pass, Version: w.Version, Lease: lease, Passes: uint16(passes), N: uint16(n), dom: pr.dom}, w.Scores)
		if !slices.Contains(a.Steps, s) {
			a.Steps = append(a.Steps, s)
		}
		a.Counted++
		p.doms[pr.dom].passCounted++
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
		p.doms[pr.dom].retired = append(p.doms[pr.dom].retired, w.Prompt)
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
func (p *promptSet) place(q uint32) {
	pr := &p.prompts[q]
	dm := p.doms[pr.dom]
	switch {
	case pr.served < dm.cur:
		p.pushFront(q)
	case pr.served == dm.cur:
		p.poolAdd(q)
	default:
		p.tally.set(&pr.where, inNext)
		dm.next = append(dm.next, q)
	}
}

func (p *promptSet) pushFront(q uint32) {
	p.tally.set(&p.prompts[q].where, inFront)
	dm := p.doms[p.prompts[q].dom]
	dm.front = append(dm.front, q)
}

func (p *promptSet) poolAdd(q uint32) {
	pr := &p.prompts[q]
	p.tally.set(&pr.where, inPool)
	p.doms[pr.dom].tree.set(int(pr.local), fixedWeight(p.weight(q)))
}

// weight is the policy's weight of prompt q now.
func (p *promptSet) weight(q uint32) float64 {
	var buf [MaxHistory]float32
	return p.pol.weight(p.rates(q, buf[:0]))
}

// rates is prompt q's history, oldest first, in buf's array when it
// wraps.
func (p *promptSet) rates(q uint32, buf []float32) []float32 {
	pr := p.prompts[q]
	k := p.history
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
	for d, dm := range p.doms {
		if p.quota(d) > 0 && (dm.fhead < len(dm.front) || dm.tree.sum > 0 || len(dm.next) > 0 ||
			(p.spec.Revisit > 0 && len(dm.retired) > 0 && dm.leased == 0)) {
			return true
		}
	}
	return false
}

// Counts is where the plan's prompts are, and its answers.
type Counts struct {
	Pass, PassesDone                                           uint32
	Pending, Leased, Front, Waiting, Retired, InBand, Excluded int
	Counted, Redrawn, Rested, Expired                          int
	// LastPassCounted are the answers counted in the last pass that
	// ended (counted from its start to the next's), -1 before one ends.
	LastPassCounted int
	Rows, Repeats   int64
	OpenLeases      int
}

// Count is where the plan's prompts are, and its answers, as kept (tally).
func (p *Plan) Count() Counts {
	t := &p.tally
	// Of several domains: the least pass any is in, and the answers of
	// the last passes that ended, every domain's (-1 before each has
	// ended one).
	cur, last := p.doms[0].cur, 0
	for _, dm := range p.doms {
		cur = min(cur, dm.cur)
		if dm.lastPass < 0 || last < 0 {
			last = -1
		} else {
			last += dm.lastPass
		}
	}
	return Counts{Pass: cur, PassesDone: t.passesDone(cur), Counted: int(p.steps.Total()), Redrawn: p.stats.redrawn,
		Rested: p.stats.rested, Expired: p.stats.expired, Rows: p.stats.rows, Repeats: p.stats.repeats, LastPassCounted: last,
		OpenLeases: p.leases.OpenCount(), Pending: t.where[inPool], Leased: t.where[inLease], Front: t.where[inFront],
		Waiting: t.where[inNext], Retired: t.where[inRetired], InBand: t.inBand, Excluded: t.where[inExcluded]}
}

// InBand reports whether the policy weighs prompt q 1 now, and Retired
// whether it is retired.
func (p *promptSet) InBand(q uint32) bool  { return p.weight(q) == 1 }
func (p *promptSet) Retired(q uint32) bool { return p.prompts[q].where == inRetired }

// Prompts is the job's prompts: every domain's, appended ones included.
func (p *promptSet) Prompts() int { return len(p.prompts) }

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
