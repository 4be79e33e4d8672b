package gateway

import (
	"net/http"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/order"
)

// handleManifest serves /epoch/{epoch}/batch/{batch}/manifest: the batch's
// samples without their data.
func (g *Gateway) handleManifest(w http.ResponseWriter, r *http.Request) {
	if isMix(r) {
		g.handleMixManifest(w, r)
		return
	}
	l, _, err := g.layoutRequest(r)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeManifest(w, l)
}

func writeManifest(w http.ResponseWriter, l *order.Layout) {
	ix := l.DS.Index
	m := api.Manifest{Dataset: l.DS.Name, IndexID: ix.ID(), Epoch: int(l.Epoch), Batch: int(l.Batch), Rank: l.Job.Rank,
		World: l.Job.World, BatchSize: l.Job.BatchSize, Offset: l.Job.Offset, Batches: l.Batches, ETag: l.ETag, Bytes: l.Length(),
		Samples: make([]api.ManifestSample, len(l.IDs))}
	for i, id := range l.IDs {
		s := l.Info[i]
		m.Samples[i] = api.ManifestSample{ID: id, Key: s.Key, Chunk: ix.Chunk(s.Chunk).Key, Offset: s.Offset, Length: s.Length, CRC32C: s.CRC}
	}
	// What a GET in skip mode would leave out, as far as the gateway
	// knows without reading: the samples of chunks whose last read found
	// them damaged at rest.
	for i := range l.IDs {
		if l.DS.IsDamaged(l.Chunks[l.Slot[i]]) {
			m.Missing = append(m.Missing, l.Info[i].Key)
		}
	}
	writeJSON(w, http.StatusOK, m)
}
