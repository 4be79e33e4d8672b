package seqpack

import (
	"flag"
	"reflect"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/golden"

	"github.com/brandgw/brand/shuffle"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

const goldenPath = "testdata/golden.json"

// goldenFile is the layout of testdata/golden.json: inputs with the
// packings they must produce, forever. docs/shuffle.md §12 and
// testdata/reference.py are checked against the same file.
type goldenFile struct {
	Comment string       `json:"comment"`
	Cases   []goldenCase `json:"cases"`
}

// goldenCase is one packed epoch. Its documents are in shuffle's epoch
// order of Counts (docs/shuffle.md §5), or, when Windows is given, in
// those windows (an importance order's shape: a document may repeat).
type goldenCase struct {
	Name        string  `json:"name"`
	Counts      []int   `json:"counts,omitempty"`  // documents per chunk
	Windows     [][]int `json:"windows,omitempty"` // or the windows' documents
	DocTokens   []int   `json:"doc_tokens"`        // per document ID, its tokens
	Seed        uint64  `json:"seed"`
	Epoch       uint64  `json:"epoch"`
	Window      int     `json:"window"` // chunks per window of the order of Counts
	Seq         int     `json:"seq"`
	Mode        string  `json:"mode"`
	BatchSize   int     `json:"batch_size"`
	World       int     `json:"world"`
	DropLast    bool    `json:"drop_last"`
	Offset      int     `json:"offset"`       // in sequences
	PositionsOf int     `json:"positions_of"` // the first sequences whose position_ids are pinned

	WindowStarts []int `json:"window_starts"`
	NumSequences int   `json:"num_sequences"`
	Tokens       int   `json:"tokens"` // not pad
	Split        int   `json:"split"`
	// Sequences are the whole epoch's, each as [pad, then doc, offset,
	// len, eos (0 or 1) for each piece].
	Sequences [][]int    `json:"sequences"`
	Positions [][]int32  `json:"positions"`
	Batches   [][][2]int `json:"batches"` // [batch][rank] -> sequences [start, end)
}

// windows is an Order of windows given by their documents.
type windows [][]int

func (ws windows) NumWindows() int    { return len(ws) }
func (ws windows) Window(w int) []int { return append([]int(nil), ws[w]...) }

// goldenInputs are the packings pinned by the golden file. Add a case here
// and run `go test ./seqpack -run TestGolden -update`; never edit outputs by
// hand.
func goldenInputs() goldenFile {
	// The worked example of docs/shuffle.md §12.4: shuffle's worked
	// example (§9) with tokens.
	worked := []int{5, 3, 9, 2, 7, 4, 1, 6, 3}
	mixed := make([]int, 60)
	for d := range mixed {
		mixed[d] = []int{0, 1, 3, 7, 12, 15, 16, 17, 33, 48, 2, 5}[(d*7)%12]
	}
	return goldenFile{
		Comment: "Brand packing golden vectors; see docs/shuffle.md §12. A sequence is [pad, then doc, offset, len, eos for each piece]. Regenerate with go test ./seqpack -run TestGolden -update, which changes every token job's sequences: do not.",
		Cases: []goldenCase{
			{Name: "worked-example", Counts: []int{3, 2, 4}, DocTokens: worked, Seed: 1, Window: 2,
				Seq: 8, Mode: "bestfit", BatchSize: 2, World: 2, PositionsOf: 6},
			{Name: "worked-example-concat", Counts: []int{3, 2, 4}, DocTokens: worked, Seed: 1, Window: 2,
				Seq: 8, Mode: "concat", BatchSize: 2, World: 2, PositionsOf: 7},
			// Long documents (several whole sequences), empty ones, empty
			// chunks, windows of several chunks.
			{Name: "mixed-bestfit", Counts: []int{5, 0, 9, 7, 3, 0, 11, 8, 6, 11}, DocTokens: mixed, Seed: 42, Epoch: 3, Window: 3,
				Seq: 16, Mode: "bestfit", BatchSize: 3, World: 2, PositionsOf: 4},
			{Name: "mixed-concat", Counts: []int{5, 0, 9, 7, 3, 0, 11, 8, 6, 11}, DocTokens: mixed, Seed: 42, Epoch: 3, Window: 3,
				Seq: 16, Mode: "concat", BatchSize: 3, World: 2, PositionsOf: 4},
			{Name: "mixed-bestfit-offset-drop-last", Counts: []int{5, 0, 9, 7, 3, 0, 11, 8, 6, 11}, DocTokens: mixed, Seed: 42, Epoch: 3, Window: 3,
				Seq: 16, Mode: "bestfit", BatchSize: 2, World: 3, DropLast: true, Offset: 5},
			{Name: "mixed-concat-offset", Counts: []int{5, 0, 9, 7, 3, 0, 11, 8, 6, 11}, DocTokens: mixed, Seed: 42, Epoch: 3, Window: 3,
				Seq: 16, Mode: "concat", BatchSize: 2, World: 3, Offset: 7},
			// seq 1: every token its own sequence.
			{Name: "seq-1", Counts: []int{2, 2}, DocTokens: []int{2, 0, 1, 3}, Seed: 7, Epoch: 1, Window: 1,
				Seq: 1, Mode: "bestfit", BatchSize: 2, World: 1, PositionsOf: 2},
			{Name: "seq-1-concat", Counts: []int{2, 2}, DocTokens: []int{2, 0, 1, 3}, Seed: 7, Epoch: 1, Window: 1,
				Seq: 1, Mode: "concat", BatchSize: 2, World: 1},
			// Ties: equal lengths placed by position, equal rooms by the
			// first bin opened.
			{Name: "ties", Counts: []int{12}, DocTokens: []int{3, 3, 3, 3, 5, 5, 5, 5, 2, 2, 1, 1}, Seed: 5, Window: 1,
				Seq: 10, Mode: "bestfit", BatchSize: 4, World: 1},
			// A concat stream that ends on a cut: no pad at all.
			{Name: "concat-exact", Counts: []int{3}, DocTokens: []int{3, 4, 2}, Seed: 5, Window: 1,
				Seq: 4, Mode: "concat", BatchSize: 1, World: 1, PositionsOf: 3},
			// An importance order's shape: windows given, a document drawn
			// twice, an empty window.
			{Name: "repeats", Windows: [][]int{{4, 1, 4, 0}, {}, {2, 3, 2}}, DocTokens: []int{6, 9, 4, 1, 7}, Seed: 11, Epoch: 2,
				Seq: 8, Mode: "bestfit", BatchSize: 2, World: 2},
			{Name: "repeats-concat", Windows: [][]int{{4, 1, 4, 0}, {}, {2, 3, 2}}, DocTokens: []int{6, 9, 4, 1, 7}, Seed: 11, Epoch: 2,
				Seq: 8, Mode: "concat", BatchSize: 2, World: 2},
			{Name: "no-tokens", Counts: []int{2, 1}, DocTokens: []int{0, 0, 0}, Seed: 3, Window: 1,
				Seq: 4, Mode: "bestfit", BatchSize: 1, World: 1},
			{Name: "large-seed", Counts: []int{4, 4}, DocTokens: []int{9, 1, 8, 2, 7, 3, 6, 4}, Seed: 1<<64 - 1, Epoch: 1<<63 + 5, Window: 1,
				Seq: 5, Mode: "bestfit", BatchSize: 2, World: 2},
		},
	}
}

// order returns c's document order.
func (c goldenCase) order(t testing.TB) DocumentOrder {
	t.Helper()
	if c.Windows != nil {
		return windows(c.Windows)
	}
	e, err := shuffle.NewEpoch(c.Counts, c.Seed, c.Epoch, c.Window)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return e
}

// computeCase fills in every output of c from the Go implementation.
func computeCase(t testing.TB, c goldenCase) goldenCase {
	t.Helper()
	mode, err := ParseMode(c.Mode)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewPacking(c.order(t), func(d int) int { return c.DocTokens[d] }, Spec{Seq: c.Seq, Mode: mode}, c.Seed, c.Epoch)
	if err != nil {
		t.Fatalf("%s: NewEpoch: %v", c.Name, err)
	}
	c.WindowStarts = make([]int, e.NumWindows()+1)
	for w := range c.WindowStarts {
		c.WindowStarts[w] = e.WindowStart(w)
	}
	c.NumSequences, c.Tokens, c.Split = e.NumSequences(), e.NumTokens(), e.Split()
	seqs := e.AppendRange(nil, 0, e.NumSequences())
	c.Sequences = make([][]int, len(seqs))
	for j, s := range seqs {
		c.Sequences[j] = flatten(s)
	}
	c.Positions = [][]int32{}
	for _, s := range seqs[:min(c.PositionsOf, len(seqs))] {
		c.Positions = append(c.Positions, s.AppendPositions(nil))
	}
	p := shuffle.Params{Window: 1, BatchSize: c.BatchSize, World: c.World, DropLast: c.DropLast, Offset: c.Offset}
	c.Batches = [][][2]int{}
	for m := range p.NumBatches(e.NumSequences()) {
		var ranks [][2]int
		for r := range c.World {
			p.Rank = r
			s, end, err := p.BatchRange(e.NumSequences(), m)
			if err != nil {
				t.Fatalf("%s: batch %d rank %d: %v", c.Name, m, r, err)
			}
			ranks = append(ranks, [2]int{s, end})
		}
		c.Batches = append(c.Batches, ranks)
	}
	return c
}

// flatten writes a sequence as the golden file does: its pad, then doc,
// offset, len and eos of each piece.
func flatten(s Sequence) []int {
	out := []int{s.Pad}
	for _, p := range s.Pieces {
		eos := 0
		if p.EOS {
			eos = 1
		}
		out = append(out, p.Doc, p.Offset, p.Len, eos)
	}
	return out
}

// compareCase reports every output field of got that differs from want.
func compareCase(t *testing.T, got, want goldenCase) {
	t.Helper()
	check := func(field string, g, w any) {
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s changed:\n got %v\nwant %v", want.Name, field, g, w)
		}
	}
	check("window_starts", got.WindowStarts, want.WindowStarts)
	check("num_sequences", got.NumSequences, want.NumSequences)
	check("tokens", got.Tokens, want.Tokens)
	check("split", got.Split, want.Split)
	check("sequences", got.Sequences, want.Sequences)
	check("positions", got.Positions, want.Positions)
	check("batches", got.Batches, want.Batches)
}

// clearOutputs returns c's inputs only.
func clearOutputs(c goldenCase) goldenCase {
	c.WindowStarts, c.NumSequences, c.Tokens, c.Split, c.Sequences, c.Positions, c.Batches = nil, 0, 0, 0, nil, nil, nil
	return c
}

func TestGolden(t *testing.T) {
	got := goldenInputs()
	for i := range got.Cases {
		got.Cases[i] = computeCase(t, got.Cases[i])
	}
	if *update {
		golden.Write(t, goldenPath, got)
	}
	want := readGolden(t)
	if len(want.Cases) != len(got.Cases) {
		t.Fatalf("%s holds %d cases; goldenInputs has %d (run with -update after adding inputs)", goldenPath, len(want.Cases), len(got.Cases))
	}
	for i, w := range want.Cases {
		t.Run(w.Name, func(t *testing.T) {
			// Recompute from the file's own inputs, so the check does not
			// depend on goldenInputs staying in sync with the file.
			g := computeCase(t, clearOutputs(w))
			if g.Name != got.Cases[i].Name {
				t.Errorf("case %d is %q in the file, %q in goldenInputs", i, g.Name, got.Cases[i].Name)
			}
			compareCase(t, g, w)
		})
	}
}

func readGolden(t *testing.T) goldenFile {
	t.Helper()
	var g goldenFile
	golden.Read(t, goldenPath, &g)
	return g
}
