package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/brandgw/brand/internal/server/httperr"
)

// maxLoggedPath bounds the request path (with its query) in a log line: a
// client may send hundreds of kilobytes, and the log must not carry them.
const maxLoggedPath = 1 << 10

// logRequests logs each request with its ID and records its metrics under
// the route pattern (not the raw path, which would explode label
// cardinality).
func (g *Gateway) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		ctx, note := httperr.WithNote(r.Context())
		next.ServeHTTP(ww, r.WithContext(ctx))
		route := "unmatched"
		if note.Route() != "" {
			route = note.Route()
		} else if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		d := time.Since(start)
		g.metrics.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		if status >= 400 {
			reason := note.Reason()
			if reason == "" { // an answer not made by writeError
				reason = httperr.Reason(status, note.Err())
			}
			g.metrics.errors.WithLabelValues(route, reason).Inc()
		}
		g.metrics.duration.WithLabelValues(route).Observe(d.Seconds())
		ev := g.log.Info()
		if status >= 500 {
			ev = g.log.Warn()
		} else if route == "/metrics" || route == "/healthz" || route == "/readyz" {
			ev = g.log.Debug()
		}
		if note.Err() != nil {
			ev = ev.Err(note.Err())
		}
		if !ev.Enabled() {
			return
		}
		path := r.URL.RequestURI()
		if len(path) > maxLoggedPath {
			// The length tells a huge query from a truncated ordinary one.
			ev.Int("path_bytes", len(path))
			path = path[:maxLoggedPath] + "…"
		}
		ev.Str("request_id", middleware.GetReqID(r.Context())).Str("method", r.Method).
			Str("path", path).Int("status", status).Int("bytes", ww.BytesWritten()).
			Float64("duration_ms", millis(d)).Str("remote", r.RemoteAddr).Msg("request")
	})
}

// noteError records err for the log line of the request ctx belongs to
// (httperr.NoteError).
func noteError(ctx context.Context, err error) { httperr.NoteError(ctx, err) }

// noteRoute names the route of the request ctx belongs to, for its log
// line and metrics, when no chi route pattern names it (httperr.NoteRoute).
func noteRoute(ctx context.Context, route string) { httperr.NoteRoute(ctx, route) }

// millis is d in milliseconds. Logged durations are fields named *_ms
// holding this, rather than zerolog's Dur, whose unit is a package-level
// setting (zerolog.DurationFieldUnit) any code in the process may change.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
