package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

type storedVersion struct {
	Version    string  `json:"version"`
	Previous   string  `json:"previous"`
	FromStep   uint64  `json:"from_step"`
	Schedule   string  `json:"schedule"`
	LatestStep *uint64 `json:"latest_step"`
}

// editSchedule sends PUT (base "") or POST to /jobs/run/schedule and
// returns the status, the version answered and the body.
func editSchedule(t *testing.T, base, sched string, from uint64, prev string) (int, storedVersion, string) {
	t.Helper()
	method := http.MethodPost
	if prev == "" {
		method = http.MethodPut
	}
	body, _ := json.Marshal(map[string]any{"schedule": sched, "from_step": from, "base": prev})
	resp, b := do(t, method, base+"/jobs/run/schedule", body)
	var v storedVersion
	if resp.StatusCode < 300 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, v, string(b)
}

// TestStoredScheduleEdits: the HTTP contract of a schedule stored under a
// job's name (PUT, POST, GET /jobs/NAME/schedule; job=NAME&schedule=):
// each answer's status, and what its body or headers name where only the
// gateway knows it (versions, steps served, the first editable step, a
// dataset not served), from_step a step or "next", an empty schedule. How
// versions chain and why an edit is refused are internal/job/jobsched's
// TestEditChain and api's TestScheduleEdit and TestParseScheduleSaysWhy;
// an edited, resumed run, internal/batch/layout's TestScheduleResumeAfterTwoEdits;
// a stored schedule's plan, internal/job/plans's TestPlanOfASchedule.
func TestStoredScheduleEdits(t *testing.T) {
	m := gatewaytest.NewMix(t)
	base := m.Start(t)
	first := "0:web:0.5,code:0.3,books:0.2"
	st, v1, body := editSchedule(t, base, first, 0, "")
	if st != http.StatusCreated || v1.Version == "" {
		t.Fatalf("PUT: %d %s", st, body)
	}
	// step5 is rank 0's batch at step 5, world 2, under the schedule= q.
	step5 := func(q string) (*http.Response, []byte) {
		return get(t, base+"/epoch/0/batch/5?world=2&job=run&schedule="+q)
	}
	resp, before := step5("latest")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderScheduleVersion) != v1.Version || resp.Header.Get(api.HeaderMixSchedule) != first {
		t.Fatalf("step 5: %d, version %q, schedule %q; want 200 naming %s and %s", resp.StatusCode, resp.Header.Get(api.HeaderScheduleVersion), resp.Header.Get(api.HeaderMixSchedule), v1.Version, first)
	}
	var v2 storedVersion
	for _, e := range []struct {
		sched  string
		from   uint64
		base   string
		status int
		says   string
	}{
		{first, 0, "", http.StatusConflict, v1.Version},
		{"5:web:0.1,code:0.1,books:0.8", 5, v1.Version, http.StatusConflict, "step 5"},
		{"6:web:1,code:1,nope:1", 6, v1.Version, http.StatusBadRequest, "nope"},
		{"6:web:0.6,code:0.3,books:0.1;20~30:web:1,code:0,books:0", 6, v1.Version, http.StatusOK, ""},
		{"8:web:1,code:1,books:1", 8, v1.Version, http.StatusConflict, ""},
		{"25:web:1,code:1,books:1", 25, "v2", http.StatusBadRequest, "ramp"},
	} {
		if e.base == "v2" {
			e.base = v2.Version
		}
		st, v, body := editSchedule(t, base, e.sched, e.from, e.base)
		if st != e.status || !strings.Contains(body, e.says) {
			t.Errorf("edit %q from %d: %d %s; want %d saying %q", e.sched, e.from, st, body, e.status, e.says)
		}
		// A step served is refused naming in a field the first step an
		// edit could start at: the one after step 5.
		var refused api.Error
		if e.says == "step 5" && (json.Unmarshal([]byte(body), &refused) != nil || refused.FirstEditableStep == nil || *refused.FirstEditableStep != 6) {
			t.Errorf("edit from step 5 after step 5 was read: %s; want first_editable_step 6", body)
		}
		if st == http.StatusOK {
			v2 = v
		}
	}
	if v2.Previous != v1.Version || v2.FromStep != 6 {
		t.Fatalf("the edit from step 6: %+v", v2)
	}
	resp, b := get(t, base+"/jobs/run/schedule")
	var cur storedVersion
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &cur) != nil || cur.Version != v2.Version || cur.LatestStep == nil || *cur.LatestStep != 5 {
		t.Fatalf("GET: %d %s", resp.StatusCode, b)
	}
	if resp, b := step5(v1.Version); resp.StatusCode != http.StatusOK || !bytes.Equal(b, before) {
		t.Fatalf("step 5 pinned to the version before the edit: %d, the same bytes %t", resp.StatusCode, bytes.Equal(b, before))
	}
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{"/epoch/0/batch/6?world=2&job=run&schedule=" + v1.Version, http.StatusConflict, v2.Version},
		{"/epoch/0/batch/0?job=nobody&schedule=latest", http.StatusNotFound, "nobody"},
		{"/epoch/0/batch/0?schedule=latest", http.StatusBadRequest, "job="},
		{"/plan?world=2&epochs=3&job=run&schedule=latest", http.StatusOK, "phases"},
	} {
		resp, b := get(t, base+tc.path)
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.says) {
			t.Errorf("%s: %d %.300s; want %d saying %q", tc.path, resp.StatusCode, b, tc.status, tc.says)
		}
		if v := resp.Header.Get(api.HeaderScheduleVersion); tc.status == http.StatusConflict && v != v2.Version {
			t.Errorf("%s: Brand-Schedule-Version %q, want the current %s", tc.path, v, v2.Version)
		}
	}

	// from_step "next": the step after every step served (5), which the
	// answer names; an edit of the version before is a 409 naming the
	// current one in schedule_version; from_step neither a step nor
	// "next", or a first phase not at next, is 400 (jobsched's
	// TestEditNext has the rule). The reproduction: a trainer read
	// latest_step from GET, edited from the step after, and got a 409
	// naming the step in prose only, its loaders having read on.
	send := func(from any, sched, prev string) (int, storedVersion, api.Error) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"schedule": sched, "from_step": from, "base": prev})
		resp, out := do(t, http.MethodPost, base+"/jobs/run/schedule", b)
		var v storedVersion
		var e api.Error
		if resp.StatusCode < 300 {
			_ = json.Unmarshal(out, &v)
		} else {
			_ = json.Unmarshal(out, &e)
		}
		return resp.StatusCode, v, e
	}
	st, v3, e := send("next", "next~+10:web:0,code:1,books:0", v2.Version)
	if st != http.StatusOK || v3.FromStep != 6 || v3.Previous != v2.Version || !strings.HasSuffix(v3.Schedule, ";6~16:web:0,code:1,books:0") {
		t.Fatalf("an edit from the next step: %d %+v %+v; want from step 6", st, v3, e)
	}
	if st, _, e := send("next", "next:web:1,code:1,books:1", v2.Version); st != http.StatusConflict || e.ScheduleVersion != v3.Version {
		t.Fatalf("an edit of the version before: %d %+v; want 409 naming %s in schedule_version", st, e, v3.Version)
	}
	for _, bad := range []struct {
		from  any
		sched string
	}{{"next", "9:web:1,code:1,books:1"}, {"later", "next:web:1,code:1,books:1"}, {-1, "next:web:1,code:1,books:1"}} {
		if st, _, e := send(bad.from, bad.sched, v3.Version); st != http.StatusBadRequest {
			t.Errorf("from_step %v, schedule %q: %d %+v; want 400", bad.from, bad.sched, st, e)
		}
	}
	// An empty first schedule is 400, and the name's first schedule is
	// still to give. The reproduction: PUT {} answered 201 and stored it;
	// every later request of the job then failed with a 500 and a valid
	// PUT with 409 (jobsched's TestEmptyScheduleRefused has the rule).
	for _, body := range []string{`{}`, `null`, `{"schedule": ""}`, `{"schedule": "  "}`} {
		if resp, b := do(t, http.MethodPut, base+"/jobs/fresh/schedule", []byte(body)); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "empty") {
			t.Fatalf("PUT %s: %d %s; want 400 saying the schedule is empty", body, resp.StatusCode, b)
		}
	}
	if resp, b := do(t, http.MethodPut, base+"/jobs/fresh/schedule", []byte(`{"schedule": "0:web:0.5,code:0.5"}`)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a valid first schedule after the refusals: %d %s", resp.StatusCode, b)
	}
	if resp, b := get(t, base+"/epoch/0/batch/0?job=fresh&schedule=latest"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a batch of the job: %d %s", resp.StatusCode, b)
	}
}
