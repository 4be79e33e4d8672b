package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/shuffle"
)

// reportIndex is what importance.NewSnapshot needs of an index.
type reportIndex struct{ n int }

func (reportIndex) ID() string        { return "0123456789abcdef" }
func (r reportIndex) NumSamples() int { return r.n }

// clusteredSnapshot returns a snapshot whose scores cluster by chunk and
// are skewed, as docs/importance.md §11 measures: each chunk's samples
// scale a log-normal (sigma 0.5) by a per-chunk log-normal (sigma 1.5), as
// when chunks were packed by class and some classes are hard.
func clusteredSnapshot(t *testing.T, counts []int, seed uint64) *importance.Snapshot {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var scores []float32
	for _, k := range counts {
		f := math.Exp(r.NormFloat64() * 1.5)
		for range k {
			scores = append(scores, float32(f*math.Exp(r.NormFloat64()*0.5)))
		}
	}
	snap, err := importance.NewSnapshot(reportIndex{len(scores)}, "report", 0, scores)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestImportancePlanReport computes docs/planner.md's importance table
// (run it with -v to print it): 256 chunks of 64 samples, window 8, batch
// 64, epochs 1–4 from one clustered snapshot, caches of 10 % and 20 % of
// the dataset with hot set to the cache's chunks. It checks what the
// document says of it: importance epochs read about 40 % of the chunks, so
// every importance policy reads less from the store than either uniform
// one in every warm epoch; the importance-aware policy hits more often
// than LRU on the same importance trace; and the offline optimum, which
// knows the next epoch, bounds it.
func TestImportancePlanReport(t *testing.T) {
	const chunks, per = 256, 64
	d := equalDataset(chunks, per, 64<<10)
	snap := clusteredSnapshot(t, d.Counts, 1)
	var b strings.Builder
	b.WriteString("| cache | epoch | uniform + LRU | uniform + next-use | importance + LRU | importance + importance-aware | importance, optimum | chunks read |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, share := range []float64{0.10, 0.20} {
		hot := int(share * chunks)
		cache := int64(hot) * 64 << 10
		p := mustPlan(t, PlanInput{
			Dataset:            d,
			Job:                Job{Params: shuffle.Params{Seed: 1, Window: 8, BatchSize: 64, World: 1}, FirstEpoch: 1, Epochs: 4},
			CacheBytes:         cache,
			BackendBytesPerSec: 1 << 30,
			Importance:         &Importance{Snapshot: snap, Hot: hot},
		})
		ip := p.Importance
		cell := func(r Result, i int) string {
			e := r.Epochs[i]
			return fmt.Sprintf("%.1f %% · %.3f", 100*e.HitRatio, float64(e.BackendBytes)/float64(p.DatasetBytes))
		}
		for i := range ip.Aware.Epochs {
			fmt.Fprintf(&b, "| %.0f %% | %d | %s | %s | %s | %s | %s | %d |\n", 100*share, ip.Aware.Epochs[i].Epoch,
				cell(p.LRU, i), cell(p.Optimal, i), cell(ip.LRU, i), cell(ip.Aware, i), cell(ip.Optimal, i), ip.ChunksRead[i])
			if i == 0 {
				continue // the cold epoch
			}
			uni := min(p.LRU.Epochs[i].BackendBytes, p.Optimal.Epochs[i].BackendBytes)
			for _, r := range []Result{ip.LRU, ip.Aware, ip.Optimal} {
				if r.Epochs[i].BackendBytes >= uni {
					t.Errorf("cache %.0f %%, epoch %d: importance under %v reads %d bytes, the uniform shuffle %d",
						100*share, ip.Aware.Epochs[i].Epoch, r.Policy, r.Epochs[i].BackendBytes, uni)
				}
			}
			if ip.Aware.Epochs[i].Hits <= ip.LRU.Epochs[i].Hits {
				t.Errorf("cache %.0f %%, epoch %d: importance-aware %d hits, LRU %d", 100*share, ip.Aware.Epochs[i].Epoch,
					ip.Aware.Epochs[i].Hits, ip.LRU.Epochs[i].Hits)
			}
		}
		if ip.Aware.Hits > ip.Optimal.Hits {
			t.Errorf("cache %.0f %%: importance-aware %d hits, above the optimum's %d", 100*share, ip.Aware.Hits, ip.Optimal.Hits)
		}
		for i, n := range ip.ChunksRead {
			if n < chunks/4 || n > chunks/2 {
				t.Errorf("epoch %d reads %d of %d chunks; docs/importance.md measures about 40 %%", ip.Aware.Epochs[i].Epoch, n, chunks)
			}
		}
	}
	t.Logf("256 chunks × 64 samples × 1 KiB (64 KiB a chunk); window 8, batch 64, 1 rank; hit ratio · store bytes as a fraction of the dataset\n%s", b.String())
}
