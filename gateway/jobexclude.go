package gateway

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/appends"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/exclusions"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// The exclusion lists of named jobs (internal/job/exclusions): POST
// /jobs/{job}/exclude stores a job's list, GET /jobs/{job}/exclude reads
// it back, and every request of the job (job=NAME) over the list's
// dataset is laid out without its samples from its step on.

// maxExcludeBodyBytes bounds an exclusion's body: exclusions.MaxKeys keys
// of about 60 bytes each, as JSON strings.
const maxExcludeBodyBytes = 256 << 20

// excludeAPI serves the exclusion endpoints from the jobs stage's book.
type excludeAPI struct{ jobs *jobs }

// job is the job of a request on /jobs/{job}/exclude: its name, and the
// dataset and shape its query gives, which count its steps.
func (ea excludeAPI) job(r *http.Request) (api.Job, *catalog.Dataset, error) {
	name := chi.URLParam(r, "job")
	if err := checkJobName(name); err != nil {
		return api.Job{}, nil, err
	}
	q, err := query.Parse(r.URL.RawQuery, query.JobParams, ea.jobs.defaults, ea.jobs.limits)
	if err != nil {
		return api.Job{}, nil, err
	}
	q.Job.Name = name
	if err := layout.CheckExclusion(q.Job); err != nil {
		return api.Job{}, nil, err
	}
	ds, err := ea.jobs.version(q.Job)
	return q.Job, ds, err
}

func (ea excludeAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	job, ds, err := ea.job(r)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	x, l, err := ea.jobs.excl.Of(ctx, ds.Store, ds, job.Name)
	if err == nil && l == nil {
		err = fmt.Errorf("%w: job %s has no exclusion list over dataset %s (POST /jobs/%s/exclude makes one)", exclusions.ErrUnknown, job.Name, ds.Name, job.Name)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, storedExclusion(l, x, ds))
}

func (ea excludeAPI) handlePost(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	job, ds, err := ea.job(r)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	if rec, err := ea.jobs.apps.Of(ctx, ds.Store, ds.Name, job.Name); err != nil || rec != nil {
		if err == nil {
			err = fmt.Errorf("%w: job %s has an append record; a job takes an exclusion or an append, not both", layout.ErrCannotExclude, job.Name)
		}
		writeError(ctx, w, err)
		return
	}
	var e api.ExclusionEdit
	if err := reqbody.DecodeLargeJSON(r.Body, &e); err != nil {
		writeError(ctx, w, fmt.Errorf("%w: the body is a JSON object {\"from_step\": 1200, \"keys\": [\"a/0001\", …]}: %w", query.ErrBadRequest, err))
		return
	}
	if e.FromStep == nil || len(e.Keys) == 0 {
		writeError(ctx, w, fmt.Errorf("%w: an exclusion names from_step, the first step it applies to, and keys, at least one", query.ErrBadRequest))
		return
	}
	// A job with an exclusion list has no append record (refused above):
	// its epochs all have its version's batches.
	n := ds.Index.NumSamples()
	steps := appends.NewSteps(job, n, nil)
	step := *e.FromStep
	epoch, m, ok := steps.At(step)
	if !ok {
		writeError(ctx, w, fmt.Errorf("%w: dataset %s has no batches for batch_size=%d world=%d offset=%d drop_last=%t: no step to count from", query.ErrBadRequest, ds.Name, job.BatchSize, job.World, job.Offset, job.DropLast))
		return
	}
	if epoch > ea.jobs.limits.MaxEpoch {
		writeError(ctx, w, fmt.Errorf("%w: from_step %d is in epoch %d, past the last epoch %d", query.ErrBadRequest, step, epoch, ea.jobs.limits.MaxEpoch))
		return
	}
	from, _, err := job.GlobalBatch(n, m)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	g := job.BatchSize * max(job.World, 1)
	// steps.After is the first step whose batch starts at or after
	// position end of epoch: where a list could start after what was
	// served.
	stepOf := steps.After
	l := exclusions.List{Job: job.Name, Dataset: ds.Name, Epoch: epoch, FromPosition: from, FromStep: step, StepSamples: g, Keys: e.Keys, Previous: e.Previous}
	made, x, err := ea.jobs.excl.Make(ctx, ds.Store, ds, l, stepOf)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	ea.jobs.orders.AddExclusion(x)
	a := storedExclusion(made, x, ds)
	a.Keys = nil // the caller sent them
	writeJSON(w, http.StatusCreated, a)
}

func storedExclusion(l *exclusions.List, x *layout.Exclusion, ds *catalog.Dataset) api.StoredExclusion {
	return api.StoredExclusion{Job: l.Job, Version: l.Version, Dataset: l.Dataset, IndexID: l.IndexID, FromStep: l.FromStep,
		StepSamples: l.StepSamples, Epoch: l.Epoch, FromPosition: l.FromPosition, Samples: x.Len(), EmptyChunks: x.EmptyChunks(ds.Counts),
		Keys: l.AllKeys(), Previous: l.Previous}
}
