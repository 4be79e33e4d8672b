package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
)

// TestUnknownParametersOfEveryRoute: every route refuses a query
// parameter it does not know with 400 naming it, as the batch routes do
// (query.Parse), before its body is read. The reproduction (issue 98,
// item 15): schedule edits, POST /plan, /datasets, /stats, /metrics,
// /healthz, /readyz and the profiles answered as if the parameter were
// not there. Every route of both handlers has a case: a route added
// without one fails here.
func TestUnknownParametersOfEveryRoute(t *testing.T) {
	data, admin, g := startScoped(t)
	job := `{"jobs": [{"name": "teamA-1"}]}`
	cases := []struct {
		admin           bool // on the admin handler
		method, pattern string
		path, body      string
	}{
		{false, "GET", "/healthz", "/healthz", ""},
		{false, "GET", "/readyz", "/readyz", ""},
		{false, "GET", "/datasets", "/datasets", ""},
		{false, "GET", "/epoch/{epoch}", "/epoch/0", ""},
		{false, "GET", "/epoch/{epoch}/batch/{batch}", "/epoch/0/batch/0", ""},
		{false, "GET", "/epoch/{epoch}/batch/{batch}/manifest", "/epoch/0/batch/0/manifest", ""},
		{false, "GET", "/samples/*", "/samples/no/such", ""},
		{false, "POST", "/prewarm", "/prewarm?steps=1", ""},
		{false, "GET", "/cluster", "/cluster", ""},
		{false, "GET", "/jobs/{job}/schedule", "/jobs/teamA-1/schedule", ""},
		{false, "GET", "/jobs/{job}/exclude", "/jobs/teamA-1/exclude", ""},
		{false, "GET", "/jobs/{job}/append", "/jobs/teamA-1/append", ""},
		{false, "GET", "/jobs/{job}/edits", "/jobs/teamA-1/edits", ""},
		{false, "GET", "/importance/{job}/epochs/{epoch}", "/importance/teamA-1/epochs/0", ""},
		{false, "GET", "/stats", "/stats", ""},
		{false, "PUT", "/tasks/{job}", "/tasks/teamA-1", `{"step": 4}`},
		{false, "GET", "/tasks/{job}", "/tasks/teamA-1", ""},
		{false, "GET", "/tasks/{job}/leases", "/tasks/teamA-1/leases?generator=g", ""},
		{false, "POST", "/tasks/{job}/leases", "/tasks/teamA-1/leases", `{"generator": "g", "prompts": 1}`},
		{false, "POST", "/tasks/{job}/leases/{lease}/feedback", "/tasks/teamA-1/leases/x-1/feedback", `{"results": []}`},
		{false, "GET", "/tasks/{job}/leases/{lease}/samples", "/tasks/teamA-1/leases/x-1/samples", ""},
		{false, "GET", "/tasks/{job}/replay", "/tasks/teamA-1/replay", ""},
		{false, "GET", "/tasks/{job}/steps/{step}", "/tasks/teamA-1/steps/0", ""},
		{false, "POST", "/tasks/{job}/trainer", "/tasks/teamA-1/trainer", `{"step": 0}`},
		{false, "POST", "/tasks/{job}/exclude", "/tasks/teamA-1/exclude", `{"keys": ["no/such"]}`},
		{false, "POST", "/tasks/{job}/append", "/tasks/teamA-1/append", `{"index": "0123456789abcdef"}`},
		{false, "POST", "/tasks/{job}/ratios", "/tasks/teamA-1/ratios", `{"from_step": 0, "ratios": {"web-a": 1}}`},
		{false, "GET", "/plan", "/plan", ""},
		{false, "POST", "/plan", "/plan", job},
		{false, "PUT", "/jobs/{job}/schedule", "/jobs/teamA-1/schedule", `{"schedule": "0:web-a:1"}`},
		{false, "POST", "/jobs/{job}/schedule", "/jobs/teamA-1/schedule", `{"schedule": "0:web-a:1"}`},
		{false, "POST", "/jobs/{job}/exclude", "/jobs/teamA-1/exclude", `{"from_step": 0, "keys": ["no/such"]}`},
		{false, "POST", "/jobs/{job}/append", "/jobs/teamA-1/append", `{"from_step": 0, "index": "0123456789abcdef"}`},
		{false, "POST", "/importance/{job}/feedback", "/importance/teamA-1/feedback?epoch=0", `{"keys": ["no/such"], "losses": [1]}`},
		{false, "POST", "/importance/{job}/seal", "/importance/teamA-1/seal?epoch=0", ""},
		{false, "GET", "/metrics", "/metrics", ""},
		{true, "GET", "/stats", "/stats", ""},
		{true, "GET", "/plan", "/plan", ""},
		{true, "POST", "/plan", "/plan", job},
		{true, "GET", "/metrics", "/metrics", ""},
		{true, "GET", "/datasets", "/datasets", ""},
		{true, "*", "/debug/pprof/", "/debug/pprof/", ""},
		{true, "*", "/debug/pprof/cmdline", "/debug/pprof/cmdline", ""},
		{true, "*", "/debug/pprof/profile", "/debug/pprof/profile?seconds=1", ""},
		// Its query is addresses to look up, not parameters: none is
		// unknown to it.
		{true, "*", "/debug/pprof/symbol", "", ""},
		{true, "*", "/debug/pprof/trace", "/debug/pprof/trace?seconds=1", ""},
		{true, "*", "/debug/pprof/{profile}", "/debug/pprof/heap?gc=1", ""},
	}
	for _, h := range []struct {
		admin  bool
		routes chi.Routes
	}{{false, gateway.RoutesOf(g)}, {true, g.AdminHandler().(chi.Routes)}} {
		_ = chi.Walk(h.routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			for _, c := range cases {
				if c.admin == h.admin && c.pattern == route && (c.method == method || c.method == "*") {
					return nil
				}
			}
			t.Errorf("%s %s (admin handler %v) has no case", method, route, h.admin)
			return nil
		})
	}
	for _, c := range cases {
		if c.path == "" {
			continue
		}
		base, method := data.URL, c.method
		if c.admin {
			base = admin.URL
		}
		if method == "*" {
			method = "GET"
		}
		sep := "?"
		if strings.Contains(c.path, "?") {
			sep = "&"
		}
		checks := []struct{ query, want string }{{"brand_unknown=1", `unknown query parameter "brand_unknown"`}}
		if _, own, ok := strings.Cut(c.path, "?"); ok {
			// The route's own parameter, given again.
			p, _, _ := strings.Cut(own, "&")
			checks = append(checks, struct{ query, want string }{p, "given 2 times"})
		}
		for _, q := range checks {
			t.Run(c.method+" "+c.pattern+" "+q.query, func(t *testing.T) {
				var body []byte
				if c.body != "" {
					body = []byte(c.body)
				}
				resp, b := do(t, method, base+c.path+sep+q.query, body, "Authorization", "Bearer sekrit-admin-0001", "Content-Type", "application/json")
				var e api.Error
				if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, q.want) {
					t.Errorf("%d %.300s; want 400 with %q", resp.StatusCode, b, q.want)
				}
			})
		}
	}
}
