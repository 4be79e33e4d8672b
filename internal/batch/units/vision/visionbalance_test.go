package vision_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/vision"
)

// visionTokens is a vision sequence's vision tokens, as the test counts
// them from the rule and the sample's facts.
func visionTokens(t *testing.T, r vision.Rule, facts []vision.Facts, q vision.Sequence) uint64 {
	var n uint64
	for _, id := range q.Samples {
		for _, im := range facts[id].Images {
			w, h, err := r.Size(im.W, im.H)
			if err != nil {
				t.Fatal(err)
			}
			n += uint64(r.Tokens(w, h))
		}
	}
	return n
}

// TestVisionBalance: a vision job balanced by attention, tokens or
// vision tokens gives each rank of a global batch as many sequences as
// the plain cut, the global batch the plain cut's sequences, each once;
// every rank reports the same assignment and costs, its own the cost of
// its sequences (vision.Cost, their tokens, their vision tokens as the
// test counts them); a fresh Orders lays the same batches out. On a
// VLM-like mix, balance=vision evens the ranks' vision tokens (max ÷ mean
// ≤ 1.1 over the epoch's global batches, the plain cut's above), which
// attention and tokens, weighing other work, do not. Orders.VisionLoad
// (what /plan reports) gives each full global batch's ranks the vision
// tokens the layouts serve them, balanced and plain.
func TestVisionBalance(t *testing.T) {
	ds := unitstest.VLMDataset(t, 12000)
	facts := ds.Vision().Facts.Samples
	r, err := vision.ParseRule(unitstest.VLMRule)
	if err != nil {
		t.Fatal(err)
	}
	const world, batch = 8, 4
	ratios := map[string][2]float64{}
	for _, kind := range []string{api.BalanceAttention, api.BalanceTokens, api.BalanceVision} {
		t.Run(kind, func(t *testing.T) {
			job := unitstest.ParseJob(t, fmt.Sprintf("seq=%d&vision=%s&window=4&world=%d&balance=%s", unitstest.VLMSeq, unitstest.VLMRule, world, kind), batch)
			plainJob := job
			plainJob.Balance = ""
			o, fresh := units.Orders(nil), units.Orders(nil)
			items, _, err := r.Items(func(id int) vision.Facts { return facts[id] }, ds.Index.SampleKey, len(facts), job.Seq, vision.Fail)
			if err != nil {
				t.Fatal(err)
			}
			cost := func(q vision.Sequence) uint64 {
				switch kind {
				case api.BalanceAttention:
					return vision.Cost(q, items)
				case api.BalanceVision:
					return visionTokens(t, r, facts, q)
				}
				var n uint64
				for _, id := range q.Samples {
					n += uint64(items[id].Tokens)
				}
				return n
			}
			var plainSum, balancedSum, full float64
			var loads, plainLoads [][]uint64 // per full global batch, per rank: vision tokens
			batches := 1
			for m := 0; m < batches; m++ {
				var got, cut []int
				var costs []uint64
				vis, plainVis := make([]uint64, world), make([]uint64, world)
				for rank := range world {
					j, pj := job, plainJob
					j.Rank, pj.Rank = rank, rank
					b, err := o.Layout(context.Background(), layout.Source{DS: ds}, j, 0, uint64(m))
					if err != nil {
						t.Fatalf("batch %d rank %d: %v", m, rank, err)
					}
					p, err := o.Layout(context.Background(), layout.Source{DS: ds}, pj, 0, uint64(m))
					if err != nil {
						t.Fatal(err)
					}
					again, err := fresh.Layout(context.Background(), layout.Source{DS: ds}, j, 0, uint64(m))
					if err != nil {
						t.Fatal(err)
					}
					batches = b.Batches
					vb, pb := unitstest.Vision(b), unitstest.Vision(p)
					if len(vb.Seqs) != len(pb.Seqs) || !slices.Equal(vb.Pos, unitstest.Vision(again).Pos) {
						t.Fatalf("batch %d rank %d: %d sequences balanced (at %v, %v laid out afresh), %d in the plain cut",
							m, rank, len(vb.Seqs), vb.Pos, unitstest.Vision(again).Pos, len(pb.Seqs))
					}
					if b.Balanced == nil || b.Balanced.Kind != kind || p.Balanced != nil {
						t.Fatalf("batch %d rank %d: balanced %+v, plain %+v", m, rank, b.Balanced, p.Balanced)
					}
					if costs == nil {
						costs = b.Balanced.Costs
					} else if !slices.Equal(costs, b.Balanced.Costs) {
						t.Fatalf("batch %d rank %d: costs %v; rank 0's %v", m, rank, b.Balanced.Costs, costs)
					}
					var c uint64
					for i, q := range vb.Seqs {
						c += cost(q)
						vis[rank] += visionTokens(t, r, facts, q)
						if len(vb.At[i]) != len(q.Samples) {
							t.Fatalf("batch %d rank %d: sequence %d reads %d of its %d samples", m, rank, i, len(vb.At[i]), len(q.Samples))
						}
						for k, id := range q.Samples {
							tk := b.Take[vb.At[i][k]]
							if b.Parts[tk.Part].Samples.IDs[tk.At] != id {
								t.Fatalf("batch %d rank %d: sequence %d's sample %d reads another", m, rank, i, id)
							}
						}
					}
					if c != b.Balanced.Costs[rank] {
						t.Fatalf("batch %d rank %d: its sequences cost %d; the layout says %d", m, rank, c, b.Balanced.Costs[rank])
					}
					for _, q := range pb.Seqs {
						plainVis[rank] += visionTokens(t, r, facts, q)
					}
					got, cut = append(got, vb.Pos...), append(cut, pb.Pos...)
				}
				slices.Sort(got)
				if !slices.Equal(got, cut) {
					t.Fatalf("batch %d: the ranks take sequences %v; the plain cut's are %v", m, got, cut)
				}
				if len(cut) == world*batch { // a full global batch
					plainSum += balance.Ratio(plainVis)
					balancedSum += balance.Ratio(vis)
					full++
					loads = append(loads, vis)
					plainLoads = append(plainLoads, plainVis)
				}
			}
			// The vision unit's Load, what /plan reports, is what the
			// layouts serve.
			planned := units.Orders(nil)
			vl, err := unitstest.VisionUnit(planned).LoadOf(layout.Source{DS: ds}, job, 0, planned.ETag)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(vl.Ranks) != fmt.Sprint(loads) || fmt.Sprint(vl.Plain) != fmt.Sprint(plainLoads) {
				t.Fatalf("VisionLoad's ranks %v, plain %v; the layouts serve %v, plain %v", vl.Ranks, vl.Plain, loads, plainLoads)
			}
			if batches < 50 {
				t.Fatalf("%d global batches: too few to weigh", batches)
			}
			ratios[kind] = [2]float64{plainSum / full, balancedSum / full}
			t.Logf("%d global batches of %d sequences: vision tokens per rank max/mean %.3f plain, %.3f balanced by %s",
				batches, world*batch, plainSum/full, balancedSum/full, kind)
		})
	}
	v := ratios[api.BalanceVision]
	if v[1] > 1.1 || v[1] >= v[0] {
		t.Errorf("balance=vision: vision tokens per rank max/mean %.3f; the plain cut's %.3f: want ≤ 1.1 and below it", v[1], v[0])
	}
}
