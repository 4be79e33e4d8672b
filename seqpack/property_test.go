package seqpack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/shuffle"
)

// job is one random packed epoch for the property tests.
type job struct {
	c     goldenCase
	e     *Packing
	order DocumentOrder
}

// randomJobs returns n random epochs in both modes, with the shapes
// randomCases gives (repeats included) but larger: up to a few hundred
// documents of up to a few sequences each.
func randomJobs(t *testing.T, n int) []job {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	cases := randomCases(t, n)
	jobs := make([]job, n)
	for i, c := range cases {
		if c.Windows == nil && r.IntN(2) == 0 {
			// Larger: more and fuller chunks.
			c.Counts = make([]int, 1+r.IntN(30))
			docs := 0
			for k := range c.Counts {
				c.Counts[k] = r.IntN(40)
				docs += c.Counts[k]
			}
			c.DocTokens = make([]int, docs)
			for d := range c.DocTokens {
				c.DocTokens[d] = r.IntN(3 * c.Seq)
			}
			c.Offset = 0
		}
		mode, err := ParseMode(c.Mode)
		if err != nil {
			t.Fatal(err)
		}
		o := c.order(t)
		e, err := NewPacking(o, func(d int) int { return c.DocTokens[d] }, Spec{Seq: c.Seq, Mode: mode}, c.Seed, c.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		jobs[i] = job{c: c, e: e, order: o}
	}
	return jobs
}

// draws returns the order's documents in epoch order.
func draws(o DocumentOrder) []int {
	var out []int
	for w := range o.NumWindows() {
		out = append(out, o.Window(w)...)
	}
	return out
}

// checkSequences fails unless every sequence holds seq tokens, its pieces
// at least one token each, and its position_ids restart at each piece and
// at the pad: the layout a trainer derives cu_seqlens from.
func checkSequences(t *testing.T, j job, seqs []Sequence) {
	t.Helper()
	for s, q := range seqs {
		n := q.Pad
		for _, p := range q.Pieces {
			if p.Len < 1 {
				t.Fatalf("%s: sequence %d: a piece of %d tokens", j.c.Name, s, p.Len)
			}
			n += p.Len
		}
		if n != j.c.Seq || q.Pad < 0 {
			t.Fatalf("%s: sequence %d holds %d tokens and pad %d, want %d", j.c.Name, s, n, q.Pad, j.c.Seq)
		}
		pos := q.AppendPositions(nil)
		var segs []int // lengths of the runs starting at position 0
		for i, x := range pos {
			if x == 0 {
				segs = append(segs, 0)
			} else if i == 0 || x != pos[i-1]+1 {
				t.Fatalf("%s: sequence %d: position_ids %v", j.c.Name, s, pos)
			}
			segs[len(segs)-1]++
		}
		var want []int
		for _, p := range q.Pieces {
			want = append(want, p.Len)
		}
		if q.Pad > 0 {
			want = append(want, q.Pad)
		}
		if !slices.Equal(segs, want) {
			t.Fatalf("%s: sequence %d: segments %v from position_ids, pieces and pad %v", j.c.Name, s, segs, want)
		}
	}
}

// TestBestFitEveryTokenOnce: in BestFit the pieces of an epoch hold every
// token of every document it draws exactly once (a document drawn twice,
// twice), no document shorter than seq is cut, only the documents longer
// than seq are split, and Tokens and Split say so.
func TestBestFitEveryTokenOnce(t *testing.T) {
	for _, j := range randomJobs(t, 300) {
		if j.e.Spec().Mode != BestFit {
			continue
		}
		seq := j.c.Seq
		seqs := j.e.AppendRange(nil, 0, j.e.NumSequences())
		checkSequences(t, j, seqs)
		drawn := map[int]int{} // per document, how many times the order draws it
		for _, d := range draws(j.order) {
			drawn[d]++
		}
		covered := map[int][]int{} // per document, how many times each token is in a piece
		tokens, pad := 0, 0
		for s, q := range seqs {
			pad += q.Pad
			for _, p := range q.Pieces {
				n := j.c.DocTokens[p.Doc]
				if p.EOS || p.Offset < 0 || p.Offset+p.Len > n {
					t.Fatalf("%s: sequence %d: piece %+v of a document of %d tokens", j.c.Name, s, p, n)
				}
				if n < seq && (p.Offset != 0 || p.Len != n) {
					t.Fatalf("%s: sequence %d: a document of %d tokens, shorter than seq %d, cut: %+v", j.c.Name, s, n, seq, p)
				}
				if p.Len == seq && len(q.Pieces) != 1 {
					t.Fatalf("%s: sequence %d: a whole sequence's piece shares it: %+v", j.c.Name, s, q)
				}
				if covered[p.Doc] == nil {
					covered[p.Doc] = make([]int, n)
				}
				for k := p.Offset; k < p.Offset+p.Len; k++ {
					covered[p.Doc][k]++
				}
				tokens += p.Len
			}
		}
		split := 0
		for d, k := range drawn {
			n := j.c.DocTokens[d]
			if n > seq {
				split += k
			}
			for i := range n {
				if got := covered[d][i]; got != k {
					t.Fatalf("%s: token %d of document %d is in %d pieces; the order draws the document %d times", j.c.Name, i, d, got, k)
				}
			}
		}
		for d := range covered {
			if drawn[d] == 0 {
				t.Fatalf("%s: document %d is in a piece but not in the order", j.c.Name, d)
			}
		}
		if tokens != j.e.NumTokens() || tokens+pad != seq*j.e.NumSequences() || split != j.e.Split() {
			t.Fatalf("%s: %d tokens, %d pad, %d split; the epoch says %d tokens of %d sequences, %d split",
				j.c.Name, tokens, pad, split, j.e.NumTokens(), j.e.NumSequences(), j.e.Split())
		}
	}
}

// TestConcatIsThePermutation: in Concat the epoch's pieces, read in
// order, are the order's documents in epoch order, each whole and once,
// each followed by its EOS; only the last sequence has pad.
func TestConcatIsThePermutation(t *testing.T) {
	for _, j := range randomJobs(t, 300) {
		if j.e.Spec().Mode != Concat {
			continue
		}
		seqs := j.e.AppendRange(nil, 0, j.e.NumSequences())
		checkSequences(t, j, seqs)
		var stream []Piece
		for s, q := range seqs {
			if q.Pad > 0 && s != len(seqs)-1 {
				t.Fatalf("%s: sequence %d of %d has pad %d", j.c.Name, s, len(seqs), q.Pad)
			}
			stream = append(stream, q.Pieces...)
		}
		i := 0
		for _, d := range draws(j.order) {
			n, at := j.c.DocTokens[d], 0
			for at < n+1 {
				if i == len(stream) {
					t.Fatalf("%s: the stream ends in document %d", j.c.Name, d)
				}
				p := stream[i]
				if p.Doc != d || p.Offset != at || p.EOS != (at+p.Len == n+1) || at+p.Len > n+1 {
					t.Fatalf("%s: piece %d is %+v; want document %d from token %d of %d (EOS the last)", j.c.Name, i, p, d, at, n+1)
				}
				at += p.Len
				i++
			}
		}
		if i != len(stream) {
			t.Fatalf("%s: %d pieces past the order's documents", j.c.Name, len(stream)-i)
		}
	}
}

// TestRangesCompose: any cut of the epoch into ranges gives the same
// sequences, a window's are its range's, WindowOf and WindowsRead name the
// windows the documents are in, and a second Packing of the same inputs is
// the same: the packing is a function of its inputs.
func TestRangesCompose(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, j := range randomJobs(t, 150) {
		e := j.e
		all := fmt.Sprint(e.AppendRange(nil, 0, e.NumSequences()))
		var cut []Sequence
		for s := 0; s < e.NumSequences(); {
			end := min(e.NumSequences(), s+1+r.IntN(7))
			cut = e.AppendRange(cut, s, end)
			s = end
		}
		if fmt.Sprint(cut) != all {
			t.Fatalf("%s: ranges differ from the whole epoch", j.c.Name)
		}
		var byWindow []Sequence
		for w := range e.NumWindows() {
			got := e.Window(w)
			if len(got) != e.WindowStart(w+1)-e.WindowStart(w) {
				t.Fatalf("%s: window %d has %d sequences, its starts say %d", j.c.Name, w, len(got), e.WindowStart(w+1)-e.WindowStart(w))
			}
			for s := e.WindowStart(w); s < e.WindowStart(w+1); s++ {
				if e.WindowOf(s) != w {
					t.Fatalf("%s: WindowOf(%d) = %d, want %d", j.c.Name, s, e.WindowOf(s), w)
				}
			}
			byWindow = append(byWindow, got...)
		}
		if fmt.Sprint(byWindow) != all {
			t.Fatalf("%s: windows differ from the whole epoch", j.c.Name)
		}
		windowOfDoc := map[int][]int{}
		for w := range j.order.NumWindows() {
			for _, d := range j.order.Window(w) {
				windowOfDoc[d] = append(windowOfDoc[d], w)
			}
		}
		for range 10 {
			if e.NumSequences() == 0 {
				break
			}
			s := r.IntN(e.NumSequences())
			end := s + 1 + r.IntN(e.NumSequences()-s)
			first, last := e.WindowsRead(s, end)
			for _, q := range e.AppendRange(nil, s, end) {
				for _, p := range q.Pieces {
					if !slices.ContainsFunc(windowOfDoc[p.Doc], func(w int) bool { return w >= first && w <= last }) {
						t.Fatalf("%s: sequences [%d, %d) read document %d of windows %v; WindowsRead says [%d, %d]",
							j.c.Name, s, end, p.Doc, windowOfDoc[p.Doc], first, last)
					}
				}
			}
		}
		again, err := NewPacking(j.c.order(t), func(d int) int { return j.c.DocTokens[d] }, e.Spec(), j.c.Seed, j.c.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(again.AppendRange(nil, 0, again.NumSequences())) != all {
			t.Fatalf("%s: a second Packing of the same inputs differs", j.c.Name)
		}
	}
}

// TestGlobalBatchesAtAnyWorld: the global batches at world 1 are the
// union of world 8's rank slices, in rank order, with and without
// drop_last; and a job that consumed P sequences at world 4 resumes at
// world 3 (and 8, and 1) with offset P, reading every remaining sequence
// once.
func TestGlobalBatchesAtAnyWorld(t *testing.T) {
	for _, j := range randomJobs(t, 100) {
		e := j.e
		all := e.AppendRange(nil, 0, e.NumSequences())
		for _, drop := range []bool{false, true} {
			one := shuffle.Params{Window: 1, BatchSize: 8 * 2, World: 1, DropLast: drop}
			eight := shuffle.Params{Window: 1, BatchSize: 2, World: 8, DropLast: drop}
			if one.NumBatches(e.NumSequences()) != eight.NumBatches(e.NumSequences()) {
				t.Fatalf("%s: %d global batches at world 1, %d at world 8", j.c.Name, one.NumBatches(e.NumSequences()), eight.NumBatches(e.NumSequences()))
			}
			for m := range one.NumBatches(e.NumSequences()) {
				whole, err := e.Batch(one, m)
				if err != nil {
					t.Fatal(err)
				}
				var union []Sequence
				for r := range 8 {
					eight.Rank = r
					part, err := e.Batch(eight, m)
					if err != nil {
						t.Fatal(err)
					}
					union = append(union, part...)
				}
				if fmt.Sprint(whole) != fmt.Sprint(union) {
					t.Fatalf("%s: global batch %d at world 1 is not the union of world 8's ranks", j.c.Name, m)
				}
			}
		}
		// Resume: world 4 reads some global batches, then another world
		// resumes at the sequences consumed.
		first := shuffle.Params{Window: 1, BatchSize: 3, World: 4}
		done := min(2, first.NumBatches(e.NumSequences()))
		var got []Sequence
		for m := range done {
			for r := range 4 {
				first.Rank = r
				b, err := e.Batch(first, m)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, b...)
			}
		}
		for _, world := range []int{3, 8, 1} {
			p := shuffle.Params{Window: 1, BatchSize: 2, World: world, Offset: len(got)}
			rest := slices.Clone(got)
			for m := range p.NumBatches(e.NumSequences()) {
				for r := range world {
					p.Rank = r
					b, err := e.Batch(p, m)
					if err != nil {
						t.Fatal(err)
					}
					rest = append(rest, b...)
				}
			}
			if fmt.Sprint(rest) != fmt.Sprint(all) {
				t.Fatalf("%s: world 4 for %d sequences, then world %d from offset %d, is not the epoch once", j.c.Name, len(got), world, len(got))
			}
		}
	}
}

// TestConcurrentRanges reads ranges of one Packing from several goroutines
// (under -race: a Packing is immutable).
func TestConcurrentRanges(t *testing.T) {
	for _, j := range randomJobs(t, 20) {
		e := j.e
		want := fmt.Sprint(e.AppendRange(nil, 0, e.NumSequences()))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if got := fmt.Sprint(e.AppendRange(nil, 0, e.NumSequences())); got != want {
					t.Errorf("%s: concurrent read differs", j.c.Name)
				}
			})
		}
		wg.Wait()
	}
}

func TestInvalid(t *testing.T) {
	one := windows{{0, 1}}
	for _, tc := range []struct {
		name   string
		spec   Spec
		tokens Tokens
	}{
		{"seq 0", Spec{Seq: 0}, func(int) int { return 1 }},
		{"seq past MaxSeq", Spec{Seq: MaxSeq + 1}, func(int) int { return 1 }},
		{"unknown mode", Spec{Seq: 8, Mode: 7}, func(int) int { return 1 }},
		{"negative tokens", Spec{Seq: 8}, func(d int) int { return d - 1 }},
		{"overflow", Spec{Seq: 8, Mode: Concat}, func(int) int { return 1 << 62 }},
	} {
		if _, err := NewPacking(one, tc.tokens, tc.spec, 0, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := ParseMode("best-fit"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseMode(best-fit): %v", err)
	}
	for _, m := range []Mode{BestFit, Concat} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if err := (Spec{Seq: MaxSeq, Mode: Concat}).Validate(); err != nil {
		t.Errorf("seq MaxSeq: %v", err)
	}
}

// The orders a gateway serves are Orders.
var (
	_ DocumentOrder = (*shuffle.Epoch)(nil)
	_ DocumentOrder = (*importance.Epoch)(nil)
)
