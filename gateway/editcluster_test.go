package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/edits"
	"github.com/brandgw/brand/s3backend"
)

// TestEditsFromAStepAnotherNodeServed: one rule for every edit on a
// cluster. On a cluster of three, a step one node served is refused to
// an edit posted to another — an exclusion, an append and a schedule
// edit alike — 409 naming the first step an edit could start at (the
// one after every step any member served); and an edit from that step is
// made. Before the rule was one, an exclusion or an append asked only the
// node it was posted to, which had served nothing, and was made.
func TestEditsFromAStepAnotherNodeServed(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	cl := startCluster(t, &fixture{store: st.(*s3backend.Local)}, 3, nil, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
	})
	// 120 samples, steps of 4: node 1 alone serves the job's steps 0..4.
	const shape = "dataset=test&seed=7&window=4&batch_size=4&world=1"
	resp, body := get(t, cl[0].srv.URL+"/epoch/0/batch/0?"+shape)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s", resp.Status, body)
	}
	v := resp.Header.Get("Brand-Index")
	job := shape + "&index=" + v + "&job=run"
	for m := range 5 {
		if resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", cl[1].srv.URL, m, job)); resp.StatusCode != http.StatusOK {
			t.Fatalf("step %d: %s %s", m, resp.Status, body)
		}
	}
	refused := func(what string, resp *http.Response, body []byte, next uint64) {
		t.Helper()
		var e api.Error
		if resp.StatusCode != http.StatusConflict || json.Unmarshal(body, &e) != nil || e.FirstEditableStep == nil || *e.FirstEditableStep != next {
			t.Errorf("%s from a step node 1 served, posted to another node: %s %s; want 409 naming step %d", what, resp.Status, body, next)
		}
	}
	exclude := func(node, step int) (*http.Response, []byte) {
		return postJSON(t, cl[node].srv.URL+"/jobs/run/exclude?"+job, fmt.Sprintf(`{"from_step": %d, "keys": ["data/f1/3"]}`, step), nil)
	}
	resp, body = exclude(0, 2)
	refused("an exclusion", resp, body, 5)
	var x api.StoredExclusion
	if resp, body := postJSON(t, cl[2].srv.URL+"/jobs/run/exclude?"+job, `{"from_step": 5, "keys": ["data/f1/3"]}`, &x); resp.StatusCode != http.StatusCreated {
		t.Fatalf("an exclusion from step 5: %s %s", resp.Status, body)
	}

	// Node 1 serves steps 5..7, under the exclusion (once it has read it).
	time.Sleep(chain.Refresh)
	for m := 5; m < 8; m++ {
		if resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", cl[1].srv.URL, m, job)); resp.StatusCode != http.StatusOK {
			t.Fatalf("step %d: %s %s", m, resp.Status, body)
		}
	}
	appendLines(t, st)
	for _, n := range cl {
		if _, err := n.g.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	_, body = get(t, cl[0].srv.URL+"/datasets")
	var dss struct {
		Datasets []struct{ Index string } `json:"datasets"`
	}
	if err := json.Unmarshal(body, &dss); err != nil || len(dss.Datasets) != 1 || dss.Datasets[0].Index == v {
		t.Fatalf("after the append, /datasets: %s", body)
	}
	grown := dss.Datasets[0].Index
	appendFrom := func(node, step int) (*http.Response, []byte) {
		return postJSON(t, cl[node].srv.URL+"/jobs/run/append?"+job, fmt.Sprintf(`{"from_step": %d, "index": %q, "previous": %q}`, step, grown, x.Version), nil)
	}
	resp, body = appendFrom(0, 6)
	refused("an append", resp, body, 8)
	if resp, body := appendFrom(2, 8); resp.StatusCode != http.StatusCreated {
		t.Fatalf("an append from step 8, after the exclusion: %s %s", resp.Status, body)
	}

	// A schedule's steps, served by node 1 alone.
	if resp, b := do(t, http.MethodPut, cl[0].srv.URL+"/jobs/mixed/schedule", []byte(`{"schedule": "0:test:1", "from_step": 0}`)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a schedule: %d %s", resp.StatusCode, b)
	}
	var sv struct{ Version string }
	_, b := get(t, cl[0].srv.URL+"/jobs/mixed/schedule")
	if err := json.Unmarshal(b, &sv); err != nil || sv.Version == "" {
		t.Fatalf("the schedule: %s", b)
	}
	for m := range 5 {
		if resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?seed=7&window=4&batch_size=4&world=1&job=mixed&schedule=latest", cl[1].srv.URL, m)); resp.StatusCode != http.StatusOK {
			t.Fatalf("the schedule's step %d: %s %s", m, resp.Status, body)
		}
	}
	edit := func(step int) (*http.Response, []byte) {
		return do(t, http.MethodPost, cl[2].srv.URL+"/jobs/mixed/schedule", fmt.Appendf(nil, `{"schedule": "%d:test:1", "from_step": %d, "base": %q}`, step, step, sv.Version))
	}
	resp, body = edit(2)
	refused("a schedule edit", resp, body, 5)
	if resp, body := edit(5); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"from_step": 5`) {
		t.Fatalf("a schedule edit from step 5: %s %s", resp.Status, body)
	}
}

// TestEditReleasesTheHolds: the members a node taking an edit asks hold
// the job's later positions while the edit is made, and are told when
// it is made or refused: a batch past the held position, on another
// node, is served as soon as the edit is done — refused or made (then
// under it) — not after the hold's bound (edits.Hold). Before the
// release, every edit tried on a cluster, a refused one too, stalled the
// job's next batch on every other member for up to 5 seconds.
func TestEditReleasesTheHolds(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	cl := startCluster(t, &fixture{store: st.(*s3backend.Local)}, 3, nil, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
	})
	const job = "dataset=test&seed=7&window=4&batch_size=4&world=1&job=run"
	for m := range 5 {
		if resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", cl[1].srv.URL, m, job)); resp.StatusCode != http.StatusOK {
			t.Fatalf("step %d: %s %s", m, resp.Status, body)
		}
	}
	// next reads node 1's next step at once, and says how long it took.
	step := 5
	next := func(what string) []string {
		t.Helper()
		start := time.Now()
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", cl[1].srv.URL, step, job))
		if took := time.Since(start); resp.StatusCode != http.StatusOK || took > edits.Hold/2 {
			t.Fatalf("step %d on node 1 just after %s: %s in %s (the hold lasts at most %s): %s", step, what, resp.Status, took, edits.Hold, body)
		}
		step++
		var keys []string
		for _, s := range readTar(t, body) {
			keys = append(keys, s.key)
		}
		return keys
	}
	if resp, body := postJSON(t, cl[0].srv.URL+"/jobs/run/exclude?"+job, `{"from_step": 2, "keys": ["data/f1/3"]}`, nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("an exclusion from a step node 1 served: %s %s; want 409", resp.Status, body)
	}
	next("a refused exclusion")
	var x api.StoredExclusion
	if resp, body := postJSON(t, cl[2].srv.URL+"/jobs/run/exclude?"+job, `{"from_step": 7, "keys": ["data/f1/3"]}`, &x); resp.StatusCode != http.StatusCreated {
		t.Fatalf("an exclusion from step 7: %s %s", resp.Status, body)
	}
	next("an exclusion made from a later step")
	for step < 30 {
		if keys := next("the exclusion"); slices.Contains(keys, "data/f1/3") && step > 7 {
			t.Fatalf("step %d serves data/f1/3, excluded from step 7", step-1)
		}
	}
}
