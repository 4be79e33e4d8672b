package gateway

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brandgw/brand/chunkcache"
)

func (g *Gateway) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, g.observe, middleware.Recoverer, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Error: "no such endpoint: " + r.URL.Path + " (see docs/http-api.md)", Status: http.StatusNotFound})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: r.Method + " is not allowed here; the API is read-only (GET, HEAD)", Status: http.StatusMethodNotAllowed})
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !g.Ready() {
			writeError(w, ErrNotReady)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	r.Handle("/metrics", promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{Registry: g.registry}))
	r.Get("/datasets", g.handleDatasets)
	r.Get("/stats", g.handleStats)
	r.Get("/plan", g.handlePlan)
	r.Get("/epoch/{epoch}", g.handleEpoch)
	r.Get("/epoch/{epoch}/batch/{batch}", g.handleBatch)
	r.Get("/epoch/{epoch}/batch/{batch}/manifest", g.handleManifest)
	r.Get("/samples/*", g.handleSample)
	return r
}

// handleStats reports the cache counters and per-epoch figures as JSON, for
// people and benchmarks that want them without a Prometheus server.
func (g *Gateway) handleStats(w http.ResponseWriter, r *http.Request) {
	epochs := g.EpochStats()
	slices.SortFunc(epochs, func(a, b EpochStat) int {
		if c := strings.Compare(a.Dataset, b.Dataset); c != 0 {
			return c
		}
		return cmp.Compare(a.Epoch, b.Epoch)
	})
	writeJSON(w, http.StatusOK, struct {
		Cache       chunkcache.Stats `json:"cache"`
		CacheBytes  int64            `json:"cache_capacity_bytes"`
		CachePolicy string           `json:"cache_policy"`
		Epochs      []EpochStat      `json:"epochs"`
	}{g.cache.Stats(), g.cfg.CacheSize, g.cfg.CachePolicy, epochs})
}

// observe logs each request with its ID and records its metrics under the
// route pattern (not the raw path, which would explode label cardinality).
func (g *Gateway) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		d := time.Since(start)
		g.metrics.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		g.metrics.duration.WithLabelValues(route).Observe(d.Seconds())
		ev := g.log.Info()
		if status >= 500 {
			ev = g.log.Warn()
		} else if route == "/metrics" || route == "/healthz" || route == "/readyz" {
			ev = g.log.Debug()
		}
		ev.Str("request_id", middleware.GetReqID(r.Context())).Str("method", r.Method).
			Str("path", r.URL.RequestURI()).Int("status", status).Int("bytes", ww.BytesWritten()).
			Dur("duration", d).Str("remote", r.RemoteAddr).Msg("request")
	})
}
