package gateway

import (
	"net/http"

	"github.com/brandgw/brand/api"
)

// handleManifest serves /epoch/{epoch}/batch/{batch}/manifest: the batch's
// samples without their data.
func (g *Gateway) handleManifest(w http.ResponseWriter, r *http.Request) {
	b, _, err := g.layoutRequest(r, jobParams)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeManifest(w, b)
}

func writeManifest(w http.ResponseWriter, b *batchLayout) {
	ix := b.js.ds.index
	m := api.Manifest{Dataset: b.js.ds.name, IndexID: ix.ID(), Epoch: int(b.epoch), Batch: int(b.batch), Rank: b.job.Rank,
		World: b.job.World, BatchSize: b.job.BatchSize, Offset: b.job.Offset, Batches: b.batches, ETag: b.etag, Bytes: b.length,
		Samples: make([]api.ManifestSample, len(b.ids))}
	for i, id := range b.ids {
		s := ix.Sample(id)
		m.Samples[i] = api.ManifestSample{ID: id, Key: s.Key, Chunk: ix.Chunk(s.Chunk).Key, Offset: s.Offset, Length: s.Length, CRC32C: s.CRC}
	}
	m.Missing = b.knownMissing()
	writeJSON(w, http.StatusOK, m)
}
