package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	utok "github.com/brandgw/brand/internal/batch/units/tokens"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/seqpack"
	"github.com/brandgw/brand/shuffle"
)

// tokenSteps lays out the global batches of epoch e of job over src, from
// the first, every rank's in rank order, and returns their sequences in
// global order. Every batch must read exactly the documents its pieces
// name, each once, and every sequence must be job.Seq tokens.
func tokenSteps(t *testing.T, o *layout.Orders, src layout.Source, job api.Job, e uint64) []seqpack.Sequence {
	t.Helper()
	var out []seqpack.Sequence
	for m, batches := 0, 1; m < batches; m++ {
		for r := range job.World {
			j := job
			j.Rank = r
			b, err := o.Layout(context.Background(), src, j, e, uint64(m))
			if err != nil {
				t.Fatalf("epoch %d batch %d rank %d: %v", e, m, r, err)
			}
			batches = b.Batches
			reads := map[int]bool{}
			for i, q := range unitstest.Tokens(b).Seqs {
				n := q.Pad
				for k, pc := range q.Pieces {
					tk := b.Take[unitstest.Tokens(b).At[i][k]]
					if id := b.Parts[tk.Part].Samples.IDs[tk.At]; id != pc.Doc {
						t.Fatalf("batch %d: sequence %d's piece %d reads document %d, not its own %d", m, i, k, id, pc.Doc)
					}
					reads[unitstest.Tokens(b).At[i][k]] = true
					n += pc.Len
				}
				if n != job.Seq {
					t.Fatalf("batch %d: sequence %d of %d tokens", m, i, n)
				}
			}
			if len(reads) != b.Reads() {
				t.Fatalf("batch %d reads %d documents, its pieces name %d", m, b.Reads(), len(reads))
			}
			out = append(out, unitstest.Tokens(b).Seqs...)
		}
	}
	return out
}

// One token job's epoch over a dataset of 400 documents of 1 to 300
// tokens (seq 64): in bestfit, the sequences' pieces hold every token of
// every document once, a document shorter than seq in one piece, and
// epochs 0 and 1 differ in order; in concat, the pieces read in order are
// a permutation of the documents, each whole and followed by its EOS,
// and only the last sequence has pad. Package pack's property tests check
// the packing alone; here it is the epoch a gateway lays out.
func TestTokenJobEpoch(t *testing.T) {
	ds := unitstest.TokenDataset(t, "d", "int32", megatrontest.Corpus(400, 300, 50000, 3))
	o := units.Orders(nil)
	counts, err := unitstest.TokenUnit(o).DocTokens(ds)
	if err != nil {
		t.Fatal(err)
	}
	const seq = 64
	for _, mode := range []string{"bestfit", "concat"} {
		t.Run(mode, func(t *testing.T) {
			q := fmt.Sprintf("seq=%d&pack=%s&pad=9&batch_size=3", seq, mode)
			if mode == "concat" {
				q += "&eos=7"
			}
			job := unitstest.TokenJob(t, q)
			var first []seqpack.Sequence
			for e := range uint64(2) {
				seqs := tokenSteps(t, o, layout.Source{DS: ds}, job, e)
				if len(seqs) < 100 {
					t.Fatalf("%d sequences: too few to cross windows", len(seqs))
				}
				seen := make([][]int, len(counts))
				pieces := make([]int, len(counts))
				for d, n := range counts {
					seen[d] = make([]int, n+1) // concat: the EOS last
				}
				var flat []seqpack.Piece
				for i, q := range seqs {
					if mode == "concat" && q.Pad > 0 && i < len(seqs)-1 {
						t.Fatalf("sequence %d of %d has pad", i, len(seqs))
					}
					for _, pc := range q.Pieces {
						for k := pc.Offset; k < pc.Offset+pc.Len; k++ {
							seen[pc.Doc][k]++
						}
						pieces[pc.Doc]++
						flat = append(flat, pc)
					}
				}
				for d, n := range counts {
					eos := 0
					if mode == "concat" {
						eos = 1
					}
					for k := range int(n) + eos {
						if seen[d][k] != 1 {
							t.Fatalf("epoch %d: document %d token %d served %d times", e, d, k, seen[d][k])
						}
					}
					if mode == "bestfit" && int(n) < seq && pieces[d] != 1 {
						t.Fatalf("document %d of %d tokens cut into %d pieces", d, n, pieces[d])
					}
				}
				if mode == "concat" {
					// In order: each document's pieces one after another,
					// the last ending with its EOS.
					for i, pc := range flat {
						last := pc.Offset+pc.Len == int(counts[pc.Doc])+1
						if pc.EOS != last || (i > 0 && !flat[i-1].EOS && (flat[i-1].Doc != pc.Doc || flat[i-1].Offset+flat[i-1].Len != pc.Offset)) {
							t.Fatalf("piece %d %+v after %+v: a document is not whole in order", i, pc, flat[max(i-1, 0)])
						}
					}
				}
				if e == 0 {
					first = seqs
				} else if fmt.Sprint(first) == fmt.Sprint(seqs) {
					t.Fatal("epochs 0 and 1 are the same sequences in the same order")
				}
			}
		})
	}
}

// A token job's global steps are the same sequences at world 1 and as the
// union of world 8's ranks, in order; a job that read 5 steps of 8 at
// world 2 and resumes at world 4 with offset 40 (in sequences) reads the
// rest of them.
func TestTokenJobAtAnyWorld(t *testing.T) {
	ds := unitstest.TokenDataset(t, "d", "uint16", megatrontest.Corpus(240, 300, 50000, 10))
	o := units.Orders(nil)
	const q = "seq=128&window=2"
	one := tokenSteps(t, o, layout.Source{DS: ds}, unitstest.TokenJob(t, q+"&batch_size=16"), 0)
	eight := tokenSteps(t, o, layout.Source{DS: ds}, unitstest.TokenJob(t, q+"&batch_size=2&world=8"), 0)
	if fmt.Sprint(eight) != fmt.Sprint(one) {
		t.Fatalf("world 8's union (%d sequences) is not world 1's (%d)", len(eight), len(one))
	}
	var resumed []seqpack.Sequence
	two := unitstest.TokenJob(t, q+"&batch_size=4&world=2")
	for m := range 5 {
		for r := range 2 {
			j := two
			j.Rank = r
			b, err := o.Layout(context.Background(), layout.Source{DS: ds}, j, 0, uint64(m))
			if err != nil {
				t.Fatal(err)
			}
			resumed = append(resumed, unitstest.Tokens(b).Seqs...)
		}
	}
	resumed = append(resumed, tokenSteps(t, o, layout.Source{DS: ds}, unitstest.TokenJob(t, q+"&batch_size=2&world=4&offset=40"), 0)...)
	if fmt.Sprint(resumed) != fmt.Sprint(one) {
		t.Fatalf("world 2 resumed at world 4: %d sequences, not world 1's %d in order", len(resumed), len(one))
	}
}

// A mixture of three token datasets mixes sequences: every global batch
// (one mixing block) holds each source within one sequence of its share,
// and so does every run of batches from the first; each sequence reads
// its own source's documents. Datasets of two dtypes are refused, naming
// both.
func TestTokenMixtureShares(t *testing.T) {
	o := units.Orders(nil)
	ds := unitstest.TokenSources(t)
	job := unitstest.TokenJob(t, "mix=web:0.5,code:0.3,books:0.2&seq=64&batch_size=10&window=2")
	m, err := unitstest.Mixture(o, job.Mix, ds, job)
	if err != nil {
		t.Fatal(err)
	}
	weights := []float64{0.5, 0.3, 0.2}
	batches, _, err := o.Extent(layout.Source{Unit: m}, job, 0)
	if err != nil || batches < 20 {
		t.Fatalf("%d batches, %v: too few to check shares", batches, err)
	}
	total := make([]int, 3)
	for n := range batches - 1 { // the last batch may be short
		b, err := o.Layout(context.Background(), layout.Source{Unit: m}, job, 0, uint64(n))
		if err != nil {
			t.Fatal(err)
		}
		tb := unitstest.Tokens(b)
		count := make([]int, 3)
		for i, c := range tb.Comps {
			count[c]++
			for _, at := range tb.At[i] {
				if p := b.Parts[b.Take[at].Part].Comp; p != c {
					t.Fatalf("batch %d: sequence %d of component %d reads a document of component %d", n, i, c, p)
				}
			}
		}
		for c, w := range weights {
			total[c] += count[c]
			if want := w * 10; math.Abs(float64(count[c])-want) >= 1 {
				t.Errorf("batch %d: component %d has %d sequences, share %.1f", n, c, count[c], want)
			}
			if want := w * 10 * float64(n+1); math.Abs(float64(total[c])-want) >= 1 {
				t.Errorf("batches 0..%d: component %d has %d sequences, share %.1f", n, c, total[c], want)
			}
		}
	}
	// Two dtypes are refused in a mixture, and in a schedule whose later
	// phase mixes them (its first phase reading web alone).
	small := unitstest.TokenDataset(t, "small", "uint16", megatrontest.Corpus(50, 100, 50000, 11))
	for _, q := range []string{"mix=web:1,small:1", "mix_schedule=0:web:1,small:0%3B4:web:1,small:1"} {
		two := unitstest.TokenJob(t, q+"&seq=64")
		if _, err := unitstest.Mixture(o, two.Mix, []*catalog.Dataset{ds[0], small}, two); !errors.Is(err, utok.ErrTokens) ||
			!strings.Contains(err.Error(), "web holds int32, small holds uint16") {
			t.Fatalf("%s of two dtypes: %v", q, err)
		}
	}
}

// What a token job cannot be is refused as a bad request, saying why:
// by the query (seq out of its bounds, eos= without concat, pad= without
// seq=) or by the dataset (a pad or EOS its dtype cannot hold, concat
// without an EOS, a dataset that holds no tokens).
func TestTokenJobRefused(t *testing.T) {
	tokens := unitstest.TokenDataset(t, "test", "uint16", megatrontest.Corpus(20, 50, 50000, 12))
	plain := catalogtest.Dataset(t, "plain", 2, 3)
	var l query.Limits
	l.Fill()
	for _, tc := range []struct {
		query, says string
		ds          *catalog.Dataset
	}{
		{"seq=0", "seq must be between 1 and 1048576", tokens},
		{"seq=1048577", "seq must be between 1 and 1048576", tokens},
		{"seq=64&eos=1", "only with pack=concat", tokens},
		{"pad=1", "token job (seq=)", tokens},
		{"seq=64&pad=65536", "does not fit dataset test's tokens (uint16", tokens},
		{"seq=64&pack=concat", "give eos=ID", tokens},
		{"seq=64&pack=concat&eos=70000", "eos=70000 does not fit", tokens},
		{"seq=64", "plain is not one", plain},
	} {
		q, err := query.Parse(tc.query, query.JobParams, query.Query{Job: api.Job{Params: shuffle.Params{BatchSize: 4, World: 1}}}, l)
		if err == nil {
			_, err = utok.TokensOf(tc.ds, q.Job)
		}
		if !errkind.Has(err, errkind.Invalid) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want a bad request saying %q", tc.query, err, tc.says)
		}
	}
	if _, err := utok.TokenView(plain); !errors.Is(err, utok.ErrTokens) || !strings.Contains(err.Error(), "plain is not one") {
		t.Errorf("TokenView of a dataset of no tokens: %v", err)
	}
}

// A token job's batch ETag names its packing: seq, pad, pack and EOS each
// change it, and a job without seq= has another.
func TestTokenJobETags(t *testing.T) {
	ds := unitstest.TokenDataset(t, "d", "uint16", megatrontest.Corpus(20, 50, 50000, 13))
	o := units.Orders(nil)
	etags := map[string]string{}
	for _, q := range []string{"seq=64", "seq=65", "seq=64&pad=1", "seq=64&pack=concat&eos=1", "seq=64&pack=concat&eos=2", ""} {
		e := o.ETag(layout.Source{DS: ds}, unitstest.TokenJob(t, "batch_size=4&"+q), 0, 0)
		if prev, ok := etags[e]; ok {
			t.Errorf("%q and %q have one ETag", prev, q)
		}
		etags[e] = q
	}
}
