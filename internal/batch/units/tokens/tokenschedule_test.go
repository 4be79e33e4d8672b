package tokens_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	umix "github.com/brandgw/brand/internal/batch/units/mixture"
	utok "github.com/brandgw/brand/internal/batch/units/tokens"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/shuffle"
)

// tokenScheduleJob is a token job (seq=32, bestfit) over sched, its
// mixing block mix_block=8 sequences whatever the world.
func tokenScheduleJob(t *testing.T, sched string, batch, world int) api.Job {
	t.Helper()
	s, err := api.ParseSchedule(sched)
	if err != nil {
		t.Fatal(err)
	}
	return api.Job{Params: shuffle.Params{Seed: 5, BatchSize: batch, Window: 3, World: world}, Seq: 32, MixBlock: 8,
		Schedule: s, Mix: s[0].Mix}
}

// tokenRun lays out the global batches [from, to) of epoch e of job at
// every rank, and returns each sequence of them in global order as its
// component and pieces, written out.
func tokenRun(t *testing.T, o *layout.Orders, m *umix.Mixed, job api.Job, e uint64, from, to int) []string {
	t.Helper()
	var out []string
	for b := from; b < to; b++ {
		for r := range job.World {
			j := job
			j.Rank = r
			bt, err := o.Layout(context.Background(), layout.Source{Unit: m}, j, e, uint64(b))
			if err != nil {
				t.Fatalf("epoch %d batch %d rank %d: %v", e, b, r, err)
			}
			for i, q := range unitstest.Tokens(bt).Seqs {
				out = append(out, fmt.Sprintf("%d:%v", unitstest.Tokens(bt).Comps[i], q))
			}
		}
	}
	return out
}

// Within every phase of a schedule over token datasets, every window of
// 1,000 steps (mixing blocks of 8 sequences) from the phase's start holds
// each source within one sequence of its share, whether one epoch holds
// the window (mix_samples= of 6,000 steps) or the epoch is the sources'
// packed sequences (55 steps, so every window crosses many epoch
// boundaries): a phase's counts run on its global steps
// (shuffle.Schedule), not afresh in each epoch's part of it. A window
// from the phase's start is within one (exclusive: the count after n
// steps is floor or ceil of its share); a later window is the difference
// of two such counts, within one where its share is whole, as every later
// window checked here is (5:3:2 and 2:5:1 over 8,000 sequences). The ramp
// holds each within one of its cumulative share from its start. The test
// logs the largest |count − share|. The batches a job reads hold the
// sequences of the draws, each of its own source's documents.
func TestTokenSchedulePhaseSharesPer1000Batches(t *testing.T) {
	o := units.Orders(nil)
	ds := unitstest.TokenSources(t)
	const K = 8
	for _, tc := range []struct {
		name    string
		samples int
	}{
		{"epochs of the packed sequences", 0},
		{"one epoch of 6000 steps", 6000 * K},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := tokenScheduleJob(t, "0:web:0.5,code:0.3,books:0.2;2000:web:1,code:1,books:1;3000~4000:web:0.25,code:0.625,books:0.125", K, 1)
			job.MixSamples = tc.samples
			m, err := unitstest.Mixture(o, job.Mix, ds, job)
			if err != nil {
				t.Fatal(err)
			}
			if m.Order.Schedule() == nil || m.Order.Block() != K {
				t.Fatalf("a token mixture of a schedule has schedule %v, block %d", m.Order.Schedule(), m.Order.Block())
			}
			blocks := m.Order.NumSamples() / K
			var comps []int // per position across epochs
			for e := uint64(0); len(comps) < 6000*K; e++ {
				for _, d := range unitstest.EpochDraws(t, m, job, e) {
					comps = append(comps, d.Component)
				}
			}
			count := func(from, to, i int) int {
				n := 0
				for _, c := range comps[from*K : to*K] {
					if c == i {
						n++
					}
				}
				return n
			}
			windows := 0
			worst := new(big.Rat)
			one := big.NewRat(1, 1)
			for _, ph := range []struct {
				from, to int
				w        []int64 // the phase's weights, and their sum last
			}{{0, 2000, []int64{5, 3, 2, 10}}, {2000, 3000, []int64{1, 1, 1, 3}}, {4000, 6000, []int64{2, 5, 1, 8}}} {
				for b := ph.from; b+1000 <= ph.to; b += 1000 {
					for i, a := range ph.w[:3] {
						want := big.NewRat(1000*K*a, ph.w[3])
						d := new(big.Rat).Sub(big.NewRat(int64(count(b, b+1000, i)), 1), want)
						if d.Abs(d).Cmp(worst) > 0 {
							worst = d
						}
						// From the phase's start: below one; a later
						// window (a whole share here): at most one.
						if c := d.Cmp(one); c > 0 || (c == 0 && b == ph.from) {
							t.Errorf("steps [%d, %d): source %d has %d sequences, share %s", b, b+1000, i, count(b, b+1000, i), want.FloatString(2))
						}
						if b != ph.from && !want.IsInt() {
							t.Fatalf("steps [%d, %d): share %s is not whole; the bound checked is for whole shares", b, b+1000, want.FloatString(2))
						}
					}
					windows++
				}
			}
			if windows != 5 {
				t.Fatalf("checked %d windows", windows)
			}
			t.Logf("%d steps an epoch: the constant phases' windows' largest |count − share| is %s sequences", blocks, worst.FloatString(2))
			// The ramp [3000, 4000) from (1,1,1)/3 to (2,5,1)/8: its share
			// is K·Σ_{t<1000} ((1000−t)/3 + b·t/8)/1000.
			worst = new(big.Rat)
			for i, b := range []int64{2, 5, 1} {
				want := new(big.Rat).Add(big.NewRat(K*500500, 3*1000), big.NewRat(K*b*499500, 8*1000))
				d := new(big.Rat).Sub(big.NewRat(int64(count(3000, 4000, i)), 1), want)
				if d.Abs(d).Cmp(worst) > 0 {
					worst = d
				}
				if d.Cmp(one) > 0 {
					t.Errorf("the ramp: source %d has %d sequences, share %s", i, count(3000, 4000, i), want.FloatString(2))
				}
			}
			t.Logf("%d steps an epoch: the ramp's |count − share| is at most %s sequences", blocks, worst.FloatString(2))
			// A batch of the last phase: its sequences are its draws',
			// each reading its own source's pass.
			e := uint64(4500 / blocks)
			b := 4500 - int(e)*blocks
			draws := unitstest.EpochDraws(t, m, job, e)[b*K : (b+1)*K]
			bt, err := o.Layout(context.Background(), layout.Source{Unit: m}, job, e, uint64(b))
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range draws {
				if unitstest.Tokens(bt).Comps[i] != d.Component {
					t.Fatalf("epoch %d batch %d: sequence %d of source %d, its draw's is %d", e, b, i, unitstest.Tokens(bt).Comps[i], d.Component)
				}
				for _, k := range unitstest.Tokens(bt).At[i] {
					if p := bt.Parts[bt.Take[k].Part]; p.Comp != d.Component || p.Epoch != d.Pass {
						t.Fatalf("sequence %d (source %d pass %d) reads a document of source %d pass %d", i, d.Component, d.Pass, p.Comp, p.Epoch)
					}
				}
			}
		})
	}
}

// A schedule of one constant phase over token datasets is that phase's
// token mixture: the same sequences in the same order.
func TestTokenScheduleOnePhaseIsTheMixture(t *testing.T) {
	o := units.Orders(nil)
	ds := unitstest.TokenSources(t)
	sj := tokenScheduleJob(t, "0:web:0.5,code:0.3,books:0.2", 2, 4)
	mj := sj
	mj.Schedule = nil
	ms, err := unitstest.Mixture(o, sj.Mix, ds, sj)
	if err != nil {
		t.Fatal(err)
	}
	mm, err := unitstest.Mixture(o, mj.Mix, ds, mj)
	if err != nil {
		t.Fatal(err)
	}
	if ms == mm || ms.Order.Schedule() == nil || mm.Order.Schedule() != nil {
		t.Fatal("the schedule and the mixture are one order")
	}
	n := ms.Order.NumSamples() / 8
	for e := range uint64(2) {
		if a, b := tokenRun(t, o, ms, sj, e, 0, n), tokenRun(t, o, mm, mj, e, 0, n); !slices.Equal(a, b) {
			t.Fatalf("epoch %d: the one-phase schedule serves other sequences than its mixture", e)
		}
	}
}

// streamsContinue checks that each source's draws over the epochs, in
// order, are its stream's positions one after another from the first
// (a pass is its dataset's epoch packed): within an epoch no sequence is
// served twice, and none is skipped.
func streamsContinue(t *testing.T, o *layout.Orders, m *umix.Mixed, job api.Job, draws []shuffle.Draw) {
	t.Helper()
	type at struct {
		pass uint64
		i    int
	}
	next := make([]at, len(m.DS))
	for n, d := range draws {
		c := d.Component
		if d.Pass != next[c].pass || d.Index != next[c].i {
			t.Fatalf("draw %d of source %d is pass %d sequence %d; its stream is at pass %d sequence %d", n, c, d.Pass, d.Index, next[c].pass, next[c].i)
		}
		spec, err := utok.TokensOf(m.DS[c], job)
		if err != nil {
			t.Fatal(err)
		}
		p, err := unitstest.TokenUnit(o).PackedEpoch(m.Stream(c, job), d.Pass, spec.Pack)
		if err != nil {
			t.Fatal(err)
		}
		if next[c].i++; next[c].i == p.NumSequences() {
			next[c] = at{next[c].pass + 1, 0}
		}
	}
	for c, a := range next {
		if a.pass == 0 && a.i == 0 {
			t.Fatalf("source %d never drawn", c)
		}
	}
}

// An edit of a token schedule at step S re-plans the future only: the
// batches before S are the same sequences under the old and the edited
// schedule, and over the epochs each source's stream goes on from where
// the steps before S left it, no sequence served twice, none skipped.
func TestTokenScheduleEditKeepsThePast(t *testing.T) {
	o := units.Orders(nil)
	ds := unitstest.TokenSources(t)
	const base = "0:web:0.5,code:0.3,books:0.2;40~60:web:0.2,code:0.2,books:0.6"
	for _, tc := range []struct {
		name   string
		edited string
		step   int
	}{
		{"within epoch 0", "0:web:0.5,code:0.3,books:0.2;7:web:0.1,code:0.1,books:0.8", 7},
		{"before the ramp, a ramp of its own", "0:web:0.5,code:0.3,books:0.2;30:web:0,code:1,books:0;50~70:web:1,code:1,books:1", 30},
		{"after the ramp", "0:web:0.5,code:0.3,books:0.2;40~60:web:0.2,code:0.2,books:0.6;61:web:0.9,code:0.05,books:0.05", 61},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := tokenScheduleJob(t, base, 2, 4)
			old, err := unitstest.Mixture(o, job.Mix, ds, job)
			if err != nil {
				t.Fatal(err)
			}
			ej := tokenScheduleJob(t, tc.edited, 2, 4)
			ed, err := unitstest.Mixture(o, ej.Mix, ds, ej)
			if err != nil {
				t.Fatal(err)
			}
			blocks := old.Order.NumSamples() / 8
			if ed.Order.NumSamples() != old.Order.NumSamples() {
				t.Fatalf("the edit changed the epoch: %d sequences, was %d", ed.Order.NumSamples(), old.Order.NumSamples())
			}
			// Steps before S, batch for batch (a global batch is a step).
			e, b := uint64(tc.step/blocks), tc.step%blocks
			for p := uint64(0); p <= e; p++ {
				to := blocks
				if p == e {
					to = b
				}
				if a, c := tokenRun(t, o, old, job, p, 0, to), tokenRun(t, o, ed, ej, p, 0, to); !slices.Equal(a, c) {
					t.Fatalf("epoch %d: steps before %d changed", p, tc.step)
				}
			}
			// The step at S follows the new weights: its batch differs.
			if a, c := tokenRun(t, o, old, job, e, b, b+1), tokenRun(t, o, ed, ej, e, b, b+1); slices.Equal(a, c) {
				t.Fatalf("step %d is the same under the edit", tc.step)
			}
			var draws []shuffle.Draw
			for p := range uint64(8) {
				draws = append(draws, unitstest.EpochDraws(t, ed, ej, p)...)
			}
			streamsContinue(t, o, ed, ej, draws)
		})
	}
}

// A job whose schedule was edited twice, resumed after the second edit at
// another world size (the same mixing block, offset= its position), reads
// exactly what a job of the final schedule reads uninterrupted.
func TestTokenScheduleResumeAfterTwoEdits(t *testing.T) {
	o := units.Orders(nil)
	ds := unitstest.TokenSources(t)
	v1 := "0:web:0.5,code:0.3,books:0.2"
	v2 := v1 + ";9:web:0.6,code:0.3,books:0.1;30~50:web:1,code:0,books:0"
	v3 := v1 + ";9:web:0.6,code:0.3,books:0.1;20:web:0.2,code:0.7,books:0.1"
	mixed := func(j api.Job) *umix.Mixed {
		m, err := unitstest.Mixture(o, j.Mix, ds, j)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	j1, j2, j3 := tokenScheduleJob(t, v1, 2, 4), tokenScheduleJob(t, v2, 2, 4), tokenScheduleJob(t, v3, 2, 4)
	m1, m2, m3 := mixed(j1), mixed(j2), mixed(j3)
	blocks := m1.Order.NumSamples() / 8
	if blocks < 21 {
		t.Fatalf("%d steps an epoch: the edits are meant to fall in epoch 1", blocks)
	}
	for _, st := range []int{9, 20} {
		if slices.Equal(tokenRun(t, o, m2, j2, 0, st-1, st+1), tokenRun(t, o, m3, j3, 0, st-1, st+1)) != (st < 20) ||
			slices.Equal(tokenRun(t, o, m1, j1, 0, st, st+1), tokenRun(t, o, m3, j3, 0, st, st+1)) {
			t.Fatalf("step %d: the versions do not part where their edits are", st)
		}
	}
	// Steps 0–8 under v1, 9–19 under v2, then v3 until epoch 1's step 4
	// at world 4; then resumed at world 2 (batch_size 2, mix_block 8)
	// from that position, through epoch 2.
	var edited []string
	edited = append(edited, tokenRun(t, o, m1, j1, 0, 0, 9)...)
	edited = append(edited, tokenRun(t, o, m2, j2, 0, 9, 20)...)
	edited = append(edited, tokenRun(t, o, m3, j3, 0, 20, blocks)...)
	edited = append(edited, tokenRun(t, o, m3, j3, 1, 0, 4)...)
	r := j3
	r.World, r.Offset = 2, 4*8
	info, err := o.Info(layout.Source{Unit: m3}, r, 1)
	if err != nil {
		t.Fatal(err)
	}
	edited = append(edited, tokenRun(t, o, m3, r, 1, 0, info.Batches)...)
	r.Offset = 0
	edited = append(edited, tokenRun(t, o, m3, r, 2, 0, 2*blocks)...)

	var whole []string
	for e := range uint64(3) {
		whole = append(whole, tokenRun(t, o, m3, j3, e, 0, blocks)...)
	}
	if !slices.Equal(edited, whole) {
		n := 0
		for n < min(len(edited), len(whole)) && edited[n] == whole[n] {
			n++
		}
		t.Fatalf("the edited, resumed run read %d sequences, the final schedule's %d; they part at sequence %d", len(edited), len(whole), n)
	}
}
