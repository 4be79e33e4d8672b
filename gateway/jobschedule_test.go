package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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

// readRange reads global batches [from, to) of epoch at world ranks
// under q, and returns their samples in epoch order, each batch's body
// hashes and the schedule version each named.
func (m *mixFixture) readRange(t *testing.T, base, q string, epoch, from, to, world int) ([]mixSample, []string, []string) {
	t.Helper()
	var out []mixSample
	var sums, versions []string
	for b := from; b < to; b++ {
		for r := range world {
			u := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&world=%d&rank=%d", base, epoch, b, q, world, r)
			resp, body := get(t, u)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", u, resp.StatusCode, body)
			}
			got, sum := m.readMix(t, u)
			out = append(out, got...)
			sums = append(sums, fmt.Sprintf("%x", sum[:8]))
			versions = append(versions, resp.Header.Get(api.HeaderScheduleVersion))
		}
	}
	return out, sums, versions
}

// TestStoredScheduleEdits: a schedule stored under a job's name, read
// with job=NAME&schedule=, and edited twice mid-run. Each edit leaves
// every step before it byte for byte, is refused from a step served
// (409 naming it) or on a version that is no longer current (409 naming
// the current one), and a request pinned to an older version is served
// where the versions agree and refused (409) where they do not. The
// edited run reads exactly what a run of the final schedule from the
// start reads; resumed after the two edits at another world size, it
// reads that too; and within each epoch no component's sample is served
// twice in one pass.
func TestStoredScheduleEdits(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	const world = 4 // K = 32: 14 steps an epoch
	first := "0:web:0.5,code:0.3,books:0.2"
	st, v1, body := editSchedule(t, srv.url, first, 0, "")
	if st != http.StatusCreated || v1.Version == "" {
		t.Fatalf("PUT: %d %s", st, body)
	}
	if st, _, body := editSchedule(t, srv.url, first, 0, ""); st != http.StatusConflict || !strings.Contains(body, v1.Version) {
		t.Fatalf("a second first schedule: %d %s", st, body)
	}
	job := "job=run&schedule=latest"
	// Steps 0–5 under v1.
	head, headSums, vs := m.readRange(t, srv.url, job, 0, 0, 6, world)
	if vs[0] != v1.Version {
		t.Fatalf("batches name version %q, want %s", vs[0], v1.Version)
	}
	// An edit from a step served: 409 naming step 5.
	if st, _, body := editSchedule(t, srv.url, "5:web:0.1,code:0.1,books:0.8", 5, v1.Version); st != http.StatusConflict || !strings.Contains(body, "step 5") {
		t.Fatalf("an edit from step 5 after step 5 was read: %d %s", st, body)
	}
	// Bad edits: refused, the schedule unchanged.
	for _, bad := range []struct {
		sched  string
		status int
	}{
		{"6:web:NaN,code:1,books:1", http.StatusBadRequest},
		{"6:web:0,code:0,books:0", http.StatusBadRequest},
		{"6:web:1,code:1,nope:1", http.StatusBadRequest},  // another dataset than the job's
		{"7:web:1,code:1,books:1", http.StatusBadRequest}, // its first phase not at from_step
	} {
		if st, _, body := editSchedule(t, srv.url, bad.sched, 6, v1.Version); st != bad.status {
			t.Errorf("edit %q: %d %s; want %d", bad.sched, st, body, bad.status)
		}
	}
	second := "6:web:0.6,code:0.3,books:0.1;20~30:web:1,code:0,books:0"
	st, v2, body := editSchedule(t, srv.url, second, 6, v1.Version)
	if st != http.StatusOK || v2.Previous != v1.Version || v2.FromStep != 6 {
		t.Fatalf("edit from step 6: %d %s", st, body)
	}
	// A racing edit on v1: 409 naming v2; the stored schedule stays v2.
	if st, _, body := editSchedule(t, srv.url, "8:web:1,code:1,books:1", 8, v1.Version); st != http.StatusConflict || !strings.Contains(body, v2.Version) {
		t.Fatalf("an edit racing on v1: %d %s", st, body)
	}
	resp, b := get(t, srv.url+"/jobs/run/schedule")
	var cur storedVersion
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &cur) != nil || cur.Version != v2.Version || cur.LatestStep == nil || *cur.LatestStep != 5 {
		t.Fatalf("GET: %d %s", resp.StatusCode, b)
	}
	// Steps before 6: the same bytes under v2, and under v1 pinned.
	for _, q := range []string{job, "job=run&schedule=" + v2.Version, "job=run&schedule=" + v1.Version} {
		_, sums, _ := m.readRange(t, srv.url, q, 0, 0, 6, world)
		if fmt.Sprint(sums) != fmt.Sprint(headSums) {
			t.Fatalf("%s: steps before the edit changed", q)
		}
	}
	// v1 pinned for step 6: 409 naming v2.
	resp, b = get(t, fmt.Sprintf("%s/epoch/0/batch/6?job=run&schedule=%s&world=%d", srv.url, v1.Version, world))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), v2.Version) {
		t.Fatalf("step 6 under v1: %d %s", resp.StatusCode, b)
	}
	// The rest of epoch 0 and epoch 1's steps 14–17 under v2, then a
	// second edit from step 18.
	rest0, _, _ := m.readRange(t, srv.url, job, 0, 6, 14, world)
	head1, _, _ := m.readRange(t, srv.url, job, 1, 0, 4, world)
	third := "18:web:0.2,code:0.7,books:0.1"
	if st, _, body := editSchedule(t, srv.url, third, 17, v2.Version); st != http.StatusConflict || !strings.Contains(body, "step 17") {
		t.Fatalf("an edit from step 17 after it was read: %d %s", st, body)
	}
	// 18 is inside v2's ramp [20, 30)? No: before it. 25 would be.
	if st, _, body := editSchedule(t, srv.url, "25:web:1,code:1,books:1", 25, v2.Version); st != http.StatusBadRequest || !strings.Contains(body, "ramp") {
		t.Fatalf("an edit inside the ramp: %d %s", st, body)
	}
	st, v3, body := editSchedule(t, srv.url, third, 18, v2.Version)
	if st != http.StatusOK {
		t.Fatalf("edit from step 18: %d %s", st, body)
	}
	// Resume at world 2 (the same mix_block) at epoch 1's global batch 4,
	// pinned to v3, through epoch 2.
	resumed := fmt.Sprintf("job=run&schedule=%s&mix_block=32", v3.Version)
	rest1, _, _ := m.readRange(t, srv.url, resumed+"&offset=128", 1, 0, 20, 2)
	e2, _, _ := m.readRange(t, srv.url, resumed, 2, 0, 28, 2)
	edited := append(append(append(append(head, rest0...), head1...), rest1...), e2...)

	// The uninterrupted run: the final schedule from the start, world 4.
	whole := "mix_schedule=" + url.QueryEscape(v3.Schedule)
	var plain []mixSample
	for e := range 3 {
		s, _, _ := m.readRange(t, srv.url, whole, e, 0, 14, world)
		plain = append(plain, s...)
	}
	if len(edited) != len(plain) || fmt.Sprint(edited) != fmt.Sprint(plain) {
		t.Fatalf("the edited, resumed run read %d samples, not the %d of the final schedule's run", len(edited), len(plain))
	}
	if v3.Schedule != "0:web:0.5,code:0.3,books:0.2;6:web:0.6,code:0.3,books:0.1;18:web:0.2,code:0.7,books:0.1" {
		t.Fatalf("v3 is %q", v3.Schedule)
	}
	// No component's sample twice in a pass: each stream's consecutive
	// runs of its dataset's size hold distinct samples.
	sizes := []int{300, 120, 20}
	streams := make([][]string, 3)
	for _, s := range edited {
		streams[s.comp] = append(streams[s.comp], s.key)
	}
	for i, keys := range streams {
		for p := 0; p < len(keys); p += sizes[i] {
			seen := map[string]bool{}
			for _, k := range keys[p:min(p+sizes[i], len(keys))] {
				if seen[k] {
					t.Fatalf("%s: sample %s twice in one pass", m.names[i], k)
				}
				seen[k] = true
			}
		}
	}
	// Unknown jobs and versions.
	resp, b = get(t, srv.url+"/epoch/0/batch/0?job=nobody&schedule=latest")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown job's schedule: %d %s", resp.StatusCode, b)
	}
	resp, b = get(t, srv.url+"/epoch/0/batch/0?schedule=latest")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("schedule= without job=: %d %s", resp.StatusCode, b)
	}
}
