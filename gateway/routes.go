package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	r.Get("/epoch/{epoch}", g.handleEpoch)
	r.Get("/epoch/{epoch}/batch/{batch}", g.handleBatch)
	r.Get("/epoch/{epoch}/batch/{batch}/manifest", g.handleManifest)
	r.Get("/samples/*", g.handleSample)
	return r
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
