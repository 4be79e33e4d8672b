package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/appends"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// The append records of named jobs (internal/job/appends): POST
// /jobs/{job}/append records that the job takes the samples of files
// appended to its dataset (a version extending the one it reads) from a
// step on, GET /jobs/{job}/append reads the record back, and every
// request of the job (job=NAME) over the dataset is laid out under it
// (layout.Append).

// maxAppendBodyBytes bounds an append's body: a step and an index ID.
const maxAppendBodyBytes = 4 << 10

// appendAPI serves the append endpoints from the jobs stage's books.
type appendAPI struct{ jobs *jobs }

// job is the job of a request on /jobs/{job}/append: its name, and the
// dataset version and shape its query gives, which count its steps.
func (aa appendAPI) job(r *http.Request) (api.Job, *catalog.Dataset, error) {
	name := chi.URLParam(r, "job")
	if err := checkJobName(name); err != nil {
		return api.Job{}, nil, err
	}
	q, err := query.Parse(r.URL.RawQuery, query.JobParams, aa.jobs.defaults, aa.jobs.limits)
	if err != nil {
		return api.Job{}, nil, err
	}
	q.Job.Name = name
	if err := layout.CheckAppend(q.Job); err != nil {
		return api.Job{}, nil, err
	}
	ds, err := aa.jobs.version(q.Job)
	return q.Job, ds, err
}

func (aa appendAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	job, ds, err := aa.job(r)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	rec, err := aa.jobs.apps.Of(ctx, ds.Store, ds.Name, job.Name)
	if err == nil && rec == nil {
		err = fmt.Errorf("%w: job %s has no append record over dataset %s (POST /jobs/%s/append makes one)", appends.ErrUnknown, job.Name, ds.Name, job.Name)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	ext, err := aa.jobs.catalog.Version(ds.Name, rec.Index)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, storedAppend(rec, ext))
}

func (aa appendAPI) handlePost(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	job, ds, err := aa.job(r)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	var e api.AppendEdit
	if err := reqbody.DecodeJSON(r.Body, &e); err != nil {
		writeError(ctx, w, fmt.Errorf("%w: the body is a JSON object {\"from_step\": 1200, \"index\": \"<the index brand index --append stored>\"}: %w", query.ErrBadRequest, err))
		return
	}
	if e.FromStep == nil || !query.ValidVersion(e.Index) {
		writeError(ctx, w, fmt.Errorf("%w: an append names from_step, the first step it applies to, and index, the version (16 hex digits) that extends the job's", query.ErrBadRequest))
		return
	}
	if x, _, err := aa.jobs.excl.Of(ctx, ds.Store, ds, job.Name); err != nil || x != nil {
		if err == nil {
			err = fmt.Errorf("%w: job %s has an exclusion list; a job takes an exclusion or an append, not both", layout.ErrCannotAppend, job.Name)
		}
		writeError(ctx, w, err)
		return
	}
	ext, err := aa.jobs.catalog.Version(ds.Name, e.Index)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	prev, err := aa.jobs.apps.Current(ctx, ds.Store, ds.Name, job.Name)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	steps, parent, err := aa.jobs.appendSteps(ds, job, prev)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	step := *e.FromStep
	epoch, m, ok := steps.At(step)
	if !ok {
		writeError(ctx, w, fmt.Errorf("%w: dataset %s has no batches for batch_size=%d world=%d offset=%d drop_last=%t: no step to count from", query.ErrBadRequest, ds.Name, job.BatchSize, job.World, job.Offset, job.DropLast))
		return
	}
	if epoch > aa.jobs.limits.MaxEpoch {
		writeError(ctx, w, fmt.Errorf("%w: from_step %d is in epoch %d, past the last epoch %d", query.ErrBadRequest, step, epoch, aa.jobs.limits.MaxEpoch))
		return
	}
	from, _, err := job.GlobalBatch(steps.Samples(epoch), m)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	g := job.BatchSize * max(job.World, 1)
	rec := appends.Record{Job: job.Name, Dataset: ds.Name, Epoch: epoch, FromPosition: from, FromStep: step, StepSamples: g, Previous: e.Previous}
	made, err := aa.jobs.apps.Make(ctx, ds.Store, parent, ext, prev, rec, steps.After)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	aa.jobs.orders.Appends().Add(made.Layout())
	writeJSON(w, http.StatusCreated, storedAppend(made, ext))
}

func storedAppend(r *appends.Record, ext *catalog.Dataset) api.StoredAppend {
	first, _ := ext.Index.ChunkRange(r.ParentChunks)
	return api.StoredAppend{Job: r.Job, Version: r.Version, Dataset: r.Dataset, IndexID: r.IndexID, Index: r.Index,
		FromStep: r.FromStep, StepSamples: r.StepSamples, Epoch: r.Epoch, FromPosition: r.FromPosition,
		NewSamples: ext.Index.NumSamples() - first, Samples: ext.Index.NumSamples(), Previous: r.Previous}
}

// appendSteps counts job's steps over ds through the epochs its append
// records grow (appends.Steps), prev its current record (nil: none), and
// names the version a next record extends: prev's, or ds.
func (j *jobs) appendSteps(ds *catalog.Dataset, job api.Job, prev *appends.Record) (appends.Steps, *catalog.Dataset, error) {
	if prev == nil {
		return appends.NewSteps(job, ds.Index.NumSamples(), nil), ds, nil
	}
	chain := prev.Chain()
	first, err := j.catalog.Version(ds.Name, chain[0].IndexID)
	if err != nil {
		return appends.Steps{}, nil, err
	}
	grown := make([]appends.Grown, len(chain))
	var last *catalog.Dataset
	for i, r := range chain {
		if last, err = j.catalog.Version(ds.Name, r.Index); err != nil {
			return appends.Steps{}, nil, err
		}
		grown[i] = appends.Grown{Epoch: r.Epoch, Samples: last.Index.NumSamples()}
	}
	return appends.NewSteps(job, first.Index.NumSamples(), grown), last, nil
}

// appended resolves the append record stored under a named job over one
// dataset, if it has one and the job reads the version it extends (or
// the extension): the job's source becomes the extension, laid out under
// the record, and its answers name the version it read before.
func (j *jobs) appended(ctx context.Context, job *api.Job, src *layout.Source) error {
	if job.Name == "" || src.DS == nil {
		return nil
	}
	rec, err := j.apps.Of(ctx, src.DS.Store, src.DS.Name, job.Name)
	if err != nil || rec == nil {
		return err
	}
	id := src.DS.ID()
	chain := rec.Chain()
	if id != chain[0].IndexID && !slices.ContainsFunc(chain, func(r *appends.Record) bool { return r.Index == id }) {
		return nil // another version: the records are not of it
	}
	if err := layout.CheckAppend(*job); err != nil {
		return err
	}
	grown := make([]*catalog.Dataset, len(chain))
	for i, r := range chain {
		ext, err := j.catalog.Version(src.DS.Name, r.Index)
		if errors.Is(err, catalog.ErrVersion) {
			return fmt.Errorf("%w; job %s takes the samples appended in it (POST /jobs/%s/append): this node has not loaded it yet", err, job.Name, job.Name)
		}
		if err != nil {
			return err
		}
		if grown[i], err = ext.Select(job.Columns); err != nil {
			return err
		}
	}
	parent := src.DS
	if id != chain[0].IndexID {
		if parent, err = j.catalog.Version(src.DS.Name, chain[0].IndexID); err == nil {
			parent, err = parent.Select(job.Columns)
		}
		if err != nil {
			return err
		}
	}
	j.orders.Appends().Add(rec.Layout())
	src.DS, src.Parent, src.Grown, job.Append = grown[len(grown)-1], parent, grown, rec.Version
	if id != rec.Index {
		src.Index = id
	}
	return nil
}

// peerAppend reports whether version is one of job's append records
// over ds, registering them for the layout: a peer's stream names the
// record its positions are laid out under (an earlier one for a batch
// no later record changes).
func (j *jobs) peerAppend(ctx context.Context, ds *catalog.Dataset, job, version string) bool {
	rec, err := j.apps.Of(ctx, ds.Store, ds.Name, job)
	if err != nil || rec == nil || !slices.ContainsFunc(rec.Chain(), func(r *appends.Record) bool { return r.Version == version }) {
		return false
	}
	j.orders.Appends().Add(rec.Layout())
	return true
}
