package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
)

// The jobs stage is package resolve's: every request about a job's
// epochs and batches, /plan and the edits of named jobs resolve the job
// there (resolve.Resolver). The gateway hands it the request's path and
// query, and answers with the status its errors map to.

// epochOf resolves a request about an epoch of a job.
func epochOf(res *resolve.Resolver, r *http.Request) (*resolve.Job, error) {
	return res.Epoch(r.Context(), r.URL.RawQuery, chi.URLParam(r, "epoch"), chi.URLParam(r, "batch"))
}

// batchOf resolves a request about a batch and lays the batch out.
func batchOf(res *resolve.Resolver, r *http.Request) (*layout.Batch, query.Query, error) {
	return res.Batch(r.Context(), r.URL.RawQuery, chi.URLParam(r, "epoch"), chi.URLParam(r, "batch"))
}
