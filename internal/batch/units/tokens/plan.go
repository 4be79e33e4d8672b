package tokens

import (
	"context"
	"encoding/json"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
)

// Plan answers /plan for a token job (seq=, plans.UnitPlanner): the plan of the
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
// and how its ranks carry their vision tokens (PlanDocuments' each).
func (*Unit) Plan(ctx context.Context, t plans.Tools, src layout.Source, q query.Query) (any, error) {
	return PlanDocuments(ctx, t, src, q, nil)
}

// PlanDocuments is Plan of a job whose documents are src's samples, with
// each(epoch, pe) adding to each planned epoch's figures what the unit
// knows of it beside (nil: nothing): a vision job's images, rank by rank.
func PlanDocuments(ctx context.Context, t plans.Tools, src layout.Source, q query.Query, each func(epoch uint64, pe *api.TokenPlanEpoch) error) (any, error) {
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
		info, err := t.Epochs().Info(src, job, uint64(q.Plan.FirstEpoch+e))
		if err != nil {
			return nil, err
		}
		served = append(served, api.PlanEpoch{Epoch: info.Epoch, Samples: info.Samples, Batches: info.Batches})
		batches += info.Batches
		t := info.Tokens
		pe := api.TokenPlanEpoch{Epoch: info.Epoch, Sequences: info.Samples, Batches: info.Batches,
			Tokens: t.Tokens, Fill: t.Fill, Split: t.Split}
		if each != nil {
			if err := each(uint64(info.Epoch), &pe); err != nil {
				return nil, err
			}
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
	return t.Run(ctx, func(ctx context.Context) (any, error) {
		p, err := t.Planner().Plan(ctx, plans.Data(ds), doc, q.Plan, nil)
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
