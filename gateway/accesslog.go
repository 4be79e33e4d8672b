package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
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
		note := &errorNote{}
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), errorNoteKey{}, note)))
		route := "unmatched"
		if note.route != "" {
			route = note.route
		} else if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
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
		if note.err != nil {
			ev = ev.Err(note.err)
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

// errorNote carries the error behind a response whose body does not show
// it (see writeError) to the request's log line.
// A handler that routes by itself (the S3 face) notes its route too.
type errorNote struct {
	err   error
	route string
}

type errorNoteKey struct{}

// noteError records err for the log line of the request ctx belongs to.
func noteError(ctx context.Context, err error) {
	if n, ok := ctx.Value(errorNoteKey{}).(*errorNote); ok {
		n.err = err
	}
}

// noteRoute names the route of the request ctx belongs to, for its log
// line and metrics, when no chi route pattern names it.
func noteRoute(ctx context.Context, route string) {
	if n, ok := ctx.Value(errorNoteKey{}).(*errorNote); ok {
		n.route = route
	}
}

// millis is d in milliseconds. Logged durations are fields named *_ms
// holding this, rather than zerolog's Dur, whose unit is a package-level
// setting (zerolog.DurationFieldUnit) any code in the process may change.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
