package gateway

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
)

// importanceAPI serves the importance endpoints (docs/importance.md):
// feedback, seals and the sealed versions, over package feedback's state.
type importanceAPI struct {
	jobs  *resolve.Resolver
	state *feedback.State
	parts feedback.Nodes // the cluster's nodes, whose feedback a seal merges
}

// jobName checks a job name from a path.
func jobName(job string) (string, error) {
	if err := importance.ValidJobName(job); err != nil {
		return "", fmt.Errorf("%w: %w", query.ErrBadRequest, err)
	}
	return job, nil
}

// importanceRequest parses what every importance endpoint names: the job
// in the path, the dataset and the epoch (in the path, or else a required
// epoch parameter), through the one parameter table.
func (a *importanceAPI) request(r *http.Request, accepted []string) (query.Query, *catalog.Dataset, string, uint64, error) {
	job, err := jobName(chi.URLParam(r, "job"))
	if err != nil {
		return query.Query{}, nil, "", 0, err
	}
	q, err := query.Parse(r.URL.RawQuery, accepted, a.jobs.Defaults(), a.jobs.Limits())
	if err != nil {
		return q, nil, "", 0, err
	}
	ds, err := a.jobs.Version(q.Job)
	if err != nil {
		return q, nil, "", 0, err
	}
	epoch := q.Epoch
	switch arg := chi.URLParam(r, "epoch"); {
	case arg != "":
		epoch, err = query.ParseNumber("epoch", arg, a.jobs.Limits().MaxEpoch)
	case !q.EpochSet:
		err = fmt.Errorf("%w: epoch=E is required: the epoch the feedback is for", query.ErrBadRequest)
	}
	return q, ds, job, epoch, err
}

// handleFeedback serves POST /importance/{job}/feedback?dataset=&epoch=:
// per-sample losses of a batch, as JSON ({"keys"|"ids", "losses"}) or as
// application/octet-stream records of (uint32 sample ID, float32 loss),
// little-endian, read from the body as it arrives (package feedback
// bounds it) within Config.LargeBodyTimeout of the request's start, the
// wait for its turn to be decoded included: a body trickling in must not
// hold one of the few decoders (feedback.Limits) for long (routes).
func (a *importanceAPI) handleFeedback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_, ds, job, epoch, err := a.request(r, query.FeedbackParams)
	var n int
	if err == nil {
		n, err = a.state.Add(ctx, ds, job, epoch, r.Header.Get("Content-Type"), r.Body)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"accepted": n})
}

// handleSeal serves POST /importance/{job}/seal?dataset=&epoch=E[&prev=V]:
// the epoch's feedback, merged over the cluster's nodes, sealed onto the
// previous snapshot and written to the store.
func (a *importanceAPI) handleSeal(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q, ds, job, epoch, err := a.request(r, query.SealParams)
	var prev *importance.Snapshot
	if err == nil && q.Prev != "" {
		prev, err = a.state.Snapshot(ctx, ds, job, q.Prev)
	}
	var sealed feedback.Sealed
	if err == nil {
		sealed, err = a.state.Seal(ctx, ds, job, epoch, prev, a.parts)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, sealed)
}

// handleSealed serves GET /importance/{job}/epochs/{epoch}?dataset=: the
// version sealed for the epoch, so that every rank of a job finds the
// snapshot its rank 0 sealed. 404 until it is sealed.
func (a *importanceAPI) handleSealed(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_, ds, job, epoch, err := a.request(r, query.SealedParams)
	var v string
	if err == nil {
		v, err = a.state.SealedVersion(ctx, ds, job, epoch)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": v, "epoch": epoch})
}
