// Package resolve turns a request about a job into the job resolved: its
// parameters through the one parameter table (package query), its
// features checked against the one table of which go together (package
// spec), and what it reads — the dataset version it pins or the cluster
// agrees on, the view of the fields it names, a mixture's components, the
// version of a stored schedule for the steps it reads, the importance
// snapshot its order is drawn from, the chain of edits stored under its
// name — into a layout.Source and an api.Job the layout lays its batches
// out from. It is the first stage of every request about a job's epochs
// and batches, of /plan (a plan is of the job that is served), and of
// every edit of a named job.
//
// # Why a room of its own
//
// Resolving a job decides whether it exists: which of its features go
// together, which stored edits apply, which version it reads. Decided in
// the HTTP layer, a batch, a plan and an edit each resolved it their own
// way, and disagreed (a plan refusing a job its batches served, an
// exclusion dropped when the job was read as a mixture). Here each asks
// the same Resolver, and the gateway keeps the routes and the statuses.
//
// # Edits on a cluster
//
// Every edit of a named job — a schedule's, an exclusion, an append — is
// made from a step only if no member of the cluster has served it: the
// node taking the edit asks every other member (Others) for the furthest
// position it has served of the job, and each answering member holds the
// job's positions from the edit's first on until the edit is made or
// refused (editproto.Positions.Hold), as jobsched holds a schedule's steps.
// A refusal names the first step an edit could start at.
//
// # Concurrency
//
// A Resolver's methods may be called concurrently.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/transform"
)

// Versions is what resolving a job's versions needs of the cluster: the
// index version the nodes agree on, who holds another, and the
// membership a job's batches are assigned under — the one it pins, or
// the agreed one (membership.Tracker; membership.Solo on a single
// gateway, which has only its own index versions and no membership).
type Versions interface {
	Agreed(dataset string) string
	Holders(dataset, id string, self bool) []string
	Members(ctx context.Context, version string) (*gcluster.Membership, error)
}

// Snapshots loads the importance snapshots a job names into memory
// (feedback.State).
type Snapshots interface {
	Snapshot(ctx context.Context, ds *catalog.Dataset, job, version string) (*importance.Snapshot, error)
}

// Pipelines are the transform pipelines a job may name (transform.Set).
type Pipelines interface {
	Get(name string) (*transform.Pipeline, error)
}

// Config is what a Resolver resolves with.
type Config struct {
	Catalog   *catalog.Catalog
	Versions  Versions
	Orders    *layout.Orders
	Snapshots Snapshots
	// Pipelines resolve a job's transform=: an unknown name is refused
	// (400, naming the pipelines there are), and a known one's
	// fingerprint, which its batches' ETags name, is filled in.
	Pipelines Pipelines
	Defaults  query.Query // the query a request starts from
	Limits    query.Limits
	// Node is this node's name in a cluster (its URL; "" for a single
	// gateway), which its reservations of schedule steps are kept
	// under; Others asks the other members before an edit (nil: none).
	Node   string
	Others Others
}

// A Resolver resolves jobs, and keeps the books of named jobs' stored
// edits: their schedules and their chains.
type Resolver struct {
	cfg Config
	// served is what this node has served of each named job, which
	// every edit starts after; chains the book of the jobs' chains of
	// exclusions and appends; scheds the book of their schedules.
	served *editproto.Positions
	chains *chain.Book
	scheds schedules
	edits  Editor
	parsed parses // the query strings of jobs' requests, parsed
}

// New returns a Resolver over cfg.
func New(cfg Config) *Resolver {
	served := editproto.NewPositions()
	r := &Resolver{cfg: cfg, served: served}
	r.chains = chain.With(served).LookIn(func(name string) *catalog.Dataset {
		ds, err := cfg.Catalog.Get(name)
		if err != nil {
			return nil
		}
		return ds
	})
	r.scheds.node = cfg.Node
	r.edits.r = r
	return r
}

// Edits is the part that makes the jobs' edits, and answers other
// members taking one (Editor).
func (r *Resolver) Edits() *Editor { return &r.edits }

// Defaults is the query a request starts from; Limits bound it.
func (r *Resolver) Defaults() query.Query { return r.cfg.Defaults }

// Limits bound what a request may ask for.
func (r *Resolver) Limits() query.Limits { return r.cfg.Limits }

// Orders are the orders the resolved jobs' batches are laid out by.
func (r *Resolver) Orders() *layout.Orders { return r.cfg.Orders }

// A Job is a request's job resolved: its query (every default applied),
// its features, what it reads, and the epoch asked about.
type Job struct {
	Query    query.Query
	Features features.Set
	Source   layout.Source
	Epoch    uint64
}

// Epoch resolves a request about epoch (its path's text) of a job whose
// query string is raw; batch is the batch's path text ("" for the epoch
// itself), whose steps a stored schedule is resolved for.
func (r *Resolver) Epoch(ctx context.Context, raw, epoch, batch string) (*Job, error) {
	e, err := query.ParseNumber("epoch", epoch, r.cfg.Limits.MaxEpoch)
	if err != nil {
		return nil, err
	}
	q, requested, err := r.parsed.parse(raw, r.cfg.Defaults, r.cfg.Limits)
	if err != nil {
		return nil, err
	}
	m := int64(-1)
	if batch != "" {
		n, err := query.ParseNumber("batch", batch, 1<<62)
		if err != nil {
			return nil, err
		}
		m = int64(n)
	}
	return r.resolve(ctx, q, e, m, requested)
}

// Batch resolves a request for batch (its path's text) of epoch of a job
// and lays the batch out. From reading the job's stored edits to
// recording what the batch served, no edit is made meanwhile that would
// change it; a batch whose positions another node, taking an edit of the
// job, was promised to hold (Answer) waits for the promise to end and is
// laid out under the job's edits read again.
func (r *Resolver) Batch(ctx context.Context, raw, epoch, batch string) (*layout.Batch, query.Query, error) {
	for fresh := false; ; fresh = true {
		b, q, h, err := r.batch(ctx, raw, epoch, batch, fresh)
		if err != nil || h.wait == 0 && !h.again {
			return b, q, err
		}
		if err := editproto.WaitOut(ctx, h.wait, h.released); err != nil {
			return nil, q, err
		}
	}
}

// held is how long a batch waits for a hold (0: none), and a channel
// closed if the hold is released before; or, with again, that it is laid
// out again at once under the job's edits read from the store (past a
// position this node answered a node taking an edit for).
type held struct {
	wait     time.Duration
	released <-chan struct{}
	again    bool
}

// batch is Batch once: the batch, or the hold it waits for. With fresh,
// the job's chain is read from the store first.
func (r *Resolver) batch(ctx context.Context, raw, epoch, batch string, fresh bool) (*layout.Batch, query.Query, held, error) {
	defer r.served.Hold()()
	j, err := r.Epoch(ctx, raw, epoch, batch)
	if err == nil && fresh && j.Query.Job.Name != "" && j.Source.DS != nil {
		if _, err = r.chains.Current(ctx, j.Source.DS.Store, j.Source.DS.Name, j.Query.Job.Name); err == nil {
			j, err = r.Epoch(ctx, raw, epoch, batch)
		}
	}
	if err != nil {
		return nil, query.Query{}, held{}, err
	}
	m, err := query.ParseNumber("batch", batch, 1<<62)
	if err != nil {
		return nil, j.Query, held{}, err
	}
	b, err := r.cfg.Orders.Layout(ctx, j.Source, j.Query.Job, j.Epoch, m)
	if err != nil || j.Query.Job.Name == "" || j.Source.DS == nil {
		return b, j.Query, held{}, err
	}
	// The global batch's end: whichever rank asks, an edit starts after
	// every position of a step any rank was served.
	_, end, err := b.Job.GlobalBatch(b.EpochSamples, int(b.Batch))
	if err != nil {
		end = b.End
	}
	ds, name := j.Source.DS.Name, j.Query.Job.Name
	if d, released := r.served.Held(ds, name, j.Epoch, end); d > 0 {
		return nil, j.Query, held{wait: d, released: released}, nil
	}
	if r.served.Stale(ds, name, j.Epoch, end) {
		if !fresh {
			return nil, j.Query, held{again: true}, nil
		}
		r.served.Confirm(ds, name)
	}
	r.served.Served(ds, name, j.Epoch, end)
	return b, j.Query, held{}, nil
}

// Resolve resolves q, a parsed query, for epoch (and with batch >= 0 that
// batch, whose steps a stored schedule is resolved for): its pipeline,
// its stored schedule, what it reads and the edits stored under its name;
// its features, and extra (a plan's, an edit's own), are checked against
// the table. Every request about a job's epochs and batches, /plan and
// the edits resolve through it.
func (r *Resolver) Resolve(ctx context.Context, q query.Query, epoch uint64, batch int64, extra features.Set) (*Job, error) {
	return r.resolve(ctx, q, epoch, batch, requested{extra: extra})
}

// requested is the features a query's parameters name, when known
// already (parses keeps them with the query: features.Requested builds a
// url.Values of the job), and those added to them (Resolve's extra).
type requested struct {
	named, extra features.Set
	known        bool // named is features.Requested of the query as parsed
}

// resolve is Resolve, with the features the query's parameters name
// known already (req.known) or not.
func (r *Resolver) resolve(ctx context.Context, q query.Query, epoch uint64, batch int64, req requested) (*Job, error) {
	if err := r.transform(&q.Job); err != nil {
		return nil, err
	}
	if q.Job.ScheduleVersion != "" {
		if err := r.stored(ctx, &q.Job, epoch, batch); err != nil {
			return nil, err
		}
		req.known = false // its mixture is the stored version's
	}
	// transform fills in only a fingerprint, which no parameter names.
	set := req.named
	if !req.known {
		set = features.Requested(q.Job)
	}
	set |= req.extra
	// What the request names is refused before what it reads is looked
	// for: the table's answer, whatever the dataset.
	if err := set.Check(); err != nil {
		return nil, err
	}
	un, err := r.unitOf(set)
	if err != nil {
		return nil, err
	}
	src, err := r.source(ctx, q.Job, un)
	if err != nil {
		return nil, err
	}
	head, err := r.chainOf(ctx, src, q.Job)
	if err != nil {
		return nil, err
	}
	for _, e := range head.Chain() {
		set = set.With(kindFeature(e.Kind))
	}
	for _, ds := range src.Datasets() {
		if ds.Index.Deferred() {
			set = set.With(features.InPlace)
		}
	}
	if src.Members != nil && src.Members.Len() > 1 {
		set = set.With(features.Cluster)
	}
	if err := set.Check(); err != nil {
		return nil, err
	}
	if u, ok := layout.As[unavailable](un); ok {
		// After the table and what the job reads (a 400 or a 404 is the
		// request's to mend): no job of a kind this node was built
		// without is served here, whatever its parameters.
		if err := u.Unavailable(q.Job); err != nil {
			return nil, err
		}
	}
	if head != nil {
		if err := r.applyChain(ctx, head, &src, &q.Job); err != nil {
			return nil, err
		}
	}
	if err := r.snapshot(ctx, src, q.Job); err != nil {
		return nil, err
	}
	src.Features = set
	return &Job{Query: q, Features: set, Source: src, Epoch: epoch}, nil
}

// kindFeature is the feature a stored edit's kind is.
func kindFeature(kind string) features.Feature {
	if kind == chain.Append {
		return features.Append
	}
	return features.Exclusion
}

// An unavailable unit is a kind of batch this node was built without
// what it needs to serve (a clip job's video decoder:
// transform/video.ErrNoDecoder): every request that resolves a job of it
// — its epochs, its plan, its batches in any format — is answered with
// its error, where the job is first named, rather than a job that lays
// out and plans and fails at its first batch.
type unavailable interface {
	Unavailable(job api.Job) error
}

// transform resolves the pipeline job names, if any: its fingerprint on
// this server goes into the job, and so into its batches' ETags.
func (r *Resolver) transform(job *api.Job) error {
	if job.Transform == "" {
		return nil
	}
	p, err := r.cfg.Pipelines.Get(job.Transform)
	if err != nil {
		return err
	}
	job.TransformFingerprint = p.Fingerprint()
	return nil
}

// source resolves what job, of unit un, reads — one dataset's version,
// or a mixture of the versions of its components — and the membership its
// batches are assigned under.
func (r *Resolver) source(ctx context.Context, job api.Job, un layout.Unit) (layout.Source, error) {
	ms, err := r.cfg.Versions.Members(ctx, job.Members)
	if err != nil {
		return layout.Source{}, err
	}
	src, err := r.data(ctx, job, un)
	src.Members = ms
	return src, err
}

// unit is the kind of batch job serves (layout.Unit), chosen from the
// features its parameters name, for a path that has not asked the table
// already (an edit's source, a stored schedule's length); Resolve chooses
// it from the features it checked. Either way the layout's UnitOf
// chooses, and the source hands it over.
func (r *Resolver) unit(job api.Job) (layout.Unit, error) { return r.unitOf(features.Requested(job)) }

// unitOf is the unit of a job of features set: none is a kind this
// node's orders do not serve (layout.ErrNoUnit).
func (r *Resolver) unitOf(set features.Set) (layout.Unit, error) {
	if un := r.cfg.Orders.UnitOf(set); un != nil {
		return un, nil
	}
	return nil, fmt.Errorf("%w: a job of %s", layout.ErrNoUnit, set.Unit())
}

// view is ds as a job of the kind job's parameters name reads it
// (layout.Unit.View).
func (r *Resolver) view(ctx context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	un, err := r.unit(job)
	if err != nil {
		return nil, err
	}
	return un.View(ctx, ds, job)
}

// data resolves what job reads: one dataset's version, or a mixture of
// the versions of its components, each the view its unit reads
// (layout.Unit.View: a vision job's image-text facts loaded, which its
// order is made from).
func (r *Resolver) data(ctx context.Context, job api.Job, un layout.Unit) (layout.Source, error) {
	if len(job.Mix) == 0 {
		ds, err := r.Version(job)
		if err == nil {
			ds, err = un.View(ctx, ds, job)
		}
		return layout.Source{DS: ds, Unit: un}, err
	}
	ds := make([]*catalog.Dataset, len(job.Mix))
	for i, c := range job.Mix {
		var err error
		if ds[i], err = r.Version(api.Job{Dataset: c.Dataset}); err == nil {
			ds[i], err = un.View(ctx, ds[i], job)
		}
		if err != nil {
			return layout.Source{}, err
		}
	}
	m, err := r.cfg.Orders.Compose(un, ds, job)
	if err != nil {
		return layout.Source{}, err
	}
	return layout.Source{Unit: m}, nil
}

// snapshot has the importance snapshot job's order is drawn from in
// memory before the order is computed (under the schedule's lock).
func (r *Resolver) snapshot(ctx context.Context, src layout.Source, job api.Job) error {
	if imp := job.Importance; imp.Version != "" && src.DS != nil {
		_, err := r.cfg.Snapshots.Snapshot(ctx, src.DS, imp.Job, imp.Version)
		return err
	}
	return nil
}

// Version is the dataset version a job reads: the one it pins (index=),
// else the one the cluster agrees on (a single gateway: the one it
// serves). A node that does not hold it answers 409, naming the nodes
// that do: serving its own version instead would give this job's ranks
// another order than their siblings get elsewhere.
func (r *Resolver) Version(job api.Job) (*catalog.Dataset, error) {
	name := job.Dataset
	id := job.Index
	pinned := id != ""
	if !pinned {
		if id = r.cfg.Versions.Agreed(name); id == "" {
			return r.cfg.Catalog.Get(name)
		}
	}
	ds, err := r.cfg.Catalog.Version(name, id)
	if !errors.Is(err, catalog.ErrVersion) {
		return ds, err
	}
	why := "the job pins it (index=)"
	if !pinned {
		why = "the cluster serves it"
	}
	if holders := r.cfg.Versions.Holders(name, id, false); len(holders) > 0 {
		return nil, fmt.Errorf("%w; %s; nodes that hold it: %s", err, why, strings.Join(holders, ", "))
	}
	return nil, fmt.Errorf("%w; %s, and no node known to this one holds it: the dataset was re-packed since; start the epoch again to read the new index", err, why)
}

// Catalog is the datasets the resolver reads.
func (r *Resolver) Catalog() *catalog.Catalog { return r.cfg.Catalog }

// Members is the membership a job pinning version (""; the agreed one)
// is assigned under.
func (r *Resolver) Members(ctx context.Context, version string) (*gcluster.Membership, error) {
	return r.cfg.Versions.Members(ctx, version)
}
