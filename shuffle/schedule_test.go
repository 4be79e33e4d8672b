package shuffle

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"
)

func equalPasses(sizes ...int) []Passes {
	p := make([]Passes, len(sizes))
	for i, n := range sizes {
		p[i] = EqualPasses(n)
	}
	return p
}

// walkCounts returns C(b) of an epoch for b = 0..blocks.
func walkCounts(m *Mixture) [][]int {
	blocks := m.NumSamples() / m.Block()
	cur := m.countsAt(0)
	out := make([][]int, 0, blocks+1)
	for b := 0; ; b++ {
		out = append(out, cur.counts(nil))
		if b == blocks {
			return out
		}
		cur.next()
	}
}

// A schedule of one constant phase is that phase's mixture, epoch for
// epoch: the same counts, draws and stream positions.
func TestScheduleOnePhaseIsMixture(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 1))
	for range 20 {
		k := 1 + rng.IntN(5)
		w := make([]uint64, k)
		sizes := make([]int, k)
		for i := range w {
			w[i] = 1 + rng.Uint64N(30)
			sizes[i] = 1 + rng.IntN(200)
		}
		block := 1 + rng.IntN(40)
		mix, err := NewMixture(w, sizes, block, 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSchedule([]SchedulePhase{{Weights: w}}, equalPasses(sizes...), block, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []uint64{0, 1, 2, 7} {
			m, err := s.Epoch(e)
			if err != nil {
				t.Fatal(err)
			}
			want := mix.AppendRange(nil, 9, e, 0, mix.NumSamples())
			got := m.AppendRange(nil, 9, e, 0, m.NumSamples())
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("weights %v K=%d epoch %d: the schedule's draws differ from the mixture's", w, block, e)
			}
			me := mix.Epoch(e)
			for i := range k {
				if m.EpochSamples(i) != me.EpochSamples(i) || m.ComponentWindow(i, 5) != mix.ComponentWindow(i, 5) {
					t.Fatalf("component %d: n %d window %d, want %d %d", i, m.EpochSamples(i), m.ComponentWindow(i, 5), me.EpochSamples(i), mix.ComponentWindow(i, 5))
				}
			}
		}
	}
}

// checkStreams fails unless every component's draws over epochs [0,
// epochs) of s are its stream positions 0, 1, 2, … in order: no phase
// change repeats or skips a sample of it.
func checkStreams(t *testing.T, s *Schedule, sizes []int, epochs uint64) {
	t.Helper()
	next := make([]uint64, len(sizes))
	for e := range epochs {
		m, err := s.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		for p, d := range m.AppendRange(nil, 3, e, 0, m.NumSamples()) {
			i := d.Component
			if q := d.Pass*uint64(sizes[i]) + uint64(d.Index); q != next[i] {
				t.Fatalf("epoch %d position %d: component %d at stream position %d, want %d", e, p, i, q, next[i])
			}
			next[i]++
		}
		for i := range sizes {
			st := m.Start(i, e)
			if q := st.Pass*uint64(sizes[i]) + uint64(st.Index); q != next[i]-uint64(m.EpochSamples(i)) {
				t.Fatalf("epoch %d: component %d starts at %d, want %d", e, i, q, next[i]-uint64(m.EpochSamples(i)))
			}
		}
	}
}

func TestScheduleStreamsContinueAcrossPhases(t *testing.T) {
	sizes := []int{40, 30, 3}
	// 80 positions an epoch, K = 8: 10 steps an epoch. Phases change
	// within epochs and across them, a ramp crosses an epoch boundary, a
	// weight goes to 0 and back.
	phases := []SchedulePhase{
		{Step: 0, Weights: []uint64{7, 2, 1}},
		{Step: 4, Weights: []uint64{3, 7, 0}},
		{Step: 13, End: 27, Weights: []uint64{1, 1, 8}},
		{Step: 31, Weights: []uint64{5, 0, 5}},
	}
	s, err := NewSchedule(phases, equalPasses(sizes...), 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkStreams(t, s, sizes, 6)
}

// rampTargets returns, for n = 0..blocks, each component's ideal count
// over a ramp segment's first n blocks from step s0, from the definition:
// the sum of K·w_i(s), w_i(s) = (1−λ)·prev_i/Σprev + λ·next_i/Σnext,
// λ = (s−S)/(E−S).
func rampTargets(prev, next []uint64, S, E, s0 uint64, K, blocks int) [][]*big.Rat {
	var ps, ns uint64
	for i := range prev {
		ps += prev[i]
		ns += next[i]
	}
	out := [][]*big.Rat{make([]*big.Rat, len(prev))}
	for i := range prev {
		out[0][i] = new(big.Rat)
	}
	for t := range blocks {
		s := s0 + uint64(t)
		lam := big.NewRat(int64(s-S), int64(E-S))
		row := make([]*big.Rat, len(prev))
		for i := range prev {
			w := new(big.Rat).Mul(new(big.Rat).Sub(big.NewRat(1, 1), lam), big.NewRat(int64(prev[i]), int64(ps)))
			w.Add(w, new(big.Rat).Mul(lam, big.NewRat(int64(next[i]), int64(ns))))
			row[i] = w.Add(out[t][i], w.Mul(w, big.NewRat(int64(K), 1)))
		}
		out = append(out, row)
	}
	return out
}

// Over a ramp every block holds K samples, no count is negative and every
// component stays within one sample of its cumulative share, on random
// ramps, weights with zeros among them.
func TestScheduleRampWithinOneOfShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 2))
	worst := new(big.Rat)
	for range 150 {
		k := 2 + rng.IntN(6)
		prev, next := make([]uint64, k), make([]uint64, k)
		sizes := make([]int, k)
		for i := range k {
			if rng.IntN(3) > 0 {
				prev[i] = rng.Uint64N(20)
			}
			if rng.IntN(3) > 0 {
				next[i] = rng.Uint64N(20)
			}
			sizes[i] = 1 + rng.IntN(50)
		}
		prev[rng.IntN(k)]++
		next[rng.IntN(k)]++
		K := 1 + rng.IntN(24)
		S := 1 + uint64(rng.IntN(5))
		E := S + 1 + uint64(rng.IntN(200))
		s, err := NewSchedule([]SchedulePhase{{Weights: prev}, {Step: S, End: E, Weights: next}}, equalPasses(sizes...), K, K*int(E+10))
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.Epoch(0)
		if err != nil {
			t.Fatal(err)
		}
		c := walkCounts(m)
		T := rampTargets(prev, next, S, E, S, K, int(E-S))
		for b := int(S); b < int(E); b++ {
			sum := 0
			for i := range k {
				d := c[b+1][i] - c[b][i]
				if d < 0 {
					t.Fatalf("ramp %v→%v K=%d over [%d,%d): block %d holds %d of component %d", prev, next, K, S, E, b, d, i)
				}
				sum += d
			}
			if sum != K {
				t.Fatalf("block %d holds %d, want %d", b, sum, K)
			}
			for i := range k {
				lag := new(big.Rat).Sub(big.NewRat(int64(c[b+1][i]-c[S][i]), 1), T[b+1-int(S)][i])
				if lag.Abs(lag).Cmp(worst) > 0 {
					worst.Set(lag)
				}
				if lag.Cmp(big.NewRat(1, 1)) > 0 {
					t.Fatalf("ramp %v→%v K=%d over [%d,%d): after block %d component %d has %d against a share of %s",
						prev, next, K, S, E, b, i, c[b+1][i]-c[S][i], T[b+1-int(S)][i].FloatString(3))
				}
			}
		}
	}
	t.Logf("largest |count − share| over the ramps: %s", worst.FloatString(4))
}

// Within each phase, every window of 1,000 global batches (steps, K = the
// global batch) from the phase's start holds each source within one
// sample of its share; over the ramp each source stays within one of its
// cumulative share.
func TestSchedulePhaseSharesPer1000Batches(t *testing.T) {
	const K = 64
	const epochBlocks = 10000
	sizes := []int{300000, 200000, 140000}
	phases := []SchedulePhase{
		{Step: 0, Weights: []uint64{7, 2, 1}},
		{Step: 3000, Weights: []uint64{3, 5, 2}},
		{Step: 5000, End: 7000, Weights: []uint64{1, 1, 8}},
	}
	s, err := NewSchedule(phases, equalPasses(sizes...), K, K*epochBlocks)
	if err != nil {
		t.Fatal(err)
	}
	var all [][]int // C(step) across two epochs
	for e := range uint64(2) {
		m, err := s.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		c := walkCounts(m)
		off := make([]int, 3)
		if len(all) > 0 {
			off = all[len(all)-1]
			c = c[1:]
		}
		for _, row := range c {
			r := make([]int, 3)
			for i := range r {
				r[i] = row[i] + off[i]
			}
			all = append(all, r)
		}
	}
	windows := 0
	for _, ph := range []struct {
		from, to int
		w        []int64
	}{{0, 3000, []int64{7, 2, 1}}, {3000, 5000, []int64{3, 5, 2}}, {7000, 20000, []int64{1, 1, 8}}} {
		for b := ph.from; b+1000 <= ph.to; b += 1000 {
			for i, a := range ph.w {
				got := int64(all[b+1000][i] - all[b][i])
				if d := got*10 - 1000*K*a; d < -10 || d > 10 {
					t.Errorf("steps [%d, %d): source %d has %d samples, share %d/10", b, b+1000, i, got, 1000*K*a)
				}
			}
			windows++
		}
	}
	// The ramp: cumulative shares from its start within one.
	T := rampTargets([]uint64{3, 5, 2}, []uint64{1, 1, 8}, 5000, 7000, 5000, K, 2000)[2000]
	for i := range 3 {
		lag := new(big.Rat).Sub(big.NewRat(int64(all[7000][i]-all[5000][i]), 1), T[i])
		if lag.Abs(lag).Cmp(big.NewRat(1, 1)) > 0 {
			t.Errorf("over the ramp source %d has %d against %s", i, all[7000][i]-all[5000][i], T[i].FloatString(2))
		}
	}
	if windows != 18 {
		t.Fatalf("checked %d windows", windows)
	}
	checkStreams(t, s, sizes, 2)
}

func TestNewScheduleRejects(t *testing.T) {
	w := []uint64{1, 1}
	p := equalPasses(10, 10)
	many := make([]SchedulePhase, MaxSchedulePhases+1)
	for i := range many {
		many[i] = SchedulePhase{Step: uint64(i), Weights: w}
	}
	for name, ph := range map[string][]SchedulePhase{
		"no phases":           nil,
		"too many phases":     many,
		"first not at 0":      {{Step: 1, Weights: w}},
		"first a ramp":        {{Step: 0, End: 5, Weights: w}},
		"weights sum to 0":    {{Weights: w}, {Step: 3, Weights: []uint64{0, 0}}},
		"out of order":        {{Weights: w}, {Step: 5, Weights: w}, {Step: 4, Weights: w}},
		"same step":           {{Weights: w}, {Step: 5, Weights: w}, {Step: 5, Weights: w}},
		"ramp overlaps":       {{Weights: w}, {Step: 5, End: 9, Weights: w}, {Step: 8, Weights: w}},
		"ramp ends at start":  {{Weights: w}, {Step: 5, End: 5, Weights: w}},
		"ramp ends before":    {{Weights: w}, {Step: 5, End: 3, Weights: w}},
		"step at 2^53":        {{Weights: w}, {Step: 1 << 53, Weights: w}},
		"ramp end at 2^53":    {{Weights: w}, {Step: 4, End: 1 << 53, Weights: w}},
		"weights per phase":   {{Weights: w}, {Step: 3, Weights: []uint64{1, 1, 1}}},
		"weights sum too big": {{Weights: w}, {Step: 3, Weights: []uint64{1 << 30, 1 << 30, 1}[:2]}, {Step: 4, Weights: []uint64{1 << 31, 1}}},
	} {
		if _, err := NewSchedule(ph, p, 4, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	if _, err := NewSchedule([]SchedulePhase{{Weights: w}, {Step: 3, Weights: []uint64{0, 1}}}, p, 4, 0); err != nil {
		t.Errorf("a weight of 0 in a phase: %v", err)
	}
	ramp := []SchedulePhase{{Weights: w}, {Step: 1, End: MaxScheduleWork, Weights: []uint64{2, 1}}}
	if _, err := NewSchedule(ramp, p, 4, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("a ramp over MaxScheduleWork: err %v", err)
	}
}
