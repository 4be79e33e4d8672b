package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

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
		if note.err != nil {
			ev = ev.Err(note.err)
		}
		ev.Str("request_id", middleware.GetReqID(r.Context())).Str("method", r.Method).
			Str("path", r.URL.RequestURI()).Int("status", status).Int("bytes", ww.BytesWritten()).
			Dur("duration", d).Str("remote", r.RemoteAddr).Msg("request")
	})
}

// errorNote carries the error behind a response whose body does not show
// it (see writeError) to the request's log line.
type errorNote struct{ err error }

type errorNoteKey struct{}

// noteError records err for the log line of the request ctx belongs to.
func noteError(ctx context.Context, err error) {
	if n, ok := ctx.Value(errorNoteKey{}).(*errorNote); ok {
		n.err = err
	}
}
