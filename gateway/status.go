package gateway

import (
	"net/http"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkcache"
)

// handleDatasets serves /datasets: what the gateway serves. Where the
// operators' endpoints have a listener of their own (Config.SeparateAdmin),
// the data port's answer leaves out where each dataset is stored.
func (g *Gateway) handleDatasets(w http.ResponseWriter, r *http.Request) {
	g.listDatasets(w, r, !g.cfg.SeparateAdmin)
}

func (g *Gateway) listDatasets(w http.ResponseWriter, r *http.Request, showURL bool) {
	all, err := g.catalog.all()
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	out := api.DatasetList{Datasets: make([]api.DatasetInfo, 0, len(all))}
	for _, ds := range all {
		info := api.DatasetInfo{Name: ds.name, IndexID: ds.index.ID(),
			Chunks: ds.index.NumChunks(), Samples: ds.index.NumSamples(), Bytes: ds.index.TotalBytes(),
			Default: ds.name == g.catalog.defaultName, IndexVersion: ds.version, IndexETag: ds.indexETag,
			IndexLoadedAt: ds.loadedAt.UTC().Format(time.RFC3339)}
		if showURL {
			info.URL = ds.url
		}
		out.Datasets = append(out.Datasets, info)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleStats serves /stats: the cache counters and per-epoch figures as
// JSON, for people and benchmarks that want them without a Prometheus
// server.
func (g *Gateway) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Cache       chunkcache.Stats `json:"cache"`
		CacheBytes  int64            `json:"cache_capacity_bytes"`
		CachePolicy string           `json:"cache_policy"`
		Epochs      []EpochStat      `json:"epochs"`
	}{g.cache.Stats(), g.cfg.CacheSize, g.cfg.CachePolicy, g.EpochStats()})
}
