package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// testSchedule changes the fixture's mixture at step 5 and ramps to web
// alone over steps [20, 30) (internal/order's TestScheduleContract has
// what its batches hold).
const testSchedule = "0:web:0.5,code:0.3,books:0.2;5:web:0.2,code:0.2,books:0.6;20~30:web:1,code:0,books:0"

// TestScheduleErrors: a bad schedule is refused with the status that says
// why and a body naming the fault: one the parser refuses (each fault and
// its words: api's TestParseScheduleRejects and TestParseScheduleSaysWhy),
// a dataset not served, and mix= beside mix_schedule=.
func TestScheduleErrors(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	for _, tc := range []struct {
		query  string
		status int
		says   string
	}{
		{"mix_schedule=" + url.QueryEscape("0:web:1;9:web:2;4:web:1"), http.StatusBadRequest, "increasing step order"},
		{"mix_schedule=" + url.QueryEscape("0:web:1,nope:1"), http.StatusNotFound, "nope"},
		{"mix_schedule=0:web:1&mix=web:1", http.StatusBadRequest, "mix"},
	} {
		resp, body := get(t, srv.url+"/epoch/0/batch/0?"+tc.query)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %.200s; want %d saying %q", tc.query, resp.StatusCode, body, tc.status, tc.says)
		}
	}
}

// TestSchedulePlan: /plan takes a stored schedule (job=J&schedule=latest)
// as it takes one given (internal/plans's TestPlanOfASchedule has what it
// reports): its three phases.
func TestSchedulePlan(t *testing.T) {
	m := newMixFixture(t)
	srv := m.start(t, nil)
	if resp, body := do(t, http.MethodPut, srv.url+"/jobs/planned/schedule", []byte(`{"schedule": "`+testSchedule+`"}`)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	var plan struct {
		Mix struct {
			Phases []struct {
				Steps int `json:"steps"`
			} `json:"phases"`
		} `json:"mix"`
	}
	resp, body := get(t, srv.url+"/plan?world=4&epochs=3&job=planned&schedule=latest")
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &plan) != nil {
		t.Fatalf("%d %.300s", resp.StatusCode, body)
	}
	if ph := plan.Mix.Phases; len(ph) != 3 || ph[0].Steps != 5 || ph[1].Steps != 15 || ph[2].Steps != 22 {
		t.Fatalf("phases %+v", ph)
	}
}
