package seqpack

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

const (
	referencePath    = "testdata/reference.py"
	docPath          = "../docs/shuffle.md"
	algorithmMarker  = "# ---- algorithm ----"
	driverMarker     = "# ---- test driver ----"
	referenceTimeout = 60 * time.Second
)

// runReference runs testdata/reference.py on the cases of g and returns
// what it computes for them.
func runReference(t *testing.T, g goldenFile) []goldenCase {
	t.Helper()
	in := goldenFile{Cases: make([]goldenCase, len(g.Cases))}
	for i, c := range g.Cases {
		in.Cases[i] = clearOutputs(c)
	}
	var ref goldenFile
	pythontest.Reference(t, referencePath, in, &ref, referenceTimeout)
	if len(ref.Cases) != len(g.Cases) {
		t.Fatalf("reference printed %d cases for %d", len(ref.Cases), len(g.Cases))
	}
	return ref.Cases
}

// TestPythonReference runs the independent Python implementation of the
// specification on the golden inputs and requires it to agree with Go on
// every output, so that docs/shuffle.md §12 is proven reimplementable.
func TestPythonReference(t *testing.T) {
	golden := readGolden(t)
	ref := runReference(t, golden)
	for i, in := range golden.Cases {
		compareCase(t, ref[i], computeCase(t, clearOutputs(in)))
	}
}

// TestPythonReferenceRandom compares Go with the Python reference on
// random epochs: both modes, sequences of 1 to 40 tokens, documents of no
// tokens, shorter than, as long as and many times longer than seq, empty
// chunks and windows, orders of shuffle's and windows given with repeats.
func TestPythonReferenceRandom(t *testing.T) {
	g := goldenFile{Cases: append(randomCases(t, 200), largeSeqCases(t)...)}
	ref := runReference(t, g)
	for i, c := range g.Cases {
		compareCase(t, ref[i], computeCase(t, c))
		if t.Failed() {
			t.Fatalf("inputs: %+v", c)
		}
	}
}

// randomCases returns n random packings' inputs, the same on every run.
func randomCases(t testing.TB, n int) []goldenCase {
	r := rand.New(rand.NewPCG(42, 12))
	out := make([]goldenCase, n)
	for i := range out {
		seq := 1 + r.IntN([]int{4, 16, 40}[r.IntN(3)])
		c := goldenCase{Name: fmt.Sprintf("random-%d", i), Seq: seq, Mode: []string{"bestfit", "concat"}[r.IntN(2)],
			Seed: r.Uint64(), Epoch: r.Uint64N(100), Window: 1 + r.IntN(4),
			BatchSize: 1 + r.IntN(5), World: 1 + r.IntN(4), DropLast: r.IntN(2) == 0, PositionsOf: r.IntN(3)}
		docs := 0
		for range r.IntN(12) {
			k := 0
			if r.IntN(5) > 0 {
				k = r.IntN(15)
			}
			c.Counts = append(c.Counts, k)
			docs += k
		}
		if r.IntN(5) == 0 { // an importance order's shape
			docs = 1 + r.IntN(20)
			c.Counts = nil
			c.Windows = make([][]int, 1+r.IntN(5))
			for w := range c.Windows {
				c.Windows[w] = []int{}
				for range r.IntN(10) {
					c.Windows[w] = append(c.Windows[w], r.IntN(docs))
				}
			}
		}
		c.DocTokens = make([]int, docs)
		for d := range c.DocTokens {
			switch r.IntN(6) {
			case 0:
				c.DocTokens[d] = 0
			case 1:
				c.DocTokens[d] = seq
			case 2:
				c.DocTokens[d] = seq * (1 + r.IntN(4))
			case 3:
				c.DocTokens[d] = r.IntN(5 * seq)
			default:
				c.DocTokens[d] = 1 + r.IntN(seq)
			}
		}
		g := computeCase(t, c)
		if g.NumSequences > 0 && r.IntN(3) == 0 {
			c.Offset = r.IntN(g.NumSequences + 1)
		}
		out[i] = c
	}
	return out
}

// largeSeqCases are random best-fit windows of a few hundred documents at
// sequence lengths whose rooms reach every level of the packer's bit set.
func largeSeqCases(t testing.TB) []goldenCase {
	r := rand.New(rand.NewPCG(99, 100))
	var out []goldenCase
	for i, seq := range []int{4096, 4097, 300_000, MaxSeq} {
		c := goldenCase{Name: fmt.Sprintf("large-seq-%d", i), Seq: seq, Mode: "bestfit", Seed: r.Uint64(), Window: 2,
			Counts: []int{150, 100, 120}, BatchSize: 4, World: 2}
		c.DocTokens = make([]int, 370)
		for d := range c.DocTokens {
			switch r.IntN(4) {
			case 0:
				c.DocTokens[d] = 1 + r.IntN(64)
			case 1:
				c.DocTokens[d] = seq - r.IntN(64)
			default:
				c.DocTokens[d] = 1 + r.IntN(2*seq)
			}
		}
		out = append(out, c)
	}
	return out
}

// TestDocEmbedsReference keeps the specification's Python listing
// identical to the reference implementation the tests execute.
func TestDocEmbedsReference(t *testing.T) {
	src, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	_, algo, ok := strings.Cut(string(src), algorithmMarker)
	if !ok {
		t.Fatalf("%s lacks the marker %q", referencePath, algorithmMarker)
	}
	algo, _, ok = strings.Cut(algo, driverMarker)
	if !ok {
		t.Fatalf("%s lacks the marker %q", referencePath, driverMarker)
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
