package gateway_test

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway/gatewaytest"
)

// post is gatewaytest.Post.
func post(t *testing.T, url, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	return gatewaytest.Post(t, url, contentType, body)
}

// feedEpoch reports a loss for every sample of an epoch: samples of the
// first chunks are "hard" (high loss), so that scores cluster by chunk.
func feedEpoch(t *testing.T, base string, f *fixture, job string, epoch int) {
	t.Helper()
	n := f.index.NumSamples()
	ids := make([]int, n)
	losses := make([]float32, n)
	for i := range n {
		ids[i] = i
		losses[i] = 0.01 + float32((n-i)%97)/1000
		if i < n/4 {
			losses[i] += 2
		}
	}
	url := fmt.Sprintf("%s/importance/%s/feedback?epoch=%d", base, job, epoch)
	if resp, body := post(t, url, "application/octet-stream", gatewaytest.BinaryFeedback(ids, losses)); resp.StatusCode != http.StatusOK {
		t.Fatalf("feedback: %s: %s", resp.Status, body)
	}
}

// seal is gatewaytest.Seal.
func seal(t *testing.T, base, job string, epoch int, prev string) gatewaytest.Sealed {
	t.Helper()
	return gatewaytest.Seal(t, base, job, epoch, prev)
}

// TestImportanceFeedbackSealAndReplicas: the HTTP contract of a seal
// and of its epoch on another replica: feedback and a seal answer 200,
// the seal counting every sample reported and naming a version; another
// gateway over the store answers /importance/JOB/epochs/0 with it and 404
// for an epoch not sealed, and serves the importance epoch's batches as
// the sealing gateway does, loading the snapshot on the request. (That
// the seal is one version, what another node reads of it and the epoch
// laid out alike: internal/job/feedback's TestAnotherNodeReadsTheSeal and
// TestSealsConvergeAcrossNodes.)
func TestImportanceFeedbackSealAndReplicas(t *testing.T) {
	f := newFixture(t, 32, 16)
	_, a := start(t, f.store, nil)
	_, b := start(t, f.store, nil)
	const job = "train-1"
	feedEpoch(t, a.URL, f, job, 0)
	s := seal(t, a.URL, job, 0, "")
	if s.Reported != f.index.NumSamples() || len(s.Version) != 16 {
		t.Fatalf("seal = %+v, want every sample reported and a version", s)
	}
	if resp, body := get(t, fmt.Sprintf("%s/importance/%s/epochs/0", b.URL, job)); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), s.Version) {
		t.Fatalf("epochs/0 from another replica: %s: %s", resp.Status, body)
	}
	if resp, _ := get(t, fmt.Sprintf("%s/importance/%s/epochs/1", b.URL, job)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an epoch not sealed: %s, want 404", resp.Status)
	}
	q := "/epoch/1/batch/2?seed=4&window=4&batch_size=16&sampling=importance&job=" + job + "&importance=" + s.Version + "&hot=2"
	ra, fromA := get(t, a.URL+q)
	rb, fromB := get(t, b.URL+q)
	if ra.StatusCode != http.StatusOK || rb.StatusCode != http.StatusOK || !bytes.Equal(fromA, fromB) {
		t.Fatalf("batch 2 of the importance epoch: %s from the sealing gateway, %s from another, the same bytes: %t", ra.Status, rb.Status, bytes.Equal(fromA, fromB))
	}
}

// TestImportanceRefusals: the statuses of importance's endpoints and
// parameters, and of the state's refusals. What a feedback body may hold
// is internal/job/feedback's TestDecodeJSON and TestDecodeBinary (every
// malformed body, each refused naming its fault); what the query may
// say, internal/job/query's TestParse; the state's bounds, package
// feedback's. Here one of each answers 400, beside the endpoints' own
// refusals and a snapshot no store holds (404); a job past the job slots
// is 503 with Retry-After and why, an epoch with no feedback 409 and
// why, feedback for a sealed epoch 409; a seal 200 naming the samples
// reported.
func TestImportanceRefusals(t *testing.T) {
	f := newFixture(t, 8, 8)
	_, srv := start(t, f.store, nil)
	feedEpoch(t, srv.URL, f, "victim", 0)
	base := srv.URL + "/importance/j/feedback?epoch=0"
	ok := []byte(`{"ids":[0],"losses":[1]}`)
	type request struct {
		name, url, ctype string
		body             []byte
		want             int
		says             string
	}
	check := func(tests []request) {
		t.Helper()
		for _, tc := range tests {
			if resp, body := post(t, tc.url, tc.ctype, tc.body); resp.StatusCode != tc.want || !strings.Contains(string(body), tc.says) {
				t.Errorf("%s: %s %s, want %d saying %q", tc.name, resp.Status, body, tc.want, tc.says)
			}
		}
	}
	check([]request{
		{"unknown key", base, "application/json", []byte(`{"keys":["nope"],"losses":[1]}`), 400, ""},
		{"NaN loss", base, "application/octet-stream", gatewaytest.BinaryFeedback([]int{1}, []float32{float32(math.NaN())}), 400, ""},
		{"bad job name", srv.URL + "/importance/a%2Fb/feedback?epoch=0", "application/json", ok, 400, ""},
		{"unknown parameter", base + "&x=1", "application/json", ok, 400, ""},
		{"unknown dataset", base + "&dataset=nope", "application/json", ok, 404, ""},
		{"no epoch", srv.URL + "/importance/j/feedback", "application/json", ok, 400, ""},
		{"epoch out of range", srv.URL + "/importance/j/feedback?epoch=-1", "application/json", ok, 400, ""},
		{"unknown prev", srv.URL + "/importance/j/seal?epoch=0&prev=0123456789abcdef", "", nil, 404, ""},
		{"bad prev", srv.URL + "/importance/j/seal?epoch=0&prev=xyz", "", nil, 400, ""},
		{"good", base, "application/json", []byte(`{"ids":[0,1],"losses":[0.5,2]}`), 200, ""},
	})
	if resp, _ := get(t, srv.URL+"/importance/j/seal?epoch=0"); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET of a seal: %s, Allow %q; want 405 and POST", resp.Status, resp.Header.Get("Allow"))
	}
	for _, tc := range []struct {
		q    string
		want int
	}{
		{"sampling=importance", 400},
		{"sampling=importance&job=j&importance=0123456789abcdef", 404},
		{"job=j&weight=2.5&sampling=uniform", 200},
	} {
		if resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+tc.q); resp.StatusCode != tc.want {
			t.Errorf("?%s: %s (%s), want %d", tc.q, resp.Status, body, tc.want)
		}
	}
	busy := 0
	for i := range 40 {
		resp, body := post(t, fmt.Sprintf("%s/importance/other-%d/feedback?epoch=0", srv.URL, i), "application/json", []byte(`{"ids":[1],"losses":[1]}`))
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "job") {
				t.Errorf("job %d refused without Retry-After or a message: %s", i, body)
			}
			busy++
		default:
			t.Fatalf("job %d: %s: %s", i, resp.Status, body)
		}
	}
	if busy == 0 {
		t.Error("no job refused past the job slots")
	}
	if s := seal(t, srv.URL, "victim", 0, ""); s.Reported != f.index.NumSamples() {
		t.Errorf("seal: %+v, want %d reported", s, f.index.NumSamples())
	}
	check([]request{
		{"seal without feedback", srv.URL + "/importance/nobody/seal?epoch=0", "", nil, http.StatusConflict, "no feedback"},
		{"feedback after the seal", srv.URL + "/importance/victim/feedback?epoch=0", "application/json", []byte(`{"ids":[1],"losses":[1]}`), http.StatusConflict, "sealed"},
	})
}
