package balance

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

const goldenPath = "testdata/golden.json"

// goldenCase is one input of testdata/golden.json with the outputs it
// must produce, forever: docs/shuffle.md §13 and the Python reference
// (testdata/reference.py) are checked against the same file. A case gives
// its costs, or its sequences' pieces' lengths (whose costs are their
// attention costs).
type goldenCase struct {
	Name   string   `json:"name"`
	Costs  []uint64 `json:"costs,omitempty"`
	Pieces [][]int  `json:"pieces,omitempty"`
	Shares []int    `json:"shares"`

	Ranks      [][]int  `json:"ranks"`
	RankCosts  []uint64 `json:"costs_out"`
	PlainCosts []uint64 `json:"plain_costs"`
}

type goldenFile struct {
	Comment string       `json:"comment"`
	Cases   []goldenCase `json:"cases"`
}

// costsOf is a case's costs.
func (c goldenCase) costsOf() []uint64 {
	if c.Pieces == nil {
		return c.Costs
	}
	out := make([]uint64, len(c.Pieces))
	for i, p := range c.Pieces {
		out[i] = Attention(p)
	}
	return out
}

// compute fills a case's outputs from Go.
func compute(t *testing.T, c goldenCase) goldenCase {
	t.Helper()
	costs := c.costsOf()
	a, err := Assign(costs, c.Shares)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	p, err := Plain(costs, c.Shares)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	c.Ranks, c.RankCosts, c.PlainCosts = a.Ranks, a.Costs, p.Costs
	return c
}

// goldenInputs are the cases the file pins: the worked example of
// docs/shuffle.md §13.3, ties, empty and short ranks, one rank, zero
// costs, a cost no swap can move, and realistic token batches.
func goldenInputs() []goldenCase {
	cs := []goldenCase{
		{Name: "worked-example", Costs: []uint64{9, 1, 7, 3, 8, 2, 2, 4}, Shares: []int{2, 2, 2, 2}},
		{Name: "equal-costs-plain-cut", Costs: []uint64{5, 5, 5, 5, 5, 5}, Shares: []int{3, 3}},
		{Name: "zero-costs", Costs: make([]uint64, 8), Shares: []int{2, 2, 2, 2}},
		{Name: "one-rank", Costs: []uint64{4, 1, 9}, Shares: []int{3}},
		{Name: "short-final-batch", Costs: []uint64{10, 1, 1, 6, 4, 3, 2}, Shares: []int{3, 3, 1, 0}},
		{Name: "one-dominates", Costs: []uint64{1000, 1, 2, 3, 4, 5, 6, 7}, Shares: []int{2, 2, 2, 2}},
		{Name: "ties-of-cost", Costs: []uint64{3, 3, 3, 2, 2, 2, 1, 1, 1, 3, 2, 1}, Shares: []int{3, 3, 3, 3}},
		{Name: "single-samples", Costs: []uint64{7, 2, 9, 4}, Shares: []int{1, 1, 1, 1}},
		{Name: "swap-needed", Costs: []uint64{8, 7, 6, 5, 4, 3, 2, 1, 1, 1}, Shares: []int{5, 5}},
		{Name: "pieces", Pieces: [][]int{{8}, {4, 3}, {2, 2, 2, 2}, {1, 6}, {5}, {7, 1}}, Shares: []int{2, 2, 2}},
	}
	r := rand.New(rand.NewPCG(56, 13))
	// Sequences of 512 tokens packed from a long-tailed mix: whole
	// sequences of one split document beside many short documents.
	for _, shape := range []struct {
		name        string
		world, size int
	}{{"tokens-world8-b4", 8, 4}, {"tokens-world8-b16", 8, 16}, {"tokens-world3-b5", 3, 5}} {
		c := goldenCase{Name: shape.name}
		for range shape.world * shape.size {
			c.Pieces = append(c.Pieces, packed(r, 512))
		}
		for range shape.world {
			c.Shares = append(c.Shares, shape.size)
		}
		cs = append(cs, c)
	}
	return cs
}

// packed is the pieces' lengths of a random sequence of seq tokens: one
// piece of a split document a fifth of the time, else short documents
// and some pad.
func packed(r *rand.Rand, seq int) []int {
	if r.IntN(5) == 0 {
		return []int{seq}
	}
	var p []int
	left := seq
	for left > 8 {
		n := 1 + r.IntN(min(left, 1+int(float64(seq)*r.ExpFloat64()/6)))
		p = append(p, n)
		left -= n
		if r.IntN(8) == 0 {
			break
		}
	}
	return p
}

func TestGolden(t *testing.T) {
	if *update {
		g := goldenFile{Comment: "Rank balancing (docs/shuffle.md §13): each case's inputs (costs, or sequences' pieces' lengths, and the ranks' shares), then what Assign and the plain cut give. Do not regenerate: these fix every balanced job's batches."}
		for _, c := range goldenInputs() {
			g.Cases = append(g.Cases, compute(t, c))
		}
		b, err := json.MarshalIndent(g, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g := readGolden(t)
	if len(g.Cases) == 0 {
		t.Fatal("no golden cases")
	}
	for _, want := range g.Cases {
		got := compute(t, want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got ranks %v costs %v plain %v, want %v %v %v", want.Name, got.Ranks, got.RankCosts, got.PlainCosts, want.Ranks, want.RankCosts, want.PlainCosts)
		}
	}
}

func readGolden(t *testing.T) goldenFile {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}
