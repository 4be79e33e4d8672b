package planner

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// randomPhases are two or three phases over k components, a ramp among
// them now and then, weights of 0 too.
func randomPhases(r *rand.Rand, k int) []shuffle.SchedulePhase {
	var out []shuffle.SchedulePhase
	step := uint64(0)
	for p := range 2 + r.IntN(2) {
		w := make([]uint64, k)
		for i := range w {
			w[i] = r.Uint64N(4)
		}
		w[r.IntN(k)]++
		ph := shuffle.SchedulePhase{Step: step, Weights: w}
		if p > 0 && r.IntN(2) == 0 {
			ph.End = step + 1 + uint64(r.IntN(6))
			step = ph.End
		}
		out = append(out, ph)
		step += 1 + uint64(r.IntN(8))
	}
	return out
}

// referenceScheduleTrace is referenceMixTrace with each epoch's draws
// from the schedule's epoch.
func referenceScheduleTrace(t *testing.T, m Mix, j Job) []Access {
	t.Helper()
	var sizes []int
	for _, c := range m.Components {
		n := 0
		for _, k := range c.Dataset.Counts {
			n += k
		}
		sizes = append(sizes, n)
	}
	passes := make([]shuffle.Passes, len(sizes))
	for i, n := range sizes {
		passes[i] = shuffle.EqualPasses(n)
	}
	block := m.Block
	if block == 0 {
		block = j.BatchSize * j.World
	}
	s, err := shuffle.NewSchedule(m.Phases, passes, block, m.Samples)
	if err != nil {
		t.Fatal(err)
	}
	first := []int{0}
	for _, c := range m.Components {
		first = append(first, first[len(first)-1]+len(c.Dataset.Counts))
	}
	var tr []Access
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		mo, err := s.Epoch(uint64(e))
		if err != nil {
			t.Fatal(err)
		}
		n, g := mo.NumSamples(), j.BatchSize*j.World
		draws := mo.AppendRange(nil, j.Seed, uint64(e), 0, n)
		for b := range shuffle.NumBatches(n, j.BatchSize, j.World, j.DropLast) {
			seen := map[int32]bool{}
			for _, d := range draws[b*g : min((b+1)*g, n)] {
				w := max(1, int((uint64(j.Window)*m.Phases[0].Weights[d.Component]+sum0(m.Phases[0].Weights)-1)/sum0(m.Phases[0].Weights)))
				ep, err := shuffle.NewEpoch(m.Components[d.Component].Dataset.Counts, j.Seed, d.Pass, w)
				if err != nil {
					t.Fatal(err)
				}
				id := ep.AppendRange(nil, d.Index, d.Index+1)[0]
				c, at := 0, 0
				for k, cnt := range m.Components[d.Component].Dataset.Counts {
					if id < at+cnt {
						c = k
						break
					}
					at += cnt
				}
				chunk := int32(first[d.Component] + c)
				if !seen[chunk] {
					tr = append(tr, Access{Chunk: chunk, Epoch: int32(e), Start: len(seen) == 0})
					seen[chunk] = true
				}
			}
		}
	}
	return tr
}

func sum0(w []uint64) uint64 {
	var s uint64
	for _, a := range w {
		s += a
	}
	return s
}

// TestScheduleTraceMatchesReference: the planner's trace of a schedule is
// the chunks the gateway's draws of each epoch read, as the schedule lays
// them out (phases, ramps, streams continued).
func TestScheduleTraceMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 5))
	for trial := range 80 {
		m, j := randomMix(r)
		m.Phases = randomPhases(r, len(m.Components))
		got, err := mixTrace(m, j)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if want := referenceScheduleTrace(t, m, j); !slices.Equal(got, want) {
			t.Fatalf("trial %d (%+v, %+v): trace\n%v\nwant\n%v", trial, m, j, got, want)
		}
	}
}

// TestSchedulePlanPhases: a plan of a schedule reports each phase's
// steps and samples per component over the simulated epochs — every
// sample read counted in one phase — and a component given more weight
// after the switch reads more there; a schedule of one phase plans as
// its mixture.
func TestSchedulePlanPhases(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 6))
	m := Mix{Components: []MixComponent{
		{Name: "a", Weight: 3, Dataset: mixDatasetOf(r, 12, 1000)},
		{Name: "b", Weight: 1, Dataset: mixDatasetOf(r, 8, 1000)},
	}, Block: 8}
	j := Job{Params: shuffle.Params{Seed: 3, Window: 2, BatchSize: 4, World: 2}, Epochs: 3}
	in := PlanInput{Mix: &m, Job: j, CacheBytes: 6000, BackendBytesPerSec: 1e8}
	plain, err := MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	m.Phases = []shuffle.SchedulePhase{{Weights: []uint64{3, 1}}}
	one, err := MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	one.Mix.Phases, one.LRU.Phases, one.Optimal.Phases = nil, nil, nil
	if !reflect.DeepEqual(one, plain) {
		t.Fatalf("a one-phase schedule's plan differs from its mixture's")
	}
	m.Phases = []shuffle.SchedulePhase{{Weights: []uint64{3, 1}}, {Step: 5, Weights: []uint64{1, 3}}}
	p, err := MakePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	ph := p.Mix.Phases
	if len(ph) != 2 || ph[0].Steps != 5 || ph[1].Steps != 3*p.Samples/8-5 {
		t.Fatalf("phases %+v", ph)
	}
	for i := range 2 {
		if got := ph[0].Samples[i] + ph[1].Samples[i]; got == 0 {
			t.Fatalf("component %d read nothing", i)
		}
	}
	total := 0
	for _, x := range ph {
		total += x.Samples[0] + x.Samples[1]
	}
	if total != 3*p.Samples {
		t.Fatalf("the phases count %d samples, the epochs hold %d", total, 3*p.Samples)
	}
	// Per step: a reads 6 of 8 before, 2 after.
	if a0, a1 := ph[0].Samples[0]*ph[1].Steps, ph[1].Samples[0]*ph[0].Steps; a0 <= a1 {
		t.Fatalf("component a per step: %d before the switch, %d after (scaled)", ph[0].Samples[0], ph[1].Samples[0])
	}
	if ph[0].Bytes == 0 || ph[1].Bytes == 0 {
		t.Fatalf("phase bytes %d %d", ph[0].Bytes, ph[1].Bytes)
	}
}
