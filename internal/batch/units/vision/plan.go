package vision

import (
	"context"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/tokens"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
)

// Plan answers /plan for a vision job (plans.UnitPlanner): a token job's
// plan of the samples it reads (tokens.PlanDocuments), each epoch's
// "vision" its images and how its ranks carry their vision tokens (Load:
// exact, the epoch a pure function of the dataset's facts and the job).
func (vs *Unit) Plan(ctx context.Context, t plans.Tools, src layout.Source, q query.Query) (any, error) {
	job := q.Job
	job.Offset = 0 // a plan is of whole epochs
	return tokens.PlanDocuments(ctx, t, src, q, func(epoch uint64, pe *api.TokenPlanEpoch) error {
		vl, err := vs.LoadOf(src, job, epoch, t.Epochs().ETag)
		if err != nil {
			return err
		}
		pe.Vision = loadPlan(vl)
		return nil
	})
}

// loadPlan is a vision epoch's images and its ranks' vision tokens,
// busiest over mean per global batch (balance.Ratio), averaged over the
// epoch's global batches and at worst.
func loadPlan(vl *Load) *api.VisionPlanEpoch {
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
