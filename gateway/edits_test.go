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
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/s3backend"
)

// appendFile is gatewaytest.AppendFile.
func appendFile(t *testing.T, st s3backend.Store, name string) {
	t.Helper()
	gatewaytest.AppendFile(t, st, name)
}

// currentIndex is the index version a gateway serves of its dataset.
func currentIndex(t *testing.T, base string) string { return datasets(t, base).IndexID }

// TestEditEndpoints is the HTTP contract of a named job's edits (POST
// and GET /jobs/{job}/exclude, /append and GET /jobs/{job}/edits): each
// answer's status, and the body's fields only the gateway writes — the
// edit made, counted over the dataset; a refusal's first_editable_step
// and edit_version — over a dataset served in place, its job pinned to
// the version it read first. A batch served before the edits keeps its
// bytes and ETag, and /epoch/N counts the samples appended. What the
// edits do to the job's order, and why each is refused, are
// internal/job/resolve's TestEditChain and its tests of a cluster's
// edits (TestEditsAskEveryMember, TestEditReleasesTheHolds), the chain's
// internal/job/chain's, the orders internal/batch/layout's
// TestExcludedOrder, TestExtendedOrder, TestAppendedOrder and
// TestAppendChainLayout; the model's TestModel holds random chains of
// edits through HTTP.
func TestEditEndpoints(t *testing.T) {
	st, want := inPlaceStore(t, formattest.Lines{})
	g, srv := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} })
	v := currentIndex(t, srv.URL)
	// 120 samples, steps of 10: the job reads steps 0 to 3.
	job := "dataset=test&seed=7&window=4&batch_size=5&world=2&job=run&index=" + v
	resp, first := get(t, srv.URL+"/epoch/0/batch/0?rank=1&"+job)
	etag := resp.Header.Get("ETag")
	for m := range 4 {
		for rank := range 2 {
			if resp, b := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?rank=%d&%s", srv.URL, m, rank, job)); resp.StatusCode != http.StatusOK {
				t.Fatalf("step %d rank %d: %s %s", m, rank, resp.Status, b)
			}
		}
	}
	var x api.StoredExclusion
	var a api.StoredAppend
	for _, tc := range []struct {
		name, method, path, body string
		grow                     bool // the dataset grows (brand index --append) and the gateway reloads first
		status                   int
		says                     string
		next                     uint64 // a 409's first_editable_step
		edit                     *string
		out                      any
	}{
		{name: "no exclusion yet", method: http.MethodGet, path: "exclude", status: http.StatusNotFound},
		{name: "no edits yet", method: http.MethodGet, path: "edits", status: http.StatusNotFound},
		{name: "not an object", method: http.MethodPost, path: "exclude", body: `"not an object"`, status: http.StatusBadRequest, says: "JSON object"},
		{name: "an unknown field", method: http.MethodPost, path: "exclude", body: `{"from_step": 9, "keys": ["data/f0/1"], "extra": 1}`, status: http.StatusBadRequest, says: "extra"},
		{name: "no keys", method: http.MethodPost, path: "exclude", body: `{"from_step": 9}`, status: http.StatusBadRequest, says: "keys"},
		{name: "no step", method: http.MethodPost, path: "exclude", body: `{"keys": ["data/f0/1"]}`, status: http.StatusBadRequest, says: "from_step"},
		{name: "unknown keys", method: http.MethodPost, path: "exclude", body: `{"from_step": 9, "keys": ["data/f0/1", "nope/1"]}`, status: http.StatusUnprocessableEntity, says: "nope/1"},
		{name: "a step served", method: http.MethodPost, path: "exclude", body: `{"from_step": 2, "keys": ["data/f0/1"]}`, status: http.StatusConflict, next: 4},
		{name: "a token job", method: http.MethodPost, path: "exclude", body: `{"from_step": 9, "keys": ["data/f0/1"]}`, status: http.StatusBadRequest, says: features.Lookup(features.Tokens, features.Exclusion).Message},
		{name: "an exclusion", method: http.MethodPost, path: "exclude", body: `{"from_step": 5, "keys": ["data/f0/1", "data/f2/7"]}`, status: http.StatusCreated, out: &x},
		{name: "the same again", method: http.MethodPost, path: "exclude", body: `{"from_step": 5, "keys": ["data/f0/1", "data/f2/7"]}`, status: http.StatusCreated, edit: &x.Version},
		{name: "a second naming no previous", method: http.MethodPost, path: "exclude", body: `{"from_step": 6, "keys": ["data/f1/1"]}`, status: http.StatusConflict, edit: &x.Version},
		{name: "the exclusion", method: http.MethodGet, path: "exclude", status: http.StatusOK, edit: &x.Version, says: "data/f2/7"},
		{name: "an append naming no index", method: http.MethodPost, path: "append", body: `{"from_step": 6}`, grow: true, status: http.StatusBadRequest, says: "index"},
		{name: "an append of the job's own version", method: http.MethodPost, path: "append", body: `{"from_step": 6, "index": "` + v + `", "previous": "PREV"}`, status: http.StatusUnprocessableEntity},
		{name: "an append", method: http.MethodPost, path: "append", body: `{"from_step": 6, "index": "NEW", "previous": "PREV"}`, status: http.StatusCreated, out: &a},
		{name: "the append", method: http.MethodGet, path: "append", status: http.StatusOK, edit: &a.Version},
		{name: "the edits", method: http.MethodGet, path: "edits", status: http.StatusOK, edit: &a.Version, says: `"kind": "exclude"`},
	} {
		if tc.grow {
			appendFile(t, st, "f9")
			if _, err := g.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		q := job
		if tc.name == "a token job" {
			q += "&seq=16"
		}
		body := strings.NewReplacer("PREV", x.Version, "NEW", currentIndex(t, srv.URL)).Replace(tc.body)
		resp, b := do(t, tc.method, srv.URL+"/jobs/run/"+tc.path+"?"+q, []byte(body))
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.says) {
			t.Fatalf("%s: %s %s; want %d saying %q", tc.name, resp.Status, b, tc.status, tc.says)
		}
		var e api.Error
		if tc.status >= 300 && json.Unmarshal(b, &e) != nil {
			t.Fatalf("%s: %s is not an error's JSON", tc.name, b)
		}
		if tc.next > 0 && (e.FirstEditableStep == nil || *e.FirstEditableStep != tc.next) {
			t.Fatalf("%s: %s; want first_editable_step %d", tc.name, b, tc.next)
		}
		if tc.edit != nil && !strings.Contains(string(b), *tc.edit) || tc.status == http.StatusConflict && tc.next == 0 && e.EditVersion != x.Version {
			t.Fatalf("%s: %s does not name the edit", tc.name, b)
		}
		if tc.out != nil && json.Unmarshal(b, tc.out) != nil {
			t.Fatalf("%s: %s", tc.name, b)
		}
	}
	if x.Samples != 2 || x.EmptyChunks != 0 || x.FromPosition != 50 || x.Epoch != 0 || x.IndexID != v {
		t.Errorf("the exclusion answered %+v; want 2 samples from position 50 of epoch 0 over index %s", x, v)
	}
	if a.Previous != x.Version || a.IndexID != v || a.NewSamples != 20 || a.Samples != len(want)+20 || a.FromPosition != 60 {
		t.Errorf("the append answered %+v; want 20 new samples of %d, from position 60, after %s", a, len(want)+20, x.Version)
	}
	resp, b := get(t, srv.URL+"/epoch/0/batch/0?rank=1&"+job)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != etag || resp.Header.Get("Brand-Index") != v || !bytes.Equal(b, first) {
		t.Errorf("a batch served before the edits: %s, ETag %s (was %s), index %s: the same bytes %t", resp.Status, resp.Header.Get("ETag"), etag, resp.Header.Get("Brand-Index"), bytes.Equal(b, first))
	}
	var ep api.EpochInfo
	if resp, b := get(t, srv.URL+"/epoch/1?"+job); resp.StatusCode != http.StatusOK || json.Unmarshal(b, &ep) != nil || ep.Samples != len(want)+18 || ep.Batches != 14 {
		t.Errorf("/epoch/1 of the job: %s %s; want its 138 samples in 14 batches", resp.Status, b)
	}
}

// TestEditedJobMadeAheadCounts: a named job with a pipeline has its
// rank's next batch made ahead once a batch is served. Under an append
// or an exclusion from a later step, stored before the job starts or
// once its batch 1 is made ahead, each batch asked after its copy made
// ahead is ready answers the edited epoch's counts (Brand-Epoch-Batches,
// Brand-Epoch-Samples), those /epoch/N gives, and the bytes and ETag the
// batch has on a gateway that asks it first; and every batch after the
// first is taken from its copy (issue 103: a batch made ahead before the
// edit's step was laid out under the job without its edit, and answered
// the unedited epoch's counts; so did a copy made before the edit was
// stored, and the copy after it was made under the wrong ETag).
func TestEditedJobMadeAheadCounts(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		after bool // the edit stored once batch 1 is made ahead
	}{{"append", false}, {"exclude", false}, {"append", true}, {"exclude", true}} {
		t.Run(fmt.Sprintf("%s,after=%t", tc.kind, tc.after), func(t *testing.T) {
			serve := func(c *gateway.Config) {
				c.Datasets[0].Formats = []format.Format{formattest.Lines{}}
				c.Transforms = testTransforms(t)
				c.TransformWorkers = 2
			}
			st, _ := inPlaceStore(t, formattest.Lines{})
			g, srv := start(t, st, serve)
			v := currentIndex(t, srv.URL)
			job := "dataset=test&seed=21&window=2&batch_size=8&world=2&job=J&index=" + v
			q := job + "&transform=plain&rank=0"
			madeAhead := func() {
				t.Helper()
				gatewaytest.WaitFor(t, 10*time.Second, "a batch made ahead", func() bool {
					return g.TransformStats().Ahead.Bytes > 0
				})
			}
			batch := func(base string, m int) (*http.Response, []byte) {
				t.Helper()
				resp, b := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", base, m, q))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("batch %d: %s %s", m, resp.Status, b)
				}
				return resp, b
			}
			first := 0
			if tc.after {
				batch(srv.URL, 0)
				madeAhead()
				first = 1
			}
			body := `{"from_step": 2, "keys": ["data/f0/1", "data/f1/3", "data/f2/5"]}`
			if tc.kind == "append" {
				appendFile(t, st, "f9")
				if _, err := g.Reload(context.Background()); err != nil {
					t.Fatal(err)
				}
				body = `{"from_step": 2, "index": "` + currentIndex(t, srv.URL) + `"}`
			}
			if resp, b := do(t, http.MethodPost, srv.URL+"/jobs/J/"+tc.kind+"?"+job, []byte(body)); resp.StatusCode != http.StatusCreated {
				t.Fatalf("the %s: %s %s", tc.kind, resp.Status, b)
			}
			// A gateway started after the edit, which asks every batch first.
			_, fresh := start(t, st, serve)
			var ep api.EpochInfo
			if resp, b := get(t, srv.URL+"/epoch/0?"+job); resp.StatusCode != http.StatusOK || json.Unmarshal(b, &ep) != nil {
				t.Fatalf("/epoch/0: %s %s", resp.Status, b)
			}
			for m := first; m < ep.Batches; m++ {
				if m > 0 {
					madeAhead() // once batch m-1 was served
				}
				resp, b := batch(srv.URL, m)
				if n, s := resp.Header.Get(api.HeaderEpochBatches), resp.Header.Get(api.HeaderEpochSamples); n != fmt.Sprint(ep.Batches) || s != fmt.Sprint(ep.Samples) {
					t.Errorf("batch %d: %s %s, %s %s; /epoch/0 says %d batches of %d samples", m, api.HeaderEpochBatches, n, api.HeaderEpochSamples, s, ep.Batches, ep.Samples)
				}
				direct, db := batch(fresh.URL, m)
				if direct.Header.Get("ETag") != resp.Header.Get("ETag") || !bytes.Equal(db, b) {
					t.Errorf("batch %d: made ahead, ETag %s; asked first, %s: the same bytes %t", m, resp.Header.Get("ETag"), direct.Header.Get("ETag"), bytes.Equal(db, b))
				}
			}
			if st := g.TransformStats().Ahead; st.Hits != int64(ep.Batches-1) {
				t.Errorf("made ahead: %+v; want every batch after the first taken from its copy", st)
			}
		})
	}
}
