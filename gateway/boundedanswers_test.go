package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
)

// TestErrorAnswersBounded: an answer that refuses a request quotes at
// most a bounded prefix of what the request sent, however much it sent —
// a name, a key, a query parameter's name or value, a JSON field — and
// an oversized name is refused before it is carried through. The
// reproduction (issue 98, item 10): a lease ask with a 60 MiB generator
// name was answered 400 with 210 MiB, the name quoted whole, and took a
// node past its --memory-limit; here 8 MiB and 512 KiB stand for it.
func TestErrorAnswersBounded(t *testing.T) {
	f := newFixture(t, 2, 10)
	_, srv := start(t, f.store, nil)
	if resp, body := do(t, "PUT", srv.URL+"/tasks/rl", []byte(`{"step":4}`)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT /tasks/rl: %d %s", resp.StatusCode, body)
	}
	resp, body := do(t, "POST", srv.URL+"/tasks/rl/leases", []byte(`{"generator":"g","prompts":2}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("lease: %d %s", resp.StatusCode, body)
	}
	var lease api.TaskLease
	if err := json.Unmarshal(body, &lease); err != nil {
		t.Fatal(err)
	}
	asJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	huge := strings.Repeat("\x01", 8<<20) // each byte quoted as \x01: four
	long := strings.Repeat("n", 512<<10)
	tests := []struct {
		name, method, path string
		body               []byte
		status             int
	}{
		{"a lease ask's generator of 8 MiB", "POST", "/tasks/rl/leases", asJSON(api.TaskLeaseRequest{Generator: huge, Prompts: 1}), http.StatusBadRequest},
		{"a lease ask's generator of 2 KiB", "POST", "/tasks/rl/leases", asJSON(api.TaskLeaseRequest{Generator: strings.Repeat("\x01", 2<<10), Prompts: 1}), http.StatusBadRequest},
		{"a lease ask's request ID", "POST", "/tasks/rl/leases", asJSON(api.TaskLeaseRequest{Generator: "g", Prompts: 1, Request: strings.Repeat("\x01", 2<<10)}), http.StatusBadRequest},
		{"a feedback's key", "POST", "/tasks/rl/leases/" + lease.Lease + "/feedback", asJSON(api.TaskFeedback{Results: []api.TaskResult{{Key: long, Scores: []float64{1}}}}), http.StatusUnprocessableEntity},
		{"a lease's name", "POST", "/tasks/rl/leases/" + long + "/feedback", []byte(`{}`), http.StatusBadRequest},
		{"a generator in the query", "GET", "/tasks/rl/leases?generator=" + long, nil, http.StatusBadRequest},
		{"a job name", "GET", "/tasks/" + long, nil, http.StatusBadRequest},
		{"an unknown parameter", "GET", "/epoch/0?" + long + "=1", nil, http.StatusBadRequest},
		{"a parameter's value", "GET", "/epoch/0?seed=" + long, nil, http.StatusBadRequest},
		{"a dataset's name", "GET", "/epoch/0?dataset=" + long, nil, http.StatusBadRequest},
		{"a mixture", "GET", "/epoch/0?mix=" + long + ":1", nil, http.StatusBadRequest},
		{"an epoch", "GET", "/epoch/" + long, nil, http.StatusBadRequest},
		{"a sample's key", "GET", "/samples/" + long, nil, http.StatusNotFound},
		{"a lease of another tag", "POST", "/tasks/rl/leases/" + long + "-1/feedback", []byte(`{}`), http.StatusConflict},
		{"an unknown JSON field", "POST", "/tasks/rl/leases", []byte(`{"` + long + `": 1}`), http.StatusBadRequest},
		{"a JSON field given twice", "POST", "/tasks/rl/leases", []byte(`{"` + long + `": 1, "` + long + `": 2}`), http.StatusBadRequest},
		{"an unknown member of a large body", "POST", "/jobs/j/exclude", []byte(`{"` + long + `": 1}`), http.StatusBadRequest},
		{"a bucket", "GET", "/epoch/0?buckets=1x" + long, nil, http.StatusBadRequest},
		{"a vision rule", "GET", "/epoch/0?vision=" + long, nil, http.StatusBadRequest},
		{"a path no route takes", "GET", "/" + long, nil, http.StatusNotFound},
	}
	const most = 2 << 10
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := srv.URL + tt.path
			if i := strings.IndexByte(u, '?'); i >= 0 {
				q, _ := url.ParseQuery(u[i+1:])
				u = u[:i+1] + q.Encode()
			}
			resp, body := do(t, tt.method, u, tt.body)
			if resp.StatusCode != tt.status {
				t.Errorf("%d %.300s, want %d", resp.StatusCode, body, tt.status)
			}
			if len(body) > most {
				t.Errorf("an answer of %d bytes (at most %d): %.300s…", len(body), most, body)
			}
		})
	}
}
