package gateway

import (
	"net/http"

	"github.com/brandgw/brand/api"
)

// handleEpoch serves /epoch/{epoch}: the epoch's extent under the job.
func (g *Gateway) handleEpoch(w http.ResponseWriter, r *http.Request) {
	if isMix(r) {
		g.handleMixEpoch(w, r)
		return
	}
	q, ds, epoch, err := g.parseEpochRequest(r)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	job := q.Job
	batches, n, e, err := g.orders.Batches(ds, job, epoch)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	w.Header().Set(api.HeaderIndex, ds.ID())
	writeJSON(w, http.StatusOK, api.EpochInfo{Dataset: ds.Name, IndexID: ds.ID(), Epoch: int(epoch), Samples: n,
		Batches: batches, BatchSize: job.BatchSize, World: job.World, Rank: job.Rank, Window: job.Window,
		Seed: job.Seed, DropLast: job.DropLast, Offset: job.Offset, Chunks: ds.Index.NumChunks(), Windows: e.NumWindows(),
		RankSamples: job.RankSamples(n)})
}
