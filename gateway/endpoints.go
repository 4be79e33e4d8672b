package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/internal/server/scope"
)

// names says where a request names what its right is asked over.
type names uint8

const (
	jobInPath  names = 1 << iota // the route's {job}
	jobInQuery                   // job=; a request without one names no job
	inQuery                      // the datasets of a job's query (Gateway.queryDatasets)
	inBody                       // the handler asks of its body's: a schedule's datasets, a shared plan's dataset and jobs
)

// port is the handler an endpoint is served by: the data handler, the
// admin handler (Gateway.AdminHandler), or either (the operators'
// endpoints the data handler serves without Config.SeparateAdmin).
type port uint8

const (
	dataPort port = 1 << iota
	adminPort
	bothPorts = dataPort | adminPort
)

// endpoint is a row of the table of every endpoint a token is asked for
// (the peers' internal endpoints take a peer's credential instead, and
// /healthz and /readyz none).
type endpoint struct {
	method, pattern string // "*": any method (pprof's)
	port            port
	right           scope.Rights
	names           names
}

// endpoints is the one table of what each endpoint asks of a token
// (docs/http-api.md, "Authentication"). A route it lacks asks for admin:
// a test holds every route to a row.
var endpoints = []endpoint{
	{"GET", "/datasets", dataPort, scope.Read, 0}, // lists those the token's scope covers
	{"GET", "/epoch/{epoch}", dataPort, scope.Read, jobInQuery | inQuery},
	{"GET", "/epoch/{epoch}/batch/{batch}", dataPort, scope.Read, jobInQuery | inQuery},
	{"GET", "/epoch/{epoch}/batch/{batch}/manifest", dataPort, scope.Read, jobInQuery | inQuery},
	{"GET", "/samples/*", dataPort, scope.Read, inQuery},
	{"POST", "/prewarm", dataPort, scope.Read, jobInQuery | inQuery},
	{"GET", "/cluster", dataPort, scope.Read, 0},
	{"GET", "/jobs/{job}/schedule", dataPort, scope.Read, jobInPath},
	{"GET", "/jobs/{job}/exclude", dataPort, scope.Read, jobInPath | inQuery},
	{"GET", "/jobs/{job}/append", dataPort, scope.Read, jobInPath | inQuery},
	{"GET", "/jobs/{job}/edits", dataPort, scope.Read, jobInPath | inQuery},
	{"GET", "/importance/{job}/epochs/{epoch}", dataPort, scope.Read, jobInPath | inQuery},
	{"PUT", "/jobs/{job}/schedule", dataPort, scope.Edit, jobInPath | inBody},
	{"POST", "/jobs/{job}/schedule", dataPort, scope.Edit, jobInPath | inBody},
	{"POST", "/jobs/{job}/exclude", dataPort, scope.Edit, jobInPath | inQuery},
	{"POST", "/jobs/{job}/append", dataPort, scope.Edit, jobInPath | inQuery},
	{"POST", "/importance/{job}/feedback", dataPort, scope.Feedback, jobInPath | inQuery},
	{"POST", "/importance/{job}/seal", dataPort, scope.Feedback, jobInPath | inQuery},
	{"GET", "/tasks/{job}", dataPort, scope.Read, jobInPath | inQuery},
	{"GET", "/tasks/{job}/leases", dataPort, scope.Read, jobInPath | inQuery},
	{"GET", "/tasks/{job}/leases/{lease}/samples", dataPort, scope.Read, jobInPath | inQuery},
	{"GET", "/tasks/{job}/steps/{step}", dataPort, scope.Read, jobInPath | inQuery},
	{"GET", "/tasks/{job}/replay", dataPort, scope.Read, jobInPath | inQuery},
	{"PUT", "/tasks/{job}", dataPort, scope.Edit, jobInPath | inQuery},
	{"POST", "/tasks/{job}/leases", dataPort, scope.Feedback, jobInPath | inQuery},
	{"POST", "/tasks/{job}/leases/{lease}/feedback", dataPort, scope.Feedback, jobInPath | inQuery},
	{"POST", "/tasks/{job}/trainer", dataPort, scope.Feedback, jobInPath | inQuery},
	{"POST", "/tasks/{job}/exclude", dataPort, scope.Edit, jobInPath | inQuery},
	{"POST", "/tasks/{job}/append", dataPort, scope.Edit, jobInPath | inQuery},
	{"POST", "/tasks/{job}/ratios", dataPort, scope.Edit, jobInPath | inQuery},
	{"GET", "/stats", bothPorts, scope.Read, 0},
	{"GET", "/plan", bothPorts, scope.Read, jobInQuery | inQuery},
	{"POST", "/plan", bothPorts, scope.Read, inBody},
	{"GET", "/metrics", bothPorts, scope.Admin, 0},
	{"GET", "/datasets", adminPort, scope.Admin, 0}, // with where each is stored
	{"*", "/debug/pprof/", adminPort, scope.Admin, 0},
	{"*", "/debug/pprof/cmdline", adminPort, scope.Admin, 0},
	{"*", "/debug/pprof/profile", adminPort, scope.Admin, 0},
	{"*", "/debug/pprof/symbol", adminPort, scope.Admin, 0},
	{"*", "/debug/pprof/trace", adminPort, scope.Admin, 0},
	{"*", "/debug/pprof/{profile}", adminPort, scope.Admin, 0},
}

// endpointsOf is the table's rows of handler p, by method and pattern.
func endpointsOf(p port) map[string]endpoint {
	out := map[string]endpoint{}
	for _, e := range endpoints {
		if e.port&p != 0 {
			out[e.method+" "+e.pattern] = e
		}
	}
	return out
}

// lookup is the row of the route r was routed to (a HEAD is its GET's),
// or one asking for admin.
func lookup(table map[string]endpoint, r *http.Request) endpoint {
	pattern, method := "", r.Method
	if rc := chi.RouteContext(r.Context()); rc != nil {
		pattern = rc.RoutePattern()
	}
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if e, ok := table[method+" "+pattern]; ok {
		return e
	}
	if e, ok := table["* "+pattern]; ok {
		return e
	}
	return endpoint{method: method, pattern: pattern, right: scope.Admin}
}
