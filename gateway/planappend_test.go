package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/planner"
)

// TestPlanKnowsTheAppend: GET /plan of a named job with an append record
// plans the chunk order the job is served — the old version's order up
// to the record's step, then the old windows left interleaved with the
// new chunks', then the whole new version's order — so that its figures
// are those of a run of the job's batches. A gateway started after the
// record (the extension alone, the record from the store) runs three
// epochs of the job through a cache of half the dataset: each epoch's
// chunk accesses, the store bytes of the first epoch and the live
// optimum's hit ratio of the last, computed from the batches it served,
// are the plan's.
// The plan's job names the record, and its samples are the new size.
func TestPlanKnowsTheAppend(t *testing.T) {
	st, want := inPlaceStore(t, formattest.Lines{})
	lines := func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} }
	g, srv := start(t, st, lines)
	const shape = "dataset=test&seed=7&window=4&batch_size=5"
	resp, _ := get(t, srv.URL+"/epoch/0/batch/0?"+shape)
	v := resp.Header.Get("Brand-Index")
	appendLines(t, st)
	if _, err := g.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, srv.URL+"/datasets")
	var dss struct {
		Datasets []struct{ Index string } `json:"datasets"`
	}
	if err := json.Unmarshal(body, &dss); err != nil || dss.Datasets[0].Index == v {
		t.Fatalf("/datasets after the append: %s", body)
	}
	x := dss.Datasets[0].Index
	const S = 9 // of 24 steps of 5 in epoch 0 before the append
	var made api.StoredAppend
	if resp, body := postJSON(t, fmt.Sprintf("%s/jobs/run/append?%s&index=%s", srv.URL, shape, v),
		fmt.Sprintf(`{"from_step": %d, "index": %q}`, S, x), &made); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append: %s %s", resp.Status, body)
	}
	resident := planOf(t, srv.URL, shape+"&index="+x).DatasetBytes
	cache := resident / 2

	counted := s3test.Wrap(st)
	g2, srv2 := start(t, counted, func(c *gateway.Config) {
		lines(c)
		c.CacheSize = cache
		c.PrefetchConcurrency = -1 // the plan's figures are demand reads
		// The plan's job keeps the use table's pace: with its clock held
		// still (and no turns, which wait on it) a job this machine's load
		// slows cannot have its next window keyed before its current one
		// and read more than the plan (docs/planner.md). Under the suite's
		// load epoch 0 read 4,179 bytes against the plan's 3,435 once.
		c.MaxTurnWait = -1
		gateway.HoldUseTableClock(c)
	})
	const epochs = 3
	plan := planOf(t, srv2.URL, fmt.Sprintf("%s&job=run&index=%s&cache_size=%d&epochs=%d", shape, v, cache, epochs))
	if plan.Samples != len(want)+20 {
		t.Errorf("the plan's samples: %d; want the new size %d", plan.Samples, len(want)+20)
	}
	readAppendedEpochs(t, srv2.URL, shape, v, epochs)
	live := checkAppendedEpochs(t, g2, plan, epochs)
	// The live optimum is computed over the batches of one index version:
	// the extension's misses the steps before S, so its first epochs
	// start from another cache than the plan's. Two epochs after the
	// record's, it is the plan's.
	last := epochStats(t, g2, epochs-1)[epochs-1]
	if got, predicted := *last.Optimal, plan.Optimal.Epochs[epochs-1].HitRatio; got != predicted {
		t.Errorf("epoch %d: live optimal hit ratio %v, the plan's %v", epochs-1, got, predicted)
	}
	var n int64 // the bytes of the data objects read
	for k, c := range counted.Total() {
		if strings.HasSuffix(k, ".lines") {
			n += c.Bytes
		}
	}
	if n == 0 {
		t.Error("the run read nothing from the store")
	}
	// POST /plan: a job named as the job is the job under its record, its
	// accesses per epoch those served; unnamed, the plain order of the
	// extension. Over the version the job read, where the record's
	// extension cannot be planned beside the other jobs, it is refused.
	shared := func(name, index string) (*http.Response, []byte) {
		job := map[string]any{"seed": 7, "window": 4, "batch_size": 5, "epochs": epochs}
		if name != "" {
			job["name"] = name
		}
		body, _ := json.Marshal(map[string]any{"cache_size": cache, "index": index, "jobs": []any{job}})
		return do(t, http.MethodPost, srv2.URL+"/plan", body)
	}
	for _, name := range []string{"run", ""} {
		resp, b := shared(name, x)
		var p planner.SharedPlan
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &p) != nil {
			t.Fatalf("POST /plan of job %q: %s %s", name, resp.Status, b)
		}
		var accesses []int64
		for _, e := range p.Optimal.Jobs[0].Epochs {
			accesses = append(accesses, int64(e.Accesses))
		}
		want := []int64{live[0].Accesses, live[1].Accesses, live[2].Accesses}
		if named := name != ""; slices.Equal(accesses, want) != named || (p.Jobs[0].Edit != nil) != named {
			t.Errorf("POST /plan of job %q: %v accesses per epoch, record %+v; the job served %v", name, accesses, p.Jobs[0].Edit, want)
		}
	}
	if resp, b := shared("run", v); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), x) {
		t.Errorf("POST /plan of the job over the version it read: %s %s; want 400 naming %s", resp.Status, b, x)
	}
	if a := plan.Job.Edit; a == nil || a.Version != made.Version || a.Epoch != 0 || a.From != made.FromPosition {
		t.Errorf("the plan's job names the record %+v; want version %s from position %d of epoch 0", a, made.Version, made.FromPosition)
	}
}

// TestPlanResizeKnowsTheExclusion: GET /plan?nodes_after= of a named job
// with an exclusion list plans the resize over the job's windows as its
// batches lay them out: the chunks the list empties (3 and 7) are not
// among those the nodes gaining them load before the change. With every
// window of epoch 1 prefetched, the job before its list, or unnamed,
// needs every moved chunk next; with its list, every moved chunk but the
// emptied ones, which move all the same.
func TestPlanResizeKnowsTheExclusion(t *testing.T) {
	const S, after = 3, 4
	f := newFixture(t, exChunks, exPerChunk)
	_, srv := start(t, f.store, nil)
	plan := func(job string) planner.ResizePlan {
		t.Helper()
		resp, b := get(t, fmt.Sprintf("%s/plan?%s&nodes_after=%d&first_epoch=1&prefetch_windows=%d", srv.URL, job, after, exChunks))
		var p planner.ResizePlan
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &p) != nil {
			t.Fatalf("/plan?%s&nodes_after=%d: %s %s", job, after, resp.Status, b)
		}
		return p
	}
	before := plan(exJob)
	if resp, b := postExclusion(t, srv.URL, exJob, map[string]any{"from_step": S, "keys": exExcluded()}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	with, unnamed := plan(exJob), plan(strings.Replace(exJob, "job=run&", "", 1))

	// The emptied chunks that move: from the one planned node to four.
	from := planner.PlannedMembers(1)
	to := planner.ResizedMembers(from, after)
	owners := to.Owners(cluster.IndexKey(f.index.Lineage().Root()), f.index.SampleCounts())
	var movedEmptied int
	var movedEmptiedBytes int64
	for _, c := range []int{3, 7} {
		if to.Members()[owners[c]] != from.Members()[0] {
			movedEmptied++
			movedEmptiedBytes += f.index.Chunk(c).Size
		}
	}
	if movedEmptied == 0 {
		t.Fatal("neither emptied chunk moves: the test shows nothing")
	}
	for _, p := range []planner.ResizePlan{before, unnamed} {
		if p.SoonChunks != p.MovedChunks || p.SoonBytes != p.MovedBytes {
			t.Errorf("without the list: %d of %d moved chunks (%d of %d B) needed next; want all", p.SoonChunks, p.MovedChunks, p.SoonBytes, p.MovedBytes)
		}
	}
	if with.MovedChunks != before.MovedChunks || with.SoonChunks != before.SoonChunks-movedEmptied || with.SoonBytes != before.SoonBytes-movedEmptiedBytes {
		t.Errorf("with the list: %d moved chunks, %d needed next (%d B); want %d, %d (%d B): the %d emptied chunks that move are never needed",
			with.MovedChunks, with.SoonChunks, with.SoonBytes, before.MovedChunks, before.SoonChunks-movedEmptied, before.SoonBytes-movedEmptiedBytes, movedEmptied)
	}
}

// readAppendedEpochs reads every batch of epochs 0 to epochs-1 of job
// "run" of shape, naming index v, from the gateway at base.
func readAppendedEpochs(t *testing.T, base, shape, v string, epochs int) {
	t.Helper()
	for e := range epochs {
		var ep api.EpochInfo
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s&job=run&index=%s", base, e, shape, v))
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ep) != nil {
			t.Fatalf("/epoch/%d: %s %s", e, resp.Status, body)
		}
		for m := range ep.Batches {
			if resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&job=run&index=%s", base, e, m, shape, v)); resp.StatusCode != http.StatusOK {
				t.Fatalf("epoch %d batch %d: %s %s", e, m, resp.Status, body)
			}
		}
	}
}

// checkAppendedEpochs checks g's live statistics of an appended job's
// epochs against plan: each epoch's accesses (each batch's distinct
// chunks, summed) are the plan's trace's, and the first epoch's store
// bytes the plan's. The steps before a record are another version's,
// counted under its index, so each epoch's figures are its versions'
// summed. It returns those sums.
func checkAppendedEpochs(t *testing.T, g *gateway.Gateway, plan *planner.Plan, epochs int) map[uint64]api.EpochStat {
	t.Helper()
	live := map[uint64]api.EpochStat{}
	for _, s := range g.EpochStats() {
		l := live[s.Epoch]
		l.Accesses += s.Accesses
		l.BackendBytes += s.BackendBytes
		live[s.Epoch] = l
	}
	for e := range epochs {
		got, predicted := live[uint64(e)], plan.Optimal.Epochs[e]
		t.Logf("epoch %d: %d accesses, the plan's %d; %d bytes read from the store, the plan's optimum %d", e, got.Accesses, predicted.Accesses, got.BackendBytes, predicted.BackendBytes)
		if got.Accesses != int64(predicted.Accesses) {
			t.Errorf("epoch %d: the gateway served %d chunk accesses, the plan %d", e, got.Accesses, predicted.Accesses)
		}
	}
	if got, predicted := live[0].BackendBytes, plan.Optimal.Epochs[0].BackendBytes; got != predicted {
		t.Errorf("epoch 0: /stats says %d bytes from the store, the plan %d", got, predicted)
	}
	return live
}
