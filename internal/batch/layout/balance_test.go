package layout_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	utok "github.com/brandgw/brand/internal/batch/units/tokens"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/seqpack"
)

// maxBalanceRatio is the target of balance=: the busiest rank's cost at
// most 5 % over the ranks' mean, in a global batch of 8 sequences a rank
// or more.
const maxBalanceRatio = 1.05

// seqKey names a sequence by its pieces and pad, which no two sequences
// of one epoch share.
func seqKey(q seqpack.Sequence) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", q.Pad)
	for _, pc := range q.Pieces {
		fmt.Fprintf(&b, "|%d,%d,%d", pc.Doc, pc.Offset, pc.Len)
	}
	return b.String()
}

// balancedStep lays out every rank of global batch m of epoch 0 of job
// (balanced) and of the same job plainly cut, and checks what balancing
// keeps: each rank's count, the global batch's sequences, the costs the
// layout reports. It returns the balanced and the plain ranks' costs.
func balancedStep(t *testing.T, o *layout.Orders, src layout.Source, job api.Job, m int) (balanced, plain []uint64, keys []string) {
	t.Helper()
	plainJob := job
	plainJob.Balance = ""
	var bal, cut []string
	for r := range job.World {
		j, pj := job, plainJob
		j.Rank, pj.Rank = r, r
		b, err := o.Layout(context.Background(), src, j, 0, uint64(m))
		if err != nil {
			t.Fatalf("batch %d rank %d: %v", m, r, err)
		}
		p, err := o.Layout(context.Background(), src, pj, 0, uint64(m))
		if err != nil {
			t.Fatalf("plain batch %d rank %d: %v", m, r, err)
		}
		if len(unitstest.Tokens(b).Seqs) != len(unitstest.Tokens(p).Seqs) {
			t.Fatalf("batch %d rank %d: %d sequences balanced, %d in the plain cut", m, r, len(unitstest.Tokens(b).Seqs), len(unitstest.Tokens(p).Seqs))
		}
		if b.Balanced == nil || b.Balanced.Kind != job.Balance {
			t.Fatalf("batch %d rank %d: no balance reported (%+v)", m, r, b.Balanced)
		}
		var c uint64
		for _, q := range unitstest.Tokens(b).Seqs {
			c += utok.Cost(job.Balance, q)
			bal = append(bal, seqKey(q))
		}
		if c != b.Balanced.Costs[r] {
			t.Fatalf("batch %d rank %d: its sequences cost %d, the layout says %d", m, r, c, b.Balanced.Costs[r])
		}
		for _, q := range unitstest.Tokens(p).Seqs {
			plain = append(plain, 0)
			plain[len(plain)-1] = utok.Cost(job.Balance, q)
			cut = append(cut, seqKey(q))
		}
		balanced = b.Balanced.Costs
		if b.ETag == p.ETag {
			t.Fatalf("batch %d rank %d: the balanced batch has the plain one's ETag", m, r)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(bal)), slices.Sorted(slices.Values(cut))) {
		t.Fatalf("batch %d: the balanced ranks hold other sequences than the plain cut's", m)
	}
	// The plain cut's per-rank costs, from its sequences in rank order.
	pc := make([]uint64, job.World)
	at := 0
	for r := range job.World {
		shares, _ := job.AppendShares(nil, balancedLen(t, o, src, plainJob), m)
		for range shares[r] {
			pc[r] += plain[at]
			at++
		}
	}
	return balanced, pc, bal
}

func balancedLen(t *testing.T, o *layout.Orders, src layout.Source, job api.Job) int {
	t.Helper()
	_, n, err := o.Extent(src, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBalanceAttention: a token job at seq 8,192 over a corpus of a
// realistic length mix (log-normal, median 500 tokens, σ 1.2: 1 % of
// documents past seq, the longest near 10^5),
// balanced by attention at world 8 and 8 sequences a rank: every step's
// busiest rank within 5 % of the mean where the plain cut is far off, the
// ranks together holding the plain cut's sequences; at world 1 the
// balanced job is the plain one; resumed at world 4 from an offset
// partway through, every remaining sequence is served once, balanced.
func TestBalanceAttention(t *testing.T) {
	ds := unitstest.TokenDataset(t, "d", "uint16", megatrontest.LogNormal(5000, 500, 1.2, 60000, 11))
	o := units.Orders(nil)
	src := layout.Source{DS: ds}
	job := unitstest.TokenJob(t, "seq=8192&balance=attention&batch_size=8&world=8&window=512")
	batches, n, err := o.Extent(src, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	if batches < 8 {
		t.Fatalf("%d global batches of %d sequences: too few", batches, n)
	}
	var worst, plainWorst, plainSum float64
	served := map[string]int{}
	full := n / (job.BatchSize * job.World)
	for m := range batches {
		bal, plain, keys := balancedStep(t, o, src, job, m)
		for _, k := range keys {
			served[k]++
		}
		if m >= full {
			continue // the short final batch: shares of its own
		}
		r, pr := balance.Ratio(bal), balance.Ratio(plain)
		worst, plainWorst, plainSum = max(worst, r), max(plainWorst, pr), plainSum+pr
		if r > maxBalanceRatio {
			t.Errorf("batch %d: busiest rank %.4f of the mean (costs %v; plain %v)", m, r, bal, plain)
		}
	}
	t.Logf("world 8, 8 sequences a rank, %d steps: busiest rank at most %.4f of the mean balanced, %.4f plainly cut (%.4f on average)", full, worst, plainWorst, plainSum/float64(full))
	if plainWorst < 1.2 {
		t.Errorf("the plain cut's worst step is %.4f of the mean: the corpus does not test balancing", plainWorst)
	}
	if len(served) != n {
		t.Fatalf("%d distinct sequences served of %d", len(served), n)
	}

	t.Run("world 1", func(t *testing.T) {
		one := unitstest.TokenJob(t, "seq=8192&balance=attention&batch_size=8&window=512")
		plain := one
		plain.Balance = ""
		for m := range 3 {
			b, err := o.Layout(context.Background(), src, one, 0, uint64(m))
			if err != nil {
				t.Fatal(err)
			}
			p, err := o.Layout(context.Background(), src, plain, 0, uint64(m))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(unitstest.Tokens(b).Seqs, unitstest.Tokens(p).Seqs, func(x, y seqpack.Sequence) bool { return seqKey(x) == seqKey(y) }) {
				t.Fatalf("batch %d: one rank's balanced batch differs from the plain one", m)
			}
		}
	})

	t.Run("token mixture", func(t *testing.T) {
		other := unitstest.TokenDataset(t, "e", "uint16", megatrontest.LogNormal(2000, 300, 1.0, 60000, 12))
		mjob := unitstest.TokenJob(t, "mix=d:0.7,e:0.3&seq=8192&balance=attention&batch_size=8&world=8&window=512")
		mx, err := unitstest.Mixture(o, mjob.Mix, []*catalog.Dataset{ds, other}, mjob)
		if err != nil {
			t.Fatal(err)
		}
		msrc := layout.Source{Unit: mx}
		mb, mn, err := o.Extent(msrc, mjob, 0)
		if err != nil {
			t.Fatal(err)
		}
		for m := range min(mb, 4) {
			bal, plain, _ := balancedStep(t, o, msrc, mjob, m)
			if (m+1)*64 <= mn && balance.Ratio(bal) > maxBalanceRatio {
				t.Errorf("mixture batch %d: busiest rank %.4f of the mean (%v; plain %v)", m, balance.Ratio(bal), bal, plain)
			}
		}
	})

	t.Run("resume at world 4", func(t *testing.T) {
		const consumed = 3 // global batches of world 8 read before the resume
		offset := consumed * job.BatchSize * job.World
		seen := map[string]int{}
		for m := range consumed {
			_, _, keys := balancedStep(t, o, src, job, m)
			for _, k := range keys {
				seen[k]++
			}
		}
		resumed := unitstest.TokenJob(t, fmt.Sprintf("seq=8192&balance=attention&batch_size=16&world=4&window=512&offset=%d", offset))
		rb, rn, err := o.Extent(src, resumed, 0)
		if err != nil {
			t.Fatal(err)
		}
		rfull := (rn - offset) / (resumed.BatchSize * resumed.World)
		for m := range rb {
			bal, _, keys := balancedStep(t, o, src, resumed, m)
			for _, k := range keys {
				seen[k]++
			}
			if r := balance.Ratio(bal); m < rfull && r > maxBalanceRatio {
				t.Errorf("resumed batch %d: busiest rank %.4f of the mean (%v)", m, r, bal)
			}
		}
		if len(seen) != n {
			t.Fatalf("%d distinct sequences served across the resume, of %d", len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("sequence %s served %d times across the resume", k, c)
			}
		}
	})
}

// bytesDataset is a dataset of tar chunks whose samples' sizes are
// those of photos: log-normal around 110 KiB, σ 0.5 (from about 30 KiB
// to 500).
func bytesDataset(t *testing.T, name string, chunks, perChunk int) *catalog.Dataset {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	for c := range chunks {
		var off int64
		for i := range perChunk {
			blocks := max(1, int64(math.Round(220*math.Exp(0.5*r.NormFloat64()))))
			ss = append(ss, chunkindex.Sample{Key: fmt.Sprintf("%s/%d/%d", name, c, i), Chunk: c, Offset: off, Length: blocks * 512})
			off += blocks * 512
		}
		cs = append(cs, chunkindex.Chunk{Key: fmt.Sprintf("c%04d.tar", c), Size: off + 1024, ETag: fmt.Sprint(c), Samples: perChunk})
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewDataset(name, "", nil, ix)
}

// TestBalanceBytes: a job of samples balanced by their stored bytes,
// over one dataset and over a mixture of two: each rank takes its share,
// the ranks together the plain cut's samples, and a full step's busiest
// rank within 5 % of the mean at 16 samples a rank.
func TestBalanceBytes(t *testing.T) {
	a, b := bytesDataset(t, "a", 40, 50), bytesDataset(t, "b", 30, 40)
	o := units.Orders(nil)
	mixed, err := unitstest.Mixture(o, api.Mix{{Dataset: "a", Weight: "0.6"}, {Dataset: "b", Weight: "0.4"}}, []*catalog.Dataset{a, b}, unitstest.ParseJob(t, "batch_size=16&world=8", 16))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		src  layout.Source
		raw  string
	}{
		{"one dataset", layout.Source{DS: a}, "balance=bytes&batch_size=16&world=8"},
		{"mixture", layout.Source{Unit: mixed}, "mix=a:0.6,b:0.4&balance=bytes&batch_size=16&world=8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := unitstest.ParseJob(t, tc.raw, 16)
			plainJob := job
			plainJob.Balance = ""
			batches, n, err := o.Extent(tc.src, job, 0)
			if err != nil {
				t.Fatal(err)
			}
			g := job.BatchSize * job.World
			for m := range batches {
				var bal, cut []string
				var costs []uint64
				for r := range job.World {
					j, pj := job, plainJob
					j.Rank, pj.Rank = r, r
					bb, err := o.Layout(context.Background(), tc.src, j, 0, uint64(m))
					if err != nil {
						t.Fatal(err)
					}
					pb, err := o.Layout(context.Background(), tc.src, pj, 0, uint64(m))
					if err != nil {
						t.Fatal(err)
					}
					if bb.Len() != pb.Len() {
						t.Fatalf("batch %d rank %d: %d samples, the plain cut's %d", m, r, bb.Len(), pb.Len())
					}
					var c uint64
					for i := range bb.Len() {
						ds, _, in := bb.Sample(i)
						bal = append(bal, ds.Name+"/"+in.Key)
						c += uint64(in.Length)
					}
					for i := range pb.Len() {
						ds, _, in := pb.Sample(i)
						cut = append(cut, ds.Name+"/"+in.Key)
					}
					if c != bb.Balanced.Costs[r] {
						t.Fatalf("batch %d rank %d: cost %d, layout says %d", m, r, c, bb.Balanced.Costs[r])
					}
					costs = bb.Balanced.Costs
				}
				if !slices.Equal(slices.Sorted(slices.Values(bal)), slices.Sorted(slices.Values(cut))) {
					t.Fatalf("batch %d: the balanced ranks hold other samples than the plain cut's", m)
				}
				if (m+1)*g <= n {
					if r := balance.Ratio(costs); r > maxBalanceRatio {
						t.Errorf("batch %d: busiest rank %.4f of the mean (%v)", m, r, costs)
					}
				}
			}
		})
	}
}

// BenchmarkBalanceAttention writes the figures of balance=attention on
// a Megatron corpus of a long-tailed length mix (log-normal, median 500
// tokens, σ 1.2) at seq 8,192, world 8, 8 sequences a rank: the busiest
// rank's attention cost over the ranks' mean, on average and at worst
// over the epoch's full global batches, balanced and as the plain cut
// leaves it, and the time to lay out a global batch's 8 ranks balanced
// (the assignment computed once, memoised for the other ranks).
func BenchmarkBalanceAttention(b *testing.B) {
	ds := unitstest.TokenDataset(b, "d", "uint16", megatrontest.LogNormal(20000, 500, 1.2, 60000, 11))
	src := layout.Source{DS: ds}
	job := unitstest.TokenJob(b, "seq=8192&balance=attention&batch_size=8&world=8&window=512")
	batches, n, err := units.Orders(nil).Extent(src, job, 0)
	if err != nil {
		b.Fatal(err)
	}
	full := min(batches, n/(job.BatchSize*job.World))
	var bal, cut struct{ sum, worst float64 }
	steps := 0
	for b.Loop() {
		o := units.Orders(nil) // no memoised assignment from the last round
		for m := range full {
			var info *layout.Balanced
			for r := range job.World {
				j := job
				j.Rank = r
				lb, err := o.Layout(context.Background(), src, j, 0, uint64(m))
				if err != nil {
					b.Fatal(err)
				}
				info = lb.Balanced
			}
			r, p := balance.Ratio(info.Costs), balance.Ratio(info.Plain)
			bal.sum, bal.worst = bal.sum+r, max(bal.worst, r)
			cut.sum, cut.worst = cut.sum+p, max(cut.worst, p)
			steps++
		}
	}
	b.ReportMetric(bal.sum/float64(steps), "max/mean")
	b.ReportMetric(bal.worst, "max/mean-worst")
	b.ReportMetric(cut.sum/float64(steps), "plain-max/mean")
	b.ReportMetric(cut.worst, "plain-max/mean-worst")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/global-batch")
}
