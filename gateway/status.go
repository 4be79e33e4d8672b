package gateway

import (
	"net/http"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/query"
)

// handleDatasets serves /datasets: what the gateway serves. Where the
// operators' endpoints have a listener of their own (Config.SeparateAdmin),
// the data port's answer leaves out where each dataset is stored.
func (g *Gateway) handleDatasets(w http.ResponseWriter, r *http.Request) {
	g.listDatasets(w, r, !g.cfg.SeparateAdmin)
}

func (g *Gateway) listDatasets(w http.ResponseWriter, r *http.Request, showURL bool) {
	all, err := g.catalog.All()
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	out := api.DatasetList{Datasets: make([]api.DatasetInfo, 0, len(all))}
	for _, ds := range all {
		info := api.DatasetInfo{Name: ds.Name, IndexID: ds.ID(),
			Chunks: ds.Index.NumChunks(), Samples: ds.Index.NumSamples(), Bytes: ds.Index.TotalBytes(),
			Default: ds.Name == g.catalog.Default(), IndexVersion: ds.Version, IndexETag: ds.IndexETag,
			IndexLoadedAt: ds.LoadedAt.UTC().Format(time.RFC3339)}
		if showURL {
			info.URL = ds.URL
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
		Cache       chunkcache.Stats   `json:"cache"`
		CacheBytes  int64              `json:"cache_capacity_bytes"`
		CachePolicy string             `json:"cache_policy"`
		Jobs        []api.JobStat      `json:"jobs"`
		Turns       api.TurnStats      `json:"turns"`
		Epochs      []api.EpochStat    `json:"epochs"`
		Cluster     *api.ClusterStats  `json:"cluster,omitempty"`
		Disk        *api.DiskStats     `json:"disk,omitempty"`
		Mixtures    []api.MixStat      `json:"mixtures,omitempty"`
		Transform   api.TransformStats `json:"transform"`
		Memory      api.MemoryStats    `json:"memory"`
		Tokens      *api.TokenStats    `json:"tokens,omitempty"`
		Video       *api.VideoStats    `json:"video,omitempty"`
	}{g.cache.Stats(), g.cfg.CacheSize, g.cfg.CachePolicy, g.JobStats(), g.turnStats(), g.EpochStats(), g.node.Stats(g.catalog.Names()), g.DiskStats(),
		g.stats.Mixtures(), g.TransformStats(), g.mem.Stats(), g.packer.Stats(), g.stage.VideoStats()})
}

// TransformStats returns the transform stage's figures: the decoder, the
// workers, per pipeline what it cost, and the batches made ahead.
func (g *Gateway) TransformStats() api.TransformStats {
	st := g.stage.Stats()
	st.Ahead = g.batches.PremadeStats()
	return st
}

// DiskStats returns the disk tier's figures, nil without one.
func (g *Gateway) DiskStats() *api.DiskStats { return g.disk.Stats() }

// handleCluster serves GET /cluster[?world=W]. A single gateway answers
// with itself, unnamed, as its only node.
func (g *Gateway) handleCluster(w http.ResponseWriter, r *http.Request) {
	q, err := query.Parse(r.URL.RawQuery, []string{api.ParamWorld}, query.Query{}, g.cfg.Limits)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeJSON(w, http.StatusOK, g.node.View(q.Job.World, g.catalog.Names()))
}

// notReady is why the gateway should not be sent new work, or nil: it
// refuses work (refusing), or, on a cluster's start, it and its peers
// have yet to see each other up (node.Settled) — a reason for a load
// balancer or a job to wait, not for a request that comes to be refused.
func (g *Gateway) notReady() error {
	if err := g.refusing(); err != nil {
		return err
	}
	return g.node.Settled()
}

// refusing is why the gateway refuses a client's request now, or nil: it
// is leaving its cluster (Leave), or cannot serve (servingNotReady).
func (g *Gateway) refusing() error {
	if g.leaving.Load() {
		return errLeaving
	}
	return g.servingNotReady()
}

// servingNotReady is why the gateway cannot serve now, or nil: the
// indexes are not loaded yet, or requests wait for the cache, or for
// room to assemble or copy a batch, and none has been let through for
// stallNotReady. A node leaving its cluster still serves its peers: their
// probes of its state ask this.
func (g *Gateway) servingNotReady() error {
	if err := g.catalog.NotReady(); err != nil {
		return err
	}
	if g.cache.Stalled(stallNotReady) || g.reader.Stalled(stallNotReady) || g.mem.Stalled(stallNotReady) {
		return errStalled
	}
	return nil
}
