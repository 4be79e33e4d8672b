package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brandgw/brand/api"
)

// routes is the API's one routing table; docs/http-api.md describes it.
func (g *Gateway) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, g.logRequests, middleware.Recoverer, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, api.Error{Error: "no such endpoint: " + r.URL.Path + " (see docs/http-api.md)", Status: http.StatusNotFound})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// Every route is GET (HEAD through middleware.GetHead).
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, api.Error{Error: r.Method + " is not allowed here; the API is read-only (GET, HEAD)", Status: http.StatusMethodNotAllowed})
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := g.catalog.notReady(); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{Registry: g.registry}))
	r.Get("/datasets", g.handleDatasets)
	r.Get("/stats", g.handleStats)
	r.Get("/plan", g.handlePlan)
	r.Get("/epoch/{epoch}", g.handleEpoch)
	r.Get("/epoch/{epoch}/batch/{batch}", g.handleBatch)
	r.Get("/epoch/{epoch}/batch/{batch}/manifest", g.handleManifest)
	r.Get("/samples/*", g.handleSample)
	return r
}
