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
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/s3backend"
)

// appendLines adds data/f9.lines (20 lines) beside an inPlaceStore's
// files and appends it to the dataset (brand index --append).
func appendLines(t *testing.T, st s3backend.Store) {
	t.Helper()
	var lines []string
	for l := range 20 {
		lines = append(lines, fmt.Sprintf("added line %d", l))
	}
	for k, b := range formattest.Write(map[string][]string{"data/f9.lines": lines}) {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.AppendInPlace(context.Background(), st, st, dataset.AppendOptions{
		Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		t.Fatal(err)
	}
}

// A job pinned to an index version (index=V) is served V's order by a
// gateway that holds only a version extending V (files appended since,
// the gateway started after): the same batches, byte for byte, under the
// same ETags, and /epoch/N describes V — where it was a 409 before.
// Unpinned requests read the extended version.
func TestPinnedVersionAfterAppend(t *testing.T) {
	st, want := inPlaceStore(t, formattest.Lines{})
	_, before := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} })
	const q = "seed=7&window=4&batch_size=8&world=2&rank=1"
	resp, _ := get(t, before.URL+"/epoch/0/batch/0?"+q)
	v := resp.Header.Get("Brand-Index")
	type read struct {
		etag string
		body []byte
	}
	var old []read
	batches := len(want) / 16
	for epoch := range 2 {
		for m := range batches {
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&index=%s", before.URL, epoch, m, q, v))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("epoch %d batch %d: %s %s", epoch, m, resp.Status, body)
			}
			old = append(old, read{resp.Header.Get("ETag"), body})
		}
	}

	appendLines(t, st)
	_, after := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} })
	i := 0
	for epoch := range 2 {
		for m := range batches {
			resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&index=%s", after.URL, epoch, m, q, v))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("pinned to %s after the append: epoch %d batch %d: %s %s", v, epoch, m, resp.Status, body)
			}
			if got := resp.Header.Get("ETag"); got != old[i].etag || !bytes.Equal(body, old[i].body) || resp.Header.Get("Brand-Index") != v {
				t.Fatalf("epoch %d batch %d: ETag %s, index %s (want %s, %s), same bytes %v", epoch, m, got, resp.Header.Get("Brand-Index"), old[i].etag, v, bytes.Equal(body, old[i].body))
			}
			i++
		}
	}
	var ep struct {
		Index   string `json:"index"`
		Samples int    `json:"samples"`
	}
	resp, body := get(t, after.URL+"/epoch/0?"+q+"&index="+v)
	if err := json.Unmarshal(body, &ep); err != nil || resp.StatusCode != http.StatusOK || ep.Index != v || ep.Samples != len(want) {
		t.Fatalf("/epoch/0 pinned: %s %s", resp.Status, body)
	}
	resp, body = get(t, after.URL+"/epoch/0?"+q)
	if err := json.Unmarshal(body, &ep); err != nil || ep.Index == v || ep.Samples != len(want)+20 {
		t.Fatalf("/epoch/0 unpinned: %s %s", resp.Status, body)
	}
}

// post sends a JSON body and decodes the answer into out (if not nil).
func postJSON(t *testing.T, url, body string, out any) (*http.Response, []byte) {
	t.Helper()
	resp, b := do(t, http.MethodPost, url, []byte(body), "Content-Type", "application/json")
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	}
	return resp, b
}

// A running job takes the samples appended to its dataset from a step
// of its choosing (POST /jobs/{job}/append): the steps before it are
// what they were, byte for byte under their ETags; the epoch holding it
// serves every old and every new sample once; the next epoch serves them
// all once too; every answer names the version the job pinned; a
// gateway started afterwards serves the same batches (the record is in
// the store). A step the job has read, an index that does not extend the
// job's, and a second record are refused.
func TestJobAppend(t *testing.T) {
	st, want := inPlaceStore(t, formattest.Lines{})
	lines := func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} }
	g, srv := start(t, st, lines)
	const shape = "dataset=test&seed=7&window=4&batch_size=5&world=2"
	resp, _ := get(t, srv.URL+"/epoch/0/batch/0?"+shape)
	v := resp.Header.Get("Brand-Index")
	type read struct {
		etag string
		body []byte
	}
	batch := func(base, job string, epoch, step, rank int) read {
		t.Helper()
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d&index=%s%s", base, epoch, step, shape, rank, v, job))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Brand-Index") != v {
			t.Fatalf("epoch %d step %d rank %d: %s, index %s: %s", epoch, step, rank, resp.Status, resp.Header.Get("Brand-Index"), body)
		}
		return read{resp.Header.Get("ETag"), body}
	}
	// Before the append: the order the job reads (12 steps of 10).
	var ref [12][2]read
	for m := range 12 {
		for r := range 2 {
			ref[m][r] = batch(srv.URL, "", 0, m, r)
		}
	}
	seen := map[string]int{}
	for m := range 4 {
		for r := range 2 {
			got := batch(srv.URL, "&job=run", 0, m, r)
			for _, s := range readTar(t, got.body) {
				seen[s.key]++
			}
		}
	}

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
	url := srv.URL + "/jobs/run/append?" + shape + "&index=" + v
	resp, body = postJSON(t, url, `{"from_step": 2, "index": "`+x+`"}`, nil)
	var refusal struct {
		FirstEditableStep *uint64 `json:"first_editable_step"`
	}
	if json.Unmarshal(body, &refusal); resp.StatusCode != http.StatusConflict || refusal.FirstEditableStep == nil || *refusal.FirstEditableStep != 4 {
		t.Fatalf("from a step read: %s %s", resp.Status, body)
	}
	if resp, body := postJSON(t, url, `{"from_step": 6, "index": "`+v+`"}`, nil); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("an index that does not extend the job's: %s %s", resp.Status, body)
	}
	var made api.StoredAppend
	resp, body = postJSON(t, url, `{"from_step": 6, "index": "`+x+`"}`, &made)
	if resp.StatusCode != http.StatusCreated || made.Epoch != 0 || made.FromPosition != 60 || made.NewSamples != 20 || made.Samples != len(want)+20 || made.IndexID != v || made.Index != x {
		t.Fatalf("append: %s %s", resp.Status, body)
	}
	var again api.StoredAppend
	if resp, body := postJSON(t, url, `{"from_step": 6, "index": "`+x+`"}`, &again); resp.StatusCode != http.StatusCreated || again.Version != made.Version {
		t.Fatalf("the same record again: %s %s", resp.Status, body)
	}
	if resp, body := postJSON(t, url, `{"from_step": 8, "index": "`+x+`"}`, nil); resp.StatusCode != http.StatusConflict || !bytes.Contains(body, []byte(made.Version)) {
		t.Fatalf("another record: %s %s", resp.Status, body)
	}
	if resp, body := get(t, url); resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(made.Version)) {
		t.Fatalf("GET: %s %s", resp.Status, body)
	}

	var ep struct {
		Index   string `json:"index"`
		Samples int    `json:"samples"`
		Batches int    `json:"batches"`
	}
	for epoch := range 2 {
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s&job=run&index=%s", srv.URL, epoch, shape, v))
		if err := json.Unmarshal(body, &ep); err != nil || resp.StatusCode != http.StatusOK || ep.Index != v || ep.Samples != len(want)+20 || ep.Batches != 14 {
			t.Fatalf("/epoch/%d: %s %s", epoch, resp.Status, body)
		}
	}
	// A gateway started now holds the extension alone, and finds the
	// record in the store.
	_, fresh := start(t, st, lines)
	for m := 4; m < 14; m++ {
		for r := range 2 {
			got := batch(srv.URL, "&job=run", 0, m, r)
			if m < 6 && (got.etag != ref[m][r].etag || !bytes.Equal(got.body, ref[m][r].body)) {
				t.Fatalf("step %d rank %d, before the append's step, changed", m, r)
			}
			if m >= 6 && m < 12 && got.etag == ref[m][r].etag {
				t.Fatalf("step %d rank %d, from the append's step on, kept its ETag", m, r)
			}
			if other := batch(fresh.URL, "&job=run", 0, m, r); other.etag != got.etag || !bytes.Equal(other.body, got.body) {
				t.Fatalf("step %d rank %d: a gateway started after the append serves other bytes", m, r)
			}
			for _, s := range readTar(t, got.body) {
				seen[s.key]++
			}
		}
	}
	exactlyOnce(t, seen, len(want)+20, "the append's epoch")
	seen = map[string]int{}
	for m := range 14 {
		for r := range 2 {
			for _, s := range readTar(t, batch(srv.URL, "&job=run", 1, m, r).body) {
				seen[s.key]++
			}
		}
	}
	exactlyOnce(t, seen, len(want)+20, "the next epoch")

	// An exclusion of a job with an append is its next edit: it names the
	// append as its previous (a 409 naming it otherwise).
	if resp, body := postJSON(t, srv.URL+"/jobs/run/exclude?"+shape+"&index="+v, `{"from_step": 1000, "keys": ["data/f0/1"]}`, nil); resp.StatusCode != http.StatusConflict ||
		!strings.Contains(string(body), `"edit_version": "`+made.Version+`"`) {
		t.Fatalf("an exclusion after an append naming no previous: %s %s", resp.Status, body)
	}
	if resp, body := postJSON(t, srv.URL+"/jobs/run/exclude?"+shape+"&index="+v, `{"from_step": 1000, "keys": ["data/f0/1"], "previous": "`+made.Version+`"}`, nil); resp.StatusCode != http.StatusCreated {
		t.Fatalf("an exclusion after an append: %s %s", resp.Status, body)
	}
}

// An append on a cluster of 3 (world 3, locality on: each rank's share
// of a step depends on the chunks' owners): every node serves the steps
// before the record's as they were, byte for byte under their ETags;
// from it on, any node serves a rank's batch with the same bytes; the
// epoch holding it and the next serve every old and new sample once
// over the ranks.
func TestJobAppendOnACluster(t *testing.T) {
	st, want := inPlaceStore(t, formattest.Lines{})
	const nodes, world = 3, 3
	cl := startCluster(t, &fixture{store: st.(*s3backend.Local)}, nodes, nil, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
	})
	const shape = "dataset=test&seed=7&window=4&batch_size=4&world=3"
	resp, body := get(t, cl[0].srv.URL+"/epoch/0/batch/0?"+shape)
	v := resp.Header.Get("Brand-Index")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Brand-Members") == "" {
		t.Fatalf("%s %s", resp.Status, body)
	}
	type read struct {
		etag string
		body []byte
	}
	batch := func(node, epoch, step, rank int, job string) read {
		t.Helper()
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d&index=%s%s", cl[node].srv.URL, epoch, step, shape, rank, v, job))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Brand-Index") != v {
			t.Fatalf("node %d epoch %d step %d rank %d: %s, index %s: %s", node, epoch, step, rank, resp.Status, resp.Header.Get("Brand-Index"), body)
		}
		return read{resp.Header.Get("ETag"), body}
	}
	// 120 samples, steps of 12: 10 steps an epoch before, 12 after.
	var ref [10][world]read
	for m := range 10 {
		for r := range world {
			ref[m][r] = batch(m%nodes, 0, m, r, "")
		}
	}
	seen := map[string]int{}
	for m := range 3 {
		for r := range world {
			for _, s := range readTar(t, batch(r, 0, m, r, "&job=run").body) {
				seen[s.key]++
			}
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
	if err := json.Unmarshal(body, &dss); err != nil {
		t.Fatal(err)
	}
	x := dss.Datasets[0].Index
	var made api.StoredAppend
	if resp, body := postJSON(t, cl[1].srv.URL+"/jobs/run/append?"+shape+"&index="+v, `{"from_step": 5, "index": "`+x+`"}`, &made); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append: %s %s", resp.Status, body)
	}
	// The nodes that found no record ask the store again within Refresh.
	time.Sleep(chain.Refresh)
	for m := 3; m < 12; m++ {
		for r := range world {
			got := batch(r, 0, m, r, "&job=run")
			if m < 5 && (got.etag != ref[m][r].etag || !bytes.Equal(got.body, ref[m][r].body)) {
				t.Fatalf("step %d rank %d, before the append's step, changed", m, r)
			}
			for k := range nodes {
				if other := batch(k, 0, m, r, "&job=run"); other.etag != got.etag || !bytes.Equal(other.body, got.body) {
					t.Fatalf("step %d rank %d: node %d serves other bytes than node %d", m, r, k, r)
				}
			}
			for _, s := range readTar(t, got.body) {
				seen[s.key]++
			}
		}
	}
	exactlyOnce(t, seen, len(want)+20, "the append's epoch over the ranks")
	seen = map[string]int{}
	for m := range 12 {
		for r := range world {
			for _, s := range readTar(t, batch((r+m)%nodes, 1, m, r, "&job=run").body) {
				seen[s.key]++
			}
		}
	}
	exactlyOnce(t, seen, len(want)+20, "the next epoch over the ranks")
}
