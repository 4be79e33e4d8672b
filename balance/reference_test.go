package balance

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
	referencePath   = "testdata/reference.py"
	docPath         = "../docs/shuffle.md"
	algorithmMarker = "# ---- algorithm ----"
	driverMarker    = "# ---- test driver ----"
)

// runReference runs the Python reference on the cases' inputs and
// returns its outputs, by case.
func runReference(t *testing.T, cases []goldenCase) []goldenCase {
	t.Helper()
	in := make([]goldenCase, len(cases))
	for i, c := range cases {
		in[i] = goldenCase{Name: c.Name, Costs: c.Costs, Pieces: c.Pieces, Shares: c.Shares}
	}
	var ref struct {
		Cases []struct {
			Name       string   `json:"name"`
			Ranks      [][]int  `json:"ranks"`
			Costs      []uint64 `json:"costs"`
			PlainCosts []uint64 `json:"plain_costs"`
		} `json:"cases"`
	}
	pythontest.Reference(t, referencePath, goldenFile{Cases: in}, &ref, 2*time.Minute)
	if len(ref.Cases) != len(cases) {
		t.Fatalf("the reference answered %d cases of %d", len(ref.Cases), len(cases))
	}
	got := make([]goldenCase, len(cases))
	for i, r := range ref.Cases {
		got[i] = in[i]
		got[i].Ranks, got[i].RankCosts, got[i].PlainCosts = r.Ranks, r.Costs, r.PlainCosts
	}
	return got
}

// TestPythonReference runs the reference on every golden input and
// compares its outputs with the golden ones.
func TestPythonReference(t *testing.T) {
	want := readGolden(t).Cases
	got := runReference(t, want)
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: the reference gives ranks %v costs %v plain %v; golden %v %v %v", want[i].Name,
				got[i].Ranks, got[i].RankCosts, got[i].PlainCosts, want[i].Ranks, want[i].RankCosts, want[i].PlainCosts)
		}
	}
}

// TestPythonReferenceRandom compares Go and the reference on random
// batches: costs with many ties, heavy tails, uneven and empty shares.
func TestPythonReferenceRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 56))
	var cases []goldenCase
	for n := range 150 {
		world := 1 + r.IntN(9)
		c := goldenCase{Name: fmt.Sprintf("random-%d", n)}
		size := 1 + r.IntN(12)
		total := 0
		for k := range world {
			s := size
			if n%5 == 0 && k == world-1 {
				s = r.IntN(size + 1) // a short final batch
			}
			c.Shares = append(c.Shares, s)
			total += s
		}
		switch n % 3 {
		case 0:
			for range total {
				c.Costs = append(c.Costs, uint64(r.IntN(6))) // many ties
			}
		case 1:
			for range total {
				c.Costs = append(c.Costs, uint64(r.ExpFloat64()*1e6))
			}
		default:
			for range total {
				c.Pieces = append(c.Pieces, packed(r, 64+r.IntN(2048)))
			}
		}
		cases = append(cases, compute(t, c))
	}
	got := runReference(t, cases)
	for i := range cases {
		if !reflect.DeepEqual(got[i], cases[i]) {
			t.Errorf("%s (costs %v pieces %v shares %v): the reference gives %v %v, Go %v %v", cases[i].Name, cases[i].Costs, cases[i].Pieces, cases[i].Shares,
				got[i].Ranks, got[i].RankCosts, cases[i].Ranks, cases[i].RankCosts)
		}
	}
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
