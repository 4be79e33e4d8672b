package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// jsonRoute is a route that takes a JSON body, for TestJSONBodiesEndThere:
// a body it accepts, the status it accepts it with, and, for a body it
// refused, what must be unchanged (a GET and the status it must answer).
type jsonRoute struct {
	method, pattern, path string
	body                  string
	ok                    int
	unchanged             string // a path to GET after a refusal
	unchangedStatus       int
	unchangedSays         string
}

// TestJSONBodiesEndThere: every route that takes a JSON body refuses one
// with data after its object — garbage, a second object, a stray brace —
// with 400 saying so, and applies none of it; the same body without the
// trailing data is accepted. Every route of the data port that takes a
// body has a case here or is named as taking a body that is not JSON.
//
// The reproduction: PUT /jobs/J/schedule with a schedule object followed
// by `x` was answered 201 and the schedule stored (json.Decoder.Decode
// reads one value and leaves the rest unread), where importance feedback
// and POST /plan refused the same.
func TestJSONBodiesEndThere(t *testing.T) {
	m := gatewaytest.NewMix(t)
	g, srv := start(t, nil, func(c *gateway.Config) {
		c.Datasets = m.Specs
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 2, Seed: 5}
	})
	base := srv.URL
	first := `{"schedule": "0:web:0.5,code:0.3,books:0.2"}`
	resp, b := do(t, http.MethodPut, base+"/jobs/edited/schedule", []byte(first))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT the schedule the edit case edits: %d %s", resp.StatusCode, b)
	}
	var v1 storedVersion
	if err := json.Unmarshal(b, &v1); err != nil {
		t.Fatal(err)
	}
	// An append's body is read before its index is looked at: the web
	// dataset's own index, which extends none, is refused (422) once read.
	_, dsb := get(t, base+"/datasets")
	var dss struct {
		Datasets []struct{ Name, Index string } `json:"datasets"`
	}
	if err := json.Unmarshal(dsb, &dss); err != nil {
		t.Fatal(err)
	}
	var web string
	for _, d := range dss.Datasets {
		if d.Name == "web" {
			web = d.Index
		}
	}
	// Task jobs whose lease and answer bodies the cases send.
	for _, job := range []string{"tl", "tf", "tx", "ta"} {
		if resp, b := do(t, http.MethodPut, base+"/tasks/"+job+"?dataset=web", []byte(`{"step": 4}`)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT task job %s: %d %s", job, resp.StatusCode, b)
		}
	}
	resp, b = do(t, http.MethodPost, base+"/tasks/tf/leases?dataset=web", []byte(`{"generator": "g", "prompts": 1}`))
	var lease api.TaskLease
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &lease) != nil {
		t.Fatalf("a lease of tf: %d %s", resp.StatusCode, b)
	}
	// A task job of two domains whose ratios the ratio case edits.
	if resp, b := do(t, http.MethodPut, base+"/tasks/td?dataset=web", []byte(`{"step": 4, "domains": [{"dataset": "web", "ratio": 0.5}, {"dataset": "code", "ratio": 0.5}]}`)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT task job td: %d %s", resp.StatusCode, b)
	}
	routes := []jsonRoute{
		{"POST", "/tasks/{job}/exclude", "/tasks/tx/exclude?dataset=web", `{"keys": ["` + lease.Prompts[0].Key + `"]}`, http.StatusOK,
			"/tasks/tx?dataset=web", http.StatusOK, `"excluded": 0,`},
		// The web dataset's own index extends none: refused (422) once read.
		{"POST", "/tasks/{job}/append", "/tasks/ta/append?dataset=web", `{"index": "` + web + `"}`, http.StatusUnprocessableEntity, "", 0, ""},
		{"POST", "/tasks/{job}/ratios", "/tasks/td/ratios?dataset=web", `{"from_step": 2, "ratios": {"web": 0.25, "code": 0.75}}`, http.StatusOK,
			"/tasks/td?dataset=web", http.StatusOK, "\"web\": 0.5\n      }\n    }\n  ]"}, // one phase
		{"PUT", "/tasks/{job}", "/tasks/tj?dataset=web", `{"step": 4}`, http.StatusCreated,
			"/tasks/tj?dataset=web", http.StatusNotFound, "no task job"},
		{"POST", "/tasks/{job}/leases", "/tasks/tl/leases?dataset=web", `{"generator": "g", "prompts": 1}`, http.StatusCreated,
			"/tasks/tl?dataset=web", http.StatusOK, `"leases": 0,`},
		{"POST", "/tasks/{job}/leases/{lease}/feedback", "/tasks/tf/leases/" + lease.Lease + "/feedback?dataset=web",
			`{"results": [{"key": "` + lease.Prompts[0].Key + `", "passes": 1, "n": 2}]}`, http.StatusOK,
			"/tasks/tf?dataset=web", http.StatusOK, `"feedback_rows": 0,`},
		{"POST", "/tasks/{job}/trainer", "/tasks/tf/trainer?dataset=web", `{"step": 0}`, http.StatusOK, "", 0, ""},
		{"PUT", "/jobs/{job}/schedule", "/jobs/first/schedule", first, http.StatusCreated,
			"/jobs/first/schedule", http.StatusNotFound, "no stored schedule"},
		{"POST", "/jobs/{job}/schedule", "/jobs/edited/schedule",
			`{"schedule": "9:web:0.1,code:0.1,books:0.8", "from_step": 9, "base": "` + v1.Version + `"}`, http.StatusOK,
			"/jobs/edited/schedule", http.StatusOK, v1.Version},
		{"POST", "/importance/{job}/feedback", "/importance/fed/feedback?dataset=web&epoch=0", `{"ids": [0, 1], "losses": [1.5, 2]}`, http.StatusOK,
			"/importance/fed/epochs/0?dataset=web", http.StatusNotFound, "not sealed"},
		{"POST", "/plan", "/plan", `{"dataset": "web", "jobs": [{"epochs": 2}]}`, http.StatusOK, "", 0, ""},
		{"POST", "/jobs/{job}/exclude", "/jobs/ex/exclude?dataset=web", `{"from_step": 3, "keys": ["web-class0/sample00000"]}`, http.StatusCreated,
			"/jobs/ex/exclude?dataset=web", http.StatusNotFound, "no exclusion list"},
		{"POST", "/jobs/{job}/append", "/jobs/ap/append?dataset=web", `{"from_step": 3, "index": "` + web + `"}`, http.StatusUnprocessableEntity,
			"/jobs/ap/append?dataset=web", http.StatusNotFound, "no append record"},
	}
	// Routes whose bodies are not JSON: a peer's IDs, 4 bytes each.
	notJSON := []string{transport.SamplesPath, transport.NeededPath}
	err := chi.Walk(gateway.RoutesOf(g), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method != http.MethodPost && method != http.MethodPut {
			return nil
		}
		if route == "/importance/{job}/seal" || route == transport.FeedbackPath+"{job}" || route == "/prewarm" || slices.Contains(notJSON, route) {
			return nil // a seal, a seal's settlement and a prewarm take no body
		}
		if !slices.ContainsFunc(routes, func(r jsonRoute) bool { return r.method == method && r.pattern == route }) {
			t.Errorf("%s %s takes a body and has no case here", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.pattern, func(t *testing.T) {
			for _, trailing := range []string{" x", "\n" + rt.body, "}", " [", "\x00"} {
				resp, b := do(t, rt.method, base+rt.path, []byte(rt.body+trailing))
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "data after the JSON object") {
					t.Errorf("a body with %q after its object: %d %s; want 400 saying there is data after the JSON object", trailing, resp.StatusCode, b)
				}
				if rt.unchanged == "" {
					continue
				}
				if resp, b := get(t, base+rt.unchanged); resp.StatusCode != rt.unchangedStatus || !strings.Contains(string(b), rt.unchangedSays) {
					t.Fatalf("after the refused body with %q after it, GET %s: %d %s; want %d saying %q: the body was applied",
						trailing, rt.unchanged, resp.StatusCode, b, rt.unchangedStatus, rt.unchangedSays)
				}
			}
			// White space after the object is no data.
			if resp, b := do(t, rt.method, base+rt.path, []byte(rt.body+" \r\n\t")); resp.StatusCode != rt.ok {
				t.Fatalf("the body alone, white space after it: %d %s; want %d", resp.StatusCode, b, rt.ok)
			}
		})
	}
}
