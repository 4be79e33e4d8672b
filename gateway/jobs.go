package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	gcluster "github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/appends"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/edits"
	"github.com/brandgw/brand/internal/job/exclusions"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/transform"
)

// versions is what resolving a job's versions needs of the cluster: the
// index version the nodes agree on, who holds another, and the membership
// a job's batches are assigned under — the one it pins, or the agreed one
// (membership.Tracker; membership.Solo on a single gateway, which has
// only its own index versions and no membership).
type versions interface {
	Agreed(dataset string) string
	Holders(dataset, id string, self bool) []string
	Members(ctx context.Context, version string) (*gcluster.Membership, error)
}

// snapshots loads the importance snapshots a job names into memory
// (feedback.State).
type snapshots interface {
	Snapshot(ctx context.Context, ds *catalog.Dataset, job, version string) (*importance.Snapshot, error)
}

// pipelines are the transform pipelines a job may name (transform.Set).
type pipelines interface {
	Get(name string) (*transform.Pipeline, error)
}

// jobs resolves what a request asks for — its job's parameters, through
// the one parameter table, and what the job reads: the dataset version it
// pins or the cluster agrees on, a mixture's components, the importance
// snapshot its order is drawn from — and lays its batches out. It is the
// first stage of every request about a job's epochs and batches.
type jobs struct {
	catalog  *catalog.Catalog
	versions versions
	orders   *layout.Orders
	snaps    snapshots
	// pipelines resolve a job's transform=: an unknown name is refused
	// (400, naming the pipelines there are), and a known one's
	// fingerprint, which its batches' ETags name, is filled in.
	pipelines pipelines
	defaults  query.Query // the query a request starts from
	limits    query.Limits
	// sched is the book of named jobs' stored schedules (schedule=).
	sched scheduleBook
	// served is what this node has served of each named job, which
	// every stored edit (exclusion lists, append records) starts after.
	served *edits.Positions
	// excl is the book of named jobs' exclusion lists.
	excl *exclusions.Book
	// apps is the book of named jobs' append records.
	apps *appends.Book
}

// epoch parses the query and the {epoch} of a request about an epoch of
// a job, and resolves what the job reads.
func (j *jobs) epoch(r *http.Request) (q query.Query, src layout.Source, epoch uint64, err error) {
	epoch, err = query.ParseNumber("epoch", chi.URLParam(r, "epoch"), j.limits.MaxEpoch)
	if err != nil {
		return query.Query{}, layout.Source{}, 0, err
	}
	q, err = query.Parse(r.URL.RawQuery, query.JobParams, j.defaults, j.limits)
	if err != nil {
		return q, layout.Source{}, 0, err
	}
	if err := j.transform(&q.Job); err != nil {
		return q, layout.Source{}, 0, err
	}
	if q.Job.ScheduleVersion != "" {
		// A stored schedule: the version for the steps the request reads.
		batch := int64(-1)
		if s := chi.URLParam(r, "batch"); s != "" {
			m, err := query.ParseNumber("batch", s, 1<<62)
			if err != nil {
				return q, layout.Source{}, 0, err
			}
			batch = int64(m)
		}
		if err := j.stored(r.Context(), &q.Job, epoch, batch); err != nil {
			return q, layout.Source{}, 0, err
		}
	}
	src, err = j.source(r.Context(), q.Job)
	if err == nil {
		err = j.exclusion(r.Context(), &q.Job, src)
	}
	if err == nil {
		err = j.appended(r.Context(), &q.Job, &src)
	}
	return q, src, epoch, err
}

// peerExclusion reports whether job's exclusion list over ds has version,
// registering it for the layout: a peer's stream names the list its
// positions are laid out under.
func (j *jobs) peerExclusion(ctx context.Context, ds *catalog.Dataset, job, version string) bool {
	x, _, err := j.excl.Of(ctx, ds.Store, ds, job)
	if err != nil {
		return false
	}
	// The asker's version, or one this node's extends: registered with
	// the versions it extends.
	for y := x; y != nil; y = y.Prev() {
		if y.Version == version {
			j.orders.AddExclusion(x)
			return true
		}
	}
	return false
}

// exclusion resolves the exclusion list stored under a named job over
// one dataset, if it has one, into job.Exclusion: its batches are laid
// out without the list's samples from its step on.
func (j *jobs) exclusion(ctx context.Context, job *api.Job, src layout.Source) error {
	if job.Name == "" || src.DS == nil {
		return nil
	}
	x, _, err := j.excl.Of(ctx, src.DS.Store, src.DS, job.Name)
	if err != nil || x == nil {
		return err
	}
	if err := layout.CheckExclusion(*job); err != nil {
		return err
	}
	j.orders.AddExclusion(x)
	job.Exclusion = x.Version
	return nil
}

// batch parses a request about a batch and lays the batch out.
func (j *jobs) batch(r *http.Request) (*layout.Batch, query.Query, error) {
	// From reading the job's exclusion list and append record to
	// recording what it served: no edit is made meanwhile that would
	// change this batch.
	defer j.served.Hold()()
	q, src, epoch, err := j.epoch(r)
	if err != nil {
		return nil, q, err
	}
	m, err := query.ParseNumber("batch", chi.URLParam(r, "batch"), 1<<62)
	if err != nil {
		return nil, q, err
	}
	b, err := j.orders.Layout(r.Context(), src, q.Job, epoch, m)
	if err == nil && q.Job.Name != "" && src.DS != nil {
		j.served.Served(src.DS.Name, q.Job.Name, epoch, b.End)
	}
	return b, q, err
}

// transform resolves the pipeline job names, if any: its fingerprint on
// this server goes into the job, and so into its batches' ETags.
func (j *jobs) transform(job *api.Job) error {
	if job.Transform == "" {
		return nil
	}
	p, err := j.pipelines.Get(job.Transform)
	if err != nil {
		return err
	}
	job.TransformFingerprint = p.Fingerprint()
	return nil
}

// source resolves what job reads — one dataset's version, or a mixture of
// the versions of its components — and the membership its batches are
// assigned under.
func (j *jobs) source(ctx context.Context, job api.Job) (layout.Source, error) {
	ms, err := j.versions.Members(ctx, job.Members)
	if err != nil {
		return layout.Source{}, err
	}
	src, err := j.data(ctx, job)
	src.Members = ms
	if err == nil {
		err = layout.CheckBalance(src, job)
	}
	return src, err
}

// data resolves what job reads: one dataset's version, or a mixture of
// the versions of its components.
func (j *jobs) data(ctx context.Context, job api.Job) (layout.Source, error) {
	if len(job.Mix) == 0 {
		ds, err := j.version(job)
		switch {
		case err == nil && job.Tokens():
			// A token job reads its dataset's token field alone.
			ds, err = layout.TokenView(ds)
		case err == nil:
			ds, err = ds.Select(job.Columns)
		}
		if err == nil {
			if imp := job.Importance; imp.Version != "" {
				// The order is drawn from the snapshot: have it in memory
				// before the order is computed (under the schedule's lock).
				_, err = j.snaps.Snapshot(ctx, ds, imp.Job, imp.Version)
			}
		}
		return layout.Source{DS: ds}, err
	}
	ds := make([]*catalog.Dataset, len(job.Mix))
	for i, c := range job.Mix {
		var err error
		if ds[i], err = j.version(api.Job{Dataset: c.Dataset}); err != nil {
			return layout.Source{}, err
		}
		if job.Tokens() {
			ds[i], err = layout.TokenView(ds[i])
		} else {
			ds[i], err = ds[i].Select(job.Columns)
		}
		if err != nil {
			return layout.Source{}, err
		}
	}
	if job.Tokens() {
		m, err := j.orders.TokenMixture(job.Mix, ds, job)
		return layout.Source{Mix: m}, err
	}
	m, err := j.orders.Mixture(job.Mix, ds, job)
	return layout.Source{Mix: m}, err
}

// version is the dataset version a job reads: the one it pins (index=),
// else the one the cluster agrees on (a single gateway: the one it
// serves). A node that does not hold it answers 409, naming the nodes
// that do: serving its own version instead would give this job's ranks
// another order than their siblings get elsewhere.
func (j *jobs) version(job api.Job) (*catalog.Dataset, error) {
	name := job.Dataset
	id := job.Index
	pinned := id != ""
	if !pinned {
		if id = j.versions.Agreed(name); id == "" {
			return j.catalog.Get(name)
		}
	}
	ds, err := j.catalog.Version(name, id)
	if !errors.Is(err, catalog.ErrVersion) {
		return ds, err
	}
	why := "the job pins it (index=)"
	if !pinned {
		why = "the cluster serves it"
	}
	if holders := j.versions.Holders(name, id, false); len(holders) > 0 {
		return nil, fmt.Errorf("%w; %s; nodes that hold it: %s", err, why, strings.Join(holders, ", "))
	}
	return nil, fmt.Errorf("%w; %s, and no node known to this one holds it: the dataset was re-packed since; start the epoch again to read the new index", err, why)
}
