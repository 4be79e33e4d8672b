package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
)

// TestTaskEndpoints is the HTTP contract of task streams (docs/tasks.md):
// each endpoint's status and answer, every refusal a hostile or late
// generator meets, two gateways over one store sharing one plan (one
// closed mid-run, as a node killed), a torn segment read as empty by
// both, and the replay equal to what was served.
func TestTaskEndpoints(t *testing.T) {
	f := newFixture(t, 6, 10) // 60 prompts
	_, a := start(t, f.store, nil)
	_, b := start(t, f.store, nil)
	call := func(srv, method, path string, body any, want int) []byte {
		t.Helper()
		var raw []byte
		if body != nil {
			raw, _ = json.Marshal(body)
		}
		resp, got := do(t, method, srv+path, raw)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, want)
		}
		return got
	}
	decode := func(b []byte, v any) {
		t.Helper()
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	spec := map[string]any{"step": 8, "ahead": 2, "ttl": "300ms", "redraws": 1, "seed": 5}
	call(a.URL, "PUT", "/tasks/rl", spec, http.StatusCreated)
	call(b.URL, "PUT", "/tasks/rl", spec, http.StatusOK)
	call(b.URL, "PUT", "/tasks/rl", map[string]any{"step": 4}, http.StatusConflict)
	call(a.URL, "PUT", "/tasks/bad", map[string]any{"step": 0}, http.StatusBadRequest)
	call(a.URL, "PUT", "/tasks/bad", map[string]any{"step": 4, "policy": "nope"}, http.StatusBadRequest)
	call(a.URL, "GET", "/tasks/none", nil, http.StatusNotFound)

	lease := func(srv, gen string, k int) api.TaskLease {
		var l api.TaskLease
		decode(call(srv, "POST", "/tasks/rl/leases", api.TaskLeaseRequest{Generator: gen, Prompts: k}, http.StatusCreated), &l)
		return l
	}
	l1 := lease(a.URL, "g1", 6)
	l2 := lease(b.URL, "g2", 6)
	held := map[string]bool{}
	for _, l := range []api.TaskLease{l1, l2} {
		for _, p := range l.Prompts {
			if held[p.Key] {
				t.Fatalf("prompt %s leased twice at once", p.Key)
			}
			held[p.Key] = true
		}
	}
	// The lease's bytes are the prompts' samples.
	_, tarBody := get(t, a.URL+"/tasks/rl/leases/"+l1.Lease+"/samples")
	got := readTar(t, tarBody)
	if len(got) != 6 || got[0].key != l1.Prompts[0].Key {
		t.Fatalf("lease samples: %d, first %q; want 6, first %q", len(got), got[0].key, l1.Prompts[0].Key)
	}
	f.verify(t, got, map[string]int{})
	// The window: ahead=2 steps of 8 with the trainer at 0 is 16 prompts.
	l3 := lease(a.URL, "g3", 6)
	resp, body := do(t, "POST", a.URL+"/tasks/rl/leases", []byte(`{"generator":"g4","prompts":1}`))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "ahead of its trainer") {
		t.Fatalf("a lease past the window: %d %s", resp.StatusCode, body)
	}

	results := func(l api.TaskLease, passes int) api.TaskFeedback {
		var fb api.TaskFeedback
		for _, p := range l.Prompts {
			fb.Results = append(fb.Results, api.TaskResult{Key: p.Key, Passes: &passes, N: 4, Version: 1})
		}
		return fb
	}
	var ans api.TaskAnswered
	decode(call(b.URL, "POST", "/tasks/rl/leases/"+l1.Lease+"/feedback", results(l1, 2), http.StatusOK), &ans)
	if ans.Applied != 6 || ans.Counted != 6 || fmt.Sprint(ans.Steps) != "[0]" {
		t.Fatalf("feedback answered %+v", ans)
	}
	decode(call(a.URL, "POST", "/tasks/rl/leases/"+l1.Lease+"/feedback", results(l1, 2), http.StatusOK), &ans)
	if ans.Repeats != 6 || ans.Applied != 0 {
		t.Fatalf("a repeat answered %+v", ans)
	}
	// Zero variance (all pass) is drawn again under redraws=1.
	decode(call(a.URL, "POST", "/tasks/rl/leases/"+l2.Lease+"/feedback", results(l2, 4), http.StatusOK), &ans)
	if ans.Redrawn != 6 || ans.Counted != 0 {
		t.Fatalf("flat groups answered %+v", ans)
	}

	// Hostile answers: each refused, none written.
	var plan api.TaskPlan
	decode(call(a.URL, "GET", "/tasks/rl", nil, http.StatusOK), &plan)
	segs := plan.Segments
	l5 := lease(a.URL, "g5", 2)
	for _, c := range []struct {
		lease string
		body  string
		want  int
	}{
		{l5.Lease, `{"results":[{"key":"nope","passes":1,"n":2}]}`, http.StatusUnprocessableEntity},
		{l5.Lease, `{"results":[{"key":"` + l1.Prompts[0].Key + `","passes":1,"n":2}]}`, http.StatusUnprocessableEntity},
		{l5.Lease, `{"results":[{"key":"` + l5.Prompts[0].Key + `","scores":[0.5,1.5]}]}`, http.StatusUnprocessableEntity},
		{l5.Lease, `{"results":[{"key":"` + l5.Prompts[0].Key + `","passes":3,"n":2}]}`, http.StatusUnprocessableEntity},
		{l5.Lease, `{"results":[{"key":"` + l5.Prompts[0].Key + `"}]}`, http.StatusUnprocessableEntity},
		{l5.Lease, `{"results":[]}`, http.StatusBadRequest},
		{l5.Lease, `{"results":`, http.StatusBadRequest},
		{"0badf00d-1", `{"results":[{"key":"` + l5.Prompts[0].Key + `","passes":1,"n":2}]}`, http.StatusConflict},
		{strings.Split(l5.Lease, "-")[0] + "-999", `{"results":[{"key":"` + l5.Prompts[0].Key + `","passes":1,"n":2}]}`, http.StatusConflict},
		{"x", `{"results":[{"key":"` + l5.Prompts[0].Key + `","passes":1,"n":2}]}`, http.StatusBadRequest},
	} {
		resp, body := do(t, "POST", a.URL+"/tasks/rl/leases/"+c.lease+"/feedback", []byte(c.body))
		if resp.StatusCode != c.want {
			t.Errorf("feedback %s to %s: %d %s, want %d", c.body, c.lease, resp.StatusCode, body, c.want)
		}
	}
	for _, c := range []string{`{"generator":"","prompts":1}`, `{"generator":"g","prompts":0}`, `{"generator":"g","prompts":5000}`, `{"generator":"a\nb","prompts":1}`} {
		if resp, body := do(t, "POST", a.URL+"/tasks/rl/leases", []byte(c)); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("lease %s: %d %s, want 400", c, resp.StatusCode, body)
		}
	}
	decode(call(a.URL, "GET", "/tasks/rl", nil, http.StatusOK), &plan)
	if plan.Segments != segs+1 {
		t.Fatalf("refused requests wrote %d segments", plan.Segments-segs-1)
	}
	if got := metric(t, a.URL, "brand_task_segments_written_total") + metric(t, b.URL, "brand_task_segments_written_total"); got != float64(plan.Segments) {
		t.Fatalf("the nodes count %v segments written, the log holds %d", got, plan.Segments)
	}

	// A generator that leases and never answers: its lease expires and
	// its prompts go to the front; a late answer is refused, naming the
	// deadline.
	time.Sleep(400 * time.Millisecond)
	resp, body = do(t, "POST", b.URL+"/tasks/rl/leases/"+l5.Lease+"/feedback", fmt.Appendf(nil, `{"results":[{"key":%q,"passes":1,"n":2,"counts":true}]}`, l5.Prompts[0].Key))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "expired at") {
		t.Fatalf("a late answer: %d %s", resp.StatusCode, body)
	}
	front := lease(a.URL, "g6", 8)
	var want, gotKeys []string
	for _, p := range append(l3.Prompts, l5.Prompts...) {
		want = append(want, p.Key)
	}
	for _, p := range front.Prompts {
		gotKeys = append(gotKeys, p.Key)
	}
	if fmt.Sprint(gotKeys[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("the lease after two expiries holds %v, want theirs first: %v", gotKeys, want)
	}
	var open api.TaskLeases
	decode(call(b.URL, "GET", "/tasks/rl/leases?generator=g6", nil, http.StatusOK), &open)
	if len(open.Leases) != 1 || open.Leases[0].Lease != front.Lease {
		t.Fatalf("g6's open leases: %+v", open)
	}

	// A step not full is 503; full, it is the counted prompts.
	if resp, body := do(t, "GET", b.URL+"/tasks/rl/steps/1", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("step 1 not full: %d %s", resp.StatusCode, body)
	}
	decode(call(a.URL, "POST", "/tasks/rl/leases/"+front.Lease+"/feedback", results(front, 1), http.StatusOK), &ans)
	var st api.TaskStep
	decode(call(b.URL, "GET", "/tasks/rl/steps/0", nil, http.StatusOK), &st)
	if len(st.Prompts) != 8 || st.Prompts[0].Key != l1.Prompts[0].Key || *st.Prompts[0].Passes != 2 {
		t.Fatalf("step 0: %+v", st)
	}
	call(a.URL, "POST", "/tasks/rl/trainer", api.TaskTrainer{Step: 5}, http.StatusBadRequest)
	call(a.URL, "POST", "/tasks/rl/trainer", api.TaskTrainer{Step: 1}, http.StatusOK)

	// A torn segment in the store, with no second copy: every node
	// refuses the job naming it (502), never reads it as empty; gone, the
	// job goes on.
	decode(call(a.URL, "GET", "/tasks/rl", nil, http.StatusOK), &plan)
	torn := plan.Segments + 1
	key := fmt.Sprintf("_brand/jobs/rl/tasks/log/%016d", torn)
	if _, err := f.store.PutIfAbsent(context.Background(), key, bytes.NewReader([]byte("BTS1 torn")), 9); err != nil {
		t.Fatal(err)
	}
	for _, srv := range []string{a.URL, b.URL} {
		body := call(srv, "POST", "/tasks/rl/leases", api.TaskLeaseRequest{Generator: "g7", Prompts: 1}, http.StatusBadGateway)
		if want := fmt.Sprintf("segment %d of its log is damaged", torn); !strings.Contains(string(body), want) {
			t.Fatalf("%s refused a lease with %s, want it to say %q", srv, body, want)
		}
	}
	if err := f.store.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	lease(b.URL, "g7", 1)
	for _, srv := range []string{a.URL, b.URL} {
		decode(call(srv, "GET", "/tasks/rl", nil, http.StatusOK), &plan)
		if plan.DamagedSegments != 0 {
			t.Fatalf("%s read %d segments from their second copy, want 0", srv, plan.DamagedSegments)
		}
	}

	// A lease asked with a request ID names it, and so do its
	// generator's open leases on either node: a generator whose ask got
	// no answer finds the lease it made by it (the Go client's Lease).
	var asked api.TaskLease
	call(a.URL, "PUT", "/tasks/rq", spec, http.StatusCreated)
	decode(call(a.URL, "POST", "/tasks/rq/leases", api.TaskLeaseRequest{Generator: "g3", Prompts: 1, Request: "ask-1"}, http.StatusCreated), &asked)
	for _, srv := range []string{a.URL, b.URL} {
		var open api.TaskLeases
		decode(call(srv, "GET", "/tasks/rq/leases?generator=g3", nil, http.StatusOK), &open)
		if asked.Request != "ask-1" || len(open.Leases) != 1 || open.Leases[0].Request != "ask-1" || open.Leases[0].Lease != asked.Lease {
			t.Fatalf("a lease asked as ask-1: %+v; g3's open leases on %s: %+v; want both naming the request", asked, srv, open)
		}
	}

	// One node gone: the other goes on, and a replay on either is what
	// they served.
	b.Close()
	lease(a.URL, "g8", 1)
	lines := strings.Split(strings.TrimSpace(string(call(a.URL, "GET", "/tasks/rl/replay", nil, http.StatusOK))), "\n")
	var end api.TaskReplayEnd
	decode([]byte(lines[len(lines)-1]), &end)
	if !end.Equal || end.Diverged != 0 {
		t.Fatalf("replay: %s", lines[len(lines)-1])
	}
	var first struct {
		Lease   string
		Prompts []string
	}
	decode([]byte(lines[0]), &first)
	if first.Lease != l1.Lease || first.Prompts[0] != l1.Prompts[0].Key {
		t.Fatalf("the replay's first lease: %s, served %s %s", lines[0], l1.Lease, l1.Prompts[0].Key)
	}
}

// TestTaskLeaseShownAtItsDeadline: GET /tasks/{job} shows a lease past its
// deadline as held by no one (overdue, not open), and a generator's open
// leases leave it out, though no request has made the plan expire it yet;
// a ttl of 0 is refused as 50 ms is, not read as the default. The
// reproduction: the lease showed as open and its prompts as leased until
// another request arrived, and ttl=0s silently became 60 s.
func TestTaskLeaseShownAtItsDeadline(t *testing.T) {
	f := newFixture(t, 2, 10)
	_, srv := start(t, f.store, nil)
	for _, ttl := range []string{"0s", "0", "-1s", "50ms"} {
		resp, body := do(t, "PUT", srv.URL+"/tasks/bad", []byte(`{"step":4,"ttl":"`+ttl+`"}`))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "ttl=") {
			t.Errorf("ttl %s: %d %s, want 400 naming ttl=", ttl, resp.StatusCode, body)
		}
	}
	const ttl = 2 * time.Second
	resp, body := do(t, "PUT", srv.URL+"/tasks/rl", []byte(`{"step":4,"ttl":"2s"}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "POST", srv.URL+"/tasks/rl/leases", []byte(`{"generator":"g","prompts":3}`))
	leased := time.Now()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("lease: %d %s", resp.StatusCode, body)
	}
	plan := func() api.TaskPlan {
		t.Helper()
		var p api.TaskPlan
		_, b := get(t, srv.URL+"/tasks/rl")
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := func() int {
		t.Helper()
		var ls api.TaskLeases
		_, b := get(t, srv.URL+"/tasks/rl/leases?generator=g")
		if err := json.Unmarshal(b, &ls); err != nil {
			t.Fatal(err)
		}
		return len(ls.Leases)
	}
	p, n := plan(), open()
	if time.Since(leased) < ttl && (p.OpenLeases != 1 || p.Leased != 3 || p.OverdueLeases != 0 || n != 1) {
		t.Fatalf("before its deadline: %d open leases, %d prompts leased, %d overdue; the generator's open: %d; want 1, 3, 0, 1", p.OpenLeases, p.Leased, p.OverdueLeases, n)
	}
	time.Sleep(time.Until(leased.Add(ttl + 200*time.Millisecond)))
	p, n = plan(), open()
	if p.OpenLeases != 0 || p.Leased != 0 || p.OverdueLeases != 1 || p.Overdue != 3 || n != 0 {
		t.Fatalf("past its deadline: %d open leases, %d prompts leased, %d overdue leases of %d prompts; the generator's open: %d; want 0, 0, 1, 3, 0", p.OpenLeases, p.Leased, p.OverdueLeases, p.Overdue, n)
	}
}
