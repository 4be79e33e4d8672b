package gateway

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
		Cluster     *ClusterStats    `json:"cluster,omitempty"`
	}{g.cache.Stats(), g.cfg.CacheSize, g.cfg.CachePolicy, g.EpochStats(), g.clusterStats()})
}

// ClusterStats is a node's view of its cluster in /stats: the layout and
// liveness of GET /cluster, and the traffic this node exchanged.
type ClusterStats struct {
	api.Cluster
	Peers []PeerStats `json:"peers"`
	// HomeBytes and PeerBytes are the sample bytes of the batches this
	// node served that came from its own cache and from peers; Locality
	// is HomeBytes over both (1 before any batch).
	HomeBytes int64   `json:"home_bytes"`
	PeerBytes int64   `json:"peer_bytes"`
	Locality  float64 `json:"locality"`
}

// PeerStats is this node's traffic with one peer.
type PeerStats struct {
	URL          string `json:"url"`
	Up           bool   `json:"up"`
	FetchedBytes int64  `json:"fetched_bytes"` // sample bytes this node fetched from it
	ServedBytes  int64  `json:"served_bytes"`  // sample bytes this node served it
	Failures     int64  `json:"fetch_failures"`
}

// clusterStats is nil for a single gateway.
func (g *Gateway) clusterStats() *ClusterStats {
	if g.peers == nil {
		return nil
	}
	p := g.peers
	cs := &ClusterStats{Cluster: p.view(0)}
	for k, u := range p.urls {
		if k == p.self {
			continue
		}
		cs.Peers = append(cs.Peers, PeerStats{URL: u, Up: p.isUp(k),
			FetchedBytes: int64(counterValue(p.metrics.fetched.WithLabelValues(u))),
			ServedBytes:  int64(counterValue(p.metrics.served.WithLabelValues(u))),
			Failures:     int64(counterValue(p.metrics.failures.WithLabelValues(u)))})
	}
	cs.HomeBytes = int64(counterValue(p.metrics.locality.WithLabelValues("home")))
	cs.PeerBytes = int64(counterValue(p.metrics.locality.WithLabelValues("peer")))
	cs.Locality = 1
	if t := cs.HomeBytes + cs.PeerBytes; t > 0 {
		cs.Locality = float64(cs.HomeBytes) / float64(t)
	}
	return cs
}

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
