package shuffle

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"sync"
)

// Bounds of a schedule (docs/shuffle.md §11.9).
const (
	// MaxSchedulePhases bounds a schedule's phases.
	MaxSchedulePhases = 1024
	// MaxScheduleStep bounds a phase's steps: every step and ramp end is
	// below it, 2^53, so that a step is exact in a JSON number and a
	// float64 on every client.
	MaxScheduleStep = 1 << 53
	// MaxScheduleWork bounds the rule's work a schedule may ask for: its
	// constant phases' min(period, blocks of an epoch) and its ramps'
	// blocks, each times the components, summed. A ramp's blocks cost a
	// few arbitrary-precision operations per component each.
	MaxScheduleWork = 1 << 23
)

// A SchedulePhase is one phase of a Schedule: from global step Step on,
// the components' weights are Weights (integers in the phase's ratios; 0
// allowed, not all of them). With End > Step the phase is a ramp: the
// weights move linearly from the previous phase's to Weights over steps
// [Step, End), and are Weights from End on. End is 0 for a constant
// phase.
type SchedulePhase struct {
	Step, End uint64
	Weights   []uint64
}

// Ramp reports whether the phase is a linear ramp.
func (p SchedulePhase) Ramp() bool { return p.End > p.Step }

// A Schedule is a mixture whose weights change with the job's global
// step (docs/shuffle.md §11.9): a step is a mixing block counted across
// epochs from the job's first, so epoch e holds steps [e·L/K, (e+1)·L/K).
// Each epoch is cut where a phase starts or a ramp ends into segments;
// a segment of a constant phase holds the counts of that phase's
// mixture (§11.2) numbered from the segment's first block, a segment of
// a ramp the counts of the carried-deficit rule from its first block.
// Every component is one stream across epochs and phases: epoch e
// starts it where epoch e−1 stopped, so a phase change neither repeats
// nor skips a sample of it. A schedule of one constant phase is that
// phase's Mixture, epoch for epoch, byte for byte.
//
// A Schedule is safe for concurrent use: it memoises the segments its
// epochs are cut into.
type Schedule struct {
	phases []SchedulePhase // the weights reduced
	pieces []schedPiece
	passes []Passes
	sizes  []int
	block  int
	length int // L
	blocks int // L/K
	first  []uint64
	sum0   uint64

	mu    sync.Mutex
	mixes map[int]*Mixture // constant piece → its counts
	ramps map[int]*rampSeg // ramp piece → its counts

	// pre[j] is each component's samples in pieces [0, j), 128 bits
	// (hi, lo per component), extended as far as an epoch asks.
	pmu sync.Mutex
	pre [][]uint64
}

// A schedPiece is a stretch of global steps [from, to) under one rule:
// a constant mixture (prev nil) or a ramp from prev to w over [from, to).
type schedPiece struct {
	from, to  uint64
	w, prev   []uint64
	sum, psum uint64
}

// NewSchedule returns the schedule of phases over components whose passes
// are passes, with mixing blocks of block samples and epochs of length
// samples (0: pass 0's lengths summed), rounded up to whole blocks, as
// NewMixtureOf. The first phase starts at step 0 and is constant; steps
// increase; a ramp ends at or before the next phase's step; every step
// is below MaxScheduleStep; each phase has a weight per component, not
// all 0, summing to at most MaxMixWeightSum. Errors wrap ErrInvalid.
func NewSchedule(phases []SchedulePhase, passes []Passes, block, length int) (*Schedule, error) {
	k := len(passes)
	switch {
	case len(phases) < 1 || len(phases) > MaxSchedulePhases:
		return nil, fmt.Errorf("%w: %d schedule phases; must be 1..%d", ErrInvalid, len(phases), MaxSchedulePhases)
	case phases[0].Step != 0 || phases[0].Ramp():
		return nil, fmt.Errorf("%w: a schedule's first phase starts at step 0 and is constant (a ramp moves from the phase before it)", ErrInvalid)
	}
	s := &Schedule{mixes: map[int]*Mixture{}, ramps: map[int]*rampSeg{}}
	work := 0
	for n, p := range phases {
		if len(p.Weights) != k {
			return nil, fmt.Errorf("%w: phase %d has %d weights for %d components", ErrInvalid, n, len(p.Weights), k)
		}
		if p.Step >= MaxScheduleStep || p.End >= MaxScheduleStep {
			return nil, fmt.Errorf("%w: phase %d: step %d; steps must be below 2^53", ErrInvalid, n, max(p.Step, p.End))
		}
		if p.End != 0 && p.End <= p.Step {
			return nil, fmt.Errorf("%w: phase %d ramps from step %d to %d; a ramp ends after it starts", ErrInvalid, n, p.Step, p.End)
		}
		if n > 0 {
			prev := phases[n-1]
			if p.Step <= prev.Step {
				return nil, fmt.Errorf("%w: phase %d starts at step %d, not after phase %d's step %d: phases are in increasing step order", ErrInvalid, n, p.Step, n-1, prev.Step)
			}
			if prev.End > p.Step {
				return nil, fmt.Errorf("%w: phase %d's ramp to step %d overlaps phase %d from step %d", ErrInvalid, n-1, prev.End, n, p.Step)
			}
		}
		var g, sum uint64
		for i, a := range p.Weights {
			if a > MaxMixWeightSum {
				return nil, fmt.Errorf("%w: phase %d: weight %d of component %d; must be 0..%d", ErrInvalid, n, a, i, MaxMixWeightSum)
			}
			g = gcd(g, a)
			sum += a
		}
		if sum == 0 {
			return nil, fmt.Errorf("%w: phase %d's weights sum to 0", ErrInvalid, n)
		}
		if sum > MaxMixWeightSum {
			return nil, fmt.Errorf("%w: phase %d's weights sum to %d (as integers); must be at most %d", ErrInvalid, n, sum, MaxMixWeightSum)
		}
		w := make([]uint64, k)
		for i, a := range p.Weights {
			w[i] = a / g
		}
		s.phases = append(s.phases, SchedulePhase{Step: p.Step, End: p.End, Weights: w})
	}
	// The first phase's mixture checks the block, the length and the
	// passes, and is the schedule's epoch length.
	m0, err := newMixture(s.phases[0].Weights, passes, block, length, true, 1)
	if err != nil {
		return nil, err
	}
	s.passes, s.sizes, s.block, s.length = m0.passes, m0.sizes, block, m0.length
	s.blocks = s.length / block
	s.first, s.sum0 = m0.weights, m0.sum
	for n, p := range s.phases {
		to := uint64(math.MaxUint64)
		if n+1 < len(s.phases) {
			to = s.phases[n+1].Step
		}
		var sum uint64
		for _, a := range p.Weights {
			sum += a
		}
		if p.Ramp() {
			prev := s.phases[n-1].Weights
			var psum uint64
			for _, a := range prev {
				psum += a
			}
			s.pieces = append(s.pieces, schedPiece{from: p.Step, to: p.End, w: p.Weights, sum: sum, prev: prev, psum: psum})
			work += int(min(p.End-p.Step, MaxScheduleWork)) * k
			if p.End == to {
				continue
			}
		}
		from := p.Step
		if p.Ramp() {
			from = p.End
		}
		s.pieces = append(s.pieces, schedPiece{from: from, to: to, w: p.Weights, sum: sum})
		// The piece's counts run on its global steps from its first, so
		// its epochs start anywhere in its period: the rule runs over the
		// period, or the whole piece when it is shorter.
		work += int(min(uint64(mixPeriod(p.Weights, sum, block)), to-from, MaxScheduleWork)) * k
		if work > MaxScheduleWork {
			return nil, fmt.Errorf("%w: the schedule's phases ask for more than %d (shuffle.MaxScheduleWork) steps × components of the rounding rules; use fewer or shorter ramps, weights with fewer digits or a larger mixing block", ErrInvalid, MaxScheduleWork)
		}
	}
	if work > MaxScheduleWork {
		return nil, fmt.Errorf("%w: the schedule's phases ask for more than %d (shuffle.MaxScheduleWork) steps × components of the rounding rules; use fewer or shorter ramps, weights with fewer digits or a larger mixing block", ErrInvalid, MaxScheduleWork)
	}
	return s, nil
}

// mixPeriod is the period, in blocks, of a mixture of weights summing to
// sum (§11.2's P).
func mixPeriod(w []uint64, sum uint64, block int) int {
	pg := sum
	for _, a := range w {
		pg = gcd(pg, uint64(block)*a%sum)
	}
	return int(sum / pg)
}

// Phases returns the schedule's phases, their weights reduced (shared; do
// not modify).
func (s *Schedule) Phases() []SchedulePhase { return s.phases }

// Components returns the number of components.
func (s *Schedule) Components() int { return len(s.passes) }

// Block returns K.
func (s *Schedule) Block() int { return s.block }

// NumSamples returns L, the samples in one epoch.
func (s *Schedule) NumSamples() int { return s.length }

// EpochBlocks returns L/K, the steps an epoch holds.
func (s *Schedule) EpochBlocks() int { return s.blocks }

// WeightsAt returns the components' weights at global step step, as
// fractions of 1: a ramp's interpolated.
func (s *Schedule) WeightsAt(step uint64) []float64 {
	p := s.piece(step)
	out := make([]float64, len(p.w))
	for i, a := range p.w {
		out[i] = float64(a) / float64(p.sum)
		if p.prev != nil {
			lam := float64(step-p.from) / float64(p.to-p.from)
			out[i] = (1-lam)*float64(p.prev[i])/float64(p.psum) + lam*out[i]
		}
	}
	return out
}

// piece returns the piece holding step.
func (s *Schedule) piece(step uint64) *schedPiece {
	j, _ := slices.BinarySearchFunc(s.pieces, step, func(p schedPiece, st uint64) int {
		switch {
		case p.to <= st:
			return -1
		case p.from > st:
			return 1
		}
		return 0
	})
	return &s.pieces[j]
}

// Epoch returns epoch e of the schedule as a Mixture: its blocks' counts
// by the pieces they are in, each piece's counted on its global steps
// from the piece's first (so a piece's share holds across epochs), each
// component's stream continued from the epochs before it. It costs, per
// piece before the epoch's end, a cursor of its rule (at most 64 steps)
// and, the first time a piece is met, that piece's checkpoints
// (memoised). Errors wrap ErrInvalid: an epoch whose steps pass 2^64.
func (s *Schedule) Epoch(e uint64) (*Mixture, error) {
	hi, g0 := bits.Mul64(e, uint64(s.blocks))
	if hi != 0 || g0 > math.MaxUint64-uint64(s.blocks) {
		return nil, fmt.Errorf("%w: epoch %d of a schedule of %d steps an epoch passes step 2^64", ErrInvalid, e, s.blocks)
	}
	k := len(s.passes)
	m := &Mixture{weights: s.first, sum: s.sum0, passes: s.passes, sizes: s.sizes, block: s.block, length: s.length,
		period: s.blocks, startHi: make([]uint64, k), startLo: make([]uint64, k)}
	g1 := g0 + uint64(s.blocks)
	// The epochs before: the whole pieces before g0 by their memoised
	// sums, then the piece holding step g0 by its counts before it.
	j, _ := slices.BinarySearchFunc(s.pieces, g0, func(p schedPiece, st uint64) int {
		if p.to <= st {
			return -1
		}
		return 1
	})
	pre, err := s.prefix(j)
	if err != nil {
		return nil, err
	}
	for i := range k {
		m.startHi[i], m.startLo[i] = pre[2*i], pre[2*i+1]
	}
	for pi := j; pi < len(s.pieces); pi++ {
		p := &s.pieces[pi]
		if p.from >= g0 {
			break
		}
		x := min(p.to, g0) - p.from
		if p.prev == nil {
			mix, err := s.constMix(pi)
			if err != nil {
				return nil, err
			}
			P := uint64(mix.period)
			at := mix.relCursor(0, int(x%P)).counts(nil)
			for i := range k {
				addMul(&m.startHi[i], &m.startLo[i], x/P, uint64(mix.perPeriod[i]))
				addMul(&m.startHi[i], &m.startLo[i], 1, uint64(at[i]))
			}
			continue
		}
		r, err := s.ramp(pi)
		if err != nil {
			return nil, err
		}
		for i, t := range r.cursor(int(x)).counts(nil) {
			addMul(&m.startHi[i], &m.startLo[i], 1, uint64(t))
		}
	}
	// This epoch's segments.
	before := make([]int, k)
	for pi := range s.pieces {
		p := &s.pieces[pi]
		if p.to <= g0 {
			continue
		}
		if p.from >= g1 {
			break
		}
		from, to := max(p.from, g0), min(p.to, g1)
		seg := mixSegment{from: int(from - g0), to: int(to - g0), before: slices.Clone(before), off: from - p.from}
		var err error
		if p.prev == nil {
			seg.mix, err = s.constMix(pi)
			seg.off %= uint64(max(seg.mix.period, 1))
		} else {
			seg.ramp, err = s.ramp(pi)
		}
		if err != nil {
			return nil, err
		}
		seg.tot = seg.cursor(seg.to - seg.from).counts(nil)
		for i, t := range seg.tot {
			before[i] += t
		}
		m.segs = append(m.segs, seg)
	}
	m.epoch = before
	return m, nil
}

// prefix returns each component's samples in pieces [0, j), as 128-bit
// (hi, lo) pairs, summing and memoising the pieces' totals as far as j.
func (s *Schedule) prefix(j int) ([]uint64, error) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	k := len(s.passes)
	if s.pre == nil {
		s.pre = [][]uint64{make([]uint64, 2*k)}
	}
	for len(s.pre) <= j {
		pi := len(s.pre) - 1
		p := &s.pieces[pi]
		sum := slices.Clone(s.pre[pi])
		x := p.to - p.from
		if p.prev == nil {
			mix, err := s.constMix(pi)
			if err != nil {
				return nil, err
			}
			P := uint64(mix.period)
			at := mix.relCursor(0, int(x%P)).counts(nil)
			for i := range k {
				addMul(&sum[2*i], &sum[2*i+1], x/P, uint64(mix.perPeriod[i]))
				addMul(&sum[2*i], &sum[2*i+1], 1, uint64(at[i]))
			}
		} else {
			r, err := s.ramp(pi)
			if err != nil {
				return nil, err
			}
			for i, t := range r.tot {
				addMul(&sum[2*i], &sum[2*i+1], 1, uint64(t))
			}
		}
		s.pre = append(s.pre, sum)
	}
	return s.pre[j], nil
}

// addMul adds n·t to the 128-bit hi, lo.
func addMul(hi, lo *uint64, n, t uint64) {
	h, l := bits.Mul64(n, t)
	var c uint64
	*lo, c = bits.Add64(*lo, l, 0)
	*hi += h + c
}

// constMix returns the mixture of constant piece pi: its rule run over
// its period, or over the piece when it is shorter.
func (s *Schedule) constMix(pi int) (*Mixture, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.mixes[pi]; ok {
		return m, nil
	}
	p := &s.pieces[pi]
	reach := int(min(p.to-p.from, math.MaxInt))
	m, err := newMixture(p.w, s.passes, s.block, s.length, true, reach)
	if err != nil {
		return nil, err
	}
	s.mixes[pi] = m
	return m, nil
}

// ramp returns the counts of ramp piece pi over its whole span of steps,
// from its first.
func (s *Schedule) ramp(pi int) (*rampSeg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.ramps[pi]; ok {
		return r, nil
	}
	p := &s.pieces[pi]
	r := newRampSeg(p, s.block, p.from, int(p.to-p.from))
	s.ramps[pi] = r
	return r, nil
}

// A mixSegment is the part of an epoch in one piece: blocks [from, to)
// of the epoch, before[i] component i's samples in the blocks before it,
// counted by a constant mixture or a ramp from the piece's block off
// (for a constant piece, off within its period), tot[i] its samples.
type mixSegment struct {
	from, to int
	before   []int
	off      uint64
	tot      []int
	mix      *Mixture
	ramp     *rampSeg
}

// cursor returns a cursor at the segment's block j: the piece's counts
// from block off to off + j.
func (g *mixSegment) cursor(j int) countCursor {
	if g.mix != nil {
		return g.mix.relCursor(int(g.off), j)
	}
	c := g.ramp.cursor(int(g.off) + j).(*rampCursor)
	if g.off != 0 {
		c.orig = g.ramp.cursor(int(g.off)).counts(nil)
	}
	return c
}

// segCursor is a countCursor over a schedule epoch's segments.
type segCursor struct {
	m     *Mixture
	s, b  int
	inner countCursor
}

func (m *Mixture) segCursor(b int) countCursor {
	s := 0
	for s+1 < len(m.segs) && m.segs[s].to <= b {
		s++
	}
	return &segCursor{m: m, s: s, b: b, inner: m.segs[s].cursor(b - m.segs[s].from)}
}

func (c *segCursor) counts(dst []int) []int {
	n := len(dst)
	dst = c.inner.counts(dst)
	for i, v := range c.m.segs[c.s].before {
		dst[n+i] += v
	}
	return dst
}

func (c *segCursor) next() {
	c.inner.next()
	c.b++
	if c.b == c.m.segs[c.s].to && c.s+1 < len(c.m.segs) {
		c.s++
		c.inner = c.m.segs[c.s].cursor(0)
	}
}

// A rampSeg is the counts of a ramp's segment: blocks [0, n) from global
// step s0, by the carried-deficit rule (docs/shuffle.md §11.9), its
// running counts kept every mixCheckpoint blocks.
type rampSeg struct {
	k, n int
	ckpt []int // ckpt[c*k+i]: component i's samples in blocks [0, c·64)
	tot  []int
	r    rampRule
}

// rampRule is the carried-deficit rule of one ramp segment, in exact
// integers: w_i(s) = u_i(s)/den with u_i(s) = a_i·A'·(E−s) + a'_i·A·(s−S)
// (a, A the previous phase's weights and sum, a', A' the ramp's, [S, E)
// the ramp) and den = A·A'·(E−S). The segment's block t is step s0+t:
// u_i(s0+t) = u0_i + t·d_i.
type rampRule struct {
	K, den *big.Int
	u0, d  []*big.Int
	want   []*big.Int // scratch
	rank   []int
	blk    []int
}

// clone returns the rule with scratch of its own.
func (r *rampRule) clone() rampRule {
	c := *r
	c.want = make([]*big.Int, len(r.want))
	for i := range c.want {
		c.want[i] = new(big.Int)
	}
	c.rank, c.blk = make([]int, len(r.rank)), make([]int, len(r.blk))
	return c
}

func newRampSeg(p *schedPiece, block int, s0 uint64, n int) *rampSeg {
	k := len(p.w)
	r := &rampSeg{k: k, n: n}
	A, A2 := new(big.Int).SetUint64(p.psum), new(big.Int).SetUint64(p.sum)
	D := new(big.Int).SetUint64(p.to - p.from)
	rule := rampRule{K: big.NewInt(int64(block)), den: new(big.Int).Mul(new(big.Int).Mul(A, A2), D)}
	left := new(big.Int).SetUint64(p.to - s0)    // E − s0
	right := new(big.Int).SetUint64(s0 - p.from) // s0 − S
	for i := range k {
		a := new(big.Int).Mul(new(big.Int).SetUint64(p.prev[i]), A2) // a_i·A'
		b := new(big.Int).Mul(new(big.Int).SetUint64(p.w[i]), A)     // a'_i·A
		u0 := new(big.Int).Add(new(big.Int).Mul(a, left), new(big.Int).Mul(b, right))
		rule.u0 = append(rule.u0, u0)
		rule.d = append(rule.d, new(big.Int).Sub(b, a))
		rule.want = append(rule.want, new(big.Int))
	}
	rule.rank = make([]int, k)
	rule.blk = make([]int, k)
	r.r = rule
	c := make([]int, k)
	for t := range n {
		if t%mixCheckpoint == 0 {
			r.ckpt = append(r.ckpt, c...)
		}
		r.r.step(t, c)
	}
	if n%mixCheckpoint == 0 {
		r.ckpt = append(r.ckpt, c...)
	}
	r.tot = c
	return r
}

// step adds block t's counts to c, the counts of blocks [0, t): each
// component's want_i = T_i(t+1) − c_i (its cumulative target over the
// segment's blocks [0, t] less what it has), c_i += max(0, floor(want_i)),
// then the R = K − Σ units left handed one each to the largest remainders
// want_i − count (ties: lower index), or, R < 0, taken one at a time from
// a component with a count of at least 1 of the smallest remainder (ties:
// higher index).
func (r *rampRule) step(t int, c []int) {
	k := len(c)
	n := big.NewInt(int64(t) + 1)
	tri := new(big.Int).Mul(n, big.NewInt(int64(t))) // n(n−1)
	tri.Rsh(tri, 1)
	x := new(big.Int)
	q, rem := new(big.Int), new(big.Int)
	blk := r.blk
	total := 0
	for i := range k {
		// T_i(n)·den = K·(n·u0_i + d_i·n(n−1)/2)
		w := r.want[i]
		w.Mul(n, r.u0[i])
		w.Add(w, x.Mul(r.d[i], tri))
		w.Mul(w, r.K)
		w.Sub(w, x.Mul(big.NewInt(int64(c[i])), r.den))
		q.DivMod(w, r.den, rem) // Euclidean: floor for den > 0
		if q.Sign() > 0 {
			blk[i] = int(q.Int64())
			w.Set(rem)
		} else {
			blk[i] = 0 // w stays want_i·den: its remainder
		}
		total += blk[i]
	}
	R := int(r.K.Int64()) - total
	rank := r.rank[:0]
	for i := range k {
		if R >= 0 || blk[i] > 0 {
			rank = append(rank, i)
		}
	}
	if R > 0 {
		slices.SortFunc(rank, func(a, b int) int {
			if d := r.want[b].Cmp(r.want[a]); d != 0 {
				return d
			}
			return a - b
		})
		for _, i := range rank[:R] {
			blk[i]++
		}
	} else if R < 0 {
		slices.SortFunc(rank, func(a, b int) int {
			if d := r.want[a].Cmp(r.want[b]); d != 0 {
				return d
			}
			return b - a
		})
		for j := 0; R < 0; j = (j + 1) % len(rank) {
			if i := rank[j]; blk[i] > 0 {
				blk[i]--
				R++
			}
		}
	}
	for i := range k {
		c[i] += blk[i]
	}
}

// rampCursor walks a ramp segment's counts.
type rampCursor struct {
	r    *rampSeg
	rule rampRule // its own scratch: cursors run at once
	t    int
	c    []int
	orig []int // the counts subtracted: the ramp's before a segment
}

func (r *rampSeg) cursor(t int) countCursor {
	j := t / mixCheckpoint
	c := &rampCursor{r: r, rule: r.r.clone(), t: j * mixCheckpoint, c: slices.Clone(r.ckpt[j*r.k : (j+1)*r.k])}
	for c.t < t {
		c.next()
	}
	return c
}

func (c *rampCursor) counts(dst []int) []int {
	n := len(dst)
	dst = append(dst, c.c...)
	for i, v := range c.orig {
		dst[n+i] -= v
	}
	return dst
}

func (c *rampCursor) next() {
	c.rule.step(c.t, c.c)
	c.t++
}
