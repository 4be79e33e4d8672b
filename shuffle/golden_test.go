package shuffle

import (
	"flag"
	"reflect"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

const goldenPath = "testdata/golden.json"

// goldenFile is the layout of testdata/golden.json: inputs with the outputs
// they must produce, forever. docs/shuffle.md and testdata/reference.py are
// checked against the same file.
type goldenFile struct {
	Comment  string          `json:"comment"`
	Cases    []goldenCase    `json:"cases"`
	Streams  []goldenStream  `json:"streams"`
	Bounded  []goldenBounded `json:"bounded"`
	Mixtures []goldenMix     `json:"mixtures"`
}

type goldenCase struct {
	Name      string `json:"name"`
	Counts    []int  `json:"counts"`
	Seed      uint64 `json:"seed"`
	Epoch     uint64 `json:"epoch"`
	Window    int    `json:"window"`
	BatchSize int    `json:"batch_size"`
	World     int    `json:"world"`
	DropLast  bool   `json:"drop_last"`

	ChunkOrder   []int     `json:"chunk_order"`
	WindowStarts []int     `json:"window_starts"`
	Order        []int     `json:"order"` // the whole epoch
	NumBatches   int       `json:"num_batches"`
	Batches      [][][]int `json:"batches"` // [batch][rank] -> sample IDs
}

type goldenStream struct {
	Seed    uint64   `json:"seed"`
	Epoch   uint64   `json:"epoch"`
	Domain  uint64   `json:"domain"`
	Index   uint64   `json:"index"`
	Seed1   uint64   `json:"seed1"`
	Seed2   uint64   `json:"seed2"`
	Outputs []uint64 `json:"outputs"` // first Uint64 values of the PCG
}

type goldenBounded struct {
	Seed1  uint64   `json:"seed1"`
	Seed2  uint64   `json:"seed2"`
	N      []uint64 `json:"n"`      // successive bounds, from one PCG
	Values []uint64 `json:"values"` // bounded(n) for each
}

// goldenMix is one mixture (docs/shuffle.md §11): its block counts and
// slots for some blocks, and the draws of a range of one epoch with the
// samples they serve.
type goldenMix struct {
	Name string `json:"name"`
	// Mix is the mixture as a job writes it (mix=), or "" when Weights
	// are given as integers; Weights are its weights as integers
	// (api.Mix.IntWeights), NewMixture's input.
	Mix     string   `json:"mix"`
	Weights []uint64 `json:"weights"`
	Counts  [][]int  `json:"counts"` // each component's samples per chunk
	// PassLengths, when a component's entry is not empty, makes its
	// passes differ in length: pass p holds PassLengths[i][p mod len]
	// positions (NewMixtureOf), and its draws serve no sample (-1).
	PassLengths [][]int `json:"pass_lengths,omitempty"`
	Block       int     `json:"block"`   // K
	Samples     int     `json:"samples"` // the epoch length asked for; 0: the sizes summed
	Seed        uint64  `json:"seed"`
	Epoch       uint64  `json:"epoch"`
	Window      int     `json:"window"` // of the components' orders
	Blocks      []int   `json:"blocks"` // the blocks whose counts and slots are pinned
	Start       int     `json:"start"`  // the draws pinned: epoch positions [start, end)
	End         int     `json:"end"`

	Reduced      []uint64    `json:"reduced"` // the weights divided by their gcd
	NumSamples   int         `json:"num_samples"`
	Period       int         `json:"period"`
	EpochSamples []int       `json:"epoch_samples"`
	Cumulative   [][]int     `json:"cumulative"`   // C(b) for each of Blocks
	BlockCounts  [][]int     `json:"block_counts"` // for each of Blocks
	Slots        [][]int     `json:"slots"`        // for each of Blocks
	Draws        [][3]uint64 `json:"draws"`        // component, pass, index
	SampleIDs    []int       `json:"sample_ids"`   // the sample each draw serves
}

// goldenInputs are the shapes pinned by the golden file. Add a case here and
// run `go test ./shuffle -run TestGolden -update`; never edit outputs by hand.
func goldenInputs() goldenFile {
	uneven := []int{3, 1, 4, 1, 5, 9, 2, 6}
	bigger := make([]int, 40)
	for c := range bigger {
		bigger[c] = (c * 7) % 13 // 0..12, including empty chunks
	}
	return goldenFile{
		Comment: "Brand shuffle golden vectors; see docs/shuffle.md. Regenerate with go test ./shuffle -run TestGolden -update, which changes every job's order: do not.",
		Cases: []goldenCase{
			{Name: "worked-example", Counts: []int{3, 2, 4}, Seed: 1, Epoch: 0, Window: 2, BatchSize: 2, World: 2},
			{Name: "uneven", Counts: uneven, Seed: 42, Epoch: 0, Window: 3, BatchSize: 4, World: 2},
			{Name: "uneven-drop-last", Counts: uneven, Seed: 42, Epoch: 0, Window: 3, BatchSize: 4, World: 2, DropLast: true},
			{Name: "uneven-epoch-1", Counts: uneven, Seed: 42, Epoch: 1, Window: 3, BatchSize: 4, World: 2},
			{Name: "uneven-world-1", Counts: uneven, Seed: 42, Epoch: 0, Window: 3, BatchSize: 8, World: 1},
			{Name: "one-chunk", Counts: []int{10}, Seed: 7, Epoch: 1, Window: 1, BatchSize: 3, World: 1},
			{Name: "window-exceeds-dataset", Counts: []int{4, 4, 4}, Seed: 9, Epoch: 2, Window: 10, BatchSize: 5, World: 1},
			{Name: "world-not-dividing", Counts: []int{5, 5, 5, 5, 5}, Seed: 3, Epoch: 0, Window: 2, BatchSize: 2, World: 3},
			{Name: "world-not-dividing-drop-last", Counts: []int{5, 5, 5, 5, 5}, Seed: 3, Epoch: 0, Window: 2, BatchSize: 2, World: 3, DropLast: true},
			{Name: "empty-chunks", Counts: []int{0, 3, 0, 0, 2, 0, 4}, Seed: 5, Epoch: 4, Window: 2, BatchSize: 2, World: 2},
			{Name: "all-empty", Counts: []int{0, 0, 0}, Seed: 5, Epoch: 0, Window: 2, BatchSize: 2, World: 2},
			{Name: "no-chunks", Counts: []int{}, Seed: 0, Epoch: 0, Window: 1, BatchSize: 1, World: 1},
			{Name: "large-seed", Counts: []int{2, 3, 5, 7, 11}, Seed: 1<<64 - 1, Epoch: 1<<63 + 5, Window: 2, BatchSize: 3, World: 2},
			{Name: "window-1", Counts: []int{4, 3, 2, 1}, Seed: 11, Epoch: 0, Window: 1, BatchSize: 4, World: 1},
			{Name: "bigger", Counts: bigger, Seed: 20240601, Epoch: 3, Window: 4, BatchSize: 8, World: 4},
			{Name: "bigger-drop-last", Counts: bigger, Seed: 20240601, Epoch: 3, Window: 4, BatchSize: 8, World: 4, DropLast: true},
		},
		Streams: []goldenStream{
			// The three streams of the worked example in docs/shuffle.md.
			{Seed: 1, Epoch: 0, Domain: domainChunks, Index: 0, Outputs: make([]uint64, 2)},
			{Seed: 1, Epoch: 0, Domain: domainWindow, Index: 0, Outputs: make([]uint64, 5)},
			{Seed: 1, Epoch: 0, Domain: domainWindow, Index: 1, Outputs: make([]uint64, 2)},
			{Seed: 42, Epoch: 0, Domain: domainChunks, Index: 0, Outputs: make([]uint64, 4)},
			{Seed: 42, Epoch: 0, Domain: domainWindow, Index: 0, Outputs: make([]uint64, 4)},
			{Seed: 42, Epoch: 0, Domain: domainWindow, Index: 1, Outputs: make([]uint64, 4)},
			{Seed: 42, Epoch: 1, Domain: domainChunks, Index: 0, Outputs: make([]uint64, 4)},
			{Seed: 1<<64 - 1, Epoch: 1<<64 - 1, Domain: domainWindow, Index: 1<<64 - 1, Outputs: make([]uint64, 4)},
		},
		Bounded: []goldenBounded{
			// Bounds just above 2^63 reject about half of all draws, so this
			// vector pins the rejection loop, not just the fast path.
			{Seed1: 1, Seed2: 2, N: []uint64{1, 2, 3, 10, 1000, 1<<32 + 1, 1<<63 + 1, 1<<63 + 1, 1<<63 + 1, 1<<63 + 1, 1<<63 + 1, 1<<63 + 1, 1<<64 - 1, 1<<62 + 12345}},
		},
		Mixtures: goldenMixInputs(),
	}
}

// goldenMixInputs are the mixtures pinned by the golden file, in the same
// way as goldenInputs.
func goldenMixInputs() []goldenMix {
	span := func(n int) []int {
		b := make([]int, n)
		for i := range b {
			b[i] = i
		}
		return b
	}
	wcb := [][]int{{10, 10, 10, 10}, {15, 15}, {3}} // 40, 30 and 3 samples
	long := [][]int{{1000, 1000, 1000, 1000, 1000}, {2000, 2000, 2000, 2000}, {1500, 1500}}
	return []goldenMix{
		// The worked example of docs/shuffle.md §11.7: books, 3 samples
		// against a share of 8 an epoch, repeats; web is continued.
		{Name: "web-code-books", Mix: "web:0.7,code:0.2,books:0.1", Weights: []uint64{7, 2, 1}, Counts: wcb,
			Block: 8, Seed: 1, Epoch: 0, Window: 2, Blocks: span(10), Start: 0, End: 80},
		{Name: "web-code-books-epoch-1", Mix: "web:0.7,code:0.2,books:0.1", Weights: []uint64{7, 2, 1}, Counts: wcb,
			Block: 8, Seed: 1, Epoch: 1, Window: 2, Blocks: []int{0, 4, 5, 9}, Start: 0, End: 80},
		// K·w_i whole: no extra units, a period of one block.
		{Name: "exact-shares", Mix: "a:0.7,b:0.2,c:0.1", Weights: []uint64{7, 2, 1}, Counts: [][]int{{5, 5}, {4}, {2}},
			Block: 10, Samples: 30, Seed: 3, Epoch: 0, Window: 1, Blocks: span(3), Start: 0, End: 30},
		// A period of 15625 blocks, longer than the epoch's 250: counts
		// past several checkpoints, draws across a block boundary.
		{Name: "long-period", Mix: "a:0.333333,b:0.5,c:0.166667", Weights: []uint64{333333, 500000, 166667}, Counts: long,
			Block: 64, Seed: 20240601, Epoch: 2, Window: 2, Blocks: []int{0, 1, 2, 63, 64, 65, 127, 128, 200, 249}, Start: 7960, End: 8040},
		// K = 1: one sample a block, the components in Pfair order.
		{Name: "block-1", Weights: []uint64{5, 3, 2, 1}, Counts: [][]int{{3, 4}, {9}, {2, 2}, {5}},
			Block: 1, Samples: 40, Seed: 7, Epoch: 3, Window: 1, Blocks: span(40), Start: 0, End: 40},
		{Name: "one-component", Weights: []uint64{1}, Counts: [][]int{{4, 3}},
			Block: 5, Seed: 5, Epoch: 1, Window: 2, Blocks: []int{0, 1}, Start: 0, End: 10},
		// epoch·n_i past 2^64: stream positions need 128 bits.
		{Name: "large-epoch", Weights: []uint64{2, 6}, Counts: [][]int{{16}, {40, 40}},
			Block: 6, Seed: 1<<64 - 1, Epoch: 1 << 62, Window: 1, Blocks: []int{0, 1, 15}, Start: 40, End: 60},
		// Passes that differ in length (§11.4), as a token dataset packed
		// by best fit has: web's passes hold 9, 12, 7 positions in turn,
		// code's 5 and 6; books' are its 3 samples. Epoch 3 reads web
		// from its pass 16, across passes of every length.
		{Name: "pass-lengths", Mix: "web:0.7,code:0.2,books:0.1", Weights: []uint64{7, 2, 1}, Counts: wcb,
			Block: 8, Samples: 80, Seed: 1, Epoch: 3, Window: 2, Blocks: []int{0, 9}, Start: 0, End: 80,
			PassLengths: [][]int{{9, 12, 7}, {5, 6}, {}}},
		// The default length is pass 0's lengths summed: 1 + 4 = 5, one
		// block of 5 in an epoch; a pass of 1 and passes of 100.
		{Name: "pass-lengths-default-length", Weights: []uint64{1, 1}, Counts: [][]int{{1}, {4}},
			Block: 5, Seed: 9, Epoch: 41, Window: 1, Blocks: []int{0}, Start: 0, End: 5,
			PassLengths: [][]int{{1, 100}, {4, 1, 2}}},
	}
}

// computeGolden fills in every output of g from the Go implementation.
func computeGolden(t *testing.T, g goldenFile) goldenFile {
	t.Helper()
	for i := range g.Cases {
		g.Cases[i] = computeCase(t, g.Cases[i])
	}
	for i := range g.Streams {
		st := &g.Streams[i]
		st.Seed1, st.Seed2 = streamSeeds(st.Seed, st.Epoch, st.Domain, st.Index)
		s := newStream(st.Seed, st.Epoch, st.Domain, st.Index)
		for j := range st.Outputs {
			st.Outputs[j] = s.Uint64()
		}
	}
	for i := range g.Mixtures {
		g.Mixtures[i] = computeMix(t, g.Mixtures[i])
	}
	for i := range g.Bounded {
		bd := &g.Bounded[i]
		var s stream
		s.Seed(bd.Seed1, bd.Seed2)
		bd.Values = make([]uint64, len(bd.N))
		for j, n := range bd.N {
			bd.Values[j] = s.Bounded(n)
		}
	}
	return g
}

func computeCase(t *testing.T, c goldenCase) goldenCase {
	t.Helper()
	e, err := NewEpoch(c.Counts, c.Seed, c.Epoch, c.Window)
	if err != nil {
		t.Fatalf("%s: NewEpoch: %v", c.Name, err)
	}
	c.ChunkOrder = append([]int{}, e.ChunkOrder()...)
	c.WindowStarts = make([]int, e.NumWindows()+1)
	for w := range c.WindowStarts {
		c.WindowStarts[w] = e.WindowStart(w)
	}
	c.Order = e.AppendRange([]int{}, 0, e.NumSamples())
	c.NumBatches = NumBatches(e.NumSamples(), c.BatchSize, c.World, c.DropLast)
	c.Batches = make([][][]int, c.NumBatches)
	for m := range c.Batches {
		c.Batches[m] = make([][]int, c.World)
		for r := range c.World {
			b, err := e.Batch(m, c.BatchSize, c.World, r, c.DropLast)
			if err != nil {
				t.Fatalf("%s: Batch(%d, rank %d): %v", c.Name, m, r, err)
			}
			c.Batches[m][r] = b
		}
	}
	return c
}

// computeMix fills in the outputs of a mixture from its inputs.
func computeMix(t *testing.T, c goldenMix) goldenMix {
	t.Helper()
	passes := goldenPasses(c)
	m, err := NewMixtureOf(c.Weights, passes, c.Block, c.Samples)
	if err != nil {
		t.Fatalf("mixture %s: %v", c.Name, err)
	}
	c.Reduced = m.Weights()
	c.NumSamples = m.NumSamples()
	c.Period = m.Period()
	// The counts of the case's epoch: its blocks are the rule's global
	// blocks epoch·L/K + b.
	me := m.Epoch(c.Epoch)
	c.EpochSamples = make([]int, m.Components())
	for i := range c.EpochSamples {
		c.EpochSamples[i] = me.EpochSamples(i)
	}
	c.Cumulative, c.BlockCounts, c.Slots = nil, nil, nil
	for _, b := range c.Blocks {
		cum := make([]int, m.Components())
		for i := range cum {
			cum[i] = me.Cumulative(b, i)
		}
		c.Cumulative = append(c.Cumulative, cum)
		c.BlockCounts = append(c.BlockCounts, me.BlockCounts(b))
		c.Slots = append(c.Slots, m.Slots(c.Seed, c.Epoch, b))
	}
	c.Draws, c.SampleIDs = nil, nil
	orders := map[Draw]*Epoch{} // by component and pass
	for _, d := range m.AppendRange(nil, c.Seed, c.Epoch, c.Start, c.End) {
		c.Draws = append(c.Draws, [3]uint64{uint64(d.Component), d.Pass, uint64(d.Index)})
		if _, equal := passes[d.Component].(EqualPasses); !equal {
			c.SampleIDs = append(c.SampleIDs, -1)
			continue
		}
		k := Draw{Component: d.Component, Pass: d.Pass}
		e, ok := orders[k]
		if !ok {
			if e, err = NewEpoch(c.Counts[d.Component], c.Seed, d.Pass, m.ComponentWindow(d.Component, c.Window)); err != nil {
				t.Fatalf("mixture %s: component %d pass %d: %v", c.Name, d.Component, d.Pass, err)
			}
			orders[k] = e
		}
		c.SampleIDs = append(c.SampleIDs, e.AppendRange(nil, d.Index, d.Index+1)...)
	}
	return c
}

// goldenPasses are a golden mixture's components' pass lengths: its
// samples in every pass, or the lengths PassLengths cycles through.
func goldenPasses(c goldenMix) []Passes {
	passes := make([]Passes, len(c.Counts))
	for i, counts := range c.Counts {
		if i < len(c.PassLengths) && len(c.PassLengths[i]) > 0 {
			lens := c.PassLengths[i]
			passes[i] = PassesFunc(func(p uint64) int { return lens[p%uint64(len(lens))] })
			continue
		}
		n := 0
		for _, k := range counts {
			n += k
		}
		passes[i] = EqualPasses(n)
	}
	return passes
}

// compareMix reports every output field of got that differs from want.
func compareMix(t *testing.T, got, want goldenMix) {
	t.Helper()
	check := func(field string, g, w any) {
		if !reflect.DeepEqual(g, w) {
			t.Errorf("mixture %s: %s changed:\n got %v\nwant %v", want.Name, field, g, w)
		}
	}
	check("weights", got.Weights, want.Weights)
	check("reduced", got.Reduced, want.Reduced)
	check("num_samples", got.NumSamples, want.NumSamples)
	check("period", got.Period, want.Period)
	check("epoch_samples", got.EpochSamples, want.EpochSamples)
	check("cumulative", got.Cumulative, want.Cumulative)
	check("block_counts", got.BlockCounts, want.BlockCounts)
	check("slots", got.Slots, want.Slots)
	check("draws", got.Draws, want.Draws)
	check("sample_ids", got.SampleIDs, want.SampleIDs)
}

func TestGolden(t *testing.T) {
	got := computeGolden(t, goldenInputs())
	if *update {
		golden.Write(t, goldenPath, got)
	}
	want := readGolden(t)

	if len(want.Cases) != len(got.Cases) || len(want.Streams) != len(got.Streams) || len(want.Bounded) != len(got.Bounded) || len(want.Mixtures) != len(got.Mixtures) {
		t.Fatalf("%s holds %d cases, %d streams, %d bounded vectors, %d mixtures; goldenInputs has %d, %d, %d, %d (run with -update after adding inputs)",
			goldenPath, len(want.Cases), len(want.Streams), len(want.Bounded), len(want.Mixtures),
			len(got.Cases), len(got.Streams), len(got.Bounded), len(got.Mixtures))
	}
	for i, w := range want.Cases {
		t.Run(w.Name, func(t *testing.T) {
			// Recompute from the file's own inputs, so the check does not
			// depend on goldenInputs staying in sync with the file.
			in := w
			in.ChunkOrder, in.WindowStarts, in.Order, in.NumBatches, in.Batches = nil, nil, nil, 0, nil
			g := computeCase(t, in)
			if g.Name != got.Cases[i].Name {
				t.Errorf("case %d is %q in the file, %q in goldenInputs", i, g.Name, got.Cases[i].Name)
			}
			compareCase(t, g, w)
		})
	}
	for i, w := range want.Mixtures {
		g := computeMix(t, w) // from the file's own inputs
		if g.Name != got.Mixtures[i].Name {
			t.Errorf("mixture %d is %q in the file, %q in goldenMixInputs", i, g.Name, got.Mixtures[i].Name)
		}
		compareMix(t, g, w)
	}
	for i, w := range want.Streams {
		g := got.Streams[i]
		if !reflect.DeepEqual(g, w) {
			t.Errorf("stream %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	for i, w := range want.Bounded {
		g := got.Bounded[i]
		if !reflect.DeepEqual(g, w) {
			t.Errorf("bounded vector %d:\n got %v\nwant %v", i, g.Values, w.Values)
		}
	}
}

// compareCase reports every output field of got that differs from want.
func compareCase(t *testing.T, got, want goldenCase) {
	t.Helper()
	check := func(field string, g, w any) {
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s changed:\n got %v\nwant %v", want.Name, field, g, w)
		}
	}
	check("chunk_order", got.ChunkOrder, want.ChunkOrder)
	check("window_starts", got.WindowStarts, want.WindowStarts)
	check("order", got.Order, want.Order)
	check("num_batches", got.NumBatches, want.NumBatches)
	check("batches", got.Batches, want.Batches)
}

func readGolden(t *testing.T) goldenFile {
	t.Helper()
	var g goldenFile
	golden.Read(t, goldenPath, &g)
	return g
}
