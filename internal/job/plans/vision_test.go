package plans_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	visionunit "github.com/brandgw/brand/internal/batch/units/vision"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/vision"
)

// visionDataset is a dataset of n image-text samples' facts (0 to 3
// images each, of varied sizes), stored beside its index and loaded.
func visionDataset(t *testing.T, n int) *catalog.Dataset {
	t.Helper()
	ix := catalogtest.Dataset(t, "test", n/20, 20).Index
	rng := rand.New(rand.NewPCG(9, 9))
	facts := make([]vision.Facts, ix.NumSamples())
	for i := range facts {
		facts[i].Text = 20 + rng.IntN(200)
		for range rng.IntN(4) {
			facts[i].Images = append(facts[i].Images, vision.ImageFacts{W: 56 + rng.IntN(400), H: 56 + rng.IntN(400)})
		}
	}
	ds := catalogtest.WithVisionFacts(t, "test", "file:///test", ix, facts)
	return ds
}

// TestPlanOfAVisionJob: a plan of a vision job (seq= with vision=) is a
// token job's plan of its samples, with each planned epoch's sequences,
// batches, tokens and fill as GET /epoch/N says them (Orders.Info), and
// its images, vision tokens and ranks' vision tokens — the busiest rank
// over the mean, averaged over the global batches and at worst — as the
// layout lays its batches out (the vision unit's LoadOf, held to the
// layouts by TestVisionBalance): under balance=vision, and under the
// plain cut, which a job without balance= plans alike.
func TestPlanOfAVisionJob(t *testing.T) {
	ctx := context.Background()
	ds := visionDataset(t, 400)
	orders := units.Orders(nil)
	m := newMaker(t, []*catalog.Dataset{ds}, func(c *plans.Config) { c.Epochs = orders })
	const rule = "min:3136,max:50176,patch:14,merge:2,image:900,start:901,end:902"
	ratios := func(batches [][]uint64) (mean, worst float64) {
		if len(batches) == 0 {
			return 1, 1
		}
		for _, ranks := range batches {
			r := balance.Ratio(ranks)
			mean += r
			worst = max(worst, r)
		}
		return mean / float64(len(batches)), worst
	}
	for _, balanced := range []string{"&balance=vision", ""} {
		raw := "seq=1024&batch_size=2&world=3&window=2&vision=" + rule + balanced
		p, err := m.Plan(ctx, raw+"&epochs=2")
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Tokens api.TokenPlan `json:"tokens"`
		}
		if err := json.Unmarshal(b, &got); err != nil || len(got.Tokens.Epochs) != 2 {
			t.Fatalf("%s: %v %s", raw, err, b)
		}
		var limits query.Limits
		limits.Fill()
		q, err := query.Parse(raw, query.JobParams, query.Query{}, limits)
		if err != nil {
			t.Fatal(err)
		}
		job := q.Job
		job.Dataset, job.Seed = "test", 42
		for e, pe := range got.Tokens.Epochs {
			info, err := orders.Info(layout.Source{DS: ds}, job, uint64(e))
			if err != nil {
				t.Fatal(err)
			}
			vu, ok := layout.As[*visionunit.Unit](orders.UnitOf(features.Requested(job)))
			if !ok {
				t.Fatalf("a vision job's unit is %T", orders.UnitOf(features.Requested(job)))
			}
			vl, err := vu.LoadOf(layout.Source{DS: ds}, job, uint64(e), orders.ETag)
			if err != nil {
				t.Fatal(err)
			}
			want := api.VisionPlanEpoch{Images: vl.Images, VisionTokens: vl.VisionTokens}
			want.MaxOverMean, want.MaxOverMeanWorst = ratios(vl.Ranks)
			want.PlainMaxOverMean, want.PlainMaxOverMeanWorst = ratios(vl.Plain)
			if pe.Sequences != info.Samples || pe.Batches != info.Batches || pe.Tokens != info.Tokens.Tokens || pe.Fill != info.Tokens.Fill ||
				pe.Vision == nil || *pe.Vision != want || want.Images == 0 {
				t.Fatalf("%s epoch %d: %+v, vision %+v; want the orders' %d sequences in %d batches, vision %+v", raw, e, pe, pe.Vision, info.Samples, info.Batches, want)
			}
			if balanced == "" && (want.MaxOverMean != want.PlainMaxOverMean || want.MaxOverMeanWorst != want.PlainMaxOverMeanWorst) {
				t.Fatalf("epoch %d unbalanced: %+v; want the plain cut's figures", e, want)
			}
		}
	}
}
