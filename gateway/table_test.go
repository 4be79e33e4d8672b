package gateway_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/job/features"
)

// tableParams are the parameters that name each feature a request can
// name (the others are the server's: features.Def.Resolved), over a gateway
// of datasets "other" and "third" of tar chunks (and "test", served in
// place, for the features only the server knows). balance-bytes and
// balance-cost are one parameter's values: no request names both.
var tableParams = map[features.Feature]string{
	features.Dataset:    "dataset=other",
	features.Mix:        "mix=other:1,third:1",
	features.Schedule:   "mix_schedule=0:other:1,third:1",
	features.Index:      "index=0123456789abcdef",
	features.Importance: "sampling=importance&job=pairs",
	features.Samples:    "",
	features.Tokens:     "seq=16",
	features.Clips:      "clip=4",
	features.Runs:       "run=2",
	features.Transform:  "transform=imagenet-train",
	features.Columns:    "columns=line",
	features.Locality:   "locality=true",
	features.BalanceB:   "balance=bytes",
	features.BalanceC:   "balance=attention",
}

// answer is an endpoint's status and, for an error, its message.
type answer struct {
	status int
	msg    string
}

func (a answer) String() string { return fmt.Sprintf("%d %q", a.status, a.msg) }

// answerOf reads an answer's status and error message.
func answerOf(t *testing.T, resp *http.Response, body []byte) answer {
	t.Helper()
	a := answer{status: resp.StatusCode}
	if resp.StatusCode >= 300 {
		var e api.Error
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("an error that is not the gateway's JSON: %d %s", resp.StatusCode, body)
		}
		a.msg = e.Error
	}
	return a
}

// refusalOf is the table's answer to features s: a refusal (400 and its
// message), or the zero answer where it takes them.
func refusalOf(err error) answer {
	if err == nil {
		return answer{}
	}
	return answer{status: http.StatusBadRequest, msg: err.Error()}
}

// TestTableOnEveryEndpoint holds every entry point to the one table of
// which features go together (internal/job/features): for every pair of
// features, on every endpoint where a request can name both — /epoch/N,
// /epoch/N/batch/M, /plan, POST /jobs/{job}/exclude and /append (whose
// own feature the edit is) and PUT /jobs/{job}/schedule (a job's stored
// edits are its features) — a refused pair is answered 400 with the
// table's message, the same on each; a pair the table takes is never
// answered with a refusal of the table, and every endpoint that reads
// the job answers it alike (a plan that the planner does not model: 501
// with the table's reason). A job's stored edits count as its features:
// a job with an exclusion or an append read as a mixture or a schedule
// is refused, not served without them.
func TestTableOnEveryEndpoint(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	other, third := newFixture(t, 4, 6), newFixture(t, 3, 5)
	_, srv := start(t, st, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "test", URL: "file:///test", Store: st, Formats: []format.Format{formattest.Lines{}}},
			{Name: "other", URL: "file:///other", Store: other.store}, {Name: "third", URL: "file:///third", Store: third.store}}
		c.DefaultDataset = "other"
	})
	const shape = "batch_size=4&world=1&seed=3"
	read := func(path, q string) answer {
		resp, body := get(t, srv.URL+path+"?"+q)
		return answerOf(t, resp, body)
	}
	post := func(path, q, body string) answer {
		resp, b := do(t, http.MethodPost, srv.URL+path+"?"+q, []byte(body), "Content-Type", "application/json")
		return answerOf(t, resp, b)
	}
	defs := features.Features()
	refused, composed, edits := 0, 0, 0
	for i, a := range defs {
		for _, b := range defs[i+1:] {
			cell := features.Lookup(a.Name, b.Name)
			pa, okA := tableParams[a.Name]
			pb, okB := tableParams[b.Name]
			if !okA || !okB || a.Name == features.BalanceB && b.Name == features.BalanceC {
				continue // a feature only the server knows (below), or two values of one parameter
			}
			q := strings.Trim(strings.Join([]string{shape, pa, pb}, "&"), "&")
			v, err := url.ParseQuery(q)
			if err != nil {
				t.Fatal(err)
			}
			want := refusalOf(features.CheckParams(v))
			if cell.Verdict == features.Refuse {
				refused++
				// Each refused pair is the table's: its own message, or a
				// group of exclusive parameters' (two sources named).
				if want.msg != features.ErrIncompatible.Error()+": "+cell.Message && !strings.Contains(want.msg, "a job reads one source") {
					t.Errorf("%s × %s: the table's check of %q says %q, not the pair's %q", a.Name, b.Name, q, want.msg, cell.Message)
				}
			} else {
				composed++
			}
			got := map[string]answer{
				"/epoch/0":         read("/epoch/0", q),
				"/epoch/0/batch/0": read("/epoch/0/batch/0", q),
				"/plan":            read("/plan", q),
			}
			for path, g := range got {
				switch {
				case want.status != 0 && g != want:
					t.Errorf("%s × %s on %s?%s: %v; want the table's %v", a.Name, b.Name, path, q, g, want)
				case want.status == 0 && strings.HasPrefix(g.msg, features.ErrIncompatible.Error()):
					t.Errorf("%s × %s on %s?%s: %v; the table takes the pair", a.Name, b.Name, path, q, g)
				}
			}
			// /epoch and its batch read the same job: one answer (a batch
			// past the epoch's end aside).
			if e, bt := got["/epoch/0"], got["/epoch/0/batch/0"]; e.status >= 300 && e != bt {
				t.Errorf("%s × %s: /epoch %v and its batch %v answer the job apart", a.Name, b.Name, e, bt)
			}
			if p := got["/plan"]; want.status == 0 && got["/epoch/0"].status == http.StatusOK && p.status != http.StatusOK {
				if err := features.Detect(v).CheckPlan(); err == nil || p.status != http.StatusNotImplemented || p.msg != err.Error() {
					t.Errorf("%s × %s: /epoch serves %q; /plan %v (the table's plan note: %v)", a.Name, b.Name, q, p, err)
				}
			}
			// The edits of a job of each feature: the edit's kind is its
			// feature too, checked once the request's own parameters are.
			edits++
			for _, edit := range []struct {
				path, body string
				kind       features.Feature
			}{
				{fmt.Sprintf("/jobs/e%d/exclude", edits), `{"from_step": 100, "keys": ["class0/sample00003"]}`, features.Exclusion},
				{fmt.Sprintf("/jobs/e%d/append", edits), `{"from_step": 100, "index": "0123456789abcdef"}`, features.Append},
			} {
				if a.Name == features.Importance || b.Name == features.Importance {
					continue // job= is the importance job's name: the path's must be it
				}
				w := want
				if w.status == 0 {
					w = refusalOf(features.Detect(v).With(edit.kind).Check())
				}
				g := post(edit.path, q, edit.body)
				if w.status != 0 && g != w {
					t.Errorf("%s × %s with POST %s?%s: %v; want the table's %v", a.Name, b.Name, edit.path, q, g, w)
				}
				if w.status == 0 && strings.HasPrefix(g.msg, features.ErrIncompatible.Error()) {
					t.Errorf("%s × %s with POST %s?%s: %v; the table takes it", a.Name, b.Name, edit.path, q, g)
				}
			}
		}
	}
	if refused == 0 || composed == 0 {
		t.Fatalf("%d refused and %d composed pairs tried", refused, composed)
	}
	// An edit's own feature beside each feature a request names.
	for _, f := range defs {
		p, ok := tableParams[f.Name]
		if !ok || f.Name == features.Importance {
			continue
		}
		for _, edit := range []features.Feature{features.Exclusion, features.Append} {
			want := refusalOf(features.Detect(mustQuery(t, shape+"&"+p)).With(edit).Check())
			cell := features.Lookup(f.Name, edit)
			if cell.Verdict == features.Refuse && want.msg != features.ErrIncompatible.Error()+": "+cell.Message {
				t.Errorf("%s × %s: the edit is refused with %q, not the pair's", f.Name, edit, want.msg)
			}
		}
	}

	// The features only the server knows. A job's stored exclusion, read
	// as a mixture or a schedule under its name, on every endpoint that
	// reads it: the table's refusal, never the job served without it.
	if g := post("/jobs/stored/exclude", "dataset=test&"+shape, `{"from_step": 50, "keys": ["data/f0/1"]}`); g.status != http.StatusCreated {
		t.Fatalf("an exclusion: %v", g)
	}
	for _, tc := range []struct {
		source features.Feature
		q      string
	}{
		{features.Mix, "mix=test:1,other:1&job=stored&" + shape},
		{features.Schedule, "mix_schedule=0:other:1,test:1&job=stored&" + shape},
	} {
		want := refusalOf(features.Refusal(features.Lookup(tc.source, features.Exclusion)))
		for _, path := range []string{"/epoch/0", "/epoch/0/batch/0", "/plan"} {
			if g := read(path, tc.q); g != want {
				t.Errorf("a job with an exclusion read as a %s, %s: %v; want %v", tc.source, path, g, want)
			}
		}
		if g := post("/jobs/stored/append", tc.q, `{"from_step": 100, "index": "0123456789abcdef"}`); g != want && g != refusalOf(features.Refusal(features.Lookup(tc.source, features.Append))) {
			t.Errorf("an append of a job with an exclusion, as a %s: %v", tc.source, g)
		}
	}
	// A stored schedule of that job is refused; and an exclusion of a job
	// that keeps a schedule.
	want := refusalOf(features.Refusal(features.Lookup(features.Schedule, features.Exclusion)))
	if resp, b := do(t, http.MethodPut, srv.URL+"/jobs/stored/schedule", []byte(`{"schedule": "0:test:1,other:1", "from_step": 0}`)); answerOf(t, resp, b) != want {
		t.Errorf("a schedule of a job with an exclusion: %d %s; want %v", resp.StatusCode, b, want)
	}
	if resp, b := do(t, http.MethodPut, srv.URL+"/jobs/scheduled/schedule", []byte(`{"schedule": "0:test:1,other:1", "from_step": 0}`)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a schedule: %d %s", resp.StatusCode, b)
	}
	if g := post("/jobs/scheduled/exclude", "dataset=test&"+shape, `{"from_step": 50, "keys": ["data/f0/1"]}`); g != want {
		t.Errorf("an exclusion of a job that keeps a schedule: %v; want %v", g, want)
	}
	// A dataset served in place, balanced by bytes.
	if g, want := read("/epoch/0", "dataset=test&balance=bytes&"+shape), refusalOf(features.Refusal(features.Lookup(features.InPlace, features.BalanceB))); g != want {
		t.Errorf("balance=bytes on a dataset served in place: %v; want %v", g, want)
	}
	if g := read("/epoch/0", "dataset=other&balance=bytes&"+shape); g.status != http.StatusOK {
		t.Errorf("balance=bytes on a dataset of tar chunks: %v", g)
	}
	// A plan's own: a resize, and several nodes.
	for _, f := range []features.Feature{features.Mix, features.Schedule, features.Importance, features.Tokens, features.Clips} {
		want := refusalOf(features.Refusal(features.Lookup(f, features.Resize)))
		if g := read("/plan", tableParams[f]+"&nodes_after=2&"+shape); g != want {
			t.Errorf("a resize of a %s job: %v; want %v", f, g, want)
		}
	}
	if g := read("/plan", "dataset=other&nodes_after=2&"+shape); g.status != http.StatusOK {
		t.Errorf("a resize of a job of one dataset: %v", g)
	}
	// A plan of several nodes names the assignment the job gets: balance=
	// and locality=false take none by locality (a plan used to report
	// locality for a balanced job).
	for q, want := range map[string]string{
		"dataset=other&nodes=3&world=4&batch_size=2":                   api.AssignLocality,
		"dataset=other&nodes=3&world=4&batch_size=2&balance=bytes":     api.AssignBalance,
		"dataset=other&nodes=3&world=4&batch_size=2&locality=false":    api.AssignPlain,
		"dataset=other&nodes=3&world=4&batch_size=2&seq=8&mix=x:1,y:1": "", // refused, or not planned: no assignment
	} {
		resp, body := get(t, srv.URL+"/plan?"+q)
		var p struct{ Assignment string }
		if resp.StatusCode == http.StatusOK && (json.Unmarshal(body, &p) != nil || p.Assignment != want) || resp.StatusCode != http.StatusOK && want != "" {
			t.Errorf("/plan?%s: %s, assignment %q; want %q", q, resp.Status, p.Assignment, want)
		}
	}
	// An importance job on several nodes is not planned, its first epoch
	// (no snapshot yet) as every later one: the table's cell.
	notPlanned := answer{status: http.StatusNotImplemented, msg: features.Of(features.Importance, features.Cluster).CheckPlan().Error()}
	if g := read("/plan", "dataset=other&nodes=3&sampling=importance&job=imp&"+shape); g != notPlanned {
		t.Errorf("a plan of 3 nodes of an importance job's first epoch: %v; want %v", g, notPlanned)
	}
}

func mustQuery(t *testing.T, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTableRulesOnEveryEndpoint: every rule the clients read
// (python/brand/compat.json, the table published) is one the server
// applies, on every endpoint that reads a job — /epoch/N, a batch, /plan
// and the edit endpoints — a request meeting it answered 400 with the
// rule's message; and the server applies no rule the file lacks (it is
// the table's, rule for rule).
func TestTableRulesOnEveryEndpoint(t *testing.T) {
	b, err := os.ReadFile("../python/brand/compat.json")
	if err != nil {
		t.Fatal(err)
	}
	var published features.Published
	if err := json.Unmarshal(b, &published); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(published.Rules) != fmt.Sprint(features.Rules()) {
		t.Fatalf("compat.json's rules %v are not the table's %v (go test ./internal/job/features -update)", published.Rules, features.Rules())
	}
	other, third := newFixture(t, 4, 6), newFixture(t, 3, 5)
	_, srv := start(t, other.store, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "other", URL: "file:///other", Store: other.store},
			{Name: "third", URL: "file:///third", Store: third.store}}
		c.DefaultDataset = "other"
	})
	// A parameter naming each feature a rule holds, valid for its
	// parser, and a value for each parameter a rule names.
	named := map[features.Feature]string{
		features.Mix:        "mix=other:1,third:1",
		features.Schedule:   "mix_schedule=0:other:1,third:1",
		features.Importance: "sampling=importance",
		features.Tokens:     "seq=16",
		features.Vision:     "seq=16&vision=size:28x28,patch:14,image:1",
		features.Clips:      "delta_timestamps=observation.image:0,0.1",
		features.BalanceC:   "balance=vision",
		features.Buckets:    "buckets=32x32",
	}
	values := map[string]string{api.ParamScheduleVersion: "latest", api.ParamEOS: "2", api.ParamStride: "2",
		api.ParamFPS: "5", api.ParamStep: "3", api.ParamClipStart: "first", api.ParamBatchSize: "4", api.ParamBudget: "4096",
		api.ParamDeltaTimestamps: "observation.image:0,0.1", api.ParamClip: "4", api.ParamGOPWindow: "2"}
	const shape = "batch_size=4&world=1&seed=3"
	for _, r := range published.Rules {
		v := mustQuery(t, shape)
		if slices.Contains(r.Features, features.Buckets) {
			v.Del(api.ParamBatchSize) // a bucket job gives none (its rule is one of these)
		}
		add := func(q string) {
			for k, x := range mustQuery(t, q) {
				v[k] = x
			}
		}
		for _, f := range r.Features {
			q, ok := named[f]
			if !ok {
				t.Fatalf("rule %v: no parameter here names %s", r, f)
			}
			add(q)
		}
		param := ""
		if len(r.Given) > 0 {
			p := r.Given[0]
			param = p.Name
			v.Set(p.Name, cmp.Or(p.Value, values[p.Name]))
		}
		if param == api.ParamGOPWindow {
			// A clip bucket job: clips bucketed by HxWxT.
			add("buckets=32x32x8&clip=8")
		}
		// And what a companion given needs (eos= a token job).
		for _, c := range features.Companions() {
			given := slices.ContainsFunc(c.Params, func(p string) bool { return v.Get(p) != "" && (c.Value == "" || v.Get(p) == c.Value) })
			if given && !slices.ContainsFunc(c.Needs, features.Detect(v).Has) {
				add(named[c.Needs[0]])
			}
		}
		want := answer{status: http.StatusBadRequest, msg: r.Refusal(param).Error()}
		if got := refusalOf(features.CheckParams(v)); got != want {
			t.Fatalf("rule %v: the table's check of %s says %v; want %v", r, v.Encode(), got, want)
		}
		q := v.Encode()
		for path, body := range map[string]string{
			"/epoch/0": "", "/epoch/0/batch/0": "", "/plan": "",
			"/jobs/rules/exclude": `{"from_step": 100, "keys": ["class0/sample00003"]}`,
			"/jobs/rules/append":  `{"from_step": 100, "index": "0123456789abcdef"}`,
		} {
			var resp *http.Response
			var b []byte
			if body == "" {
				resp, b = get(t, srv.URL+path+"?"+q)
			} else {
				resp, b = do(t, http.MethodPost, srv.URL+path+"?"+q, []byte(body), "Content-Type", "application/json")
			}
			if got := answerOf(t, resp, b); got != want {
				t.Errorf("rule %v on %s?%s: %v; want %v", r, path, q, got, want)
			}
		}
	}
}
