package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/spec"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/planner"
)

// exclusionFixture is a dataset of 12 chunks of 10 samples (sample i in
// chunk i/10), read by job "run" at world 2 × batch_size 5: 10 samples,
// a step, 12 steps an epoch.
const (
	exChunks, exPerChunk = 12, 10
	exJob                = "job=run&batch_size=5&world=2&window=2&seed=7"
	exSteps              = exChunks * exPerChunk / 10
)

func exKey(id int) string { return fmt.Sprintf("class%d/sample%05d", id%3, id) }

// exExcluded are every sample of chunks 3 and 7, and three of others.
func exExcluded() []string {
	var keys []string
	for _, c := range []int{3, 7} {
		for i := range exPerChunk {
			keys = append(keys, exKey(c*exPerChunk+i))
		}
	}
	return append(keys, exKey(1), exKey(55), exKey(99))
}

// exStep reads step s of epoch e of the job at world 2: both ranks'
// bodies, back to back, and their keys.
func exStep(t *testing.T, base string, e, s int, job string) ([]byte, []string) {
	t.Helper()
	var body []byte
	var keys []string
	for rank := range 2 {
		resp, b := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d", base, e, s, job, rank))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("epoch %d step %d rank %d: %d %s", e, s, rank, resp.StatusCode, b)
		}
		body = append(body, b...)
		for _, smp := range readTar(t, b) {
			keys = append(keys, smp.key)
		}
	}
	return body, keys
}

// exEpochKeys reads the keys of epoch e at world 2 from step from on,
// until the epoch's last batch.
func exEpochKeys(t *testing.T, base string, e, from int, job string) (keys []string, bodies [][]byte) {
	t.Helper()
	resp, b := get(t, fmt.Sprintf("%s/epoch/%d?%s&rank=0", base, e, job))
	var info api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &info) != nil {
		t.Fatalf("epoch %d: %d %s", e, resp.StatusCode, b)
	}
	for s := from; s < info.Batches; s++ {
		body, k := exStep(t, base, e, s, job)
		keys = append(keys, k...)
		bodies = append(bodies, body)
	}
	return keys, bodies
}

func postExclusion(t *testing.T, base, query string, body any) (*http.Response, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, http.MethodPost, base+"/jobs/run/exclude?"+query, b)
}

// TestExclusionFromStep: a list of keys excluded from step S of a
// running job (POST /jobs/run/exclude) leaves the steps before S as they
// were, byte for byte; every later step of the epoch and every step of
// the next serves each sample not excluded exactly once and no excluded
// one; a resume at another world size from S serves the same samples in
// the same order; a gateway started over the same store serves the same
// bytes; and the chunks left with no sample are never read.
func TestExclusionFromStep(t *testing.T) {
	const S = 3
	f := newFixture(t, exChunks, exPerChunk)
	_, srv := start(t, f.store, nil)

	before := make([][]byte, S)
	served := map[string]bool{}
	for s := range S {
		var keys []string
		before[s], keys = exStep(t, srv.URL, 0, s, exJob)
		for _, k := range keys {
			served[k] = true
		}
	}
	excluded := exExcluded()
	resp, b := postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S, "keys": excluded})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	var made api.StoredExclusion
	if err := json.Unmarshal(b, &made); err != nil {
		t.Fatal(err)
	}
	if made.Samples != len(excluded) || made.EmptyChunks != 2 || made.FromPosition != S*10 || made.Epoch != 0 {
		t.Fatalf("POST answered %+v; want %d samples, 2 chunks emptied, from position %d of epoch 0", made, len(excluded), S*10)
	}
	out := map[string]bool{}
	for _, k := range excluded {
		out[k] = true
	}

	// Steps before S: the same bytes.
	for s := range S {
		if body, _ := exStep(t, srv.URL, 0, s, exJob); !bytes.Equal(body, before[s]) {
			t.Fatalf("step %d before the exclusion's step %d changed", s, S)
		}
	}
	// Epoch 0 from S: every sample neither served before S nor excluded,
	// once; epoch 1: every sample not excluded, once.
	rest0, bodies0 := exEpochKeys(t, srv.URL, 0, S, exJob)
	all1, bodies1 := exEpochKeys(t, srv.URL, 1, 0, exJob)
	check := func(what string, got []string, want func(k string) bool) {
		t.Helper()
		seen := map[string]int{}
		for _, k := range got {
			if out[k] {
				t.Fatalf("%s: excluded sample %s served", what, k)
			}
			seen[k]++
		}
		n := 0
		for id := range exChunks * exPerChunk {
			if want(exKey(id)) {
				n++
				if seen[exKey(id)] != 1 {
					t.Fatalf("%s: sample %s served %d times, want once", what, exKey(id), seen[exKey(id)])
				}
			}
		}
		if len(got) != n {
			t.Fatalf("%s: %d samples served, want %d", what, len(got), n)
		}
	}
	check("epoch 0 from step 3", rest0, func(k string) bool { return !served[k] && !out[k] })
	check("epoch 1", all1, func(k string) bool { return !out[k] })
	if want := (exChunks*exPerChunk - len(excluded) + 9) / 10; len(bodies1) != want {
		t.Fatalf("epoch 1 has %d steps; want %d, the samples left cut into steps of 10", len(bodies1), want)
	}

	// A resume at world 4 from S's first position: the same samples in
	// the same order.
	resumed, _ := func() ([]string, error) {
		var keys []string
		job := fmt.Sprintf("job=run&batch_size=5&world=4&window=2&seed=7&offset=%d", S*10)
		for s := 0; ; s++ {
			var stepKeys []string
			for rank := range 4 {
				resp, b := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d", srv.URL, s, job, rank))
				if resp.StatusCode == http.StatusNotFound {
					return keys, nil
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("resume at world 4, step %d rank %d: %d %s", s, rank, resp.StatusCode, b)
				}
				for _, smp := range readTar(t, b) {
					stepKeys = append(stepKeys, smp.key)
				}
			}
			keys = append(keys, stepKeys...)
		}
	}()
	if strings.Join(resumed, ",") != strings.Join(rest0, ",") {
		t.Fatalf("resumed at world 4 from position %d:\n%v\nwant the world-2 order:\n%v", S*10, resumed, rest0)
	}

	// A gateway started over the same store, with an empty cache: the
	// same list, the same bytes, and no read of the chunks emptied.
	counting := s3test.Wrap(f.store)
	g2, srv2 := start(t, counting, nil)
	resp, b = get(t, srv2.URL+"/jobs/run/exclude?"+exJob)
	var got api.StoredExclusion
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || got.Version != made.Version || len(got.Keys) != len(excluded) {
		t.Fatalf("GET on a restarted gateway: %d %s; want version %s with %d keys", resp.StatusCode, b, made.Version, len(excluded))
	}
	_, again1 := exEpochKeys(t, srv2.URL, 1, 0, exJob)
	_, again0 := exEpochKeys(t, srv2.URL, 0, S, exJob)
	for s := range bodies1 {
		if !bytes.Equal(again1[s], bodies1[s]) {
			t.Fatalf("epoch 1 step %d differs on the restarted gateway", s)
		}
	}
	for s := range bodies0 {
		if !bytes.Equal(again0[s], bodies0[s]) {
			t.Fatalf("epoch 0 step %d differs on the restarted gateway", S+s)
		}
	}
	g2.Close() // its prefetches done
	reads := counting.Take().Under("chunks/")
	for _, c := range []int{3, 7} {
		if n := reads[fmt.Sprintf("chunks/%06d.tar", c)].Reads; n != 0 {
			t.Fatalf("chunk %d, every sample of which is excluded, was read %d times (reads: %v)", c, n, reads)
		}
	}
	if len(reads) != exChunks-2 {
		t.Fatalf("%d chunks read; want the %d that keep a sample: %v", len(reads), exChunks-2, reads)
	}
}

// TestExclusionRefusals: what a list that cannot be applied is answered,
// and that it changes nothing served.
func TestExclusionRefusals(t *testing.T) {
	f := newFixture(t, exChunks, exPerChunk)
	_, srv := start(t, f.store, func(c *gateway.Config) {})
	if resp, b := get(t, srv.URL+"/jobs/run/exclude?"+exJob); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET before any list: %d %s; want 404", resp.StatusCode, b)
	}
	before, _ := exStep(t, srv.URL, 0, 4, exJob) // served: steps 0..4 now taken
	cases := []struct {
		name   string
		query  string
		body   any
		status int
		says   string
	}{
		{"malformed", exJob, "not an object", http.StatusBadRequest, "JSON object"},
		{"unknown field", exJob, map[string]any{"from_step": 9, "keys": []string{exKey(1)}, "extra": 1}, http.StatusBadRequest, "extra"},
		{"no keys", exJob, map[string]any{"from_step": 9}, http.StatusBadRequest, "keys"},
		{"no step", exJob, map[string]any{"keys": []string{exKey(1)}}, http.StatusBadRequest, "from_step"},
		{"unknown keys", exJob, map[string]any{"from_step": 9, "keys": []string{exKey(1), "nope/1", "nope/2"}}, http.StatusUnprocessableEntity, "nope/1"},
		{"a step served", exJob, map[string]any{"from_step": 4, "keys": []string{exKey(1)}}, http.StatusConflict, "from step 5"},
		{"a token job", exJob + "&seq=16", map[string]any{"from_step": 9, "keys": []string{exKey(1)}}, http.StatusBadRequest, spec.Lookup(spec.Tokens, spec.Exclusion).Message},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if s, ok := c.body.(string); ok {
				body = []byte(s)
			} else {
				body, _ = json.Marshal(c.body)
			}
			resp, b := do(t, http.MethodPost, srv.URL+"/jobs/run/exclude?"+c.query, body)
			if resp.StatusCode != c.status || !strings.Contains(string(b), c.says) {
				t.Fatalf("%d %s; want %d saying %q", resp.StatusCode, b, c.status, c.says)
			}
			if c.status == http.StatusConflict {
				var e api.Error
				if json.Unmarshal(b, &e) != nil || e.FirstEditableStep == nil || *e.FirstEditableStep != 5 {
					t.Fatalf("409 body %s; want first_editable_step 5", b)
				}
			}
		})
	}
	if after, _ := exStep(t, srv.URL, 0, 4, exJob); !bytes.Equal(after, before) {
		t.Fatal("a refused list changed a step served")
	}
	if resp, b := get(t, srv.URL+"/jobs/run/exclude?"+exJob); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after refused lists: %d %s; want 404", resp.StatusCode, b)
	}
	// One list a job: the same again is the same list, another is 409.
	ok := map[string]any{"from_step": 9, "keys": []string{exKey(1), exKey(2)}}
	resp1, b1 := postExclusion(t, srv.URL, exJob, ok)
	resp2, b2 := postExclusion(t, srv.URL, exJob, ok)
	if resp1.StatusCode != http.StatusCreated || resp2.StatusCode != http.StatusCreated || string(b1) != string(b2) {
		t.Fatalf("a list made twice: %d %s then %d %s; want the same answer", resp1.StatusCode, b1, resp2.StatusCode, b2)
	}
	resp3, b3 := postExclusion(t, srv.URL, exJob, map[string]any{"from_step": 10, "keys": []string{exKey(3)}})
	var first api.StoredExclusion
	_ = json.Unmarshal(b1, &first)
	if resp3.StatusCode != http.StatusConflict || first.Version == "" || !strings.Contains(string(b3), `"edit_version": "`+first.Version+`"`) {
		t.Fatalf("a second list: %d %s; want 409 naming the first", resp3.StatusCode, b3)
	}
}

// TestExclusionOnEveryNode: of two lists sent at once to two gateways
// over one store, one is made and the other refused naming it; each
// gateway, and one started since, lays the job out under the winner.
func TestExclusionOnEveryNode(t *testing.T) {
	f := newFixture(t, exChunks, exPerChunk)
	_, a := start(t, f.store, nil)
	_, b := start(t, f.store, nil)
	lists := [][]string{{exKey(4), exKey(40)}, {exKey(5), exKey(50)}}
	statuses := make([]int, 2)
	versions := make([]string, 2)
	var wg sync.WaitGroup
	for k, base := range []string{a.URL, b.URL} {
		wg.Go(func() {
			resp, body := postExclusion(t, base, exJob, map[string]any{"from_step": 2, "keys": lists[k]})
			statuses[k] = resp.StatusCode
			var made api.StoredExclusion
			if resp.StatusCode == http.StatusCreated && json.Unmarshal(body, &made) == nil {
				versions[k] = made.Version
			}
		})
	}
	wg.Wait()
	won := slices.IndexFunc(statuses, func(s int) bool { return s == http.StatusCreated })
	if won < 0 || statuses[1-won] != http.StatusConflict {
		t.Fatalf("two lists at once answered %v; want one 201 and one 409", statuses)
	}
	_, c := start(t, f.store, nil)
	var want []string
	for k, base := range []string{a.URL, b.URL, c.URL} {
		keys, _ := exEpochKeys(t, base, 1, 0, exJob)
		for _, key := range keys {
			if slices.Contains(lists[won], key) {
				t.Fatalf("node %d served %s, on the list made", k, key)
			}
		}
		if len(keys) != exChunks*exPerChunk-2 {
			t.Fatalf("node %d served %d samples of epoch 1; want %d", k, len(keys), exChunks*exPerChunk-2)
		}
		if k == 0 {
			want = keys
		} else if !slices.Equal(keys, want) {
			t.Fatalf("node %d's epoch 1 differs from node 0's", k)
		}
		resp, body := get(t, base+"/jobs/run/exclude?"+exJob)
		var got api.StoredExclusion
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Version != versions[won] {
			t.Fatalf("node %d's list: %d %s; want version %s", k, resp.StatusCode, body, versions[won])
		}
	}
}

// TestExclusionOnACluster: a list made on one node of a 3-node cluster
// is applied by every node (each ranks' batches assigned across the
// members, samples read from their chunks' owners): from its step on, the
// epoch and the next serve every sample not listed exactly once, each
// node answering a step as the others do, and no node reads a chunk the
// list empties.
func TestExclusionOnACluster(t *testing.T) {
	const S = 3
	f := newFixture(t, exChunks, exPerChunk)
	cl := startCluster(t, f, 3, nil, nil)
	stepOn := func(k, e, s int) ([]byte, []string) {
		t.Helper()
		var body []byte
		var keys []string
		for rank := range 2 {
			base := cl[(k+rank)%3].srv.URL
			resp, b := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d", base, e, s, exJob, rank))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("node %d epoch %d step %d rank %d: %d %s", (k+rank)%3, e, s, rank, resp.StatusCode, b)
			}
			body = append(body, b...)
			for _, smp := range readTar(t, b) {
				keys = append(keys, smp.key)
			}
		}
		return body, keys
	}
	served := map[string]bool{}
	for s := range S {
		_, keys := stepOn(s, 0, s)
		for _, k := range keys {
			served[k] = true
		}
	}
	excluded := exExcluded()
	if resp, b := postExclusion(t, cl[1].srv.URL, exJob, map[string]any{"from_step": S, "keys": excluded}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	// The nodes that found no list ask the store again within Refresh.
	time.Sleep(chain.Refresh)
	for _, n := range cl {
		n.store.Take()
	}
	out := map[string]bool{}
	for _, k := range excluded {
		out[k] = true
	}
	for e, from := range []int{S, 0} {
		resp, b := get(t, fmt.Sprintf("%s/epoch/%d?%s&rank=0", cl[2].srv.URL, e, exJob))
		var info api.EpochInfo
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &info) != nil {
			t.Fatalf("epoch %d: %d %s", e, resp.StatusCode, b)
		}
		seen := map[string]int{}
		for s := from; s < info.Batches; s++ {
			var first []byte
			for k := range 3 {
				body, keys := stepOn(k, e, s)
				if k == 0 {
					first = body
					for _, key := range keys {
						seen[key]++
					}
				} else if !bytes.Equal(body, first) {
					t.Fatalf("epoch %d step %d: node %d answers otherwise than node 0", e, s, k)
				}
			}
		}
		for id := range exChunks * exPerChunk {
			k := exKey(id)
			want := 1
			if out[k] || e == 0 && served[k] {
				want = 0
			}
			if seen[k] != want {
				t.Fatalf("epoch %d: sample %s served %d times from the list's step on; want %d", e, k, seen[k], want)
			}
		}
	}
	for k, n := range cl {
		reads := n.store.Take().Under("chunks/")
		for _, c := range []int{3, 7} {
			if r := reads[fmt.Sprintf("chunks/%06d.tar", c)].Reads; r != 0 {
				t.Fatalf("node %d read chunk %d, which the list empties, %d times", k, c, r)
			}
		}
	}
}

// TestPlanKnowsTheExclusion: GET /plan of a named job with an exclusion
// list plans the job without the list's samples. From a cold cache that
// holds the dataset, the epoch after the list's reads every chunk the
// job reads once: the dataset's bytes less those of the chunks the list
// empties (3 and 7), where the same job before its list, or unnamed,
// reads them all; the list's own epoch reads no more than without it;
// and the plan's job names the list. POST /plan plans a job named as
// the job the same way.
func TestPlanKnowsTheExclusion(t *testing.T) {
	const S = 3
	f := newFixture(t, exChunks, exPerChunk)
	_, srv := start(t, f.store, nil)
	var total int64
	for c := range exChunks {
		total += f.index.Chunk(c).Size
	}
	empty := f.index.Chunk(3).Size + f.index.Chunk(7).Size
	plan := func(job string, first int) *planner.Plan {
		return planOf(t, srv.URL, fmt.Sprintf("%s&cache_size=%d&epochs=2&first_epoch=%d", job, total, first))
	}
	unnamed := strings.Replace(exJob, "job=run&", "", 1)
	before, before0 := plan(exJob, 1), plan(exJob, 0)
	resp, b := postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S, "keys": exExcluded()})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	var made api.StoredExclusion
	if err := json.Unmarshal(b, &made); err != nil {
		t.Fatal(err)
	}
	with, with0, without := plan(exJob, 1), plan(exJob, 0), plan(unnamed, 1)
	for _, r := range []struct {
		name                  string
		before, with, without planner.Result
		before0, with0        planner.Result
	}{
		{"lru", before.LRU, with.LRU, without.LRU, before0.LRU, with0.LRU},
		{"optimal", before.Optimal, with.Optimal, without.Optimal, before0.Optimal, with0.Optimal},
	} {
		if got := r.with.Epochs[0].BackendBytes; got != total-empty {
			t.Errorf("%s: epoch 1 of the job with its list reads %d bytes from the store; want %d, the dataset's %d less the emptied chunks' %d", r.name, got, total-empty, total, empty)
		}
		if r.before.Epochs[0].BackendBytes != total || r.without.Epochs[0].BackendBytes != total {
			t.Errorf("%s: epoch 1 reads %d bytes before the list, %d unnamed; want the dataset's %d", r.name, r.before.Epochs[0].BackendBytes, r.without.Epochs[0].BackendBytes, total)
		}
		if r.with0.Epochs[0].BackendBytes > r.before0.Epochs[0].BackendBytes {
			t.Errorf("%s: epoch 0, the list's, reads %d bytes with it, %d before it", r.name, r.with0.Epochs[0].BackendBytes, r.before0.Epochs[0].BackendBytes)
		}
	}
	if x := with.Job.Edit; x == nil || x.Version != made.Version || x.From != S*10 || x.Samples != made.Samples {
		t.Errorf("the plan's job names the list %+v; want version %s from position %d", x, made.Version, S*10)
	}
	if before.Job.Edit != nil || without.Job.Edit != nil {
		t.Error("a plan of the job before its list, or unnamed, names a list")
	}

	// POST /plan: a job named "run" is the job with its list.
	shared := func(name string) *planner.SharedPlan {
		job := map[string]any{"seed": 7, "window": 2, "batch_size": 5, "world": 2, "epochs": 2, "first_epoch": 1}
		if name != "" {
			job["name"] = name
		}
		body, _ := json.Marshal(map[string]any{"cache_size": total, "jobs": []any{job}})
		resp, b := do(t, http.MethodPost, srv.URL+"/plan", body)
		var p planner.SharedPlan
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &p) != nil {
			t.Fatalf("POST /plan: %d %s", resp.StatusCode, b)
		}
		return &p
	}
	named, anon := shared("run"), shared("")
	for _, r := range []struct {
		name        string
		named, anon planner.Result
	}{{"lru", named.LRU, anon.LRU}, {"optimal", named.Optimal, anon.Optimal}, {"partitioned", named.Partitioned, anon.Partitioned}} {
		if r.named.BackendBytes != total-empty || r.anon.BackendBytes != total {
			t.Errorf("POST /plan, %s: the job named run reads %d bytes, unnamed %d; want %d and %d", r.name, r.named.BackendBytes, r.anon.BackendBytes, total-empty, total)
		}
	}
	if x := named.Jobs[0].Edit; x == nil || x.Version != made.Version {
		t.Errorf("POST /plan's job names the list %+v; want version %s", x, made.Version)
	}
}

// exStepTagged is exStep with the ETags of its ranks' batches.
func exStepTagged(t *testing.T, base string, e, s int, job string) (body []byte, keys, tags []string) {
	t.Helper()
	for rank := range 2 {
		resp, b := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d", base, e, s, job, rank))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("epoch %d step %d rank %d: %d %s", e, s, rank, resp.StatusCode, b)
		}
		body = append(body, b...)
		tags = append(tags, resp.Header.Get("ETag"))
		for _, smp := range readTar(t, b) {
			keys = append(keys, smp.key)
		}
	}
	return body, keys, tags
}

// TestExclusionExtended: a job's list extended from a later step S2
// (POST naming the current version as previous). A POST without
// previous, or naming a version not the current one, is 409 naming the
// current version; the steps before S2 are the first list's, byte for
// byte and ETag for ETag; from S2 on, and in the next epoch, the union
// of the lists is left out and every other sample served exactly once;
// GET answers the new version with every key; a gateway started over the
// same store serves the same bytes and reads no chunk the union empties.
func TestExclusionExtended(t *testing.T) {
	const S1, S2 = 3, 6
	f := newFixture(t, exChunks, exPerChunk)
	_, srv := start(t, f.store, nil)
	var epoch0 []string // keys served in epoch 0, in order
	for s := range S1 {
		_, keys := exStep(t, srv.URL, 0, s, exJob)
		epoch0 = append(epoch0, keys...)
	}
	first := exExcluded() // chunks 3 and 7, and three more
	resp, b := postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S1, "keys": first})
	var v1 api.StoredExclusion
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &v1) != nil {
		t.Fatalf("POST the first list: %d %s", resp.StatusCode, b)
	}
	// The steps between the lists, as the first list has them.
	type step struct {
		body []byte
		tags []string
	}
	between := map[int]step{}
	for s := S1; s < S2; s++ {
		body, keys, tags := exStepTagged(t, srv.URL, 0, s, exJob)
		between[s] = step{body, tags}
		epoch0 = append(epoch0, keys...)
	}
	// The second list: chunk 10 whole, two more, and one of the first's.
	var second []string
	for i := range exPerChunk {
		second = append(second, exKey(10*exPerChunk+i))
	}
	second = append(second, exKey(2), exKey(118), exKey(55))

	resp, b = postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S2, "keys": second})
	var e api.Error
	if resp.StatusCode != http.StatusConflict || json.Unmarshal(b, &e) != nil || e.ExclusionVersion != v1.Version {
		t.Fatalf("a second list without previous: %d %s; want 409 naming version %s", resp.StatusCode, b, v1.Version)
	}
	resp, b = postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S2, "keys": second, "previous": "0123456789abcdef"})
	if resp.StatusCode != http.StatusConflict || json.Unmarshal(b, &e) != nil || e.ExclusionVersion != v1.Version {
		t.Fatalf("an extension of a version the job has not: %d %s; want 409 naming version %s", resp.StatusCode, b, v1.Version)
	}
	resp, b = postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S1 - 1, "keys": second, "previous": v1.Version})
	if resp.StatusCode == http.StatusCreated {
		t.Fatalf("an extension from step %d, before the first list's %d: %d %s", S1-1, S1, resp.StatusCode, b)
	}
	resp, b = postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S2, "keys": second, "previous": v1.Version})
	var v2 api.StoredExclusion
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &v2) != nil {
		t.Fatalf("POST the extension: %d %s", resp.StatusCode, b)
	}
	out := map[string]bool{}  // the union
	out1 := map[string]bool{} // the first list
	for _, k := range first {
		out[k], out1[k] = true, true
	}
	for _, k := range second {
		out[k] = true
	}
	if v2.Previous != v1.Version || v2.Version == v1.Version || v2.Samples != len(out) || v2.EmptyChunks != 3 || v2.FromPosition != S2*10 {
		t.Fatalf("the extension: %+v; want previous %s, %d samples, 3 chunks emptied, from position %d", v2, v1.Version, len(out), S2*10)
	}

	// Before S2: the first list's steps, bytes and ETags.
	for s := S1; s < S2; s++ {
		body, _, tags := exStepTagged(t, srv.URL, 0, s, exJob)
		if !bytes.Equal(body, between[s].body) || !slices.Equal(tags, between[s].tags) {
			t.Fatalf("step %d, between the lists, changed: ETags %v, were %v", s, tags, between[s].tags)
		}
	}
	// From S2 on: the union left out.
	rest0, bodies0 := exEpochKeys(t, srv.URL, 0, S2, exJob)
	all1, bodies1 := exEpochKeys(t, srv.URL, 1, 0, exJob)
	for _, k := range rest0 {
		if out[k] {
			t.Fatalf("epoch 0 from step %d: %s, on a list, served", S2, k)
		}
	}
	for _, k := range epoch0[S1*10:] {
		if out1[k] {
			t.Fatalf("epoch 0 from step %d: %s, on the first list, served", S1, k)
		}
	}
	once := func(what string, got []string, want func(k string) bool) {
		t.Helper()
		seen := map[string]int{}
		for _, k := range got {
			seen[k]++
		}
		n := 0
		for id := range exChunks * exPerChunk {
			if k := exKey(id); want(k) {
				n++
				if seen[k] != 1 {
					t.Fatalf("%s: sample %s served %d times, want once", what, k, seen[k])
				}
			}
		}
		if len(got) != n {
			t.Fatalf("%s: %d samples served, want %d", what, len(got), n)
		}
	}
	whole0 := append(slices.Clone(epoch0), rest0...)
	served := map[string]bool{}
	for _, k := range whole0 {
		served[k] = true
	}
	// Epoch 0: every sample on no list once, and nothing twice.
	once("epoch 0", whole0, func(k string) bool { return !out[k] || served[k] })
	once("epoch 1", all1, func(k string) bool { return !out[k] })

	resp, b = get(t, srv.URL+"/jobs/run/exclude?"+exJob)
	var got api.StoredExclusion
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || got.Version != v2.Version || got.Previous != v1.Version ||
		!slices.Equal(got.Keys, append(slices.Clone(first), second...)) {
		t.Fatalf("GET: %d %s; want version %s extending %s with both lists' keys", resp.StatusCode, b, v2.Version, v1.Version)
	}

	// /plan of the job: epoch 1, from a cold cache that holds the
	// dataset, reads every chunk but the three the union empties.
	var total, empty int64
	for c := range exChunks {
		total += f.index.Chunk(c).Size
		if c == 3 || c == 7 || c == 10 {
			empty += f.index.Chunk(c).Size
		}
	}
	plan := planOf(t, srv.URL, fmt.Sprintf("%s&cache_size=%d&epochs=2&first_epoch=1", exJob, total))
	if got := plan.LRU.Epochs[0].BackendBytes; got != total-empty || plan.Job.Edit == nil || plan.Job.Edit.Previous == nil {
		t.Errorf("/plan: epoch 1 reads %d bytes; want %d, the dataset's less chunks 3, 7 and 10 (the plan's list: %+v)", got, total-empty, plan.Job.Edit)
	}

	// A gateway started over the same store: the same bytes of epoch 1,
	// and no read of the chunks the union empties; another, the same
	// bytes of epoch 0 (whose steps before S2 may read chunk 10).
	counting := s3test.Wrap(f.store)
	g2, srv2 := start(t, counting, nil)
	_, again1 := exEpochKeys(t, srv2.URL, 1, 0, exJob)
	for s := range bodies1 {
		if !bytes.Equal(again1[s], bodies1[s]) {
			t.Fatalf("epoch 1 step %d differs on the restarted gateway", s)
		}
	}
	g2.Close() // its prefetches done
	reads := counting.Take().Under("chunks/")
	for _, c := range []int{3, 7, 10} {
		if n := reads[fmt.Sprintf("chunks/%06d.tar", c)].Reads; n != 0 {
			t.Fatalf("chunk %d, every sample of which is on a list, was read %d times (reads: %v)", c, n, reads)
		}
	}
	_, srv3 := start(t, f.store, nil)
	_, again0 := exEpochKeys(t, srv3.URL, 0, S2, exJob)
	for s := range bodies0 {
		if !bytes.Equal(again0[s], bodies0[s]) {
			t.Fatalf("epoch 0 step %d differs on the restarted gateway", S2+s)
		}
	}
	for s := S1; s < S2; s++ {
		if body, _, tags := exStepTagged(t, srv3.URL, 0, s, exJob); !bytes.Equal(body, between[s].body) || !slices.Equal(tags, between[s].tags) {
			t.Fatalf("step %d, between the lists, differs on the restarted gateway", s)
		}
	}
}

// TestEditNamesTheFurthestServed: an edit refused on a cluster because
// members served past its step names, as first_editable_step, the step
// after the furthest position any member served — not the first
// refusing member's, from which an edit would be refused again. Node 1
// serves steps 0 to 2, node 2 steps 0 to 5; node 0, which served none,
// refuses an exclusion from step 1 naming step 6 (member 1 answers
// first); so does node 0 once it has served step 1 itself (it refused
// without asking the others, naming step 2).
func TestEditNamesTheFurthestServed(t *testing.T) {
	f := newFixture(t, exChunks, exPerChunk)
	cl := startCluster(t, f, 3, nil, nil)
	for k, steps := range []int{1: 3, 2: 6} {
		for s := range steps {
			for rank := range 2 {
				if resp, b := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d", cl[k].srv.URL, s, exJob, rank)); resp.StatusCode != http.StatusOK {
					t.Fatalf("node %d step %d rank %d: %s %s", k, s, rank, resp.Status, b)
				}
			}
		}
	}
	resp, b := postExclusion(t, cl[0].srv.URL, exJob, map[string]any{"from_step": 1, "keys": []string{exKey(1)}})
	var e api.Error
	if resp.StatusCode != http.StatusConflict || json.Unmarshal(b, &e) != nil || e.FirstEditableStep == nil || *e.FirstEditableStep != 6 {
		t.Fatalf("an exclusion from step 1, members having served up to steps 2 and 5: %s %s; want 409 naming first_editable_step 6", resp.Status, b)
	}
	// Node 0 itself served past the edit's step too, but not as far as
	// node 2: it still asks the others, and names step 6.
	for rank := range 2 {
		if resp, b := get(t, fmt.Sprintf("%s/epoch/0/batch/1?%s&rank=%d", cl[0].srv.URL, exJob, rank)); resp.StatusCode != http.StatusOK {
			t.Fatalf("node 0 step 1 rank %d: %s %s", rank, resp.Status, b)
		}
	}
	resp, b = postExclusion(t, cl[0].srv.URL, exJob, map[string]any{"from_step": 1, "keys": []string{exKey(1)}})
	e = api.Error{}
	if resp.StatusCode != http.StatusConflict || json.Unmarshal(b, &e) != nil || e.FirstEditableStep == nil || *e.FirstEditableStep != 6 {
		t.Fatalf("an exclusion from step 1 posted to a node that served step 1, another up to step 5: %s %s; want 409 naming first_editable_step 6", resp.Status, b)
	}
}
