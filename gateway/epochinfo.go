package gateway

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
)

// parseRequest parses the query parameters an endpoint accepts onto base
// and finds the dataset they name.
func (g *Gateway) parseRequest(r *http.Request, accepted []string, base query) (query, *loadedDataset, error) {
	q, err := parseQuery(r.URL.RawQuery, accepted, base, g.cfg.Limits)
	if err != nil {
		return q, nil, err
	}
	ds, err := g.catalog.get(q.job.Dataset)
	return q, ds, err
}

// parseEpochRequest parses the query and the {epoch} of a request about an
// epoch of a job, and finds its dataset.
func (g *Gateway) parseEpochRequest(r *http.Request, accepted []string) (query, *loadedDataset, uint64, error) {
	epoch, err := parseNumber("epoch", chi.URLParam(r, "epoch"), g.cfg.Limits.MaxEpoch)
	if err != nil {
		return query{}, nil, 0, err
	}
	q, ds, err := g.parseRequest(r, accepted, g.defaults)
	if err == nil {
		if imp := q.job.Importance; imp.Version != "" {
			// The order is drawn from the snapshot: have it in memory
			// before the order is computed (under the schedule's lock).
			_, err = g.snaps.load(r.Context(), ds, imp.Job, imp.Version)
		}
	}
	return q, ds, epoch, err
}

// handleEpoch serves /epoch/{epoch}: the epoch's extent under the job.
func (g *Gateway) handleEpoch(w http.ResponseWriter, r *http.Request) {
	q, ds, epoch, err := g.parseEpochRequest(r, jobParams)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	job := q.job
	e, err := g.orders.epoch(streamOf(ds, job), epoch)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	n := e.NumSamples()
	if job.Offset > n {
		writeError(r.Context(), w, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d samples", ErrNotFound, job.Offset, epoch, n))
		return
	}
	writeJSON(w, http.StatusOK, api.EpochInfo{Dataset: ds.name, IndexID: ds.index.ID(), Epoch: int(epoch), Samples: n,
		Batches: job.NumBatches(n), BatchSize: job.BatchSize, World: job.World, Rank: job.Rank, Window: job.Window,
		Seed: job.Seed, DropLast: job.DropLast, Offset: job.Offset, Chunks: ds.index.NumChunks(), Windows: e.NumWindows(),
		RankSamples: job.RankSamples(n)})
}
