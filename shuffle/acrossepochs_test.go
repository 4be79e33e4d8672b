package shuffle

import (
	"fmt"
	"math/big"
	"testing"
)

// epochsComps returns the component of every position of epochs
// [0, epochs) of an order, one epoch after another, and checks that each
// component's draws are its stream positions 0, 1, 2, … in order across
// the epochs (no sample twice, none skipped) and that each epoch reads
// its EpochSamples of each.
func epochsComps(t *testing.T, name string, epoch func(e uint64) *Mixture, sizes []int, epochs int) []int {
	t.Helper()
	var comps []int
	next := make([]uint64, len(sizes))
	for e := range uint64(epochs) {
		m := epoch(e)
		per := make([]int, len(sizes))
		for _, d := range m.AppendRange(nil, 3, e, 0, m.NumSamples()) {
			if q := d.Pass*uint64(sizes[d.Component]) + uint64(d.Index); q != next[d.Component] {
				t.Fatalf("%s epoch %d: component %d drew stream position %d, want %d", name, e, d.Component, q, next[d.Component])
			}
			next[d.Component]++
			per[d.Component]++
			comps = append(comps, d.Component)
		}
		for i, n := range per {
			if n != m.EpochSamples(i) {
				t.Fatalf("%s epoch %d: component %d read %d, EpochSamples says %d", name, e, i, n, m.EpochSamples(i))
			}
		}
	}
	return comps
}

// A window's count against its exact share, share = num/den: the count
// minus the share.
func windowError(count int, num, den int64) *big.Rat {
	return new(big.Rat).Sub(big.NewRat(int64(count), 1), big.NewRat(num, den))
}

// prefixCounts returns, per component, its positions in blocks [0, b)
// for every b: the block counts summed.
func prefixCounts(comps []int, k, block int) [][]int {
	blocks := len(comps) / block
	out := make([][]int, blocks+1)
	out[0] = make([]int, k)
	for b := range blocks {
		out[b+1] = append([]int(nil), out[b]...)
		for _, c := range comps[b*block : (b+1)*block] {
			out[b+1][c]++
		}
	}
	return out
}

// Every window of blocks of a mixture holds each component within its
// share across epoch boundaries, as within an epoch: the counts run on the
// global block index (docs/shuffle.md §11.2). With epochs whose L/K is not
// a multiple of the period P, over at least five epoch boundaries and
// windows of 1, 7, P and 1,000 blocks at every start:
//   - a window from block 0 (a prefix) holds floor or ceil of its share:
//     |count − share| < 1;
//   - any window holds |count − share| < 2, the difference of two
//     prefixes: within one of the share when the share is whole, and
//     floor − 1 … ceil + 1 otherwise (PD² does not keep every window at
//     floor or ceil: measured up to 1.75 in windows of 7 blocks);
//   - a window of P blocks holds exactly P·K·w_i.
//
// Before the counts ran on the global index each epoch restarted the
// rule, and a window of 1,000 blocks over 55-block epochs of 1:1:1 with
// K = 4 was 6 samples off.
func TestMixtureSharesAcrossEpochs(t *testing.T) {
	for _, tc := range []struct {
		weights []uint64
		block   int
		blocks  int // L/K
	}{
		{[]uint64{1, 1, 1}, 4, 55},                    // P = 3
		{[]uint64{1, 1, 1}, 1, 10},                    // P = 3, K = 1
		{[]uint64{7, 2, 1}, 8, 13},                    // §11.7's, P = 5
		{[]uint64{5, 3, 2}, 7, 23},                    // P = 10
		{[]uint64{90, 60, 98, 60, 9, 45, 35}, 44, 50}, // §11.2's, P = 397 > L/K
	} {
		name := fmt.Sprintf("%v K=%d L/K=%d", tc.weights, tc.block, tc.blocks)
		sizes := make([]int, len(tc.weights))
		for i := range sizes {
			sizes[i] = 17 + 5*i
		}
		m, err := NewMixture(tc.weights, sizes, tc.block, tc.blocks*tc.block)
		if err != nil {
			t.Fatal(err)
		}
		P := m.Period()
		if tc.blocks%P == 0 {
			t.Fatalf("%s: L/K a multiple of P = %d", name, P)
		}
		// At least five boundaries and 1,000-block windows besides.
		epochs := max(6, (1000+2*P)/tc.blocks+2)
		comps := epochsComps(t, name, m.Epoch, sizes, epochs)
		k, K, A := len(tc.weights), int64(tc.block), int64(m.sum)
		pre := prefixCounts(comps, k, tc.block)
		total := len(pre) - 1
		one, two := big.NewRat(1, 1), big.NewRat(2, 1)
		for b := range total + 1 {
			for i := range k {
				d := windowError(pre[b][i], int64(b)*K*int64(m.weights[i]), A)
				if d.Abs(d).Cmp(one) >= 0 {
					t.Fatalf("%s: blocks [0, %d) hold %d of component %d; share %s", name, b, pre[b][i], i, big.NewRat(int64(b)*K*int64(m.weights[i]), A).FloatString(2))
				}
			}
		}
		worst := new(big.Rat)
		for _, w := range []int{1, 7, P, 1000} {
			if w > total {
				t.Fatalf("%s: %d blocks hold no window of %d", name, total, w)
			}
			for s := 0; s+w <= total; s++ {
				for i := range k {
					n := pre[s+w][i] - pre[s][i]
					share := big.NewRat(int64(w)*K*int64(m.weights[i]), A)
					d := windowError(n, int64(w)*K*int64(m.weights[i]), A)
					d.Abs(d)
					if d.Cmp(worst) > 0 {
						worst = d
					}
					bad := d.Cmp(two) >= 0 || (share.IsInt() && d.Cmp(one) > 0) || (w == P && d.Sign() != 0)
					if bad {
						t.Fatalf("%s: blocks [%d, %d) (epochs %d–%d) hold %d of component %d; share %s", name, s, s+w, s/tc.blocks, (s+w-1)/tc.blocks, n, i, share.FloatString(2))
					}
				}
			}
		}
		t.Logf("%s: %d epochs, largest |count − share| in a window %s", name, epochs, worst.FloatString(2))
	}
}

// A schedule's pieces hold their shares across epoch boundaries: each
// piece's counts run on its global steps from its first (docs/shuffle.md
// §11.9). With 55-step epochs (L/K not a multiple of either constant
// phase's period), over more than 90 epoch boundaries:
//   - a constant phase is a mixture from its first step: every window from
//     its start within one (exclusive), every window in it |count −
//     share| < 2 and within one where the share is whole, every window of
//     P steps exact (windows of 1, 7, P and 1,000 steps at every start);
//   - the ramp: every prefix from its first step within one of its
//     cumulative share (the carried-deficit rule's bound, measured, not
//     proven: docs/shuffle.md §11.9), so every window in it within two;
//   - each component's stream continues across epochs and phases.
//
// Before, each epoch's part of a piece was counted afresh, and a window
// of 1,000 steps of the 1:1:1 phase gathered an error per part.
func TestScheduleSharesAcrossEpochs(t *testing.T) {
	const K, blocks = 4, 55
	sizes := []int{29, 31, 37}
	phases := []SchedulePhase{
		{Step: 0, Weights: []uint64{1, 1, 1}},               // P = 3
		{Step: 2000, End: 3200, Weights: []uint64{5, 3, 2}}, // a ramp to 5:3:2, P = 5 after
	}
	s, err := NewSchedule(phases, equalPasses(sizes...), K, blocks*K)
	if err != nil {
		t.Fatal(err)
	}
	const steps = 5000
	comps := epochsComps(t, "schedule", func(e uint64) *Mixture {
		m, err := s.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, sizes, steps/blocks+1)
	pre := prefixCounts(comps, 3, K)
	one, two := big.NewRat(1, 1), big.NewRat(2, 1)
	for _, ph := range []struct {
		from, to int
		w        []int64
		period   int
	}{{0, 2000, []int64{1, 1, 1}, 3}, {3200, steps, []int64{5, 3, 2}, 5}} {
		A := ph.w[0] + ph.w[1] + ph.w[2]
		worst := new(big.Rat)
		for _, w := range []int{1, 7, ph.period, 1000} {
			for b := ph.from; b+w <= ph.to; b++ {
				for i, a := range ph.w {
					n := pre[b+w][i] - pre[b][i]
					share := big.NewRat(int64(w)*K*a, A)
					d := windowError(n, int64(w)*K*a, A)
					d.Abs(d)
					if d.Cmp(worst) > 0 {
						worst = d
					}
					bad := d.Cmp(two) >= 0 || (share.IsInt() && d.Cmp(one) > 0) || (w == ph.period && d.Sign() != 0)
					if b == ph.from && d.Cmp(one) >= 0 {
						bad = true
					}
					if bad {
						t.Fatalf("phase from %d: steps [%d, %d) (epochs %d–%d) hold %d of component %d; share %s", ph.from, b, b+w, b/blocks, (b+w-1)/blocks, n, i, share.FloatString(2))
					}
				}
			}
		}
		t.Logf("phase from step %d: largest |count − share| in a window %s", ph.from, worst.FloatString(2))
	}
	// The ramp [2000, 3200) from 1:1:1 to 5:3:2: the share of step s is
	// K·((1−λ)/3 + λ·a_i/10), λ = (s − 2000)/1200.
	prev, next := []int64{1, 1, 1}, []int64{5, 3, 2}
	ideal := make([][]*big.Rat, 1201) // ideal[t][i]: the share of steps [2000, 2000+t)
	ideal[0] = []*big.Rat{new(big.Rat), new(big.Rat), new(big.Rat)}
	for st := range 1200 {
		ideal[st+1] = make([]*big.Rat, 3)
		for i := range 3 {
			lam := big.NewRat(int64(st), 1200)
			x := new(big.Rat).Mul(new(big.Rat).Sub(big.NewRat(1, 1), lam), big.NewRat(prev[i], 3))
			x.Add(x, new(big.Rat).Mul(lam, big.NewRat(next[i], 10)))
			x.Mul(x, big.NewRat(K, 1))
			ideal[st+1][i] = x.Add(x, ideal[st][i])
		}
	}
	worstPrefix, worst := new(big.Rat), new(big.Rat)
	for a := range 1201 {
		for i := range 3 {
			d := new(big.Rat).Sub(big.NewRat(int64(pre[2000+a][i]-pre[2000][i]), 1), ideal[a][i])
			d.Abs(d)
			if d.Cmp(worstPrefix) > 0 {
				worstPrefix = d
			}
			if d.Cmp(one) > 0 {
				t.Fatalf("the ramp's steps [2000, %d) hold %d of component %d; share %s", 2000+a, pre[2000+a][i]-pre[2000][i], i, ideal[a][i].FloatString(2))
			}
		}
	}
	for _, w := range []int{1, 7, 1000} {
		for a := 0; a+w <= 1200; a++ {
			for i := range 3 {
				share := new(big.Rat).Sub(ideal[a+w][i], ideal[a][i])
				d := new(big.Rat).Sub(big.NewRat(int64(pre[2000+a+w][i]-pre[2000+a][i]), 1), share)
				d.Abs(d)
				if d.Cmp(worst) > 0 {
					worst = d
				}
				if d.Cmp(two) >= 0 {
					t.Fatalf("the ramp's steps [%d, %d) hold %d of component %d; share %s", 2000+a, 2000+a+w, pre[2000+a+w][i]-pre[2000+a][i], i, share.FloatString(2))
				}
			}
		}
	}
	t.Logf("the ramp: largest |count − share| from its start %s, in a window %s", worstPrefix.FloatString(2), worst.FloatString(2))
}

// A mixture whose period is too long to run the rule over (P·k past
// MaxMixWork: weights 0.000001 and 2147.483647, A = 2^31) is still
// served, as before: each epoch restarts the rule at its block 0 and
// starts its streams at e·n_i, so every epoch holds epoch 0's counts and
// the streams still continue (docs/shuffle.md §11.2, "Long periods").
func TestMixtureLongPeriodRestartsEachEpoch(t *testing.T) {
	sizes := []int{50, 70}
	m, err := NewMixture([]uint64{1, 2147483647}, sizes, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Period()*2 <= MaxMixWork {
		t.Fatalf("period %d: not past the work bound", m.Period())
	}
	e0 := m.Epoch(0)
	for _, e := range []uint64{1, 2, 9} {
		me := m.Epoch(e)
		for b := range m.NumSamples()/m.Block() + 1 {
			for i := range sizes {
				if me.Cumulative(b, i) != e0.Cumulative(b, i) {
					t.Fatalf("epoch %d block %d component %d: %d, epoch 0's %d", e, b, i, me.Cumulative(b, i), e0.Cumulative(b, i))
				}
			}
		}
		for i := range sizes {
			q := e * uint64(e0.EpochSamples(i))
			if d := m.Start(i, e); d.Pass != q/uint64(sizes[i]) || d.Index != int(q%uint64(sizes[i])) {
				t.Fatalf("epoch %d component %d starts at %+v; want stream position %d", e, i, d, q)
			}
		}
	}
	epochsComps(t, "long period", m.Epoch, sizes, 4)
}
