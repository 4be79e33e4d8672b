package plans

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/server/httperr"
)

// Planner simulates cache policies over a job's chunk uses: the /plan
// endpoint's answer and the optimal policy's figures for epochs the gateway
// served. It speaks only in types of the packages below the gateway, so the
// gateway does not link a planner: `brand serve` passes planner.ForGateway.
// The data a job reads is an api.PlanDataset (Data): the dataset's
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
	// TracePlan returns what a cache of o.CacheBytes does with t, a
	// demand the gateway computed itself (a clip job's), under the
	// gateway's policy ("policy", keyed by t's orders' windows as the use
	// table keys them), Belady's rule ("optimal") and LRU ("lru"), as a
	// value that encodes to JSON.
	TracePlan(ctx context.Context, d api.PlanDataset, t api.PlanTrace, o api.PlanOptions) (any, error)
	livestats.Optimizer
}

// Jobs resolves a plan's job as the requests for its batches are
// resolved (resolve.Resolver): its pipeline, stored schedule, source and
// chain of edits, its features, and extra (the plan's own), checked
// against the one table, so that a plan is of the job that is served.
type Jobs interface {
	Resolve(ctx context.Context, q query.Query, epoch uint64, batch int64, extra features.Set) (*resolve.Job, error)
}

// Snapshots loads the importance snapshot a job names (feedback.State).
type Snapshots interface {
	Snapshot(ctx context.Context, ds *catalog.Dataset, job, version string) (*importance.Snapshot, error)
}

// Epochs tells what an epoch of a job holds, and lays its batches out, as
// they are served (layout.Orders).
type Epochs interface {
	Info(src layout.Source, job api.Job, epoch uint64) (api.EpochInfo, error)
	Layout(ctx context.Context, src layout.Source, job api.Job, epoch, m uint64) (*layout.Batch, error)
	ETag(src layout.Source, job api.Job, epoch, m uint64) string
}

// A UnitPlanner is a unit whose /plan is its own: a kind whose epochs are
// not its samples as stored (a token job's packed epochs, a clip job's
// clips, a bucket job's steps) or a job over several datasets (a
// mixture). It is asked of the job's resolved unit (layout.As) in one
// place, Plan; a unit that is none is planned as samples as stored.
type UnitPlanner interface {
	Plan(ctx context.Context, t Tools, src layout.Source, q query.Query) (any, error)
}

// Tools are what a unit's plan is made with (the Maker's).
type Tools interface {
	// Epochs are the layout's, as batches are served.
	Epochs() Epochs
	// Planner is the simulator of caches over a demand.
	Planner() Planner
	// Run computes a plan within a plan slot (Slots), the planner's
	// errors mapped as every plan's.
	Run(ctx context.Context, plan func(context.Context) (any, error)) (any, error)
	// DecodeCost is this node's CPU a decoded frame, measured, and
	// whether it has decoded any.
	DecodeCost() (time.Duration, bool)
}

// Costs tells what a transform pipeline costs on this node, measured or
// calibrated (about a second of a core, once per pipeline).
type Costs interface {
	Costs(ctx context.Context, name string) (api.TransformCosts, error)
}

// DefaultEpochs is the epochs a plan simulates when the request does not
// say, of one job (GET /plan) or of each of several (POST /plan).
const DefaultEpochs = 3

// Slots plans run at once; a plan waits at most Wait for a slot.
const (
	Slots = 2
	Wait  = 10 * time.Second
)

// ErrBusy means every plan slot stayed taken for Wait.
var ErrBusy = httperr.ErrPlanBusy

// Config is what a Maker plans with.
type Config struct {
	// Planner computes the plans; nil refuses every plan
	// (httperr.ErrNotImplemented).
	Planner   Planner
	Jobs      Jobs
	Snapshots Snapshots
	Epochs    Epochs
	Costs     Costs
	// DecodeCost is this node's CPU a decoded frame, measured, and
	// whether it has decoded any (nil: none measured).
	DecodeCost func() (time.Duration, bool)
	// Defaults is the query a request starts from, Limits its bounds
	// (the gateway's, as a batch request's).
	Defaults query.Query
	Limits   query.Limits
	// Options are a plan's defaults: this gateway's cache, disk tier and
	// prefetch. Epochs 0 is DefaultEpochs.
	Options api.PlanOptions
	// Nodes is the cluster's member count now: a plan's default nodes
	// (nil: 1).
	Nodes func() int
	// Members is the membership the cluster agrees on now, a resize
	// plan's start (nil, or nil returned: a single gateway, which plans
	// from nodes= nodes).
	Members func(ctx context.Context) *gcluster.Membership
}

// Maker answers plan requests: GET /plan (Plan) and POST /plan (Shared).
type Maker struct {
	cfg   Config
	slots chan struct{} // the plans running, Slots at most
	wait  time.Duration
}

// New returns a Maker planning with cfg.
func New(cfg Config) *Maker {
	if cfg.Planner == nil {
		cfg.Planner = noPlanner{}
	}
	if cfg.Options.Epochs == 0 {
		cfg.Options.Epochs = DefaultEpochs
	}
	if cfg.Nodes == nil {
		cfg.Nodes = func() int { return 1 }
	}
	if cfg.Members == nil {
		cfg.Members = func(context.Context) *gcluster.Membership { return nil }
	}
	return &Maker{cfg: cfg, slots: make(chan struct{}, Slots), wait: Wait}
}

// Data describes ds — a dataset version, or the view of some of its
// fields a job reads (catalog.Dataset.Select) — to the planner: each
// chunk's samples, its bytes in the cache (ChunkSize, what the cache
// accounts) and, where they differ, the bytes a load of it reads from the
// store (StoreSize, what /stats counts), so that a plan predicts what the
// gateway then reads.
func Data(ds *catalog.Dataset) api.PlanDataset {
	n := ds.Index.NumChunks()
	d := api.PlanDataset{ID: ds.ID(), Root: ds.Index.Lineage().Root(), Counts: ds.Index.SampleCounts(), Sizes: make([]int64, n)}
	store := make([]int64, n)
	differ := false
	for c := range n {
		d.Sizes[c], store[c] = ds.ChunkSize(c), ds.StoreSize(c)
		differ = differ || store[c] != d.Sizes[c]
	}
	if differ {
		d.StoreSizes = store
	}
	// A chunk read whole is read in the store's parts; one read in place
	// is its fields' ranges, not counted.
	if _, ok := ds.Store.(interface{ Requests(n int64) int }); ok && ds.InPlace == nil {
		d.GETs = make([]int32, n)
		for c := range n {
			d.GETs[c] = int32(ds.StoreGETs(c))
		}
	}
	return d
}

// noPlanner is a gateway built without a planner: /plan answers 501.
type noPlanner struct{ livestats.Optimizer }

var errNoPlanner = fmt.Errorf("%w: this gateway was built without a planner", httperr.ErrNotImplemented)

func (noPlanner) Plan(context.Context, api.PlanDataset, api.Job, api.PlanOptions, *importance.Snapshot) (any, error) {
	return nil, errNoPlanner
}

func (noPlanner) SharedPlan(context.Context, api.PlanDataset, []api.SharedPlanJob, int64) (any, error) {
	return nil, errNoPlanner
}

func (noPlanner) MixPlan(context.Context, []api.PlanDataset, api.Job, api.PlanOptions) (any, error) {
	return nil, errNoPlanner
}

func (noPlanner) TracePlan(context.Context, api.PlanDataset, api.PlanTrace, api.PlanOptions) (any, error) {
	return nil, errNoPlanner
}

func (noPlanner) Resize(context.Context, api.PlanDataset, api.Job, api.PlanOptions, *gcluster.Membership) (any, error) {
	return nil, errNoPlanner
}

// Plan answers GET /plan, rawQuery being its query string: the job's
// chunk uses simulated for a cache size, what hit ratio and backend traffic
// LRU and the optimal policy reach, the cache that never stalls at a
// bandwidth, and the window's shuffle quality; with
// sampling=importance&job=J&importance=V&hot=H, the same for epochs drawn
// from snapshot V besides; or, with nodes=N (a cluster's default), the
// prediction for N nodes each with a cache of cache_size. With
// disk_cache_size=D (default: the gateway's; 0: none) the plan adds a
// disk tier of D bytes below the cache (each node's): the store and disk
// reads per policy. With mix=… it plans the mixture, each component the
// current version of the dataset it names. With columns=… (a dataset
// served in place) it plans the view of those fields the job reads, as the
// job's batches read it: its chunks' resident bounds in the cache, their
// store extents from the store. With seq=… (a token job) it plans the
// documents the job's sequences are packed from (planTokens; a vision
// job's samples, and its images rank by rank); with a clip
// job's parameters, its clips' exact demand (planClips).
//
// The job is resolved as the requests for its batches are (Jobs): a pair
// of its features the table refuses is refused as /epoch refuses it, a
// named job's edits are planned as its batches are laid out, and a pair
// the planner does not model is ErrNotPlanned (501, the table's reason).
// Whatever its kind, the plan lists its epochs as /epoch/N answers them
// ("epochs", api.PlanEpoch, and "batches_per_epoch", the first's): an
// epoch of no batches is planned, not refused.
func (m *Maker) Plan(ctx context.Context, rawQuery string) (any, error) {
	base := m.cfg.Defaults
	base.Plan = m.cfg.Options
	if n := m.cfg.Nodes(); n > 1 {
		base.Plan.Nodes = n
	}
	q, err := query.Parse(rawQuery, query.PlanParams, base, m.cfg.Limits)
	if err != nil {
		return nil, err
	}
	var extra features.Set
	if q.Plan.NodesAfter > 0 {
		extra = extra.With(features.Resize)
	}
	if q.Plan.Nodes > 1 {
		extra = extra.With(features.Cluster)
	}
	j, err := m.cfg.Jobs.Resolve(ctx, q, uint64(q.Plan.FirstEpoch), -1, extra)
	if err != nil {
		return nil, err
	}
	// What the planner does not model is the table's to say (501), from
	// the job's features as its batches have them: an importance job on
	// a cluster is one, whether its epochs are drawn from a snapshot yet
	// or not, for its next ones are.
	if err := j.Features.CheckPlan(); err != nil {
		return nil, err
	}
	q = j.Query
	src := j.Source
	// How the job's global batches are given to its ranks, as its
	// batches are (the table's, of its features: a plan of several nodes
	// is of a cluster): a plan of several nodes reports the cross-node
	// traffic of that one.
	q.Plan.Assignment = j.Features.Assignment(q.Job.World)
	// A named job's edits: its epochs are laid out under its chain, over
	// the version its appends grew it to, as its batches are.
	q.Plan.Edit = PlanEdit(src.Edit)
	// A unit whose epochs are not its samples as stored plans them
	// itself: a token or vision job its packed epochs, a clip job its
	// clips, a mixture its components. The one place /plan takes a job's
	// kind (its resolved unit).
	if p, ok := layout.As[UnitPlanner](src.Unit); ok {
		return p.Plan(ctx, m, src, q)
	}
	ds := src.DS
	if q.Plan.NodesAfter > 0 {
		from := m.cfg.Members(ctx) // nil on a single gateway: from nodes= planned ones
		return m.run(ctx, func(ctx context.Context) (any, error) {
			return m.cfg.Planner.Resize(ctx, Data(ds), q.Job, q.Plan, from)
		})
	}
	if ms := m.cfg.Members(ctx); ms != nil && ms.Len() == q.Plan.Nodes {
		// The cluster's own: its chunks owned as its members own them.
		q.Plan.MemberIDs = ms.IDs()
	}
	var snap *importance.Snapshot // nil: the uniform shuffle only
	if imp := q.Job.Importance; imp.On() && imp.Version != "" {
		if snap, err = m.cfg.Snapshots.Snapshot(ctx, ds, imp.Job, imp.Version); err != nil {
			return nil, err
		}
	}
	return m.run(ctx, func(ctx context.Context) (any, error) {
		if q.Job.Transform != "" {
			// A pipeline's costs: measured, or calibrated within the
			// plan's slot.
			c, err := m.cfg.Costs.Costs(ctx, q.Job.Transform)
			if err != nil {
				return nil, err
			}
			q.Plan.Transform = &c
		}
		return m.cfg.Planner.Plan(ctx, Data(ds), q.Job, q.Plan, snap)
	})
}

// PlanEdit is a job's chain of edits as a plan takes it.
func PlanEdit(e *layout.Edit) *api.PlanEdit {
	if e == nil {
		return nil
	}
	p := &api.PlanEdit{Version: e.Version, Epoch: e.Epoch, From: e.From, Chunks: e.Chunks, Previous: PlanEdit(e.Prev)}
	if e.Drop != nil {
		p.Samples, p.Drop = e.Drop.Len(), e.Drop.Bits()
	}
	return p
}

// Epochs are the layout's (Tools).
func (m *Maker) Epochs() Epochs { return m.cfg.Epochs }

// Planner is the gateway's planner (Tools).
func (m *Maker) Planner() Planner { return m.cfg.Planner }

// DecodeCost is this node's CPU a decoded frame (Tools).
func (m *Maker) DecodeCost() (time.Duration, bool) {
	if m.cfg.DecodeCost == nil {
		return 0, false
	}
	return m.cfg.DecodeCost()
}

// Run computes a plan in a plan slot (Tools; run).
func (m *Maker) Run(ctx context.Context, plan func(context.Context) (any, error)) (any, error) {
	return m.run(ctx, plan)
}

// run computes a plan with plan in one of the plan slots (Slots, waiting
// at most Wait for one). The plan runs under ctx, the request's, so that
// it stops when its client leaves. The request was checked before: an
// error of the planner other than ctx's or its budget running out
// (api.ErrPlanBudget, 503) is a job it cannot plan (over the budget up
// front), the client's.
func (m *Maker) run(ctx context.Context, plan func(context.Context) (any, error)) (any, error) {
	wait := time.NewTimer(m.wait)
	defer wait.Stop()
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	case <-wait.C:
		return nil, fmt.Errorf("%w: %d plans are being computed, and none finished within %s", ErrBusy, Slots, m.wait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p, err := plan(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, api.ErrPlanBudget) ||
		errors.Is(err, httperr.ErrNotImplemented) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", query.ErrBadRequest, err)
	}
	return p, nil
}
