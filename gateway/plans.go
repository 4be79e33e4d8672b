package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/server/scope"
)

// Planner simulates cache policies over a job's chunk uses (plans.Planner):
// the /plan endpoint's answer and the optimal policy's figures for epochs
// the gateway served. `brand serve` passes planner.ForGateway.
type Planner = plans.Planner

// ErrPlanBusy means every plan slot stayed taken while a plan waited.
var ErrPlanBusy = plans.ErrBusy

// newPlans builds the maker of /plan's answers over the gateway's
// resolver (a plan is of the job that is served), with this gateway's
// cache, disk tier and prefetch as a plan's defaults.
func newPlans(cfg Config, j *resolve.Resolver, nodes func() int, costs *pipelineCosts, snaps plans.Snapshots) *plans.Maker {
	return plans.New(plans.Config{Planner: cfg.Planner, Jobs: j, Snapshots: snaps, Epochs: j.Orders(), Costs: costs,
		DecodeCost: costs.frameCost,
		Defaults:   j.Defaults(), Limits: j.Limits(), Nodes: nodes,
		Options: api.PlanOptions{Prices: cfg.StorePrices, CacheBytes: cfg.CacheSize, DiskCacheBytes: cfg.DiskCache.Size, Epochs: plans.DefaultEpochs,
			BackendBytesPerSec: 1 << 30, PrefetchWindows: cfg.PrefetchWindows},
		Members: func(ctx context.Context) *gcluster.Membership {
			ms, _ := j.Members(ctx, "")
			return ms
		}})
}

// getPlan serves GET /plan (plans.Maker.Plan).
func getPlan(m *plans.Maker) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writePlan(w, r, func(ctx context.Context) (any, error) { return m.Plan(ctx, r.URL.RawQuery) })
	}
}

// postPlan serves POST /plan (plans.Maker.Shared), its body bounded by
// api.MaxSharedPlanBodyBytes. A token of a narrowed scope needs read over
// the body's dataset (or the default one) and every job it names: a
// named job is planned under its edits.
func postPlan(m *plans.Maker, defaultDataset string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writePlan(w, r, func(ctx context.Context) (any, error) {
			body := io.Reader(http.MaxBytesReader(w, r.Body, api.MaxSharedPlanBodyBytes))
			if grant, ok := grantOf(ctx); ok && grant.Narrowed() {
				b, err := io.ReadAll(body)
				if err != nil {
					return nil, err
				}
				// A body that does not decode is Shared's to refuse.
				var req api.SharedPlanRequest
				_ = json.Unmarshal(b, &req)
				ds := cmp.Or(req.Dataset, defaultDataset)
				if err := grant.Allow(scope.Read, []string{ds}, ""); err != nil {
					return nil, err
				}
				for _, j := range req.Jobs {
					if err := grant.Allow(scope.Read, nil, j.Name); err != nil {
						return nil, err
					}
				}
				body = bytes.NewReader(b)
			}
			return m.Shared(ctx, body)
		})
	}
}

// writePlan answers a plan, or its error with the status statusOf gives.
func writePlan(w http.ResponseWriter, r *http.Request, plan func(context.Context) (any, error)) {
	p, err := plan(r.Context())
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}
