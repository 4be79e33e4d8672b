package gateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/task"
)

// The edits of named jobs (internal/job/chain): POST /jobs/{job}/exclude
// leaves samples out of the job's future from a step on, POST
// /jobs/{job}/append takes the samples of files appended to its dataset
// from a step on, each the next edit of the job's one chain; GET
// /jobs/{job}/exclude, /append and /edits read them back; and every
// request of the job (job=NAME) over the dataset is laid out under the
// chain (layout.Edit). Resolving the job, the table's refusals and the
// one rule for edits on a cluster are package resolve's.

// The bounds of an edit's body: an exclusion's chain.MaxKeys keys of
// about 60 bytes each, as JSON strings; an append's step and index ID.
const (
	maxExcludeBodyBytes = 256 << 20
	maxAppendBodyBytes  = 4 << 10
)

// editAPI serves the edit endpoints from the resolver's editor.
type editAPI struct {
	jobs    *resolve.Editor
	catalog *catalog.Catalog
}

// notTask refuses an edit of the chain of job where a task job has its
// name, in any dataset this gateway serves: its edits are entries of its
// own log, and a chain stored beside it would be ignored.
func (ea editAPI) notTask(ctx context.Context, job string) error {
	for _, name := range ea.catalog.Names() {
		ds, err := ea.catalog.Get(name)
		if err != nil || ds.Store == nil {
			continue
		}
		made, err := task.Made(ctx, ds.Store, job)
		if err != nil {
			return err
		}
		if made {
			return fmt.Errorf("%w: job %s is a task job (its log is kept in dataset %s): its prompts are excluded and appended by POST /tasks/%s/exclude and /tasks/%s/append, entries of its log; nothing was stored", task.ErrTaskJob, job, name, job, job)
		}
	}
	return nil
}

func (ea editAPI) handleExcludePost(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	err := ea.notTask(ctx, chi.URLParam(r, "job"))
	var ej *resolve.EditJob
	if err == nil {
		ej, err = ea.jobs.EditJob(ctx, chi.URLParam(r, "job"), r.URL.RawQuery, chain.Exclude)
	}
	if err != nil {
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
	made, ds, x, err := ea.jobs.Make(ctx, ej, resolve.NewEdit{Kind: chain.Exclude, FromStep: *e.FromStep, Previous: e.Previous, Keys: e.Keys})
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	a := storedExclusion(made, x, ds)
	a.Keys = nil // the caller sent them
	writeJSON(w, http.StatusCreated, a)
}

func (ea editAPI) handleAppendPost(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	err := ea.notTask(ctx, chi.URLParam(r, "job"))
	var ej *resolve.EditJob
	if err == nil {
		ej, err = ea.jobs.EditJob(ctx, chi.URLParam(r, "job"), r.URL.RawQuery, chain.Append)
	}
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
	made, ext, _, err := ea.jobs.Make(ctx, ej, resolve.NewEdit{Kind: chain.Append, FromStep: *e.FromStep, Previous: e.Previous, Index: e.Index})
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusCreated, storedAppend(made, ext))
}

// read is the chain of the job a GET of its edits names, over the
// dataset its query names: its newest edit, resolved.
func (ea editAPI) read(r *http.Request) (*chain.Link, *layout.Edit, *catalog.Dataset, error) {
	return ea.jobs.Read(r.Context(), chi.URLParam(r, "job"), r.URL.RawQuery)
}

func (ea editAPI) handleExcludeGet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	head, x, ds, err := ea.read(r)
	var newest *chain.Link
	if err == nil {
		if newest = head.Newest(chain.Exclude); newest == nil {
			err = fmt.Errorf("%w: job %s has no exclusion list over dataset %s (POST /jobs/%s/exclude makes one)", chain.ErrUnknown, chi.URLParam(r, "job"), ds.Name, chi.URLParam(r, "job"))
		}
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	for x != nil && x.Version != newest.Version {
		x = x.Prev
	}
	writeJSON(w, http.StatusOK, storedExclusion(newest, x, ds))
}

func (ea editAPI) handleAppendGet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	head, _, ds, err := ea.read(r)
	var newest *chain.Link
	if err == nil {
		if newest = head.Newest(chain.Append); newest == nil {
			err = fmt.Errorf("%w: job %s has no append record over dataset %s (POST /jobs/%s/append makes one)", chain.ErrUnknown, chi.URLParam(r, "job"), ds.Name, chi.URLParam(r, "job"))
		}
	}
	var ext *catalog.Dataset
	if err == nil {
		ext, err = ea.catalog.Version(ds.Name, newest.Index)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, storedAppend(newest, ext))
}

// handleEditsGet serves GET /jobs/{job}/edits: the job's chain, first
// first.
func (ea editAPI) handleEditsGet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	head, _, ds, err := ea.read(r)
	if err == nil && head == nil {
		err = fmt.Errorf("%w: job %s has no edits over dataset %s", chain.ErrUnknown, chi.URLParam(r, "job"), ds.Name)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	out := api.StoredEdits{Job: head.Job, Dataset: ds.Name, Current: head.Version}
	for _, e := range head.Chain() {
		out.Edits = append(out.Edits, api.StoredEdit{Kind: e.Kind, Version: e.Version, Previous: e.Previous, IndexID: e.IndexID, Index: e.Index,
			FromStep: e.FromStep, StepSamples: e.StepSamples, Epoch: e.Epoch, FromPosition: e.FromPosition, PassStep: e.PassStep, Keys: len(e.Keys)})
	}
	writeJSON(w, http.StatusOK, out)
}

func storedExclusion(e *chain.Link, x *layout.Edit, ds *catalog.Dataset) api.StoredExclusion {
	a := api.StoredExclusion{Job: e.Job, Version: e.Version, Dataset: e.Dataset, IndexID: e.IndexID, FromStep: e.FromStep,
		StepSamples: e.StepSamples, Epoch: e.Epoch, FromPosition: e.FromPosition, PassStep: e.PassStep, Keys: e.AllKeys(), Previous: e.Previous}
	if x != nil && x.Drop != nil {
		a.Samples, a.EmptyChunks = x.Drop.Len(), x.Drop.EmptyChunks(ds.Counts)
	}
	return a
}

func storedAppend(e *chain.Link, ext *catalog.Dataset) api.StoredAppend {
	first, _ := ext.Index.ChunkRange(e.ParentChunks)
	return api.StoredAppend{Job: e.Job, Version: e.Version, Dataset: e.Dataset, IndexID: e.IndexID, Index: e.Index,
		FromStep: e.FromStep, StepSamples: e.StepSamples, Epoch: e.Epoch, FromPosition: e.FromPosition, PassStep: e.PassStep,
		NewSamples: ext.Index.NumSamples() - first, Samples: ext.Index.NumSamples(), Previous: e.Previous}
}
