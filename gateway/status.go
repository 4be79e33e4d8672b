package gateway

import (
	"net/http"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
)

// listDatasets serves /datasets: what the gateway serves, and with
// showURL where each dataset is stored. Where the operators' endpoints
// have a listener of their own (Config.SeparateAdmin), the data port's
// answer leaves that out.
func listDatasets(cat *catalog.Catalog, showURL bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		all, err := cat.All()
		if err != nil {
			writeError(r.Context(), w, err)
			return
		}
		out := api.DatasetList{Datasets: make([]api.DatasetInfo, 0, len(all))}
		grant, scoped := grantOf(r.Context())
		for _, ds := range all {
			if scoped && !grant.Dataset(ds.Name) {
				continue // a token lists the datasets its scope covers
			}
			info := api.DatasetInfo{Name: ds.Name, IndexID: ds.ID(),
				Chunks: ds.Index.NumChunks(), Samples: ds.Index.NumSamples(), Bytes: ds.Index.TotalBytes(),
				Default: ds.Name == cat.Default(), IndexVersion: ds.Version, IndexETag: ds.IndexETag,
				IndexLoadedAt: ds.LoadedAt.UTC().Format(time.RFC3339)}
			if showURL {
				info.URL = ds.URL
			}
			out.Datasets = append(out.Datasets, info)
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// handleStats serves /stats: the cache counters and per-epoch figures as
// JSON, for people and benchmarks that want them without a Prometheus
// server. A scoped token sees the jobs, epochs, mixtures and datasets its
// scope covers (visible) and the node's own figures.
func (g *Gateway) handleStats(w http.ResponseWriter, r *http.Request) {
	v := visibleTo(r.Context())
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
		Balance     []api.BalanceStats `json:"balance,omitempty"`
		Video       *api.VideoStats    `json:"video,omitempty"`
	}{g.cache.Stats(), g.cfg.CacheSize, g.cfg.CachePolicy, g.stats.JobsOf(v.shown()), turnStats(g.sched), g.stats.SnapshotOf(v.shown()),
		v.clusterStats(g.node.Stats(v.datasets(g.catalog.Names()))), g.DiskStats(),
		v.mixtures(g.stats.Mixtures()), g.TransformStats(), g.mem.Stats(), g.packer.Stats(), g.stats.Balances(), g.stage.VideoStats()})
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

// getCluster serves GET /cluster[?world=W]: the cluster as n sees it, its
// datasets those the request's token covers (visible). A single gateway
// answers with itself, unnamed, as its only node.
func getCluster(n node, cat *catalog.Catalog, limits Limits) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := query.Parse(r.URL.RawQuery, []string{api.ParamWorld}, query.Query{}, limits)
		if err != nil {
			writeError(r.Context(), w, err)
			return
		}
		v := visibleTo(r.Context())
		c := n.View(q.Job.World, v.datasets(cat.Names()))
		v.cluster(&c)
		writeJSON(w, http.StatusOK, c)
	}
}

// turnStats returns the use table's figures of turns.
func turnStats(s *usetable.Table) api.TurnStats {
	t := s.Turns()
	return api.TurnStats{WaitSeconds: t.Waited.Seconds(), Overdue: t.Overdue, Waiting: t.Waiting}
}
