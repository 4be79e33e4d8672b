package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/httperr"
	"github.com/brandgw/brand/internal/livestats"
	"github.com/brandgw/brand/internal/query"
)

// Planner simulates cache policies over a job's schedule: the /plan
// endpoint's answer and the optimal policy's figures for epochs the gateway
// served. It speaks only in types of the packages below the gateway, so the
// gateway does not link a planner: `brand serve` passes planner.ForGateway.
// The data a job reads is an api.PlanDataset (planData): the dataset's
// chunks, or for a job naming columns= of a dataset served in place the
// view it reads, each chunk's bytes in the cache and in the store. Its
// methods may be called concurrently and must honour ctx.
type Planner interface {
	// Plan returns the plan of job over the data d describes, as a value
	// that encodes to JSON. snap is the importance snapshot job.Importance
	// names, which the gateway loads from the dataset's store, so that the
	// plan adds the importance epochs' figures; nil for the uniform
	// shuffle.
	Plan(ctx context.Context, d api.PlanDataset, job api.Job, o api.PlanOptions, snap *importance.Snapshot) (any, error)
	// SharedPlan returns the plan of jobs reading the data d describes
	// at once through one cache of cacheBytes, as a value that encodes to
	// JSON. Every field of every job is given: the gateway has filled its
	// defaults and checked its limits (POST /plan).
	SharedPlan(ctx context.Context, d api.PlanDataset, jobs []api.SharedPlanJob, cacheBytes int64) (any, error)
	// MixPlan returns the plan of job over the mixture job.Mix, ds[i]
	// describing the data of its component i, as a value that encodes to
	// JSON; with o.Nodes set, the prediction for that many nodes (GET
	// /plan?mix=).
	MixPlan(ctx context.Context, ds []api.PlanDataset, job api.Job, o api.PlanOptions) (any, error)
	// Resize returns what resizing the cluster from membership from (nil:
	// o.Nodes nodes of a cluster the gateway is not part of) to
	// o.NodesAfter nodes costs job over the data d describes, as a value
	// that encodes to JSON (GET /plan?nodes_after=).
	Resize(ctx context.Context, d api.PlanDataset, job api.Job, o api.PlanOptions, from *gcluster.Membership) (any, error)
	livestats.Optimizer
}

// planData describes ds — a dataset version, or the view of some of its
// fields a job reads (catalog.Dataset.Select) — to the planner: each
// chunk's samples, its bytes in the cache (ChunkSize, what the cache
// accounts) and, where they differ, the bytes a load of it reads from the
// store (StoreSize, what /stats counts), so that a plan predicts what the
// gateway then reads.
func planData(ds *catalog.Dataset) api.PlanDataset {
	n := ds.Index.NumChunks()
	d := api.PlanDataset{ID: ds.ID(), Counts: ds.Index.SampleCounts(), Sizes: make([]int64, n)}
	store := make([]int64, n)
	differ := false
	for c := range n {
		d.Sizes[c], store[c] = ds.ChunkSize(c), ds.StoreSize(c)
		differ = differ || store[c] != d.Sizes[c]
	}
	if differ {
		d.StoreSizes = store
	}
	return d
}

// planEpochs is the epochs a plan simulates when the request does not say,
// of one job (GET /plan) or of each of several (POST /plan).
const planEpochs = 3

// Plans cost up to seconds of a core each, within the planner's budget
// (planner.GatewayWalk and the others): planSlots run at once, so that
// one long plan does not hold every other back, and a plan waits at most
// planWait for a slot before it is answered 503.
const (
	planSlots = 2
	planWait  = 10 * time.Second
)

// ErrPlanBusy means every plan slot stayed taken for planWait.
var ErrPlanBusy = httperr.ErrPlanBusy

// planAPI serves /plan (GET: one job, or a mixture; POST: several jobs
// sharing the cache) through the gateway's Planner, in planSlots slots.
type planAPI struct {
	planner Planner         // noPlanner when the gateway has none
	jobs    *jobs           // what a plan's job reads
	options api.PlanOptions // a plan's defaults: this gateway's cache, disk tier, prefetch
	nodes   func() int      // the cluster's member count now: a plan's default nodes
	// members is the membership the cluster agrees on now (nil on a
	// single gateway): a resize plan's start.
	members func(ctx context.Context) *gcluster.Membership
	slots   chan struct{} // the plans running, planSlots at most
	// costs are a pipeline's costs on this node, for a job that names
	// one (transform=).
	costs interface {
		Costs(ctx context.Context, name string) (api.TransformCosts, error)
	}
}

func newPlanAPI(cfg Config, jobs *jobs, nodes func() int, costs *pipelineCosts) *planAPI {
	members := func(ctx context.Context) *gcluster.Membership {
		ms, _ := jobs.versions.Members(ctx, "")
		return ms
	}
	a := &planAPI{planner: cfg.Planner, jobs: jobs, nodes: nodes, members: members, slots: make(chan struct{}, planSlots), costs: costs,
		options: api.PlanOptions{CacheBytes: cfg.CacheSize, DiskCacheBytes: cfg.DiskCache.Size, Epochs: planEpochs,
			BackendBytesPerSec: 1 << 30, PrefetchWindows: cfg.PrefetchWindows}}
	if a.planner == nil {
		a.planner = noPlanner{}
	}
	return a
}

// noPlanner is a gateway built without a planner: /plan answers 501.
type noPlanner struct{ livestats.Optimizer }

var errNoPlanner = fmt.Errorf("%w: this gateway was built without a planner", ErrNotImplemented)

func (noPlanner) Plan(context.Context, api.PlanDataset, api.Job, api.PlanOptions, *importance.Snapshot) (any, error) {
	return nil, errNoPlanner
}

func (noPlanner) SharedPlan(context.Context, api.PlanDataset, []api.SharedPlanJob, int64) (any, error) {
	return nil, errNoPlanner
}

func (noPlanner) MixPlan(context.Context, []api.PlanDataset, api.Job, api.PlanOptions) (any, error) {
	return nil, errNoPlanner
}

func (noPlanner) Resize(context.Context, api.PlanDataset, api.Job, api.PlanOptions, *gcluster.Membership) (any, error) {
	return nil, errNoPlanner
}

// handlePlan serves /plan: the job's schedule simulated for a cache size,
// what hit ratio and backend traffic LRU and the optimal policy reach, the
// cache that never stalls at a bandwidth, and the window's shuffle quality;
// with sampling=importance&job=J&importance=V&hot=H, the same for epochs
// drawn from snapshot V besides; or, with nodes=N (a cluster's default),
// the prediction for N nodes each with a cache of cache_size. With
// disk_cache_size=D (default: the gateway's --disk-cache-size; 0: none) the
// plan adds a disk tier of D bytes below the cache (each node's): the
// store and disk reads per policy. With mix=… it plans the mixture, each
// component the current version of the dataset it names. With columns=…
// (a dataset served in place) it plans the view of those fields the job
// reads, as the job's batches read it (jobs.data): its chunks' resident
// bounds in the cache, their store extents from the store.
func (a *planAPI) handlePlan(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	base := a.jobs.defaults
	base.Plan = a.options
	if n := a.nodes(); n > 1 {
		base.Plan.Nodes = n
	}
	q, err := query.Parse(r.URL.RawQuery, query.PlanParams, base, a.jobs.limits)
	if err == nil {
		err = a.jobs.transform(&q.Job)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	// A pipeline's costs: measured, or calibrated (about a second of a
	// core, once per pipeline) within the plan's slot.
	withCosts := func(ctx context.Context) error {
		if q.Job.Transform == "" {
			return nil
		}
		c, err := a.costs.Costs(ctx, q.Job.Transform)
		q.Plan.Transform = &c
		return err
	}
	// A resize is planned for a job of one dataset and the uniform
	// shuffle: refused before a mixture or a snapshot is looked at.
	if q.Plan.NodesAfter > 0 && (len(q.Job.Mix) > 0 || q.Job.Importance.On()) {
		writeError(ctx, w, fmt.Errorf("%w: nodes_after plans a resize for a job of one dataset and the uniform shuffle, not with mix or sampling=importance", query.ErrBadRequest))
		return
	}
	if q.Job.ScheduleVersion != "" {
		// A stored schedule: its current version (or the one pinned).
		if err := a.jobs.stored(ctx, &q.Job, uint64(q.Plan.FirstEpoch), -1); err != nil {
			writeError(ctx, w, err)
			return
		}
	}
	if len(q.Job.Mix) > 0 && q.Job.Tokens() {
		// The mixture's plan counts samples; a token mixture's steps are
		// sequences packed from its documents.
		writeError(ctx, w, fmt.Errorf("%w: a token job's plan (seq=) is of one dataset: a token mixture or schedule (mix=, mix_schedule= or schedule= with seq=) has none yet", query.ErrBadRequest))
		return
	}
	if len(q.Job.Mix) > 0 {
		ds := make([]*catalog.Dataset, len(q.Job.Mix))
		for i, c := range q.Job.Mix {
			var err error
			if ds[i], err = a.jobs.version(api.Job{Dataset: c.Dataset}); err == nil {
				ds[i], err = ds[i].Select(q.Job.Columns)
			}
			if err != nil {
				writeError(ctx, w, err)
				return
			}
		}
		a.write(ctx, w, func(ctx context.Context) (any, error) {
			data := make([]api.PlanDataset, len(ds))
			for i := range ds {
				data[i] = planData(ds[i])
			}
			return a.planner.MixPlan(ctx, data, q.Job, q.Plan)
		})
		return
	}
	ds, err := a.jobs.version(q.Job)
	if err == nil {
		ds, err = ds.Select(q.Job.Columns)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	if q.Job.Tokens() {
		a.planTokens(ctx, w, ds, q)
		return
	}
	if q.Plan.NodesAfter > 0 {
		from := a.members(ctx) // nil on a single gateway: from nodes= planned ones
		a.write(ctx, w, func(ctx context.Context) (any, error) {
			return a.planner.Resize(ctx, planData(ds), q.Job, q.Plan, from)
		})
		return
	}
	var snap *importance.Snapshot // nil: the uniform shuffle only
	if imp := q.Job.Importance; imp.On() && imp.Version != "" {
		if snap, err = a.jobs.snaps.Snapshot(ctx, ds, imp.Job, imp.Version); err != nil {
			writeError(ctx, w, err)
			return
		}
	}
	a.write(ctx, w, func(ctx context.Context) (any, error) {
		if err := withCosts(ctx); err != nil {
			return nil, err
		}
		return a.planner.Plan(ctx, planData(ds), q.Job, q.Plan, snap)
	})
}

// write computes a plan with plan in one of the gateway's plan slots
// (planSlots, waiting at most planWait for one) and answers it. The plan
// runs under the request's context, so that it stops when its client
// leaves. The request was checked before: an error of the planner other
// than ctx's or its budget running out (api.ErrPlanBudget, 503) is a job
// it cannot plan (no batches, or over the budget up front), the
// client's.
func (a *planAPI) write(ctx context.Context, w http.ResponseWriter, plan func(context.Context) (any, error)) {
	wait := time.NewTimer(planWait)
	defer wait.Stop()
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	case <-wait.C:
		writeError(ctx, w, fmt.Errorf("%w: %d plans are being computed, and none finished within %s", ErrPlanBusy, planSlots, planWait))
		return
	case <-ctx.Done():
		writeError(ctx, w, ctx.Err())
		return
	}
	p, err := plan(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, api.ErrPlanBudget) ||
		errors.Is(err, ErrNotImplemented) {
		writeError(ctx, w, err)
		return
	}
	if err != nil {
		writeError(ctx, w, fmt.Errorf("%w: %w", query.ErrBadRequest, err))
		return
	}
	writeJSON(w, http.StatusOK, p)
}
