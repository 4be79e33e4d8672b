package gateway

import (
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/feedback"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// stallNotReady is how long requests may wait for cache room, or for room
// to assemble or copy a batch, with none let through, before /readyz
// reports the gateway not ready: a load balancer then sends new work
// elsewhere until pins and copies are released.
const stallNotReady = 10 * time.Second

// routes is the API's one routing table; docs/http-api.md describes it.
// Every route takes no request body but those given a bound here
// (bodies), checked after authentication and the token's right (guard,
// by the table of endpoints): a request without a credential, or without
// the right, is refused before any of its body is read.
func (g *Gateway) routes() http.Handler {
	r := g.newRouter()
	b := g.bodies
	r.With(b.none, params()).Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.With(b.none, params()).Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := g.ready.notReady(); err != nil {
			writeError(r.Context(), w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	r.Group(func(r chi.Router) {
		r.Use(g.authorizer().guard(endpointsOf(dataPort)))
		r.Group(func(r chi.Router) {
			r.Use(b.none)
			r.With(params()).Get("/datasets", listDatasets(g.catalog, !g.cfg.SeparateAdmin))
			r.Get("/epoch/{epoch}", g.handleEpoch)
			r.Get("/epoch/{epoch}/batch/{batch}", g.handleBatch)
			r.Get("/epoch/{epoch}/batch/{batch}/manifest", g.handleManifest)
			r.Get("/samples/*", g.handleSample)
			r.Get("/cluster", getCluster(g.node, g.catalog, g.cfg.Limits))
			r.Post("/importance/{job}/seal", g.importance.handleSeal)
			r.Get("/importance/{job}/epochs/{epoch}", g.importance.handleSealed)
			r.With(params()).Get("/jobs/{job}/schedule", scheduleAPI{g.jobs.Edits()}.handleScheduleGet)
			r.Get("/jobs/{job}/exclude", editAPI{g.jobs.Edits(), g.catalog}.handleExcludeGet)
			r.Get("/jobs/{job}/append", editAPI{g.jobs.Edits(), g.catalog}.handleAppendGet)
			r.Get("/jobs/{job}/edits", editAPI{g.jobs.Edits(), g.catalog}.handleEditsGet)
			r.Post("/prewarm", prewarmAPI{jobs: g.jobs, next: g}.handle)
			r.Get("/tasks/{job}", g.tasks.handlePlan)
			r.Get("/tasks/{job}/leases", g.tasks.handleOpen)
			r.Get("/tasks/{job}/leases/{lease}/samples", g.tasks.handleSamples)
			r.Get("/tasks/{job}/steps/{step}", g.tasks.handleStep)
			r.Get("/tasks/{job}/replay", g.tasks.handleReplay)
		})
		tb := r.With(b.upTo(fixed(maxTaskBodyBytes), b.timeout, perByteJSON))
		tb.Put("/tasks/{job}", g.tasks.handleMake)
		tb.Post("/tasks/{job}/leases", g.tasks.handleLease)
		tb.Post("/tasks/{job}/leases/{lease}/feedback", g.tasks.handleFeedback)
		tb.Post("/tasks/{job}/trainer", g.tasks.handleTrainer)
		tb.Post("/tasks/{job}/exclude", g.tasks.handleExclude)
		tb.Post("/tasks/{job}/append", g.tasks.handleAppend)
		tb.Post("/tasks/{job}/ratios", g.tasks.handleRatios)
		r.With(params(), b.upTo(fixed(maxScheduleBodyBytes), b.timeout, perByteJSON)).Put("/jobs/{job}/schedule", scheduleAPI{g.jobs.Edits()}.handleScheduleEdit)
		r.With(params(), b.upTo(fixed(maxScheduleBodyBytes), b.timeout, perByteJSON)).Post("/jobs/{job}/schedule", scheduleAPI{g.jobs.Edits()}.handleScheduleEdit)
		r.With(b.upTo(fixed(feedback.MaxBodyBytes), b.large, perByteBinary)).Post("/importance/{job}/feedback", g.importance.handleFeedback)
		r.With(b.upTo(fixed(maxExcludeBodyBytes), b.large, perByteExclusion)).Post("/jobs/{job}/exclude", editAPI{g.jobs.Edits(), g.catalog}.handleExcludePost)
		r.With(b.upTo(fixed(maxAppendBodyBytes), b.timeout, perByteJSON)).Post("/jobs/{job}/append", editAPI{g.jobs.Edits(), g.catalog}.handleAppendPost)
		if !g.cfg.SeparateAdmin {
			g.adminRoutes(r)
		}
	})
	// The peers' internal endpoints exist on a node of a cluster alone
	// (however many members it has now: one may join at any time), and
	// take a peer's credential, never a client's token (peerAPI).
	if g.cfg.Cluster.Members != nil {
		r.Group(func(r chi.Router) {
			r.Use(g.peers.authenticate)
			r.Group(func(r chi.Router) {
				r.Use(b.none)
				r.With(params()).Get(transport.StatePath, g.peers.handleState)
				r.Get(transport.MembersPath, g.peers.handleMembers)
				r.Get(transport.ChunkPath, g.peers.handleChunk)
				r.Get(transport.FeedbackPath+"{job}", g.peers.handleFeedback)
				r.Post(transport.FeedbackPath+"{job}", g.peers.handleSettle)
				r.Get(transport.StepsPath+"{job}", g.peers.handleSteps)
			})
			// A sample request's IDs and a question's chunk IDs, 4 bytes each.
			r.With(b.upTo(fixed(4*int64(g.cfg.Limits.MaxBatchSize)), b.timeout, perByteBinary)).Post(transport.SamplesPath, g.peers.handleSamples)
			r.With(loaded(g.catalog), b.upTo(g.neededBodyBytes, b.timeout, perByteBinary)).Post(transport.NeededPath, g.peers.handleNeeded)
		})
	}
	return r
}

// newRouter is a router with the middleware and error answers every
// handler of the gateway shares.
func (g *Gateway) newRouter() chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, g.logRequests, middleware.Recoverer, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		refuseBody(w, r)
		writeJSON(w, http.StatusNotFound, api.Error{Error: "no such endpoint: " + quote.Input(r.URL.Path) + " (see docs/http-api.md)", Status: http.StatusNotFound})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		refuseBody(w, r)
		allow := allowedMethods(r.URL.Path)
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, api.Error{Error: r.Method + " is not allowed here; use " + allow, Status: http.StatusMethodNotAllowed})
	})
	return r
}

// refuseBody answers a request no route takes without reading its body,
// and closes its connection if it has one (reqbody.Refuse).
func refuseBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		reqbody.Refuse(w, r)
	}
}

// allowedMethods is what a path takes: POST for importance feedback and
// seals and the peers' sample requests, GET (and HEAD) and POST for /plan
// (one job, several jobs), GET (and HEAD) for the rest.
func allowedMethods(path string) string {
	switch {
	case path == transport.SamplesPath, strings.HasPrefix(path, "/importance/") &&
		(strings.HasSuffix(path, "/feedback") || strings.HasSuffix(path, "/seal")):
		return http.MethodPost
	case strings.HasPrefix(path, transport.FeedbackPath):
		return "GET, HEAD, POST"
	case path == "/plan":
		return "GET, HEAD, POST"
	case strings.HasPrefix(path, "/jobs/") && strings.HasSuffix(path, "/schedule"):
		return "GET, HEAD, PUT, POST"
	}
	return "GET, HEAD"
}

// adminRoutes are the operators' endpoints: metrics, statistics and plans,
// which show more of the deployment than a training job needs.
func (g *Gateway) adminRoutes(r chi.Router) {
	b := g.bodies
	r.With(b.none, params()).Method(http.MethodGet, "/metrics", promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{Registry: g.registry}))
	r.With(b.none, params()).Get("/stats", g.handleStats)
	r.With(b.none).Get("/plan", getPlan(g.plans))
	r.With(params(), b.upTo(fixed(api.MaxSharedPlanBodyBytes), b.timeout, perByteJSON)).Post("/plan", postPlan(g.plans, g.cfg.DefaultDataset))
}

// AdminHandler serves the operators' endpoints — /metrics, /stats, /plan,
// /datasets with where each dataset is stored, and Go's profiles under
// /debug/pprof/ — for a listener of their own, so
// that they need not share the data port (Config.SeparateAdmin). It
// requires the same bearer tokens as the data handler, each endpoint the
// right the table of endpoints gives it there.
func (g *Gateway) AdminHandler() http.Handler {
	r := g.newRouter()
	r.Group(func(r chi.Router) {
		r.Use(g.authorizer().guard(endpointsOf(adminPort)))
		g.adminRoutes(r)
		r = r.With(g.bodies.none)
		r.With(params()).Get("/datasets", listDatasets(g.catalog, true))
		r.With(params()).HandleFunc("/debug/pprof/", pprof.Index)
		r.With(params()).HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		r.With(params(secondsParam...)).HandleFunc("/debug/pprof/profile", pprof.Profile)
		// Its query is not parameters but addresses, 0x…+0x…, each of
		// which it looks up.
		r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		r.With(params(secondsParam...)).HandleFunc("/debug/pprof/trace", pprof.Trace)
		r.With(params(profileParams...)).Handle("/debug/pprof/{profile}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pprof.Handler(chi.URLParam(r, "profile")).ServeHTTP(w, r)
		}))
	})
	return r
}
