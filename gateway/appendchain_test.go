package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/s3backend"
)

// appendFile adds a .lines file of 20 lines, name, beside an
// inPlaceStore's files and appends it to the dataset (brand index
// --append): a writer's next batch of files.
func appendFile(t *testing.T, st s3backend.Store, name string) {
	t.Helper()
	var lines []string
	for l := range 20 {
		lines = append(lines, fmt.Sprintf("%s line %d", name, l))
	}
	for k, b := range formattest.Write(map[string][]string{"data/" + name + ".lines": lines}) {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.AppendInPlace(context.Background(), st, st, dataset.AppendOptions{
		Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		t.Fatal(err)
	}
}

// currentIndex is the index version a gateway serves of its dataset.
func currentIndex(t *testing.T, base string) string {
	t.Helper()
	_, body := get(t, base+"/datasets")
	var dss struct {
		Datasets []struct{ Index string } `json:"datasets"`
	}
	if err := json.Unmarshal(body, &dss); err != nil || len(dss.Datasets) == 0 {
		t.Fatalf("/datasets: %s", body)
	}
	return dss.Datasets[0].Index
}

// A job takes two appends in turn (a writer adding files every hour),
// on one gateway and on a cluster of 3: two records in one epoch, and
// two in successive epochs. Every node serves the steps before each
// record's from_step as they were, byte for byte under their ETags, and
// the same bytes as every other node; each epoch a record applies in
// serves every old and new sample once, and its step count grows (a
// from_step counts the grown epochs' steps); the epoch after the last
// record's is the whole newest version's order. On one gateway, the
// refusals: a second record without previous or with a stale one (409
// naming the current), an index not extending the previous record's
// (422), a step before the previous record's (400) or one served (409).
func TestJobAppendChain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nodes      int
		successive bool
	}{
		{"one gateway, one epoch", 1, false},
		{"one gateway, successive epochs", 1, true},
		{"cluster, one epoch", 3, false},
		{"cluster, successive epochs", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) { appendChain(t, tc.nodes, tc.successive) })
	}
}

func appendChain(t *testing.T, nodes int, successive bool) {
	st, want := inPlaceStore(t, formattest.Lines{})
	lines := func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} }
	var urls []string
	var reload []func() error
	if nodes == 1 {
		g, srv := start(t, st, lines)
		urls, reload = []string{srv.URL}, []func() error{func() error { _, err := g.Reload(context.Background()); return err }}
	} else {
		for _, n := range startCluster(t, &fixture{store: st.(*s3backend.Local)}, nodes, nil, lines) {
			urls = append(urls, n.srv.URL)
			reload = append(reload, func() error { _, err := n.g.Reload(context.Background()); return err })
		}
	}
	grow := func(name string) string {
		t.Helper()
		appendFile(t, st, name)
		for _, r := range reload {
			if err := r(); err != nil {
				t.Fatal(err)
			}
		}
		return currentIndex(t, urls[0])
	}
	// 120 samples, steps of 10 (world 2): 12 steps an epoch, then 14,
	// then 16.
	const shape = "dataset=test&seed=7&window=4&batch_size=5&world=2"
	const world = 2
	v := currentIndex(t, urls[0])
	type read struct {
		etag string
		body []byte
	}
	// batch reads step m of epoch's rank r of the job from every node,
	// which must agree, and marks it served on each.
	batch := func(epoch, m, r int) read {
		t.Helper()
		var first read
		for k, u := range urls {
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d&index=%s&job=run", u, epoch, m, shape, r, v))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Brand-Index") != v {
				t.Fatalf("node %d epoch %d step %d rank %d: %s, index %s: %s", k, epoch, m, r, resp.Status, resp.Header.Get("Brand-Index"), body)
			}
			got := read{resp.Header.Get("ETag"), body}
			if k == 0 {
				first = got
			} else if got.etag != first.etag || !bytes.Equal(got.body, first.body) {
				t.Fatalf("epoch %d step %d rank %d: node %d serves other bytes than node 0", epoch, m, r, k)
			}
		}
		return first
	}
	seenOf := func(epoch, steps int) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for m := range steps {
			for r := range world {
				for _, s := range readTar(t, batch(epoch, m, r).body) {
					seen[s.key]++
				}
			}
		}
		return seen
	}
	type at struct{ epoch, m int }
	served := map[at][world]read{}
	serve := func(epoch, from, to int) {
		t.Helper()
		for m := from; m < to; m++ {
			var rs [world]read
			for r := range world {
				rs[r] = batch(epoch, m, r)
			}
			served[at{epoch, m}] = rs
		}
	}
	post := func(body string, out any) (*http.Response, []byte) {
		t.Helper()
		return postJSON(t, urls[0]+"/jobs/run/append?"+shape+"&index="+v, body, out)
	}
	settle := func() {
		if nodes > 1 {
			time.Sleep(chain.Refresh + 100*time.Millisecond) // the other nodes ask the store again
		}
	}

	serve(0, 0, 4)
	x1 := grow("f9")
	var r1 api.StoredAppend
	if resp, body := post(`{"from_step": 6, "index": "`+x1+`"}`, &r1); resp.StatusCode != http.StatusCreated || r1.Epoch != 0 || r1.FromPosition != 60 {
		t.Fatalf("first append: %s %s", resp.Status, body)
	}
	settle()
	last := 9 // the steps served under the first record: up to 8
	if successive {
		serve(0, 4, 14)
		serve(1, 0, 3)
	} else {
		serve(0, 4, last)
	}
	x2 := grow("f8")

	if !successive {
		for _, tc := range []struct {
			name, body string
			status     int
		}{
			{"without previous", `{"from_step": 10, "index": "` + x2 + `"}`, http.StatusConflict},
			{"a stale previous", `{"from_step": 10, "index": "` + x2 + `", "previous": "0123456789abcdef"}`, http.StatusConflict},
			{"the job's first index", `{"from_step": 10, "index": "` + v + `", "previous": "` + r1.Version + `"}`, http.StatusUnprocessableEntity},
			{"the previous record's index", `{"from_step": 10, "index": "` + x1 + `", "previous": "` + r1.Version + `"}`, http.StatusUnprocessableEntity},
			{"before the previous record's step", `{"from_step": 5, "index": "` + x2 + `", "previous": "` + r1.Version + `"}`, http.StatusBadRequest},
			{"a step served", `{"from_step": 8, "index": "` + x2 + `", "previous": "` + r1.Version + `"}`, http.StatusConflict},
		} {
			resp, body := post(tc.body, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("%s: %s %s; want %d", tc.name, resp.Status, body, tc.status)
			}
			if tc.status == http.StatusConflict && tc.name != "a step served" && !bytes.Contains(body, []byte(r1.Version)) {
				t.Fatalf("%s: %s does not name the current record %s", tc.name, body, r1.Version)
			}
		}
	}
	step, epoch, pos := 10, 0, 100
	if successive {
		step, epoch, pos = 14+3, 1, 30 // epoch 0 has 14 steps under the first record
	}
	var r2 api.StoredAppend
	body := fmt.Sprintf(`{"from_step": %d, "index": %q, "previous": %q}`, step, x2, r1.Version)
	if resp, b := post(body, &r2); resp.StatusCode != http.StatusCreated || r2.Previous != r1.Version || r2.IndexID != x1 || r2.Index != x2 ||
		r2.Epoch != uint64(epoch) || r2.FromPosition != pos || r2.Samples != len(want)+40 || r2.NewSamples != 20 {
		t.Fatalf("second append: %s %s", resp.Status, b)
	}
	var again api.StoredAppend
	if resp, b := post(body, &again); resp.StatusCode != http.StatusCreated || again.Version != r2.Version {
		t.Fatalf("the second record again: %s %s", resp.Status, b)
	}
	if resp, b := get(t, urls[0]+"/jobs/run/append?"+shape+"&index="+v); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(r2.Version)) || !bytes.Contains(b, []byte(r1.Version)) {
		t.Fatalf("GET: %s %s", resp.Status, b)
	}
	settle()

	// The steps served before are what they were.
	for k, rs := range served {
		for r := range world {
			if got := batch(k.epoch, k.m, r); got.etag != rs[r].etag || !bytes.Equal(got.body, rs[r].body) {
				t.Fatalf("epoch %d step %d rank %d, before the second record's step, changed", k.epoch, k.m, r)
			}
		}
	}
	steps := []int{16, 16, 16}
	if successive {
		steps = []int{14, 16, 16}
	}
	for e, n := range steps {
		var ep api.EpochInfo
		resp, b := get(t, fmt.Sprintf("%s/epoch/%d?%s&job=run&index=%s", urls[len(urls)-1], e, shape, v))
		if json.Unmarshal(b, &ep) != nil || resp.StatusCode != http.StatusOK || ep.Batches != n {
			t.Fatalf("/epoch/%d: %s %s; want %d batches", e, resp.Status, b, n)
		}
		exactlyOnce(t, seenOf(e, n), n*10, fmt.Sprintf("epoch %d", e))
	}
	// The epoch after the last record's is the whole newest version's
	// order: the samples a job without records reads of it.
	after := epoch + 1
	for m := range 16 {
		for r := range world {
			resp, b := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d&index=%s", urls[0], after, m, shape, r, x2))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("plain epoch %d step %d: %s %s", after, m, resp.Status, b)
			}
			if got, want := keysOf(t, batch(after, m, r).body), keysOf(t, b); !slices.Equal(got, want) {
				t.Fatalf("epoch %d step %d rank %d: %v, the newest version's order %v", after, m, r, got, want)
			}
		}
	}
}

// keysOf are the keys of a batch's samples, in order.
func keysOf(t *testing.T, body []byte) []string {
	t.Helper()
	var ks []string
	for _, s := range readTar(t, body) {
		ks = append(ks, s.key)
	}
	return ks
}

// TestPlanKnowsTheAppendChain: GET /plan of a job that took two appends
// in turn (the second in the epoch after the first's) plans the order the
// job is served: a gateway started afterwards (the records from the
// store) serves three epochs of the job through a cache of half the
// dataset, and each epoch's chunk accesses, and the first epoch's store
// bytes, are the plan's. The plan's job names both records.
func TestPlanKnowsTheAppendChain(t *testing.T) {
	st, want := inPlaceStore(t, formattest.Lines{})
	lines := func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} }
	g, srv := start(t, st, lines)
	const shape = "dataset=test&seed=7&window=4&batch_size=5"
	v := currentIndex(t, srv.URL)
	grow := func(name string) string {
		t.Helper()
		appendFile(t, st, name)
		if _, err := g.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		return currentIndex(t, srv.URL)
	}
	url := fmt.Sprintf("%s/jobs/run/append?%s&index=%s", srv.URL, shape, v)
	var r1, r2 api.StoredAppend
	if resp, body := postJSON(t, url, `{"from_step": 9, "index": "`+grow("f9")+`"}`, &r1); resp.StatusCode != http.StatusCreated {
		t.Fatalf("first append: %s %s", resp.Status, body)
	}
	// Epoch 0 has 28 steps under the first record: step 32 is epoch 1's
	// fifth.
	x := grow("f8")
	if resp, body := postJSON(t, url, fmt.Sprintf(`{"from_step": 32, "index": %q, "previous": %q}`, x, r1.Version), &r2); resp.StatusCode != http.StatusCreated || r2.Epoch != 1 || r2.FromPosition != 20 {
		t.Fatalf("second append: %s %s", resp.Status, body)
	}
	cache := planOf(t, srv.URL, shape+"&index="+x).DatasetBytes / 2

	g2, srv2 := start(t, st, func(c *gateway.Config) {
		lines(c)
		c.CacheSize = cache
		c.PrefetchConcurrency = -1 // the plan's figures are demand reads
		// The use table's pace held, as TestPlanKnowsTheAppend holds it:
		// the keys are the job's order alone. So held, epoch 0 read 4,119
		// store bytes against the plan's 3,375 in every run, and with the
		// table's own clock in about one suite run in three: a chunk of
		// the version before the second record, which epoch 0's batches
		// read, was keyed by the newest version's uses alone when the
		// table listed that version first (usetable's
		// TestUseTableDistanceOverGrownVersions).
		c.MaxTurnWait = -1
		gateway.HoldUseTableClock(c)
	})
	const epochs = 3
	plan := planOf(t, srv2.URL, fmt.Sprintf("%s&job=run&index=%s&cache_size=%d&epochs=%d", shape, v, cache, epochs))
	if plan.Samples != len(want)+40 {
		t.Errorf("the plan's samples: %d; want the newest size %d", plan.Samples, len(want)+40)
	}
	if a := plan.Job.Edit; a == nil || a.Version != r2.Version || a.Epoch != 1 || a.From != 20 || a.Previous == nil || a.Previous.Version != r1.Version || a.Previous.From != 45 {
		t.Errorf("the plan's job names the records %+v; want %s from position 20 of epoch 1 after %s", a, r2.Version, r1.Version)
	}
	readAppendedEpochs(t, srv2.URL, shape, v, epochs)
	checkAppendedEpochs(t, g2, plan, epochs)
}

// TestOldVersionOnAClusterAfterAppend: a cluster node holds its
// dataset's index in part and reads the sample tables of chunks it does
// not keep from the stored index object when a batch needs them. An
// append replaces that object; a job pinned to the version before it
// (index=) goes on reading that version on every node, each batch the
// bytes and ETag it had before the append, with a table cache too small
// to keep any table read (every read goes to the object), and a job
// pinned to it takes an exclusion of its keys. Both answered 502 while
// the nodes read the old version's tables from the replaced object.
func TestOldVersionOnAClusterAfterAppend(t *testing.T) {
	st, _ := inPlaceStore(t, formattest.Lines{})
	nodes := startCluster(t, &fixture{store: st.(*s3backend.Local)}, 3, nil, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
		c.IndexTablesCache = 1
	})
	const shape = "dataset=test&seed=7&window=4&batch_size=5&world=2"
	v := currentIndex(t, nodes[0].srv.URL)
	type read struct {
		etag string
		body []byte
	}
	readAll := func() map[string]read {
		t.Helper()
		out := map[string]read{}
		for k, n := range nodes {
			for m := range 12 {
				for r := range 2 {
					resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d&index=%s", n.srv.URL, m, shape, r, v))
					if resp.StatusCode != http.StatusOK || resp.Header.Get("Brand-Index") != v {
						t.Fatalf("node %d step %d rank %d of version %s: %s, index %s: %s", k, m, r, v, resp.Status, resp.Header.Get("Brand-Index"), body)
					}
					out[fmt.Sprintf("%d/%d/%d", k, m, r)] = read{resp.Header.Get("ETag"), body}
				}
			}
		}
		return out
	}
	before := readAll()
	appendFile(t, st, "g0")
	for _, n := range nodes {
		if _, err := n.g.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if cur := currentIndex(t, nodes[0].srv.URL); cur == v {
		t.Fatalf("the nodes still serve %s after the append", v)
	}
	for key, got := range readAll() {
		if want := before[key]; got.etag != want.etag || !bytes.Equal(got.body, want.body) {
			t.Fatalf("node/step/rank %s of version %s: other bytes after the append (ETag %s, before %s)", key, v, got.etag, want.etag)
		}
	}
	resp, body := do(t, http.MethodPost, fmt.Sprintf("%s/jobs/old/exclude?%s&index=%s", nodes[1].srv.URL, shape, v),
		[]byte(`{"from_step": 3, "keys": ["data/f0/1", "data/f2/7"]}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("an exclusion of a job pinned to %s after the append: %s %s", v, resp.Status, body)
	}
}
