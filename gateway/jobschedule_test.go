package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
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

// stepOf reads global step b of epoch 0 at world 2 under q and returns
// its bodies' hash and the schedule version it names.
func (m *mixFixture) stepOf(t *testing.T, base, q string, b int) (string, string) {
	t.Helper()
	var sums, version string
	for r := range 2 {
		u := fmt.Sprintf("%s/epoch/0/batch/%d?%s&world=2&rank=%d", base, b, q, r)
		resp, _ := get(t, u)
		_, sum := m.readMix(t, u)
		sums += fmt.Sprintf("%x", sum[:8])
		version = resp.Header.Get(api.HeaderScheduleVersion)
	}
	return sums, version
}

// TestStoredScheduleEdits: the HTTP contract of a schedule stored under a
// job's name (PUT, POST, GET /jobs/NAME/schedule; job=NAME&schedule=),
// each answer's status and what its body names: the first PUT is 201
// and a second 409 naming the version; batches name their version
// (Brand-Schedule-Version); an edit from a step served is 409 naming the
// step, a bad edit 400 (another dataset than the job's, a first phase
// not at from_step, inside a ramp), one on a version no longer current
// 409 naming the current one; GET says the latest step served; a request
// pinned to an older version is served where the versions agree (the
// same bytes) and refused (409 naming the current one) where they do
// not; an unknown job is 404, schedule= without job= 400. How versions
// chain and which steps they cover is internal/jobsched's TestEditChain;
// that an edited, resumed run reads what the final schedule reads from
// the start is internal/order's TestScheduleResumeAfterTwoEdits.
func TestStoredScheduleEdits(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	first := "0:web:0.5,code:0.3,books:0.2"
	st, v1, body := editSchedule(t, srv.url, first, 0, "")
	if st != http.StatusCreated || v1.Version == "" {
		t.Fatalf("PUT: %d %s", st, body)
	}
	if st, _, body := editSchedule(t, srv.url, first, 0, ""); st != http.StatusConflict || !strings.Contains(body, v1.Version) {
		t.Fatalf("a second first schedule: %d %s", st, body)
	}
	const job = "job=run&schedule=latest"
	step5, version := m.stepOf(t, srv.url, job, 5)
	if version != v1.Version {
		t.Fatalf("batches name version %q, want %s", version, v1.Version)
	}
	for _, bad := range []struct {
		sched  string
		from   uint64
		status int
		says   string
	}{
		{"5:web:0.1,code:0.1,books:0.8", 5, http.StatusConflict, "step 5"},
		{"6:web:NaN,code:1,books:1", 6, http.StatusBadRequest, "NaN"},
		{"6:web:1,code:1,nope:1", 6, http.StatusBadRequest, "nope"},
		{"7:web:1,code:1,books:1", 6, http.StatusBadRequest, "starts with a phase at that step"},
	} {
		if st, _, body := editSchedule(t, srv.url, bad.sched, bad.from, v1.Version); st != bad.status || !strings.Contains(body, bad.says) {
			t.Errorf("edit %q from %d: %d %s; want %d saying %q", bad.sched, bad.from, st, body, bad.status, bad.says)
		}
	}
	second := "6:web:0.6,code:0.3,books:0.1;20~30:web:1,code:0,books:0"
	st, v2, body := editSchedule(t, srv.url, second, 6, v1.Version)
	if st != http.StatusOK || v2.Previous != v1.Version || v2.FromStep != 6 {
		t.Fatalf("edit from step 6: %d %s", st, body)
	}
	for _, bad := range []struct{ sched, base, says string }{
		{"8:web:1,code:1,books:1", v1.Version, v2.Version},
		{"25:web:1,code:1,books:1", v2.Version, "ramp"},
	} {
		from, _ := strconv.ParseUint(strings.Split(bad.sched, ":")[0], 10, 64)
		if st, _, body := editSchedule(t, srv.url, bad.sched, from, bad.base); st/100 != 4 || !strings.Contains(body, bad.says) {
			t.Errorf("edit %q on %s: %d %s; want a refusal saying %q", bad.sched, bad.base, st, body, bad.says)
		}
	}
	resp, b := get(t, srv.url+"/jobs/run/schedule")
	var cur storedVersion
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &cur) != nil || cur.Version != v2.Version || cur.LatestStep == nil || *cur.LatestStep != 5 {
		t.Fatalf("GET: %d %s", resp.StatusCode, b)
	}
	for _, q := range []string{job, "job=run&schedule=" + v2.Version, "job=run&schedule=" + v1.Version} {
		if sum, _ := m.stepOf(t, srv.url, q, 5); sum != step5 {
			t.Fatalf("%s: step 5, before the edit, changed", q)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{"/epoch/0/batch/6?world=2&job=run&schedule=" + v1.Version, http.StatusConflict, v2.Version},
		{"/epoch/0/batch/0?job=nobody&schedule=latest", http.StatusNotFound, "nobody"},
		{"/epoch/0/batch/0?schedule=latest", http.StatusBadRequest, "job="},
	} {
		if resp, b := get(t, srv.url+tc.path); resp.StatusCode != tc.status || !strings.Contains(string(b), tc.says) {
			t.Errorf("%s: %d %s; want %d saying %q", tc.path, resp.StatusCode, b, tc.status, tc.says)
		}
	}
}
