package gateway

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
)

// parseEpochRequest parses the query and the {epoch} of a request about an
// epoch of a job, and finds its dataset.
func (g *Gateway) parseEpochRequest(r *http.Request, accepted []string) (query, *loadedDataset, uint64, error) {
	q, err := parseQuery(r.URL.Query(), accepted, g.defaults, g.cfg.Limits)
	if err != nil {
		return q, nil, 0, err
	}
	epoch, err := parseNumber("epoch", chi.URLParam(r, "epoch"), g.cfg.Limits.MaxEpoch)
	if err != nil {
		return q, nil, 0, err
	}
	ds, err := g.catalog.get(q.job.Dataset)
	return q, ds, epoch, err
}

// handleEpoch serves /epoch/{epoch}: the epoch's extent under the job.
func (g *Gateway) handleEpoch(w http.ResponseWriter, r *http.Request) {
	q, ds, epoch, err := g.parseEpochRequest(r, jobParams)
	if err != nil {
		writeError(w, err)
		return
	}
	job := q.job
	e, err := g.orders.epoch(jobStream{ds, job.Seed, job.Window}, epoch)
	if err != nil {
		writeError(w, err)
		return
	}
	n := e.NumSamples()
	if job.Offset > n {
		writeError(w, fmt.Errorf("%w: offset %d is past the end of epoch %d, which has %d samples", ErrNotFound, job.Offset, epoch, n))
		return
	}
	writeJSON(w, http.StatusOK, api.EpochInfo{Dataset: ds.name, IndexID: ds.index.ID(), Epoch: int(epoch), Samples: n,
		Batches: job.NumBatches(n), BatchSize: job.BatchSize, World: job.World, Rank: job.Rank, Window: job.Window,
		Seed: job.Seed, DropLast: job.DropLast, Offset: job.Offset, Chunks: ds.index.NumChunks(), Windows: e.NumWindows(),
		RankSamples: job.RankSamples(n)})
}
