package shuffle

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
)

const scheduleGoldenPath = "testdata/schedules.json"

// goldenSched is one schedule (docs/shuffle.md §11.9) and, for each of
// some epochs, its counts and the draws of the whole epoch with the
// samples they serve.
type goldenSched struct {
	Name   string        `json:"name"`
	Text   string        `json:"schedule,omitempty"` // as mix_schedule= writes it, for the docs
	Phases []goldenPhase `json:"phases"`
	Counts [][]int       `json:"counts"` // each component's samples per chunk
	Block  int           `json:"block"`
	// Samples is the epoch length asked for; 0: the sizes summed.
	Samples int      `json:"samples"`
	Seed    uint64   `json:"seed"`
	Window  int      `json:"window"`
	Epochs  []uint64 `json:"epochs"`

	NumSamples int                `json:"num_samples"`
	Out        []goldenSchedEpoch `json:"out"`
}

type goldenPhase struct {
	Step    uint64   `json:"step"`
	End     uint64   `json:"end"`
	Weights []uint64 `json:"weights"`
}

type goldenSchedEpoch struct {
	Epoch        uint64      `json:"epoch"`
	EpochSamples []int       `json:"epoch_samples"`
	Cumulative   [][]int     `json:"cumulative"` // C(b), b = 0..L/K
	Draws        [][3]uint64 `json:"draws"`
	SampleIDs    []int       `json:"sample_ids"`
}

func goldenSchedInputs() []goldenSched {
	wcb := [][]int{{10, 10, 10, 10}, {15, 15}, {3}}
	return []goldenSched{
		// The worked example of §11.9: §11.7's mixture, then code's share
		// raised at step 6 (within epoch 0), then a ramp over steps
		// [13, 27) to books and code alone, across two epoch boundaries.
		{Name: "web-code-books-schedule", Text: "0:web:0.7,code:0.2,books:0.1;6:web:0.2,code:0.5,books:0.3;13~27:web:0,code:0.5,books:0.5",
			Phases: []goldenPhase{{0, 0, []uint64{7, 2, 1}}, {6, 0, []uint64{2, 5, 3}}, {13, 27, []uint64{0, 1, 1}}},
			Counts: wcb, Block: 8, Seed: 1, Window: 2, Epochs: []uint64{0, 1, 2, 3}},
		// One phase: §11.7's mixture itself, epochs 0 and 1.
		{Name: "one-phase", Phases: []goldenPhase{{0, 0, []uint64{7, 2, 1}}},
			Counts: wcb, Block: 8, Seed: 1, Window: 2, Epochs: []uint64{0, 1}},
		// K = 1, a source at 0 from the start, ramps back to back.
		{Name: "block-1-ramps", Phases: []goldenPhase{{0, 0, []uint64{3, 0, 1}}, {5, 17, []uint64{1, 1, 1}}, {17, 40, []uint64{0, 5, 1}}},
			Counts: [][]int{{3, 4}, {9}, {2, 2}}, Block: 1, Samples: 12, Seed: 7, Window: 1, Epochs: []uint64{0, 1, 2, 3, 4}},
	}
}

func computeSched(t *testing.T, c goldenSched) goldenSched {
	t.Helper()
	s := goldenSchedule(t, c)
	c.NumSamples = s.NumSamples()
	c.Out = nil
	for _, e := range c.Epochs {
		m, err := s.Epoch(e)
		if err != nil {
			t.Fatalf("%s epoch %d: %v", c.Name, e, err)
		}
		o := goldenSchedEpoch{Epoch: e, Cumulative: walkCounts(m)}
		for i := range m.Components() {
			o.EpochSamples = append(o.EpochSamples, m.EpochSamples(i))
		}
		for _, d := range m.AppendRange(nil, c.Seed, e, 0, m.NumSamples()) {
			o.Draws = append(o.Draws, [3]uint64{uint64(d.Component), d.Pass, uint64(d.Index)})
			ep, err := NewEpoch(c.Counts[d.Component], c.Seed, d.Pass, m.ComponentWindow(d.Component, c.Window))
			if err != nil {
				t.Fatal(err)
			}
			o.SampleIDs = append(o.SampleIDs, ep.AppendRange(nil, d.Index, d.Index+1)[0])
		}
		c.Out = append(c.Out, o)
	}
	return c
}

func goldenSchedule(t *testing.T, c goldenSched) *Schedule {
	t.Helper()
	phases := make([]SchedulePhase, len(c.Phases))
	for i, p := range c.Phases {
		phases[i] = SchedulePhase{Step: p.Step, End: p.End, Weights: p.Weights}
	}
	sizes := make([]int, len(c.Counts))
	for i, cs := range c.Counts {
		for _, n := range cs {
			sizes[i] += n
		}
	}
	s, err := NewSchedule(phases, equalPasses(sizes...), c.Block, c.Samples)
	if err != nil {
		t.Fatalf("schedule %s: %v", c.Name, err)
	}
	return s
}

func TestGoldenSchedules(t *testing.T) {
	got := make([]goldenSched, 0)
	for _, c := range goldenSchedInputs() {
		got = append(got, computeSched(t, c))
	}
	if *update {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(scheduleGoldenPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(scheduleGoldenPath)
	if err != nil {
		t.Fatalf("%v (generate with -update)", err)
	}
	var want []goldenSched
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%s holds %d schedules, goldenSchedInputs %d", scheduleGoldenPath, len(want), len(got))
	}
	for i, w := range want {
		g := computeSched(t, w) // from the file's own inputs
		if !reflect.DeepEqual(g, w) {
			t.Errorf("schedule %s changed", w.Name)
		}
		if g.Name != got[i].Name {
			t.Errorf("schedule %d is %q in the file, %q in goldenSchedInputs", i, w.Name, got[i].Name)
		}
	}
	// A one-phase schedule is the mixture: the file's one-phase draws
	// are the golden mixture web-code-books's.
	var mix goldenFile
	if err := json.Unmarshal(must(os.ReadFile(goldenPath)), &mix); err != nil {
		t.Fatal(err)
	}
	for _, m := range mix.Mixtures {
		if m.Name == "web-code-books" && !reflect.DeepEqual(m.Draws, want[1].Out[0].Draws) {
			t.Errorf("one-phase schedule's epoch 0 draws differ from the mixture web-code-books's")
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// randomSchedules are schedules of one to five components over up to six
// phases, ramps and zero weights among them, for the reference to check.
func randomSchedules(n int) []goldenSched {
	r := rand.New(rand.NewPCG(43, 9))
	out := make([]goldenSched, n)
	for j := range out {
		k := 1 + r.IntN(5)
		c := goldenSched{Name: fmt.Sprintf("random-%d", j), Block: 1 + r.IntN(12), Seed: r.Uint64(), Window: 1 + r.IntN(3)}
		for range k {
			counts := make([]int, 1+r.IntN(3))
			for x := range counts {
				counts[x] = r.IntN(20)
			}
			counts[0]++
			c.Counts = append(c.Counts, counts)
		}
		if r.IntN(2) == 0 {
			c.Samples = 1 + r.IntN(120)
		}
		step := uint64(0)
		for p := range 1 + r.IntN(6) {
			w := make([]uint64, k)
			for i := range w {
				if r.IntN(4) > 0 {
					w[i] = r.Uint64N(12)
				}
			}
			w[r.IntN(k)]++
			ph := goldenPhase{Step: step, Weights: w}
			if p > 0 && r.IntN(2) == 0 {
				ph.End = step + 1 + uint64(r.IntN(15))
				step = ph.End
			}
			c.Phases = append(c.Phases, ph)
			step += 1 + uint64(r.IntN(12))
		}
		c.Epochs = []uint64{0, 1, 2, uint64(3 + r.IntN(4))}
		out[j] = c
	}
	return out
}

// TestPythonReferenceSchedules runs the Python reference of §11.9 on the
// golden schedules and on random ones, and requires it to agree with Go on
// every count, draw and sample.
func TestPythonReferenceSchedules(t *testing.T) {
	in := append(goldenSchedInputs(), randomSchedules(60)...)
	var want []goldenSched
	for _, c := range in {
		want = append(want, computeSched(t, c))
	}
	var ref struct {
		Schedules []struct {
			Name       string             `json:"name"`
			NumSamples int                `json:"num_samples"`
			Epochs     []goldenSchedEpoch `json:"epochs"`
		} `json:"schedules"`
	}
	runReference(t, map[string]any{"schedules": in}, &ref)
	if len(ref.Schedules) != len(want) {
		t.Fatalf("reference printed %d schedules, want %d", len(ref.Schedules), len(want))
	}
	for i, w := range want {
		r := ref.Schedules[i]
		if r.NumSamples != w.NumSamples || !reflect.DeepEqual(r.Epochs, w.Out) {
			for e := range w.Out {
				if e < len(r.Epochs) && !reflect.DeepEqual(r.Epochs[e], w.Out[e]) {
					t.Errorf("%s (%+v) epoch %d:\npython %+v\n    go %+v", w.Name, w.Phases, w.Out[e].Epoch, r.Epochs[e], w.Out[e])
					break
				}
			}
			t.Errorf("schedule %s: the reference differs from Go", w.Name)
		}
	}
}
