package shuffle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// bruteCounts runs the block rule from block 0 without checkpoints or
// periods: C(b) for b = 0..blocks.
func bruteCounts(m *Mixture, blocks int) [][]int {
	k := m.Components()
	u := make([]int, k)
	st := newMixState(m)
	out := [][]int{make([]int, k)}
	for b := 0; b < blocks; b++ {
		st.step(uint64(b%m.period), u)
		c := make([]int, k)
		for i := range c {
			// u counts extra units within the current period.
			c[i] = (b+1)/m.period*m.perPeriod[i] + (b+1)%m.period*m.base[i]
		}
		if (b+1)%m.period == 0 {
			clear(u)
		}
		for i := range c {
			c[i] += u[i]
		}
		out = append(out, c)
	}
	return out
}

// checkQuota fails unless every block holds floor or ceil of K·w_i of each
// component and every cumulative count after b blocks is floor or ceil of
// b·K·w_i: |A·count − K·a_i·b| < A.
func checkQuota(t *testing.T, m *Mixture, blocks int) {
	t.Helper()
	A := int64(m.sum)
	prev := m.counts(0)
	for b := 1; b <= blocks; b++ {
		cur := m.counts(b)
		sum := 0
		for i, a := range m.weights {
			exact := int64(m.block) * int64(a) // per block, times A
			got := int64(cur[i]-prev[i]) * A
			if d := got - exact; d <= -A || d >= A {
				t.Fatalf("weights %v K=%d: block %d holds %d of component %d; want within one of %d/%d",
					m.weights, m.block, b-1, cur[i]-prev[i], i, exact, A)
			}
			cum := int64(cur[i])*A - int64(b)*exact
			if cum <= -A || cum >= A {
				t.Fatalf("weights %v K=%d: after %d blocks component %d has %d; want within one of %d/%d",
					m.weights, m.block, b, i, cur[i], int64(b)*exact, A)
			}
			sum += cur[i] - prev[i]
		}
		if sum != m.block {
			t.Fatalf("block %d holds %d samples, want %d", b-1, sum, m.block)
		}
		prev = cur
	}
}

func TestMixtureQuotaRandomWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 150 {
		k := 2 + r.IntN(7)
		w := make([]uint64, k)
		sizes := make([]int, k)
		for i := range w {
			w[i] = 1 + r.Uint64N([]uint64{3, 10, 100, 1000}[r.IntN(4)])
			sizes[i] = 1 + r.IntN(500)
		}
		K := 1 + r.IntN(70)
		blocks := 300
		m, err := NewMixture(w, sizes, K, K*blocks)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		checkQuota(t, m, blocks)
		want := bruteCounts(m, blocks)
		for b := range want {
			if got := m.counts(b); fmt.Sprint(got) != fmt.Sprint(want[b]) {
				t.Fatalf("trial %d weights %v K=%d: C(%d) = %v from checkpoints, %v run from 0", trial, w, K, b, got, want[b])
			}
		}
	}
}

// TestMixtureEveryPassOnce: over several epochs, each component's draws
// are its stream positions 0, 1, 2, … in order of its slots, so each
// pass reads every index once; the small component is repeated, the
// large one read on from where the last epoch stopped.
func TestMixtureEveryPassOnce(t *testing.T) {
	sizes := []int{1000, 300, 37}
	m, err := NewMixture([]uint64{5, 3, 2}, sizes, 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumSamples() != 1344 { // 1337 rounded up to 42 blocks of 32
		t.Fatalf("length %d", m.NumSamples())
	}
	next := make([]int, 3) // stream position expected next
	for e := range uint64(4) {
		draws := m.AppendRange(nil, 9, e, 0, m.NumSamples())
		per := make([]int, 3)
		for _, d := range draws {
			q := int(d.Pass)*sizes[d.Component] + d.Index
			if q != next[d.Component] {
				t.Fatalf("epoch %d: component %d drew stream position %d, want %d", e, d.Component, q, next[d.Component])
			}
			next[d.Component]++
			per[d.Component]++
		}
		for i := range per {
			if n := m.Epoch(e).EpochSamples(i); per[i] != n {
				t.Fatalf("epoch %d: component %d gave %d, EpochSamples says %d", e, i, per[i], n)
			}
		}
		// Ranges compose: any cut gives the same draws.
		var cut []Draw
		for s := 0; s < m.NumSamples(); s += 29 {
			cut = m.AppendRange(cut, 9, e, s, min(s+29, m.NumSamples()))
		}
		if fmt.Sprint(cut) != fmt.Sprint(draws) {
			t.Fatalf("epoch %d: ranges of 29 differ from the whole epoch", e)
		}
	}
	// 1344 · 2/10 ≈ 268.8 samples of the 37-sample component an epoch:
	// it starts about 7 passes an epoch.
	if n := m.EpochSamples(2); n < 268 || n > 269 {
		t.Fatalf("component 2 gives %d an epoch", n)
	}
}

func TestMixtureSlotsDependOnSeedEpochBlock(t *testing.T) {
	m, err := NewMixture([]uint64{1, 1}, []int{100, 100}, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := fmt.Sprint(m.Slots(1, 0, 0)), fmt.Sprint(m.Slots(2, 0, 0)), fmt.Sprint(m.Slots(1, 1, 0))
	if a == b || a == c || a == fmt.Sprint(m.Slots(1, 0, 1)) {
		t.Fatalf("slots do not depend on seed, epoch and block: %s %s %s", a, b, c)
	}
}

func TestNewMixtureRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w     []uint64
		sizes []int
		k, l  int
	}{
		{"no components", nil, nil, 8, 0},
		{"zero weight", []uint64{1, 0}, []int{1, 1}, 8, 0},
		{"empty component", []uint64{1, 1}, []int{1, 0}, 8, 0},
		{"sizes mismatch", []uint64{1, 1}, []int{1}, 8, 0},
		{"block 0", []uint64{1}, []int{1}, 0, 0},
		{"block too large", []uint64{1}, []int{1}, MaxMixBlock + 1, 0},
		{"weights too large", []uint64{MaxMixWeightSum, 1}, []int{1, 1}, 8, 0},
		{"negative length", []uint64{1}, []int{1}, 8, -1},
		// Weights 1000000:1100001 repeat their rounding only every
		// 2,100,001 blocks of 1: over 2 components that is past
		// MaxMixWork.
		{"rounding past the work bound", []uint64{1000000, 1100001}, []int{1, 1}, 1, MaxMixWork},
	} {
		if _, err := NewMixture(tc.w, tc.sizes, tc.k, tc.l); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", tc.name, err)
		}
	}
}

// TestMixSpanRanges: a span reads every range of its positions as the
// whole-epoch draws give it, across its running-count strides and
// whatever blocks it was cut from, and holds what SpanBytes says.
func TestMixSpanRanges(t *testing.T) {
	m, err := NewMixture([]uint64{5, 3, 2}, []int{1000, 300, 37}, 3000, 30000)
	if err != nil {
		t.Fatal(err)
	}
	all := m.AppendRange(nil, 4, 2, 0, m.NumSamples())
	sp := m.Span(4, 2, 2, 5) // blocks 2..6: positions [6000, 21000)
	if sp.Start() != 6000 || sp.End() != 21000 || sp.Bytes() != m.SpanBytes(5) || sp.Bytes() < 15000 {
		t.Fatalf("span [%d, %d) of %d bytes", sp.Start(), sp.End(), sp.Bytes())
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		s := 6000 + r.IntN(15000)
		e := s + r.IntN(21000-s+1)
		if got, want := fmt.Sprint(sp.AppendRange(nil, s, e)), fmt.Sprint(all[s:e]); got != want {
			t.Fatalf("[%d, %d): the span gives %.80s…, the epoch %.80s…", s, e, got, want)
		}
	}
	if got := m.SpanBlocks(); got != 21 { // 65536 / 3000
		t.Errorf("SpanBlocks %d", got)
	}
}

func BenchmarkMixtureRange(b *testing.B) {
	m, err := NewMixture([]uint64{7, 2, 1}, []int{1 << 20, 1 << 18, 1 << 16}, 256, 0)
	if err != nil {
		b.Fatal(err)
	}
	var dst []Draw
	for i := 0; b.Loop(); i++ {
		s := (i * 256) % (m.NumSamples() - 256)
		dst = m.AppendRange(dst[:0], 1, 3, s, s+256)
	}
}

// TestMixturePassesDifferInLength: with passes of lengths that change
// from pass to pass (some of one position), each component's draws over
// several epochs walk its stream in order: every index of a pass once,
// then the next pass from index 0; ranges and spans of any cut give the
// same draws.
func TestMixturePassesDifferInLength(t *testing.T) {
	lens := []func(p uint64) int{
		func(p uint64) int { return 40 + int(p*7%13) },
		func(p uint64) int { return 1 + int(p%3) }, // 1, 2, 3, 1, 2, 3, …
		func(p uint64) int { return 9 },
	}
	passes := []Passes{PassesFunc(lens[0]), PassesFunc(lens[1]), EqualPasses(9)}
	m, err := NewMixtureOf([]uint64{5, 3, 2}, passes, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumSamples() != 56 || m.Size(0) != 40 || m.Size(1) != 1 { // 40 + 1 + 9 rounded up to 7 blocks of 8
		t.Fatalf("length %d, sizes %d %d", m.NumSamples(), m.Size(0), m.Size(1))
	}
	next := make([]Draw, 3) // each component's draw expected next
	for i := range next {
		next[i].Component = i
	}
	for e := range uint64(40) {
		draws := m.AppendRange(nil, 9, e, 0, m.NumSamples())
		for i := range next {
			if got := m.Start(i, e); got != next[i] {
				t.Fatalf("epoch %d: Start(%d) = %+v, want %+v", e, i, got, next[i])
			}
		}
		for _, d := range draws {
			if d != next[d.Component] {
				t.Fatalf("epoch %d: component %d drew %+v, want %+v", e, d.Component, d, next[d.Component])
			}
			n := &next[d.Component]
			if n.Index++; n.Index == lens[d.Component](n.Pass) {
				n.Pass, n.Index = n.Pass+1, 0
			}
		}
		var cut []Draw
		for s := 0; s < m.NumSamples(); s += 5 {
			cut = m.AppendRange(cut, 9, e, s, min(s+5, m.NumSamples()))
		}
		sp := m.Span(9, e, 0, m.NumSamples()/m.Block())
		if fmt.Sprint(cut) != fmt.Sprint(draws) || fmt.Sprint(sp.AppendRange(nil, 13, 50)) != fmt.Sprint(draws[13:50]) {
			t.Fatalf("epoch %d: ranges differ from the whole epoch", e)
		}
	}
	// 40 epochs of 56·2/10 ≈ 11 draws of component 1, whose passes hold
	// 2 on average: past its pass 200.
	if next[1].Pass < 200 {
		t.Fatalf("component 1 reached pass %d", next[1].Pass)
	}
}

// TestMixtureEqualPassesEitherWay: passes of one length given as a
// function, which the mixture walks pass by pass, draw as EqualPasses
// do, which it divides.
func TestMixtureEqualPassesEitherWay(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		k := 1 + r.IntN(4)
		w := make([]uint64, k)
		sizes := make([]int, k)
		funcs := make([]Passes, k)
		for i := range w {
			w[i] = 1 + r.Uint64N(10)
			n := 1 + r.IntN(50)
			sizes[i], funcs[i] = n, PassesFunc(func(uint64) int { return n })
		}
		K := 1 + r.IntN(20)
		a, err := NewMixture(w, sizes, K, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewMixtureOf(w, funcs, K, 0)
		if err != nil {
			t.Fatal(err)
		}
		for e := range uint64(5) {
			da := a.AppendRange(nil, uint64(trial), e, 0, a.NumSamples())
			db := b.AppendRange(nil, uint64(trial), e, 0, b.NumSamples())
			if fmt.Sprint(da) != fmt.Sprint(db) {
				t.Fatalf("trial %d epoch %d: divided %v, walked %v", trial, e, da, db)
			}
		}
	}
}

func TestNewMixtureOfRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		passes []Passes
	}{
		{"nil passes", []Passes{EqualPasses(3), nil}},
		{"empty pass 0", []Passes{EqualPasses(3), PassesFunc(func(p uint64) int { return int(p) })}},
		{"too few", []Passes{EqualPasses(3)}},
	} {
		if _, err := NewMixtureOf([]uint64{1, 1}, tc.passes, 4, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", tc.name, err)
		}
	}
}

// TestStartCountsBefore: over passes of one sample, an epoch of one
// block's view starts each component's stream at its count of samples in
// the global blocks before it, as an epoch of many blocks counts them
// block by block (Cumulative), for a mixture and a schedule of blocks of
// one.
func TestStartCountsBefore(t *testing.T) {
	weights := []uint64{3, 7, 2}
	one, err := NewMixture(weights, []int{1, 1, 1}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	long, err := NewMixture(weights, []int{1, 1, 1}, 1, 500)
	if err != nil {
		t.Fatal(err)
	}
	for b := range 500 {
		for i := range weights {
			if got, want := one.Epoch(uint64(b)).Start(i, uint64(b)).Pass, uint64(long.Cumulative(b, i)); got != want {
				t.Fatalf("block %d component %d: %d before, the epoch's cumulative %d", b, i, got, want)
			}
		}
	}
	phases := []SchedulePhase{{Step: 0, Weights: []uint64{1, 1, 0}}, {Step: 40, Weights: weights}, {Step: 90, End: 130, Weights: []uint64{1, 0, 1}}}
	passes := []Passes{EqualPasses(1), EqualPasses(1), EqualPasses(1)}
	s1, err := NewSchedule(phases, passes, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	s300, err := NewSchedule(phases, passes, 1, 300)
	if err != nil {
		t.Fatal(err)
	}
	e0, err := s300.Epoch(0)
	if err != nil {
		t.Fatal(err)
	}
	for b := range 300 {
		m, err := s1.Epoch(uint64(b))
		if err != nil {
			t.Fatal(err)
		}
		for i := range weights {
			if got, want := m.Start(i, uint64(b)).Pass, uint64(e0.Cumulative(b, i)); got != want {
				t.Fatalf("schedule, step %d component %d: %d before, the epoch's cumulative %d", b, i, got, want)
			}
		}
	}
}
