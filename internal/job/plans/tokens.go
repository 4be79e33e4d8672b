package plans

import (
	"context"
	"encoding/json"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/query"
)

// planTokens answers /plan for a token job (seq=): the plan of the
// documents it reads — the same chunks in the same windows as its
// document order, so the same store bytes and cache behaviour — with
// batches of the documents its global batches of sequences hold on
// average, and a "tokens" section: per planned epoch its sequences,
// batches, tokens, fill and split documents, from the packing itself.
// Its epochs and batches_per_epoch are its sequences', as /epoch/N
// counts them (api.PlanEpoch): an epoch of fewer sequences than one
// global batch with drop_last serves none, and its documents' plan then
// reads none either.
// The job's source is its token view (resolved as its batches are): the
// table has refused a token job's resize and importance sampling. A
// vision job's documents are its samples (each read once an epoch, in
// its window, as a document is), and each epoch's "vision" its images
// and how its ranks carry their vision tokens (layout.VisionLoad:
// exact, the epoch a pure function of the dataset's facts and the job).
func (m *Maker) planTokens(ctx context.Context, src layout.Source, q query.Query, vision bool) (any, error) {
	ds := src.DS
	epochs := q.Plan.Epochs
	if epochs == 0 {
		epochs = 3 // the planner's default
	}
	tp := api.TokenPlan{Seq: q.Job.Seq, Pack: q.Job.PackMode()}
	job := q.Job
	job.Offset = 0 // a plan is of whole epochs
	var served []api.PlanEpoch
	var seqs, docs, batches int
	for e := range epochs {
		info, err := m.cfg.Epochs.Info(src, job, uint64(q.Plan.FirstEpoch+e))
		if err != nil {
			return nil, err
		}
		served = append(served, api.PlanEpoch{Epoch: info.Epoch, Samples: info.Samples, Batches: info.Batches})
		batches += info.Batches
		t := info.Tokens
		pe := api.TokenPlanEpoch{Epoch: info.Epoch, Sequences: info.Samples, Batches: info.Batches,
			Tokens: t.Tokens, Fill: t.Fill, Split: t.Split}
		if vision {
			vl, err := m.cfg.Epochs.VisionLoad(src, job, uint64(info.Epoch))
			if err != nil {
				return nil, err
			}
			pe.Vision = visionPlan(vl)
		}
		tp.Epochs = append(tp.Epochs, pe)
		seqs, docs = info.Samples, t.Documents
	}
	// The documents a global batch of sequences holds, on average: the
	// plan's batches.
	doc := q.Job
	doc.Seq, doc.Pack, doc.Pad, doc.EOS, doc.EOSSet, doc.Offset, doc.Vision = 0, "", 0, 0, false, 0, ""
	global := q.Job.BatchSize * q.Job.World
	doc.BatchSize = max(1, int(int64(global)*int64(docs)/int64(max(seqs, 1)))/q.Job.World)
	tp.DocumentsPerBatch = doc.BatchSize
	if batches == 0 {
		// No epoch serves a batch (drop_last): nor does a global batch of
		// more documents than an epoch's.
		doc.BatchSize = docs/q.Job.World + 1
	}
	return m.run(ctx, func(ctx context.Context) (any, error) {
		p, err := m.cfg.Planner.Plan(ctx, Data(ds), doc, q.Plan, nil)
		if err != nil {
			return nil, err
		}
		// The plan as it is, and the tokens beside its fields.
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		m["tokens"] = tp
		m["epochs"], m["batches_per_epoch"] = served, served[0].Batches
		return m, nil
	})
}

// visionPlan is a vision epoch's images and its ranks' vision tokens,
// busiest over mean per global batch (balance.Ratio), averaged over the
// epoch's global batches and at worst.
func visionPlan(vl *layout.VisionLoad) *api.VisionPlanEpoch {
	vp := &api.VisionPlanEpoch{Images: vl.Images, VisionTokens: vl.VisionTokens}
	vp.MaxOverMean, vp.MaxOverMeanWorst = ratios(vl.Ranks)
	vp.PlainMaxOverMean, vp.PlainMaxOverMeanWorst = ratios(vl.Plain)
	return vp
}

// ratios is the mean and the largest of each global batch's ranks'
// busiest over mean (1 and 1 for an epoch of no batch).
func ratios(batches [][]uint64) (mean, worst float64) {
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
