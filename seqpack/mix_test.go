package seqpack

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// tokenStream is a token dataset read as a mixture component: pass p is
// its epoch p packed, whose sequence counts differ from pass to pass.
// It memoises each pass's Packing, as a server would its counts.
type tokenStream struct {
	counts []int // documents per chunk
	tokens []int // per document
	window int
	spec   Spec
	seed   uint64

	mu     sync.Mutex
	passes map[uint64]*Packing
}

func (s *tokenStream) pass(t testing.TB, p uint64) *Packing {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.passes[p]; ok {
		return e
	}
	o, err := shuffle.NewEpoch(s.counts, s.seed, p, s.window)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewPacking(o, func(d int) int { return s.tokens[d] }, s.spec, s.seed, p)
	if err != nil {
		t.Fatal(err)
	}
	if s.passes == nil {
		s.passes = map[uint64]*Packing{}
	}
	s.passes[p] = e
	return e
}

// TestMixtureOfTokenStreams mixes three best-fit token streams by weight
// with shuffle.NewMixtureOf, each pass's length its packing's sequence
// count: over several mixture epochs each component reads its passes'
// sequences in order, each once, every pass it finishes holding every
// token of its dataset once; and every mixing block holds each component
// within one sequence of its share.
func TestMixtureOfTokenStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	spec := Spec{Seq: 32, Mode: BestFit}
	var streams []*tokenStream
	var passes []shuffle.Passes
	for i, docs := range []int{120, 40, 9} {
		s := &tokenStream{window: 2, spec: spec, seed: 77}
		for left := docs; left > 0; left -= 10 {
			s.counts = append(s.counts, min(10, left))
		}
		for range docs {
			s.tokens = append(s.tokens, 1+r.IntN([]int{40, 90, 20}[i]))
		}
		streams = append(streams, s)
		passes = append(passes, shuffle.PassesFunc(func(p uint64) int { return s.pass(t, p).NumSequences() }))
	}
	weights := []uint64{5, 3, 2}
	const block = 10
	m, err := shuffle.NewMixtureOf(weights, passes, block, 0)
	if err != nil {
		t.Fatal(err)
	}
	lens := map[string]bool{}
	next := make([]shuffle.Draw, 3)
	covered := make([]map[int][]int, 3) // the current pass's tokens read, per document
	for i := range next {
		next[i].Component = i
		covered[i] = map[int][]int{}
	}
	for e := range uint64(8) {
		draws := m.AppendRange(nil, 5, e, 0, m.NumSamples())
		for b := 0; b < len(draws); b += block {
			per := make([]int, 3)
			for _, d := range draws[b : b+block] {
				per[d.Component]++
			}
			for i, a := range weights {
				if exact := float64(block*int(a)) / 10; float64(per[i]) <= exact-1 || float64(per[i]) >= exact+1 {
					t.Fatalf("epoch %d block %d: %d sequences of component %d, share %.1f", e, b/block, per[i], i, exact)
				}
			}
		}
		for _, d := range draws {
			i := d.Component
			if d != next[i] {
				t.Fatalf("epoch %d: component %d drew %+v, want %+v", e, i, d, next[i])
			}
			s := streams[i]
			pe := s.pass(t, d.Pass)
			lens[fmt.Sprint(i, pe.NumSequences())] = true
			for _, q := range pe.AppendRange(nil, d.Index, d.Index+1) {
				for _, p := range q.Pieces {
					if covered[i][p.Doc] == nil {
						covered[i][p.Doc] = make([]int, s.tokens[p.Doc])
					}
					for k := p.Offset; k < p.Offset+p.Len; k++ {
						covered[i][p.Doc][k]++
					}
				}
			}
			if next[i].Index++; next[i].Index < pe.NumSequences() {
				continue
			}
			// A pass read whole: every token of the dataset once.
			for doc, n := range s.tokens {
				for k := range n {
					if covered[i][doc][k] != 1 {
						t.Fatalf("component %d pass %d: token %d of document %d read %d times", i, d.Pass, k, doc, covered[i][doc][k])
					}
				}
			}
			covered[i] = map[int][]int{}
			next[i].Pass, next[i].Index = next[i].Pass+1, 0
		}
	}
	t.Logf("passes reached %+v; lengths seen %v", next, lens)
	if next[2].Pass < 3 || len(lens) < 5 {
		t.Fatalf("the small component reached pass %d; pass lengths seen %v: the test reads too little", next[2].Pass, lens)
	}
}
