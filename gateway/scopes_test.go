package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/server/scope"
)

// scopedTokens is a token file of every right, and of a team's scope.
const scopedTokens = `# a bare token may do anything, as before scopes
sekrit-admin-0001
sekrit-read-0002 rights=read
sekrit-edit-0003 rights=edit
sekrit-feedback-0004 rights=feedback name=feeder
sekrit-teamA-0005 rights=read,edit,feedback datasets=web-* jobs=teamA-* name=teamA
sekrit-teamB-0006 rights=read,edit jobs=teamB-*
`

// startScoped runs a gateway of the datasets web-a (the default) and
// books behind scopedTokens, and its admin handler.
func startScoped(t *testing.T) (data, admin *httptest.Server, g *gateway.Gateway) {
	tokens, err := scope.ParseTokens(strings.NewReader(scopedTokens))
	if err != nil {
		t.Fatal(err)
	}
	web, books := newFixture(t, 2, 4), newFixture(t, 2, 4)
	g, data = start(t, web.store, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "web-a", URL: "file:///web", Store: web.store}, {Name: "books", URL: "file:///books", Store: books.store}}
		c.Tokens = tokens
	})
	admin = httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)
	return data, admin, g
}

// TestScopesOfEveryEndpoint: every endpoint × every right. Each endpoint
// asks for one right (a read-only token reads batches, /plan and the
// edits back, and is refused every edit, seal, feedback and append; the
// operators' endpoints ask for admin); a token with it is let through
// (whatever the request then answers), one without it is 403 naming the
// right and its scope, never a secret. Every route has its row here.
func TestScopesOfEveryEndpoint(t *testing.T) {
	data, admin, g := startScoped(t)
	read, edit, feedback, adm := scope.Read, scope.Edit, scope.Feedback, scope.Admin
	job := `{"jobs": [{"name": "teamA-1"}]}`
	cases := []struct {
		admin           bool // on the admin handler
		method, pattern string
		path, body      string
		right           scope.Rights
	}{
		{false, "GET", "/datasets", "/datasets", "", read},
		{false, "GET", "/epoch/{epoch}", "/epoch/0?job=teamA-1", "", read},
		{false, "GET", "/epoch/{epoch}/batch/{batch}", "/epoch/0/batch/0", "", read},
		{false, "HEAD", "/epoch/{epoch}/batch/{batch}", "/epoch/0/batch/0?dataset=web-a", "", read},
		{false, "GET", "/epoch/{epoch}/batch/{batch}/manifest", "/epoch/0/batch/0/manifest", "", read},
		{false, "GET", "/samples/*", "/samples/no/such", "", read},
		{false, "POST", "/prewarm", "/prewarm?dataset=web-a&job=teamA-1&steps=1", "", read},
		{false, "GET", "/cluster", "/cluster", "", read},
		{false, "GET", "/jobs/{job}/schedule", "/jobs/teamA-1/schedule", "", read},
		{false, "GET", "/jobs/{job}/exclude", "/jobs/teamA-1/exclude", "", read},
		{false, "GET", "/jobs/{job}/append", "/jobs/teamA-1/append", "", read},
		{false, "GET", "/jobs/{job}/edits", "/jobs/teamA-1/edits", "", read},
		{false, "GET", "/importance/{job}/epochs/{epoch}", "/importance/teamA-1/epochs/0", "", read},
		{false, "GET", "/stats", "/stats", "", read},
		{false, "PUT", "/tasks/{job}", "/tasks/teamA-1?dataset=web-a", `{"step": 4}`, edit},
		{false, "GET", "/tasks/{job}", "/tasks/teamA-1?dataset=web-a", "", read},
		{false, "GET", "/tasks/{job}/leases", "/tasks/teamA-1/leases?dataset=web-a&generator=g", "", read},
		{false, "POST", "/tasks/{job}/leases", "/tasks/teamA-1/leases?dataset=web-a", `{"generator": "g", "prompts": 1}`, feedback},
		{false, "POST", "/tasks/{job}/leases/{lease}/feedback", "/tasks/teamA-1/leases/x-1/feedback?dataset=web-a", `{"results": [{"key": "no/such", "passes": 1, "n": 2}]}`, feedback},
		{false, "GET", "/tasks/{job}/leases/{lease}/samples", "/tasks/teamA-1/leases/x-1/samples?dataset=web-a", "", read},
		{false, "GET", "/tasks/{job}/replay", "/tasks/teamA-1/replay?dataset=web-a", "", read},
		{false, "GET", "/tasks/{job}/steps/{step}", "/tasks/teamA-1/steps/0?dataset=web-a", "", read},
		{false, "POST", "/tasks/{job}/trainer", "/tasks/teamA-1/trainer?dataset=web-a", `{"step": 0}`, feedback},
		{false, "POST", "/tasks/{job}/exclude", "/tasks/teamA-1/exclude?dataset=web-a", `{"keys": ["no/such"]}`, edit},
		{false, "POST", "/tasks/{job}/append", "/tasks/teamA-1/append?dataset=web-a", `{"index": "0123456789abcdef"}`, edit},
		{false, "POST", "/tasks/{job}/ratios", "/tasks/teamA-1/ratios?dataset=web-a", `{"from_step": 0, "ratios": {"web-a": 1}}`, edit},
		{false, "GET", "/plan", "/plan?job=teamA-1", "", read},
		{false, "POST", "/plan", "/plan", job, read},
		{false, "PUT", "/jobs/{job}/schedule", "/jobs/teamA-1/schedule", `{"schedule": "0:web-a:1"}`, edit},
		{false, "POST", "/jobs/{job}/schedule", "/jobs/teamA-1/schedule", `{"schedule": "0:web-a:1"}`, edit},
		{false, "POST", "/jobs/{job}/exclude", "/jobs/teamA-1/exclude", `{"from_step": 0, "keys": ["no/such"]}`, edit},
		{false, "POST", "/jobs/{job}/append", "/jobs/teamA-1/append", `{"from_step": 0, "index": "0123456789abcdef"}`, edit},
		{false, "POST", "/importance/{job}/feedback", "/importance/teamA-1/feedback?epoch=0", `{"keys": ["no/such"], "losses": [1]}`, feedback},
		{false, "POST", "/importance/{job}/seal", "/importance/teamA-1/seal?epoch=0", "", feedback},
		{false, "GET", "/metrics", "/metrics", "", adm},
		{true, "GET", "/stats", "/stats", "", read},
		{true, "GET", "/plan", "/plan", "", read},
		{true, "POST", "/plan", "/plan", job, read},
		{true, "GET", "/metrics", "/metrics", "", adm},
		{true, "GET", "/datasets", "/datasets", "", adm},
		{true, "*", "/debug/pprof/", "/debug/pprof/", "", adm},
		{true, "*", "/debug/pprof/cmdline", "/debug/pprof/cmdline", "", adm},
		{true, "*", "/debug/pprof/profile", "/debug/pprof/profile?seconds=1", "", adm},
		{true, "*", "/debug/pprof/symbol", "/debug/pprof/symbol", "", adm},
		{true, "*", "/debug/pprof/trace", "/debug/pprof/trace?seconds=0.01", "", adm},
		{true, "*", "/debug/pprof/{profile}", "/debug/pprof/goroutine", "", adm},
	}
	// Every route of both handlers has a case: a route added without a
	// row in the table of endpoints (which asks admin of it) fails here.
	for _, h := range []struct {
		admin  bool
		routes chi.Routes
	}{{false, gateway.RoutesOf(g)}, {true, g.AdminHandler().(chi.Routes)}} {
		_ = chi.Walk(h.routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			if route == "/healthz" || route == "/readyz" {
				return nil
			}
			for _, c := range cases {
				if c.admin == h.admin && c.pattern == route && (c.method == method || c.method == "*") {
					return nil
				}
			}
			t.Errorf("%s %s (admin handler %v) has no case", method, route, h.admin)
			return nil
		})
	}
	tokens := []struct {
		secret string
		rights scope.Rights
	}{
		{"sekrit-admin-0001", adm}, {"sekrit-read-0002", read}, {"sekrit-edit-0003", edit},
		{"sekrit-feedback-0004", feedback}, {"sekrit-teamA-0005", read | edit | feedback},
	}
	for _, c := range cases {
		base, method := data.URL, c.method
		if c.admin {
			base = admin.URL
		}
		if method == "*" {
			method = "GET"
		}
		for _, tok := range tokens {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			resp, b := do(t, method, base+c.path, body, "Authorization", "Bearer "+tok.secret, "Content-Type", "application/json")
			allowed := tok.rights.Has(c.right)
			if got := resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized; got != allowed {
				t.Errorf("%s %s (admin %v) with %s: %d %s; want allowed %v", c.method, c.path, c.admin, tok.secret, resp.StatusCode, b, allowed)
				continue
			}
			if allowed || method == "HEAD" {
				continue
			}
			var e api.Error
			if err := json.Unmarshal(b, &e); err != nil || e.Status != 403 ||
				!strings.Contains(e.Error, "lacks the "+c.right.String()+" right") || !strings.Contains(e.Error, "; it has "+tok.rights.String()+" over") ||
				strings.Contains(e.Error, "sekrit") {
				t.Errorf("%s %s with %s: 403 %s, want the missing right and the scope", c.method, c.path, tok.secret, b)
			}
		}
	}
	// The metrics count the refusals by route and reason and show no
	// secret.
	_, m := get(t, data.URL+"/metrics", "Authorization", "Bearer sekrit-admin-0001")
	if strings.Contains(string(m), "sekrit") || !strings.Contains(string(m), `reason="forbidden"`) {
		t.Errorf("metrics show a secret, or count no refusal")
	}
}

// TestScopesOfNames: a token scoped to jobs teamA-* and datasets web-*
// edits and reads its jobs over its datasets, and is 403 naming the job or
// dataset otherwise: another job (in the path or job=), another dataset
// (dataset=, a mixture's, a schedule's, one a job's stored schedule reads,
// a shared plan's), while /datasets lists its datasets alone.
//
// The reproduction (issue 80, case 4): token B extended and read the
// exclusion list token A made; every token could edit, seal, append to
// and read every job and dataset.
func TestScopesOfNames(t *testing.T) {
	data, _, _ := startScoped(t)
	const adminTok, team, teamB = "sekrit-admin-0001", "sekrit-teamA-0005", "sekrit-teamB-0006"
	exclude := []byte(`{"from_step": 0, "keys": ["class0/sample00000"]}`)
	if resp, b := do(t, "POST", data.URL+"/jobs/teamA-run/exclude", exclude, "Authorization", "Bearer "+team); resp.StatusCode != 201 {
		t.Fatalf("team A's exclusion: %d %s", resp.StatusCode, b)
	}
	for _, m := range []string{"GET", "POST"} {
		if resp, b := do(t, m, data.URL+"/jobs/teamA-run/exclude", exclude, "Authorization", "Bearer "+teamB); resp.StatusCode != 403 {
			t.Errorf("%s of team A's exclusion by team B: %d %s", m, resp.StatusCode, b)
		}
	}
	if resp, b := get(t, data.URL+"/jobs/teamA-run/exclude", "Authorization", "Bearer "+team); resp.StatusCode != 200 {
		t.Errorf("team A reading its exclusion: %d %s", resp.StatusCode, b)
	}
	// A schedule over books, stored by an operator, under a team's job.
	if resp, b := do(t, "PUT", data.URL+"/jobs/teamA-books/schedule", []byte(`{"schedule": "0:books:1"}`), "Authorization", "Bearer "+adminTok); resp.StatusCode != 201 {
		t.Fatalf("storing a schedule: %d %s", resp.StatusCode, b)
	}
	tests := []struct {
		method, path, body string
		want               int
		says               string
	}{
		{"GET", "/epoch/0/batch/0?job=teamA-1&dataset=web-a", "", 200, ""},
		{"GET", "/epoch/0/batch/0", "", 200, ""}, // the default dataset, no job
		{"GET", "/epoch/0/batch/0?job=teamB-x", "", 403, `lacks the read right over job "teamB-x"`},
		{"GET", "/epoch/0?job=teamB-x&schedule=latest", "", 403, `over job "teamB-x"`}, // not its schedule's 404
		{"POST", "/jobs/teamB-x/exclude", `{"from_step": 0, "keys": ["k"]}`, 403, `lacks the edit right over job "teamB-x"`},
		{"PUT", "/jobs/teamB-x/schedule", `{"schedule": "0:web-a:1"}`, 403, `over job "teamB-x"`},
		{"POST", "/importance/teamB-x/seal?epoch=0", "", 403, `lacks the feedback right over job "teamB-x"`},
		{"GET", "/jobs/teamB-x/exclude", "", 403, `lacks the read right over job "teamB-x"`},
		{"GET", "/epoch/0?dataset=books", "", 403, `lacks the read right over dataset "books"`},
		{"GET", "/samples/k?dataset=books", "", 403, `over dataset "books"`},
		{"GET", "/epoch/0?mix=web-a:1,books:1", "", 403, `over dataset "books"`},
		{"GET", "/plan?mix_schedule=0:web-a:1,books:1", "", 403, `over dataset "books"`},
		{"GET", "/epoch/0?job=teamA-books&schedule=latest", "", 403, `over dataset "books"`},
		// The schedule stored under a team's job reads a dataset its token
		// does not cover: the schedule is not told (it was answered).
		{"GET", "/jobs/teamA-books/schedule", "", 403, `lacks the read right over dataset "books"`},
		{"POST", "/jobs/teamA-1/exclude?dataset=books", `{"from_step": 0, "keys": ["k"]}`, 403, `lacks the edit right over dataset "books"`},
		{"PUT", "/jobs/teamA-2/schedule", `{"schedule": "0:web-a:1,books:1"}`, 403, `lacks the edit right over dataset "books"`},
		{"POST", "/plan", `{"dataset": "books", "jobs": [{}]}`, 403, `over dataset "books"`},
		{"POST", "/plan", `{"jobs": [{"name": "teamB-x"}]}`, 403, `over job "teamB-x"`},
		{"GET", "/metrics", "", 403, "lacks the admin right; it has read,edit,feedback over datasets web-* and jobs teamA-*"},
		{"GET", "/datasets", "", 200, `"web-a"`},
	}
	for _, tt := range tests {
		resp, b := do(t, tt.method, data.URL+tt.path, []byte(tt.body), "Authorization", "Bearer "+team)
		var e api.Error
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			b = []byte(e.Error)
		}
		if resp.StatusCode != tt.want || !strings.Contains(string(b), tt.says) || strings.Contains(string(b), "sekrit") {
			t.Errorf("%s %s: %d %s; want %d saying %s", tt.method, tt.path, resp.StatusCode, b, tt.want, tt.says)
		}
	}
	if _, b := get(t, data.URL+"/datasets", "Authorization", "Bearer "+team); strings.Contains(string(b), "books") {
		t.Errorf("/datasets lists a dataset out of the token's scope: %s", b)
	}
	if _, b := get(t, data.URL+"/datasets", "Authorization", "Bearer "+adminTok); !strings.Contains(string(b), "books") {
		t.Errorf("/datasets of an admin token: %s", b)
	}
}

// TestScopesOfFigures: /stats and /cluster show a scoped token the
// figures of the jobs and datasets its scope covers alone — jobs and
// epochs whose dataset and job it covers, mixtures all of whose
// components it covers, the index versions of its datasets — and an
// admin token all of them, on a single gateway and on a node of a
// cluster.
//
// The reproduction (issue 80, case 4): a token scoped to jobs teamA-*
// and datasets web-* read every job's and every dataset's figures.
func TestScopesOfFigures(t *testing.T) {
	tokens, err := scope.ParseTokens(strings.NewReader(scopedTokens))
	if err != nil {
		t.Fatal(err)
	}
	web, books := newFixture(t, 2, 4), newFixture(t, 2, 4)
	secret := []byte("a shared secret of the test cluster")
	cl := startCluster(t, web, 2, nil, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "web-a", URL: "file:///web", Store: c.Datasets[0].Store}, {Name: "books", URL: "file:///books", Store: books.store}}
		c.Tokens = tokens
		c.Cluster.Secret = secret
	})
	const adminTok, team = "sekrit-admin-0001", "sekrit-teamA-0005"
	base := cl[0].srv.URL
	for _, q := range []string{"job=teamA-1&dataset=web-a", "job=teamB-x&dataset=web-a", "job=teamA-2&dataset=books", "dataset=books",
		"job=teamA-3&mix=web-a:1,books:1"} {
		if resp, b := get(t, base+"/epoch/0/batch/0?world=2&"+q, "Authorization", "Bearer "+adminTok); resp.StatusCode != 200 {
			t.Fatalf("batch of %s: %d %s", q, resp.StatusCode, b)
		}
	}
	// The nodes probe each other: each names the other's index versions.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var c api.Cluster
		_, b := get(t, base+"/cluster", "Authorization", "Bearer "+adminTok)
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Nodes) == 2 && len(c.Nodes[1-c.Self].Indexes) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer's index versions never shown: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	type figures struct {
		Jobs     []api.JobStat     `json:"jobs"`
		Epochs   []api.EpochStat   `json:"epochs"`
		Mixtures []api.MixStat     `json:"mixtures"`
		Cluster  *api.ClusterStats `json:"cluster"`
	}
	read := func(tok string) (st figures, c api.Cluster) {
		t.Helper()
		for path, v := range map[string]any{"/stats": &st, "/cluster": &c} {
			resp, b := get(t, base+path, "Authorization", "Bearer "+tok)
			if resp.StatusCode != 200 {
				t.Fatalf("%s with %s: %d %s", path, tok, resp.StatusCode, b)
			}
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatal(err)
			}
		}
		return st, c
	}
	// What a figure names: its job and dataset (a mixture's as its
	// requests name it), or a version's dataset.
	named := func(st figures, c api.Cluster) (jobs, datasets, versions map[string]bool) {
		jobs, datasets, versions = map[string]bool{}, map[string]bool{}, map[string]bool{}
		for _, j := range st.Jobs {
			jobs[j.Job], datasets[j.Dataset] = true, true
		}
		for _, e := range st.Epochs {
			jobs[e.Job], datasets[e.Dataset] = true, true
		}
		for _, m := range st.Mixtures {
			for _, comp := range m.Components {
				datasets[comp.Dataset] = true
			}
		}
		for _, v := range []api.Cluster{c, st.Cluster.Cluster} {
			for d := range v.Agreed {
				versions[d] = true
			}
			for _, n := range v.Nodes {
				for d := range n.Indexes {
					versions[d] = true
				}
			}
		}
		return jobs, datasets, versions
	}
	jobs, datasets, versions := named(read(adminTok))
	for _, want := range []string{"teamA-1", "teamB-x", "teamA-2", "", "teamA-3"} {
		if !jobs[want] {
			t.Errorf("an admin token's /stats lacks job %q: %v", want, jobs)
		}
	}
	if !datasets["books"] || !datasets["web-a"] || !versions["books"] || !versions["web-a"] {
		t.Errorf("an admin token's figures lack a dataset: %v, versions of %v", datasets, versions)
	}
	st, c := read(team)
	jobs, datasets, versions = named(st, c)
	if !jobs["teamA-1"] || len(jobs) != 1 {
		t.Errorf("a token of jobs teamA-* over datasets web-* reads the figures of jobs %v; want teamA-1's alone", jobs)
	}
	if !datasets["web-a"] || len(datasets) != 1 {
		t.Errorf("a token of datasets web-* reads the figures of datasets %v; want web-a's alone", datasets)
	}
	if !versions["web-a"] || len(versions) != 1 {
		t.Errorf("a token of datasets web-* reads the index versions of datasets %v in /cluster and /stats; want web-a's alone", versions)
	}
	if len(st.Mixtures) != 0 {
		t.Errorf("a token of datasets web-* reads a mixture over books: %+v", st.Mixtures)
	}
}
