package shuffle

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

const (
	referencePath = "testdata/reference.py"
	docPath       = "../docs/shuffle.md"
	driverMarker  = "# ---- test driver ----"
)

// referenceOutput is what testdata/reference.py prints for the golden inputs.
type referenceOutput struct {
	Cases []struct {
		Name         string    `json:"name"`
		ChunkOrder   []int     `json:"chunk_order"`
		WindowStarts []int     `json:"window_starts"`
		Order        []int     `json:"order"`
		NumBatches   int       `json:"num_batches"`
		Batches      [][][]int `json:"batches"`
	} `json:"cases"`
	Streams []struct {
		Seed1   uint64   `json:"seed1"`
		Seed2   uint64   `json:"seed2"`
		Outputs []uint64 `json:"outputs"`
	} `json:"streams"`
	Bounded []struct {
		Values []uint64 `json:"values"`
	} `json:"bounded"`
	Mixtures []goldenMix `json:"mixtures"` // outputs, name and weights only
}

// runReference runs testdata/reference.py on in (a golden file's path,
// or inputs to write as JSON) and decodes what it prints into out.
func runReference(t *testing.T, in, out any) {
	t.Helper()
	pythontest.Reference(t, referencePath, in, out, 30*time.Second)
}

// TestPythonReference runs the independent Python implementation of the
// specification on the golden inputs and requires it to agree with Go on
// every output, so that docs/shuffle.md is proven reimplementable.
func TestPythonReference(t *testing.T) {
	var ref referenceOutput
	runReference(t, goldenPath, &ref)

	golden := readGolden(t)
	if len(ref.Cases) != len(golden.Cases) || len(ref.Streams) != len(golden.Streams) || len(ref.Bounded) != len(golden.Bounded) || len(ref.Mixtures) != len(golden.Mixtures) {
		t.Fatalf("reference printed %d cases, %d streams, %d bounded, %d mixtures; golden has %d, %d, %d, %d",
			len(ref.Cases), len(ref.Streams), len(ref.Bounded), len(ref.Mixtures),
			len(golden.Cases), len(golden.Streams), len(golden.Bounded), len(golden.Mixtures))
	}
	// Mixtures written as decimals: the reference derives their integer
	// weights from the text, and must find the file's.
	for i, in := range golden.Mixtures {
		compareMix(t, ref.Mixtures[i], computeMix(t, in))
	}
	for i, in := range golden.Cases {
		in.ChunkOrder, in.WindowStarts, in.Order, in.NumBatches, in.Batches = nil, nil, nil, 0, nil
		g := computeCase(t, in)
		r := ref.Cases[i]
		compareCase(t, goldenCase{
			Name:         r.Name,
			ChunkOrder:   r.ChunkOrder,
			WindowStarts: r.WindowStarts,
			Order:        r.Order,
			NumBatches:   r.NumBatches,
			Batches:      r.Batches,
		}, g)
	}
	for i, st := range golden.Streams {
		seed1, seed2 := streamSeeds(st.Seed, st.Epoch, st.Domain, st.Index)
		s := newStream(st.Seed, st.Epoch, st.Domain, st.Index)
		outputs := make([]uint64, len(st.Outputs))
		for j := range outputs {
			outputs[j] = s.Uint64()
		}
		r := ref.Streams[i]
		if r.Seed1 != seed1 || r.Seed2 != seed2 || !reflect.DeepEqual(r.Outputs, outputs) {
			t.Errorf("stream %d: python seeds %#x %#x outputs %#x; go %#x %#x %#x", i, r.Seed1, r.Seed2, r.Outputs, seed1, seed2, outputs)
		}
	}
	for i, bd := range golden.Bounded {
		var s stream
		s.Seed(bd.Seed1, bd.Seed2)
		values := make([]uint64, len(bd.N))
		for j, n := range bd.N {
			values[j] = s.Bounded(n)
		}
		if r := ref.Bounded[i]; !reflect.DeepEqual(r.Values, values) {
			t.Errorf("bounded %d: python %v, go %v", i, r.Values, values)
		}
	}
}

// TestPythonReferenceMixtures compares Go's mixtures with the Python
// reference's on random ones: one to seven components, weights of several
// scales, components smaller and larger than their share, K from 1 up,
// periods shorter and longer than the epoch.
func TestPythonReferenceMixtures(t *testing.T) {
	var in struct {
		Mixtures []goldenMix `json:"mixtures"`
	}
	in.Mixtures = append(randomMixtures(t, 120), randomPassMixtures(t, 60)...)
	var ref referenceOutput
	runReference(t, in, &ref)
	if len(ref.Mixtures) != len(in.Mixtures) {
		t.Fatalf("reference printed %d mixtures for %d", len(ref.Mixtures), len(in.Mixtures))
	}
	for i, c := range in.Mixtures {
		compareMix(t, ref.Mixtures[i], computeMix(t, c))
		if t.Failed() {
			t.Fatalf("inputs: weights %v counts %v block %d samples %d seed %d epoch %d window %d",
				c.Weights, c.Counts, c.Block, c.Samples, c.Seed, c.Epoch, c.Window)
		}
	}
}

// randomMixtures returns n random mixtures' inputs, the same on every run.
func randomMixtures(t *testing.T, n int) []goldenMix {
	t.Helper()
	r := rand.New(rand.NewPCG(11, 12))
	out := make([]goldenMix, n)
	for i := range out {
		c := goldenMix{Name: fmt.Sprintf("random-%d", i), Block: 1 + r.IntN(40),
			Seed: r.Uint64(), Epoch: uint64(r.IntN(6)), Window: 1 + r.IntN(3)}
		if r.IntN(8) == 0 {
			c.Epoch = r.Uint64N(1 << 40)
		}
		k := 1 + r.IntN(7)
		// Weights whose period is short enough for the reference to run
		// the rule over it (the counts run on the global block index, so
		// a later epoch starts anywhere in the period): redrawn past
		// 20,000 blocks × components.
		for c.Weights == nil || mixPeriod(c.Weights, sumOf(c.Weights), c.Block)*k > 20_000 {
			scale := []uint64{3, 10, 1000, 1_000_000}[r.IntN(4)]
			c.Weights = c.Weights[:0]
			for range k {
				c.Weights = append(c.Weights, 1+r.Uint64N(scale))
			}
		}
		for range k {
			counts := make([]int, 1+r.IntN(4))
			for j := range counts {
				counts[j] = r.IntN([]int{3, 40}[r.IntN(2)]) // empty chunks too
			}
			counts[0]++ // a component holds a sample
			c.Counts = append(c.Counts, counts)
		}
		if r.IntN(2) == 0 {
			c.Samples = 1 + r.IntN(600)
		}
		// The shape decides which blocks and positions to pin.
		g := computeMix(t, c)
		blocks := g.NumSamples / c.Block
		if blocks <= 30 {
			for b := range blocks {
				c.Blocks = append(c.Blocks, b)
			}
		} else {
			for range 10 {
				c.Blocks = append(c.Blocks, r.IntN(blocks))
			}
			c.Blocks = append(c.Blocks, blocks-1)
		}
		c.Start, c.End = 0, g.NumSamples
		if g.NumSamples > 400 {
			c.Start = r.IntN(g.NumSamples)
			c.End = c.Start + r.IntN(min(300, g.NumSamples-c.Start)+1)
		}
		out[i] = c
	}
	return out
}

// randomPassMixtures are random mixtures some of whose components' passes
// differ in length: a pass 0 of the component's samples, as the epoch
// length was chosen for, then one to four lengths cycled through, some of
// a single position.
func randomPassMixtures(t *testing.T, n int) []goldenMix {
	t.Helper()
	r := rand.New(rand.NewPCG(13, 14))
	out := randomMixtures(t, n)
	for j := range out {
		c := &out[j]
		c.Name = fmt.Sprintf("random-passes-%d", j)
		// A pass is found by adding the lengths before it: no epochs of
		// 2^40 here.
		c.Epoch = r.Uint64N(6)
		c.PassLengths = make([][]int, len(c.Counts))
		for i, counts := range c.Counts {
			if r.IntN(3) == 0 {
				continue // equal passes
			}
			n := 0
			for _, k := range counts {
				n += k
			}
			lens := []int{n}
			for range r.IntN(4) {
				lens = append(lens, 1+r.IntN([]int{2, 30, 200}[r.IntN(3)]))
			}
			c.PassLengths[i] = lens
		}
	}
	return out
}

// TestDocEmbedsReference keeps the specification's Python listing identical
// to the reference implementation that TestPythonReference executes.
func TestDocEmbedsReference(t *testing.T) {
	src, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	algo, _, ok := strings.Cut(string(src), driverMarker)
	if !ok {
		t.Fatalf("%s lacks the marker %q", referencePath, driverMarker)
	}
	// The module docstring describes the file, not the algorithm; the doc
	// lists everything after it.
	_, algo, ok = strings.Cut(algo, "\"\"\"\n\n")
	if !ok {
		t.Fatalf("%s: no module docstring", referencePath)
	}
	algo = strings.TrimSpace(algo)
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```python\n"+algo+"\n```") {
		t.Errorf("%s does not list the algorithm part of %s verbatim in a ```python block; copy it from there", docPath, referencePath)
	}
}

func sumOf(w []uint64) uint64 {
	var s uint64
	for _, a := range w {
		s += a
	}
	return s
}
