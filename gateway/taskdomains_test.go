package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/s3backend"
)

// TestTaskDomainsAndEdits is the HTTP contract of a task job of domains
// and of its edits (docs/tasks.md, "Domains", "Edits"): three prompt
// datasets of the same keys at 0.5/0.3/0.2, each lease's prompts naming
// their dataset, a key two prompts of a lease share answered with its
// dataset, every step holding each domain's share within one prompt; an
// exclusion never leased after it; an edit of the job's chain refused for
// a task job's name; a ratio edit from a full step refused naming the
// first editable one, and from a later step served; an append's prompts
// leased in its domain's next pass; the replay equal to what was served.
// The plan's rules themselves are internal/task's TestDomainSteps,
// TestExclusionAtOnce, TestAppendNextPass and TestRatioEdit.
func TestTaskDomainsAndEdits(t *testing.T) {
	names := []string{"math", "code", "chat"}
	stores := map[string]s3backend.Store{}
	var specs []gateway.DatasetSpec
	for _, n := range names {
		st, _ := gatewaytest.InPlaceStore(t, formattest.Lines{}) // 120 prompts, data/fF/L
		stores[n] = st
		specs = append(specs, gateway.DatasetSpec{Name: n, URL: "file:///" + n, Store: st, Formats: []format.Format{formattest.Lines{}}})
	}
	g, srv := start(t, nil, func(c *gateway.Config) { c.Datasets = specs })
	call := func(method, path string, body any, want int) []byte {
		t.Helper()
		var raw []byte
		if body != nil {
			raw, _ = json.Marshal(body)
		}
		resp, got := do(t, method, srv.URL+path, raw)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, want)
		}
		return got
	}
	spec := map[string]any{"step": 10, "ahead": 3, "seed": 5, "domains": []map[string]any{
		{"dataset": "math", "ratio": 0.5}, {"dataset": "code", "ratio": 0.3}, {"dataset": "chat", "ratio": 0.2}}}
	call("PUT", "/tasks/rl?dataset=math", spec, http.StatusCreated)
	var plan api.TaskPlan
	if err := json.Unmarshal(call("GET", "/tasks/rl?dataset=math", nil, http.StatusOK), &plan); err != nil || plan.Prompts != 360 || len(plan.Domains) != 3 || len(plan.Ratios) != 1 {
		t.Fatalf("the plan: %+v, %v", plan, err)
	}

	gone := map[string]bool{} // dataset/key excluded
	leased := map[string]bool{}
	steps := 0
	run := func(until int) {
		t.Helper()
		for n := 0; steps < until; n++ {
			if n > 400 {
				t.Fatalf("%d steps full of %d after %d leases", steps, until, n)
			}
			var l api.TaskLease
			resp, body := do(t, "POST", srv.URL+"/tasks/rl/leases?dataset=math", []byte(`{"generator":"g","prompts":7}`))
			if resp.StatusCode == http.StatusServiceUnavailable {
				call("POST", "/tasks/rl/trainer?dataset=math", api.TaskTrainer{Step: uint64(steps)}, http.StatusOK)
				continue
			}
			if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &l) != nil {
				t.Fatalf("a lease: %s %s", resp.Status, body)
			}
			var fb api.TaskFeedback
			keys := map[string]int{}
			for _, p := range l.Prompts {
				keys[p.Key]++
			}
			for _, p := range l.Prompts {
				if p.Dataset == "" || gone[p.Dataset+"/"+p.Key] {
					t.Fatalf("lease %s: prompt %+v (excluded: %v)", l.Lease, p, gone[p.Dataset+"/"+p.Key])
				}
				leased[p.Dataset+"/"+p.Key] = true
				passes := 1
				r := api.TaskResult{Key: p.Key, Dataset: p.Dataset, Passes: &passes, N: 4}
				if keys[p.Key] > 1 {
					// Of two domains: without its dataset, refused.
					fb1 := api.TaskFeedback{Results: []api.TaskResult{{Key: p.Key, Passes: &passes, N: 4}}}
					if got := call("POST", "/tasks/rl/leases/"+l.Lease+"/feedback?dataset=math", fb1, http.StatusUnprocessableEntity); !strings.Contains(string(got), "name its dataset") {
						t.Fatalf("an ambiguous key answered: %s", got)
					}
				}
				fb.Results = append(fb.Results, r)
			}
			var ans api.TaskAnswered
			if err := json.Unmarshal(call("POST", "/tasks/rl/leases/"+l.Lease+"/feedback?dataset=math", fb, http.StatusOK), &ans); err != nil || ans.Applied != len(l.Prompts) {
				t.Fatalf("feedback of %s: %+v, %v", l.Lease, ans, err)
			}
			if err := json.Unmarshal(call("GET", "/tasks/rl?dataset=math", nil, http.StatusOK), &plan); err != nil {
				t.Fatal(err)
			}
			steps = int(plan.StepsFull)
		}
	}
	// shares holds steps [from, to) to the ratios (math, code, chat).
	shares := func(from, to int, want [3]float64) {
		t.Helper()
		for s := from; s < to; s++ {
			var st api.TaskStep
			if err := json.Unmarshal(call("GET", fmt.Sprintf("/tasks/rl/steps/%d?dataset=math", s), nil, http.StatusOK), &st); err != nil {
				t.Fatal(err)
			}
			n := map[string]int{}
			for _, p := range st.Prompts {
				n[p.Dataset]++
			}
			for i, name := range names {
				if math.Abs(float64(n[name])-want[i]) >= 1 {
					t.Fatalf("step %d: %v prompts of the domains, their shares %v", s, n, want)
				}
			}
		}
	}
	run(4)
	shares(0, 4, [3]float64{5, 3, 2})

	// An exclusion: never leased after it.
	keys := []string{"data/f0/1", "data/f1/2", "data/f2/3"}
	var ed api.TaskEdited
	if err := json.Unmarshal(call("POST", "/tasks/rl/exclude?dataset=math", api.TaskExclusion{Dataset: "chat", Keys: keys}, http.StatusOK), &ed); err != nil || ed.Excluded != 3 || ed.Total != 3 {
		t.Fatalf("the exclusion: %+v, %v", ed, err)
	}
	for _, k := range keys {
		gone["chat/"+k] = true
	}
	call("POST", "/tasks/rl/exclude?dataset=math", api.TaskExclusion{Dataset: "chat", Keys: []string{"nope"}}, http.StatusUnprocessableEntity)
	if got := call("POST", "/jobs/rl/exclude?dataset=chat", map[string]any{"from_step": 40, "keys": keys}, http.StatusConflict); !strings.Contains(string(got), "/tasks/rl/exclude") {
		t.Fatalf("an edit of a task job's chain: %s", got)
	}

	// A ratio edit: refused from a full step, naming the first editable.
	ratios := map[string]float64{"math": 0.2, "code": 0.3, "chat": 0.5}
	var e api.Error
	if err := json.Unmarshal(call("POST", "/tasks/rl/ratios?dataset=math", api.TaskRatios{From: 1, Ratios: ratios}, http.StatusConflict), &e); err != nil || e.FirstEditableStep == nil || int(*e.FirstEditableStep) != steps {
		t.Fatalf("a ratio edit from a full step: %+v; want the first editable step %d", e, steps)
	}
	from := steps + 1
	call("POST", "/tasks/rl/ratios?dataset=math", api.TaskRatios{From: uint64(from), Ratios: ratios}, http.StatusOK)

	// An append to chat: its new prompts in chat's next pass.
	gatewaytest.AppendFile(t, stores["chat"], "f9")
	if _, err := g.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	var dss api.DatasetList
	_, body := get(t, srv.URL+"/datasets")
	if err := json.Unmarshal(body, &dss); err != nil {
		t.Fatal(err)
	}
	index := ""
	for _, d := range dss.Datasets {
		if d.Name == "chat" {
			index = d.IndexID
		}
	}
	if err := json.Unmarshal(call("POST", "/tasks/rl/append?dataset=math", api.TaskAppend{Dataset: "chat", Index: index}, http.StatusOK), &ed); err != nil || ed.Appended != 20 || ed.Prompts != 380 {
		t.Fatalf("the append: %+v, %v", ed, err)
	}
	run(from + 30) // chat's pass of 117 prompts at 5 a step runs out within 24 steps
	shares(from, from+30, [3]float64{2, 3, 5})
	appended := 0
	for k := range leased {
		if strings.HasPrefix(k, "chat/data/f9/") {
			appended++
		}
	}
	if appended == 0 {
		t.Fatal("no appended prompt leased in chat's next pass")
	}
	_, body = get(t, srv.URL+"/tasks/rl/replay?dataset=math")
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	var end api.TaskReplayEnd
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &end); err != nil || !end.Equal {
		t.Fatalf("the replay: %s, %v", lines[len(lines)-1], err)
	}
}
