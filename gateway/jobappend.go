package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
	n := ds.Index.NumSamples()
	batches := job.NumBatches(n)
	if batches == 0 {
		writeError(ctx, w, fmt.Errorf("%w: dataset %s has no batches for batch_size=%d world=%d offset=%d drop_last=%t: no step to count from", query.ErrBadRequest, ds.Name, job.BatchSize, job.World, job.Offset, job.DropLast))
		return
	}
	step := *e.FromStep
	epoch, m := step/uint64(batches), int(step%uint64(batches))
	if epoch > aa.jobs.limits.MaxEpoch {
		writeError(ctx, w, fmt.Errorf("%w: from_step %d is in epoch %d, past the last epoch %d", query.ErrBadRequest, step, epoch, aa.jobs.limits.MaxEpoch))
		return
	}
	from, _, err := job.GlobalBatch(n, m)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	g := job.BatchSize * max(job.World, 1)
	stepOf := func(epoch uint64, end int) uint64 {
		k := (max(end-job.Offset, 0) + g - 1) / g
		if end >= n || k >= batches {
			return (epoch + 1) * uint64(batches)
		}
		return epoch*uint64(batches) + uint64(k)
	}
	rec := appends.Record{Job: job.Name, Dataset: ds.Name, Epoch: epoch, FromPosition: from, FromStep: step, StepSamples: g}
	made, err := aa.jobs.apps.Make(ctx, ds.Store, ds, ext, rec, stepOf)
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
		NewSamples: ext.Index.NumSamples() - first, Samples: ext.Index.NumSamples()}
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
	if id != rec.IndexID && id != rec.Index {
		return nil // another version: the record is not of it
	}
	if err := layout.CheckAppend(*job); err != nil {
		return err
	}
	ext, err := j.catalog.Version(src.DS.Name, rec.Index)
	if errors.Is(err, catalog.ErrVersion) {
		return fmt.Errorf("%w; job %s takes the samples appended in it (POST /jobs/%s/append): this node has not loaded it yet", err, job.Name, job.Name)
	}
	if err != nil {
		return err
	}
	if ext, err = ext.Select(job.Columns); err != nil {
		return err
	}
	parent := src.DS
	if id != rec.IndexID {
		if parent, err = j.catalog.Version(src.DS.Name, rec.IndexID); err == nil {
			parent, err = parent.Select(job.Columns)
		}
		if err != nil {
			return err
		}
	}
	j.orders.Appends().Add(rec.Layout())
	src.DS, src.Parent, job.Append = ext, parent, rec.Version
	if id == rec.IndexID {
		src.Index = id
	}
	return nil
}

// peerAppend reports whether job's append record over ds is version,
// registering it for the layout: a peer's stream names the record its
// positions are laid out under.
func (j *jobs) peerAppend(ctx context.Context, ds *catalog.Dataset, job, version string) bool {
	rec, err := j.apps.Of(ctx, ds.Store, ds.Name, job)
	if err != nil || rec == nil || rec.Version != version {
		return false
	}
	j.orders.Appends().Add(rec.Layout())
	return true
}
