package shuffle

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"

	"github.com/brandgw/brand/internal/seeded"
)

// domainMixSlots seeds the permutation of a mixing block's slots: the
// ASCII bytes "brandmxs" read big-endian, like the other domains.
const domainMixSlots uint64 = 0x6272616e646d7873

// Bounds of a mixture's parameters. They keep every product the block
// counts need below 2^63 (docs/shuffle.md §11.2) and a mixture's
// construction and memory bounded (§11.6).
const (
	MaxMixComponents = 100
	MaxMixWeightSum  = 1 << 31 // the reduced integer weights' sum A
	MaxMixBlock      = 1 << 24 // samples in a mixing block K
	// MaxMixWork bounds the rule's work NewMixture does once: the blocks
	// it runs the rule over, min(period, blocks of an epoch), times the
	// components each step ranks. At the bound it takes about half a
	// second and keeps 512 KiB of checkpoints.
	MaxMixWork = 1 << 22
)

// mixSpanPositions is about how many positions a MixSpan of small blocks
// holds: whole blocks, at least one, so that a span of blocks of 1 sample
// is not a span of one position.
const mixSpanPositions = 1 << 16

// mixSpanStride is how many positions apart a MixSpan keeps each
// component's running count: a range of a span costs at most this many
// positions counted before its first.
const mixSpanStride = 1 << 12

// mixCheckpoint is how many blocks apart NewMixture keeps the running
// counts: a block's counts cost at most this many steps of the rule.
const mixCheckpoint = 64

// A Mixture interleaves several datasets' orders into one epoch order
// (docs/shuffle.md §11). Each component is a stream of samples of its own
// dataset: pass p of component i is that dataset's epoch order for epoch
// p (NewEpoch, by the caller), and the mixture reads
// each component's stream from where the previous mixture epoch left it,
// starting the component's next pass when one runs out. A component's
// passes may differ in length (NewMixtureOf): a token dataset packed into
// sequences holds a different number of sequences each epoch.
//
// The epoch is cut into blocks of K positions. Block b takes from each
// component i either floor(K·w_i) or ceil(K·w_i) samples (w_i its weight
// over the weights' sum), chosen by the PD² Pfair rule so that after any
// number of blocks every component's count is within one sample of its
// exact share — never drifting. The rule runs on the global block index,
// e·L/K + b for block b of epoch e, so this holds across epochs too, and
// every component's stream continues where the epoch before left it.
// The slots of a block are shuffled by a stream of (seed, epoch,
// "brandmxs", b). With K the job's global
// batch (B·world), every global batch holds each component within one
// sample of its weight. The order depends on K, so a job that resumes at
// another world size keeps its K.
//
// A Mixture is immutable and safe for concurrent use.
type Mixture struct {
	weights []uint64 // reduced integer weights a_i
	sum     uint64   // A = Σ a_i
	passes  []Passes // each component's pass lengths
	sizes   []int    // N_i: samples in pass 0 of component i
	block   int      // K
	length  int      // L: samples in an epoch, a multiple of K
	base    []int    // floor(K·a_i/A)
	rem     []uint64 // K·a_i mod A: the weight m_i/A of the extra unit
	extra   int      // r = Σ m_i / A: extra units a block hands out
	period  int      // blocks after which the rule repeats
	// perPeriod[i] is component i's samples in one period of blocks.
	perPeriod []int
	// ckpt[c*k+i] is component i's extra units in blocks [0, c*64) of a
	// period, for the blocks of a period the mixture reaches: the whole
	// period, or for a schedule's piece shorter than it the piece's.
	ckpt []int
	// reach is how many blocks of a period the checkpoints cover:
	// min(period, the blocks the rule is run over).
	reach int
	// restart is set for a mixture whose period is too long to run the
	// rule over (period × components past MaxMixWork): each epoch then
	// restarts the rule at its block 0 and starts its streams at e·n_i.
	restart bool
	// epoch[i] is n_i, component i's samples in the epoch: epoch 0's for
	// a mixture from NewMixture, its epoch's for one from Epoch.
	epoch []int
	// An epoch (Mixture.Epoch, Schedule.Epoch) counts its blocks by
	// segments, each a piece's part of the epoch numbered by the piece's
	// global blocks, and starts each component's stream where the epochs
	// before it left it: startHi, startLo is that position, 128 bits. A
	// mixture from NewMixture has neither: the methods that take an epoch
	// read that epoch's view.
	segs             []mixSegment
	startHi, startLo []uint64
}

// A Draw is one position of a mixture epoch: which component it reads and
// where in that component's stream.
type Draw struct {
	Component int
	// Pass is the component's pass (its dataset's epoch number) and Index
	// the position in that pass's order.
	Pass  uint64
	Index int
}

// Passes gives the length of each pass of a mixture component: how many
// positions of the component's stream its pass p holds. A dataset of N
// samples has passes of N each (EqualPasses); a token dataset packed into
// sequences by best fit has as many as pass p's packing makes
// (docs/shuffle.md §11.4).
//
// PassLen must be a pure function of p, at least 1, and safe for
// concurrent use: a Mixture calls it for passes in increasing order from
// 0 to find where a stream position falls, so for a component whose
// passes differ an implementation should memoise its lengths.
type Passes interface {
	PassLen(p uint64) int
}

// PassesFunc adapts a function to Passes.
type PassesFunc func(p uint64) int

// PassLen returns f(p).
func (f PassesFunc) PassLen(p uint64) int { return f(p) }

// EqualPasses is a component every pass of which holds the same number of
// positions: a dataset's samples. A Mixture finds a position's pass in it
// by a division; for any other Passes it adds pass lengths from pass 0.
type EqualPasses int

// PassLen returns n whatever the pass.
func (n EqualPasses) PassLen(uint64) int { return int(n) }

// MaxMixPasses bounds how far a Mixture follows a component whose passes
// differ in length: a stream position past its first MaxMixPasses passes
// reads Pass math.MaxUint64, as one past 2^64 passes of equal ones does,
// and callers answer it as out of range. Finding a position's pass costs
// a PassLen call for every pass before it.
const MaxMixPasses = 1 << 31

// NewMixture returns the mixture of components whose reduced integer
// weights are weights, each pass of component i holding sizes[i] samples,
// with mixing blocks of block samples and epochs of length samples
// rounded up to a whole number of blocks. length 0 means the sum of
// sizes.
//
// Weights must be positive, their sum at most MaxMixWeightSum (callers
// scale decimal weights to integers; NewMixture divides out their
// greatest common divisor), sizes positive, block in [1, MaxMixBlock].
// Errors wrap ErrInvalid.
func NewMixture(weights []uint64, sizes []int, block, length int) (*Mixture, error) {
	if len(sizes) != len(weights) {
		return nil, fmt.Errorf("%w: %d sizes for %d mixture components", ErrInvalid, len(sizes), len(weights))
	}
	passes := make([]Passes, len(sizes))
	for i, n := range sizes {
		passes[i] = EqualPasses(n)
	}
	return NewMixtureOf(weights, passes, block, length)
}

// NewMixtureOf is NewMixture for components whose passes may differ in
// length: pass p of component i holds passes[i].PassLen(p) positions.
// Pass 0's lengths stand for the components' sizes: length 0 means their
// sum, and Size reports them. NewMixtureOf calls PassLen(0) of each
// component once; the other passes' lengths are asked for only when a
// position is located in them. Errors are NewMixture's.
func NewMixtureOf(weights []uint64, passes []Passes, block, length int) (*Mixture, error) {
	return newMixture(weights, passes, block, length, false, math.MaxInt)
}

// newMixture is NewMixtureOf; with zeros, weights of 0 are allowed (a
// schedule's phase may give a component none), so long as one is not.
// The rule is run over min(period, reach) blocks: a schedule's piece of
// reach blocks needs no more.
func newMixture(weights []uint64, passes []Passes, block, length int, zeros bool, reach int) (*Mixture, error) {
	k := len(weights)
	switch {
	case k < 1 || k > MaxMixComponents:
		return nil, fmt.Errorf("%w: %d mixture components; must be 1..%d", ErrInvalid, k, MaxMixComponents)
	case len(passes) != k:
		return nil, fmt.Errorf("%w: %d pass lengths for %d mixture components", ErrInvalid, len(passes), k)
	case block < 1 || block > MaxMixBlock:
		return nil, fmt.Errorf("%w: mixing block %d; must be 1..%d", ErrInvalid, block, MaxMixBlock)
	case length < 0:
		return nil, fmt.Errorf("%w: mixture epoch of %d samples; must be >= 0", ErrInvalid, length)
	}
	sizes := make([]int, k)
	for i, p := range passes {
		if p == nil {
			return nil, fmt.Errorf("%w: mixture component %d has no pass lengths", ErrInvalid, i)
		}
		sizes[i] = p.PassLen(0)
	}
	var g, sum uint64
	total := 0
	for i, a := range weights {
		if (a == 0 && !zeros) || a > MaxMixWeightSum {
			return nil, fmt.Errorf("%w: weight %d of mixture component %d; must be 1..%d", ErrInvalid, a, i, MaxMixWeightSum)
		}
		if sizes[i] < 1 {
			return nil, fmt.Errorf("%w: mixture component %d has %d samples; a component needs at least one", ErrInvalid, i, sizes[i])
		}
		if sizes[i] > math.MaxInt-total {
			return nil, fmt.Errorf("%w: mixture components' sizes overflow int", ErrInvalid)
		}
		total += sizes[i]
		sum += a
		g = gcd(g, a)
	}
	if sum > MaxMixWeightSum {
		return nil, fmt.Errorf("%w: mixture weights sum to %d (as integers); must be at most %d", ErrInvalid, sum, MaxMixWeightSum)
	}
	if sum == 0 {
		return nil, fmt.Errorf("%w: mixture weights sum to 0; at least one must be positive", ErrInvalid)
	}
	if length == 0 {
		length = total
	}
	if length > math.MaxInt-block {
		return nil, fmt.Errorf("%w: mixture epoch of %d samples overflows int", ErrInvalid, length)
	}
	length = (length + block - 1) / block * block
	if length == 0 {
		length = block
	}
	m := &Mixture{weights: make([]uint64, k), passes: slices.Clone(passes), sizes: sizes, block: block, length: length,
		base: make([]int, k), rem: make([]uint64, k), perPeriod: make([]int, k), epoch: make([]int, k)}
	for i, a := range weights {
		m.weights[i] = a / g
	}
	m.sum = sum / g
	A := m.sum
	var remSum uint64
	p := A // the period: A / gcd(A, m_0, …, m_{k-1})
	pg := A
	for i, a := range m.weights {
		ka := uint64(block) * a // < 2^24 · 2^31
		m.base[i] = int(ka / A)
		m.rem[i] = ka % A
		remSum += m.rem[i]
		pg = gcd(pg, m.rem[i])
	}
	m.extra = int(remSum / A)
	p = A / pg
	m.period = int(p)
	for i := range m.weights {
		m.perPeriod[i] = m.period*m.base[i] + int(uint64(m.period)*m.rem[i]/A)
	}
	blocks := length / block
	steps := min(m.period, max(reach, 1))
	if steps > MaxMixWork/k && reach == math.MaxInt {
		// A period too long to run the rule over: each epoch restarts
		// the rule at its block 0 (docs/shuffle.md §11.2, "Long periods").
		m.restart = true
		steps = min(m.period, blocks)
	}
	if steps > MaxMixWork/k {
		return nil, fmt.Errorf("%w: a mixture whose rounding repeats only every %d blocks, over %d components: %d steps of the rounding rule, over the bound of %d (shuffle.MaxMixWork) steps × components; use weights with fewer digits, a larger mixing block or a shorter epoch",
			ErrInvalid, m.period, k, steps, MaxMixWork)
	}
	m.reach = steps
	// Run the rule over the blocks of a period the mixture reaches (its
	// counts run on the global block index, so a later epoch starts
	// anywhere in the period), keeping the running extra units every
	// mixCheckpoint blocks.
	u := make([]int, k)
	st := newMixState(m)
	for t := 0; t < steps; t++ {
		if t%mixCheckpoint == 0 {
			m.ckpt = append(m.ckpt, u...)
		}
		st.step(uint64(t), u)
	}
	if steps%mixCheckpoint == 0 {
		m.ckpt = append(m.ckpt, u...)
	}
	if blocks <= m.reach || m.reach == m.period {
		m.epoch = m.counts(blocks)
	}
	return m, nil
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Components returns the number of components.
func (m *Mixture) Components() int { return len(m.weights) }

// Weights returns the reduced integer weights a_i (shared; do not modify).
func (m *Mixture) Weights() []uint64 { return m.weights }

// Block returns K, the samples in a mixing block.
func (m *Mixture) Block() int { return m.block }

// NumSamples returns L, the samples in one epoch of the mixture.
func (m *Mixture) NumSamples() int { return m.length }

// EpochSamples returns n_i, how many samples of component i the epoch
// reads: epoch 0's for a mixture from NewMixture (Epoch gives another
// epoch's). Its counts run on the global block index, so where the
// epoch's blocks are not a whole number of periods epochs may differ,
// each within two of L·w_i (docs/shuffle.md §11.2).
func (m *Mixture) EpochSamples(i int) int { return m.epoch[i] }

// ComponentWindow returns the shuffle window, in chunks, of component i's
// passes for a job whose window is window: the job's window split by
// weight, ceil(window·a_i/A), at least 1. A job's window is what it holds
// in the cache at once; a mixture reads every component's window at once,
// so splitting it keeps the mixture's footprint that of one dataset's
// (docs/shuffle.md §11.4).
func (m *Mixture) ComponentWindow(i, window int) int {
	w := (uint64(max(window, 1))*m.weights[i] + m.sum - 1) / m.sum
	return int(max(w, 1))
}

// Period returns the number of blocks after which the block counts repeat.
func (m *Mixture) Period() int { return m.period }

// Size returns N_i, the samples in one pass of component i: in pass 0
// when its passes differ in length.
func (m *Mixture) Size(i int) int { return m.sizes[i] }

// Cumulative returns C_i(b): how many samples of component i blocks
// [0, b) of the epoch hold (epoch 0 for a mixture from NewMixture), for
// 0 <= b <= NumSamples()/Block().
func (m *Mixture) Cumulative(b, i int) int { return m.counts(b)[i] }

// Start returns where epoch epoch starts component i's stream: the draw of
// its first sample of the epoch. Over passes of one sample each
// (EqualPasses(1)) its pass is the count of the component's samples in
// the global blocks before the epoch.
func (m *Mixture) Start(i int, epoch uint64) Draw {
	if m.startLo == nil {
		return m.Epoch(epoch).Start(i, epoch)
	}
	return m.draw(i, epoch, 0)
}

// BlockCounts returns how many samples of each component block b of the
// epoch (epoch 0 for a mixture from NewMixture) holds: floor(K·w_i) or
// one more.
func (m *Mixture) BlockCounts(b int) []int {
	lo, hi := m.counts(b), m.counts(b+1)
	for i := range hi {
		hi[i] -= lo[i]
	}
	return hi
}

// Epoch returns epoch e of the mixture as a Mixture of its own: its
// blocks are global blocks e·L/K … (e+1)·L/K − 1 of the rule, counted from
// the epoch's first, and each component's stream starts at its count in
// the global blocks before them (docs/shuffle.md §11.2, §11.4), so
// EpochSamples, Cumulative and BlockCounts are that epoch's. It costs one
// cursor of the rule: at most 64 of its steps, and O(k) 128-bit products.
// An epoch's view (from Epoch, or Schedule.Epoch) returns itself.
func (m *Mixture) Epoch(e uint64) *Mixture {
	if m.segs != nil {
		return m
	}
	k := len(m.weights)
	blocks := m.length / m.block
	v := *m
	v.startHi, v.startLo = make([]uint64, k), make([]uint64, k)
	if m.restart {
		for i := range k {
			v.startHi[i], v.startLo[i] = bits.Mul64(e, uint64(m.epoch[i]))
		}
		seg := mixSegment{from: 0, to: blocks, before: make([]int, k), mix: m, tot: m.epoch}
		v.segs = []mixSegment{seg}
		return &v
	}
	// g0 = e·L/K, 128 bits; its place in the period, t0 = g0 mod P.
	ghi, glo := bits.Mul64(e, uint64(blocks))
	_, t0 := bits.Div64(ghi%uint64(m.period), glo, uint64(m.period))
	// C_i(g0) = (g0 − t0)/P · perPeriod_i + t0·base_i + U_i(t0), where
	// (g0 − t0)/P · perPeriod_i < 2^128 as C_i(g0) <= g0·K is.
	qhi, qlo := ghi, glo
	if t0 != 0 {
		var b uint64
		qlo, b = bits.Sub64(qlo, t0, 0)
		qhi -= b
	}
	q := new(big.Int).Lsh(new(big.Int).SetUint64(qhi), 64)
	q.Or(q, new(big.Int).SetUint64(qlo))
	q.Quo(q, big.NewInt(int64(m.period)))
	at := m.relCursor(0, int(t0)).counts(nil) // t0·base_i + U_i(t0)
	x := new(big.Int)
	for i := range k {
		x.Mul(q, big.NewInt(int64(m.perPeriod[i])))
		x.Add(x, big.NewInt(int64(at[i])))
		v.startLo[i] = x.Uint64()
		v.startHi[i] = new(big.Int).Rsh(x, 64).Uint64()
	}
	seg := mixSegment{from: 0, to: blocks, before: make([]int, k), mix: m, off: uint64(t0)}
	seg.tot = seg.cursor(blocks).counts(nil)
	v.segs = []mixSegment{seg}
	v.epoch = seg.tot
	return &v
}

// counts returns C(b) for every component: whole periods by their
// counts, the rest from the nearest checkpoint by the rule.
func (m *Mixture) counts(b int) []int {
	return m.countsAt(b).counts(nil)
}

// A countCursor walks an epoch's block counts forward: counts appends
// C(b) of its block b, next moves it to block b+1.
type countCursor interface {
	counts(dst []int) []int
	next()
}

// countsAt returns a cursor at block b of the epoch: epoch 0 for a
// mixture from NewMixture.
func (m *Mixture) countsAt(b int) countCursor {
	if m.segs != nil {
		return m.segCursor(b)
	}
	return m.relCursor(0, b)
}

// mixCursor walks the block counts forward from a block: each step costs
// one step of the rule. Its counts are those of the blocks from block
// t0 of a period: C(t0 + b) − C(t0).
type mixCursor struct {
	m    *Mixture
	q, t int   // the block t0 + b: q periods and t blocks
	u    []int // extra units of blocks [0, t) of the period
	orig []int // C(t0): t0·base_i + U_i(t0)
	st   *mixState
}

// relCursor returns a cursor at block b counted from block t0 of a
// period (0 <= t0 < period), run from the nearest checkpoints. t0 + b
// must stay within the blocks the checkpoints reach when they do not
// cover the whole period.
func (m *Mixture) relCursor(t0, b int) *mixCursor {
	var orig []int
	if t0 != 0 {
		c := m.relCursor(0, t0)
		orig = c.counts(nil)
	}
	k := len(m.weights)
	x := uint64(t0) + uint64(b)
	q, t := int(x/uint64(m.period)), int(x%uint64(m.period))
	c := t / mixCheckpoint
	cur := &mixCursor{m: m, q: q, t: c * mixCheckpoint, u: slices.Clone(m.ckpt[c*k : (c+1)*k]), orig: orig, st: newMixState(m)}
	for cur.t < t {
		cur.st.step(uint64(cur.t), cur.u)
		cur.t++
	}
	return cur
}

// counts appends C(t0 + b) − C(t0) of the cursor's block to dst. The
// products wrap in int as they may for a huge epoch; the difference, a
// count of one epoch, does not.
func (c *mixCursor) counts(dst []int) []int {
	m := c.m
	for i := range m.weights {
		n := c.q*m.perPeriod[i] + c.t*m.base[i] + c.u[i]
		if c.orig != nil {
			n -= c.orig[i]
		}
		dst = append(dst, n)
	}
	return dst
}

// next moves the cursor to the next block.
func (c *mixCursor) next() {
	c.st.step(uint64(c.t), c.u)
	c.t++
	if c.t == c.m.period {
		c.q, c.t = c.q+1, 0
		clear(c.u)
	}
}

// mixState runs the PD² rule: scratch for one step's choice.
type mixState struct {
	m    *Mixture
	cand []mixCand
}

type mixCand struct {
	i        int
	d, group uint64
	bbit     bool
	eligible bool
}

func newMixState(m *Mixture) *mixState {
	return &mixState{m: m, cand: make([]mixCand, 0, len(m.weights))}
}

// step hands block t's r extra units (t within a period, u the extra
// units of blocks [0, t)) to the r components first by PD² priority:
// eligible subtasks (release <= t) by earlier pseudo-deadline, then b-bit
// 1 before 0, then later group deadline, then lower component index
// (docs/shuffle.md §11.2).
func (st *mixState) step(t uint64, u []int) {
	m := st.m
	A := m.sum
	st.cand = st.cand[:0]
	for i, w := range m.rem {
		if w == 0 {
			continue
		}
		j := uint64(u[i]) + 1
		c := mixCand{i: i}
		c.eligible = (j-1)*A/w <= t
		c.d = (j*A + w - 1) / w
		c.bbit = j*A%w != 0
		if 2*w >= A {
			n := A - w
			c.group = ((c.d*n+A-1)/A*A + n - 1) / n
		}
		st.cand = append(st.cand, c)
	}
	slices.SortFunc(st.cand, func(a, b mixCand) int {
		switch {
		case a.eligible != b.eligible:
			if a.eligible {
				return -1
			}
			return 1
		case a.d != b.d:
			if a.d < b.d {
				return -1
			}
			return 1
		case a.bbit != b.bbit:
			if a.bbit {
				return -1
			}
			return 1
		case a.group != b.group:
			if a.group > b.group {
				return -1
			}
			return 1
		}
		return a.i - b.i
	})
	for _, c := range st.cand[:m.extra] {
		u[c.i]++
	}
}

// Slots returns the components of block b's K positions in epoch order:
// component i BlockCounts(b)[i] times, in ascending component order,
// permuted by the Fisher–Yates shuffle of the stream (seed, epoch,
// "brandmxs", b).
func (m *Mixture) Slots(seed, epoch uint64, b int) []int {
	slots := m.slots(make([]uint8, 0, m.block), seed, epoch, b, m.Epoch(epoch).BlockCounts(b))
	out := make([]int, len(slots))
	for i, c := range slots {
		out[i] = int(c)
	}
	return out
}

// slots appends block b's slots, given its counts, to dst: a byte each,
// since a mixture has at most MaxMixComponents components.
func (m *Mixture) slots(dst []uint8, seed, epoch uint64, b int, cnt []int) []uint8 {
	base := len(dst)
	for i, c := range cnt {
		for range c {
			dst = append(dst, uint8(i))
		}
	}
	s := newStream(seed, epoch, domainMixSlots, uint64(b))
	seeded.ShuffleOf(&s.Stream, dst[base:], 0)
	return dst
}

// AppendRange appends the draws at epoch positions [start, end) of epoch
// epoch to dst: for each position its component, and the pass and the
// position in that pass it reads. Component i's stream before epoch e has
// given its count in the global blocks before the epoch's (Epoch); its
// stream position Q falls in the pass p whose
// passes before it hold at most Q positions in all, at index Q minus
// those: with passes of N_i each, pass Q / N_i, index Q mod N_i. It costs
// O(K + k log k) per block touched, as Span of those blocks does, and
// that span's memory while it runs. It panics unless
// 0 <= start <= end <= NumSamples().
func (m *Mixture) AppendRange(dst []Draw, seed, epoch uint64, start, end int) []Draw {
	if start < 0 || end < start || end > m.length {
		panic(fmt.Sprintf("shuffle: Mixture.AppendRange(%d, %d) outside [0, %d]", start, end, m.length))
	}
	if start == end {
		return dst
	}
	first := start / m.block
	sp := m.Span(seed, epoch, first, (end-1)/m.block+1-first)
	return sp.AppendRange(dst, start, end)
}

// Bytes is about the memory the mixture holds — its tables and, for an
// epoch of a schedule, its pieces' — for a server that keeps mixtures to
// bound them by. A span (MixSpan) holds its mixture too.
func (m *Mixture) Bytes() int64 {
	return m.bytes(map[*Mixture]bool{})
}

func (m *Mixture) bytes(seen map[*Mixture]bool) int64 {
	if seen[m] {
		return 0
	}
	seen[m] = true
	ints := len(m.weights) + len(m.rem) + len(m.startHi) + len(m.startLo) + len(m.base) + len(m.perPeriod) + len(m.ckpt) + len(m.epoch) + len(m.sizes)
	n := int64(200 + 8*ints + 16*len(m.passes))
	for _, g := range m.segs {
		n += 96 + 8*int64(len(g.before)+len(g.tot))
		if g.mix != nil {
			n += g.mix.bytes(seen)
		}
		if g.ramp != nil {
			n += 8 * int64(len(g.ramp.ckpt)+len(g.ramp.tot))
			n += 64 * int64(len(g.ramp.r.u0)+len(g.ramp.r.d)+len(g.ramp.r.want)+2)
		}
	}
	return n
}

// Mixture is the mixture the span is of, which it holds.
func (s *MixSpan) Mixture() *Mixture { return s.m }

// SpanBlocks is how many blocks a span of the epoch holds when an epoch
// is read a span at a time, as a server memoises it: whole blocks, about
// 65,536 positions, at least one block.
func (m *Mixture) SpanBlocks() int { return max(1, mixSpanPositions/m.block) }

// SpanBytes is the memory a span of blocks blocks holds: a byte a
// position, each component's running count every 4,096 positions, and
// where each component's draws start.
func (m *Mixture) SpanBytes(blocks int) int64 {
	n := int64(blocks) * int64(m.block)
	strides := (n + mixSpanStride - 1) / mixSpanStride
	return n + strides*int64(len(m.weights))*4 + int64(len(m.weights))*16
}

// A MixSpan is blocks of one epoch of a Mixture, materialised: each
// position's component, and the counts that place each position in its
// component's stream, so that any range of it is read without a random
// draw, in O(4,096 + the range's length). A server keeps the spans its
// requests read, once per (mixture, seed, epoch, span), rather than
// shuffling a block of up to MaxMixBlock slots for every batch in it.
//
// A MixSpan is immutable and safe for concurrent use.
type MixSpan struct {
	m          *Mixture
	start, end int     // its epoch positions
	comp       []uint8 // per position, its component
	first      []Draw  // per component, its first draw in the span
	// ckpt[j·k+i] is component i's positions in [start, start+j·stride).
	ckpt []int32
}

// Span materialises blocks [first, first+blocks) of epoch epoch. It costs
// O(k log k) per block for its counts (from the nearest checkpoint) and
// O(K) per block for its slots, and holds SpanBytes(blocks); locating
// each component's first draw costs a division, or a PassLen call for
// every pass before it when the component's passes differ in length. It
// panics unless the blocks are in the epoch.
func (m *Mixture) Span(seed, epoch uint64, first, blocks int) *MixSpan {
	if first < 0 || blocks < 1 || first+blocks > m.length/m.block {
		panic(fmt.Sprintf("shuffle: Mixture.Span(%d, %d) outside the epoch's %d blocks", first, blocks, m.length/m.block))
	}
	if m.segs == nil {
		return m.Epoch(epoch).Span(seed, epoch, first, blocks)
	}
	k := len(m.weights)
	cur := m.countsAt(first)
	before := cur.counts(make([]int, 0, k)) // each component's samples in the epoch before the span
	sp := &MixSpan{m: m, start: first * m.block, end: (first + blocks) * m.block,
		comp: make([]uint8, 0, blocks*m.block), first: make([]Draw, k)}
	for i, c := range before {
		sp.first[i] = m.draw(i, epoch, c)
	}
	at := slices.Clone(before) // each component's samples before the block
	after := make([]int, 0, k)
	cnt := make([]int, k)
	for b := first; b < first+blocks; b++ {
		cur.next()
		after = cur.counts(after[:0])
		for i := range cnt {
			cnt[i] = after[i] - at[i]
		}
		sp.comp = m.slots(sp.comp, seed, epoch, b, cnt)
		at, after = after, at
	}
	run := make([]int32, k)
	sp.ckpt = make([]int32, 0, (len(sp.comp)+mixSpanStride-1)/mixSpanStride*k)
	for p, c := range sp.comp {
		if p%mixSpanStride == 0 {
			sp.ckpt = append(sp.ckpt, run...)
		}
		run[c]++
	}
	return sp
}

// Start and End are the span's epoch positions, [Start, End).
func (sp *MixSpan) Start() int { return sp.start }
func (sp *MixSpan) End() int   { return sp.end }

// Bytes is the memory the span holds, its Mixture's SpanBytes.
func (sp *MixSpan) Bytes() int64 { return sp.m.SpanBytes((sp.end - sp.start) / sp.m.block) }

// AppendRange is Mixture.AppendRange for positions [start, end) within
// the span; it panics outside it.
func (sp *MixSpan) AppendRange(dst []Draw, start, end int) []Draw {
	if start < sp.start || end < start || end > sp.end {
		panic(fmt.Sprintf("shuffle: MixSpan.AppendRange(%d, %d) outside [%d, %d]", start, end, sp.start, sp.end))
	}
	if start == end {
		return dst
	}
	k := len(sp.first)
	lo := start - sp.start
	j := lo / mixSpanStride
	seen := make([]int, k) // each component's positions in the span before the next
	for i, c := range sp.ckpt[j*k : (j+1)*k] {
		seen[i] = int(c)
	}
	for _, c := range sp.comp[j*mixSpanStride : lo] {
		seen[c]++
	}
	// Each component's next draw, and the length of its pass.
	next := make([]Draw, k)
	size := make([]int, k)
	for i := range next {
		next[i] = sp.m.advance(sp.first[i], seen[i])
		size[i] = sp.m.passLen(i, next[i].Pass)
	}
	for _, c := range sp.comp[lo : end-sp.start] {
		d := next[c]
		dst = append(dst, d)
		if d.Pass == math.MaxUint64 {
			continue
		}
		if d.Index++; d.Index == size[c] {
			d = sp.m.nextPass(d)
			size[c] = sp.m.passLen(int(c), d.Pass)
		}
		next[c] = d
	}
	return dst
}

// draw is the draw of component i's sample number c of the epoch: its
// stream position Q = start_i + c, start_i the epoch's, located in the
// component's passes (locate). m is an epoch's view (Epoch).
func (m *Mixture) draw(i int, _ uint64, c int) Draw {
	lo, carry := bits.Add64(m.startLo[i], uint64(c), 0)
	return m.locate(i, m.startHi[i]+carry, lo)
}

// locate returns the draw of stream position Q = hi·2^64 + lo of
// component i. With equal passes of N_i that is pass Q / N_i, index
// Q mod N_i, computed in 128 bits: Q / N_i overflows 64 bits only past
// 2^64 passes, which callers' epoch bounds rule out; it then saturates.
// Otherwise it subtracts the passes' lengths from Q, pass 0 first, up to
// MaxMixPasses passes, past which it saturates.
func (m *Mixture) locate(i int, hi, lo uint64) Draw {
	if n, ok := m.passes[i].(EqualPasses); ok {
		size := uint64(n)
		if hi >= size {
			return Draw{Component: i, Pass: math.MaxUint64}
		}
		pass, idx := bits.Div64(hi, lo, size)
		return Draw{Component: i, Pass: pass, Index: int(idx)}
	}
	for p := uint64(0); p < MaxMixPasses; p++ {
		n := uint64(m.passLen(i, p))
		if hi == 0 && lo < n {
			return Draw{Component: i, Pass: p, Index: int(lo)}
		}
		var borrow uint64
		lo, borrow = bits.Sub64(lo, n, 0)
		hi -= borrow
	}
	return Draw{Component: i, Pass: math.MaxUint64}
}

// advance returns the draw c positions of d's component's stream after d.
func (m *Mixture) advance(d Draw, c int) Draw {
	if n, ok := m.passes[d.Component].(EqualPasses); ok && d.Pass != math.MaxUint64 {
		q := d.Index + c // < 2^63: an index and a count of one epoch
		d.Index = q % int(n)
		if d.Pass += uint64(q / int(n)); d.Pass < uint64(q/int(n)) {
			d = Draw{Component: d.Component, Pass: math.MaxUint64}
		}
		return d
	}
	for d.Pass != math.MaxUint64 {
		left := m.passLen(d.Component, d.Pass) - d.Index
		if c < left {
			d.Index += c
			break
		}
		c -= left
		d = m.nextPass(d)
	}
	return d
}

// nextPass returns the first draw of the pass after d's, saturating past
// 2^64 passes, or past MaxMixPasses when the passes differ in length.
func (m *Mixture) nextPass(d Draw) Draw {
	_, equal := m.passes[d.Component].(EqualPasses)
	if d.Pass == math.MaxUint64 || (!equal && d.Pass+1 >= MaxMixPasses) {
		return Draw{Component: d.Component, Pass: math.MaxUint64}
	}
	return Draw{Component: d.Component, Pass: d.Pass + 1}
}

// passLen is the length of pass p of component i, which must be at least
// 1: a pass of no positions would leave a stream position nowhere.
func (m *Mixture) passLen(i int, p uint64) int {
	if p == math.MaxUint64 {
		return 1
	}
	n := m.passes[i].PassLen(p)
	if n < 1 {
		panic(fmt.Sprintf("shuffle: mixture component %d: pass %d holds %d positions; a pass holds at least one", i, p, n))
	}
	return n
}
