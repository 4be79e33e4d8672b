package gateway

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brandgw/brand/api"
)

// stallNotReady is how long requests may wait for cache room, with none
// let through, before /readyz reports the gateway not ready: a load
// balancer then sends new work elsewhere until pins are released.
const stallNotReady = 10 * time.Second

// routes is the API's one routing table; docs/http-api.md describes it.
func (g *Gateway) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, g.logRequests, middleware.Recoverer, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, api.Error{Error: "no such endpoint: " + r.URL.Path + " (see docs/http-api.md)", Status: http.StatusNotFound})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, api.Error{Error: r.Method + " is not allowed here; the API is read-only (GET, HEAD)", Status: http.StatusMethodNotAllowed})
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !g.Ready() {
			writeError(w, ErrNotReady)
			return
		}
		if g.cache.Stalled(stallNotReady) {
			writeError(w, fmt.Errorf("%w: requests are waiting for cache room and none has been let through for %s", ErrStalled, stallNotReady))
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
