package gateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/plans"
)

// Planner simulates cache policies over a job's schedule (plans.Planner):
// the /plan endpoint's answer and the optimal policy's figures for epochs
// the gateway served. `brand serve` passes planner.ForGateway.
type Planner = plans.Planner

// ErrPlanBusy means every plan slot stayed taken while a plan waited.
var ErrPlanBusy = plans.ErrBusy

// newPlans builds the maker of /plan's answers over the gateway's jobs
// stage, with this gateway's cache, disk tier and prefetch as a plan's
// defaults.
func newPlans(cfg Config, j *jobs, nodes func() int, costs *pipelineCosts) *plans.Maker {
	return plans.New(plans.Config{Planner: cfg.Planner, Jobs: planJobs{j}, Snapshots: j.snaps, Epochs: j.orders, Costs: costs,
		Clips: j.orders, DecodeCost: costs.frameCost,
		Defaults: j.defaults, Limits: j.limits, Nodes: nodes,
		Options: api.PlanOptions{CacheBytes: cfg.CacheSize, DiskCacheBytes: cfg.DiskCache.Size, Epochs: plans.DefaultEpochs,
			BackendBytesPerSec: 1 << 30, PrefetchWindows: cfg.PrefetchWindows},
		Members: func(ctx context.Context) *gcluster.Membership {
			ms, _ := j.versions.Members(ctx, "")
			return ms
		}})
}

// planJobs resolves a plan's job as the requests for its batches are
// resolved (plans.Jobs).
type planJobs struct{ j *jobs }

func (p planJobs) Transform(job *api.Job) error { return p.j.transform(job) }

func (p planJobs) Stored(ctx context.Context, job *api.Job, epoch uint64) error {
	return p.j.stored(ctx, job, epoch, -1)
}

func (p planJobs) Version(job api.Job) (*catalog.Dataset, error) { return p.j.version(job) }

func (p planJobs) Exclusion(ctx context.Context, job api.Job, ds *catalog.Dataset) (*layout.Exclusion, error) {
	if job.Name == "" {
		return nil, nil
	}
	x, _, err := p.j.excl.Of(ctx, ds.Store, ds, job.Name)
	return x, err
}

func (p planJobs) Append(ctx context.Context, job api.Job, ds *catalog.Dataset) (*catalog.Dataset, *api.PlanAppend, error) {
	src := layout.Source{DS: ds}
	if err := p.j.appended(ctx, &job, &src); err != nil || job.Append == "" {
		return ds, nil, err
	}
	a, ok := p.j.orders.Appends().Get(job.Append)
	if !ok {
		return nil, nil, fmt.Errorf("%w: record %s", layout.ErrNoAppend, job.Append)
	}
	return src.DS, planAppend(a), nil
}

// planAppend is a's chain as a plan takes it.
func planAppend(a *layout.Append) *api.PlanAppend {
	if a == nil {
		return nil
	}
	return &api.PlanAppend{Version: a.Version, Chunks: a.Chunks, Epoch: a.Epoch, From: a.From, Previous: planAppend(a.Previous)}
}

// getPlan serves GET /plan (plans.Maker.Plan).
func getPlan(m *plans.Maker) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writePlan(w, r, func(ctx context.Context) (any, error) { return m.Plan(ctx, r.URL.RawQuery) })
	}
}

// postPlan serves POST /plan (plans.Maker.Shared), its body bounded by
// api.MaxSharedPlanBodyBytes.
func postPlan(m *plans.Maker) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writePlan(w, r, func(ctx context.Context) (any, error) {
			return m.Shared(ctx, http.MaxBytesReader(w, r.Body, api.MaxSharedPlanBodyBytes))
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
