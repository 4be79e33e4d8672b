package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestRequestParams: a sample request says the job stream it is for —
// its order, its name and its weight, an importance job's snapshot, a
// clip job's clips, an edit of its chain, the pipeline it wants —
// in the parameters the serving node's table reads (peerreq's
// TestSamplesRoundTrip reads them back), and says nothing of a stream
// when it is for none.
func TestRequestParams(t *testing.T) {
	ds, _ := testDataset(t)
	tests := []struct {
		origin *Origin
		want   string
	}{
		{nil, "dataset=d&index=" + ds.ID()},
		{&Origin{Stream: Stream{Seed: 7, Window: 4}, Epoch: 3, Pos: 1}, "dataset=d&epoch=3&index=" + ds.ID() + "&pos=1&seed=7&window=4"},
		{&Origin{Stream: Stream{Seed: 7, Window: 4, Name: "lr-0.1"}, Weight: 2.5}, "dataset=d&epoch=0&index=" + ds.ID() + "&job=lr-0.1&pos=0&seed=7&weight=2.5&window=4"},
		{&Origin{Stream: Stream{Seed: 1, Window: 2, Name: "imp", Imp: Importance{Job: "imp", Version: "0123456789abcdef", Hot: 3}}, Epoch: 2, Pos: 1},
			"dataset=d&epoch=2&hot=3&importance=0123456789abcdef&index=" + ds.ID() + "&job=imp&pos=1&sampling=importance&seed=1&window=2"},
		{&Origin{Stream: Stream{Seed: 3, Window: 2, Name: "run", Edit: "fedcba9876543210", Clips: "k"}, Transform: Transform{Name: "tiny", Fingerprint: "0123456789abcdef"}},
			"clips=k&dataset=d&edit=fedcba9876543210&epoch=0&index=" + ds.ID() + "&job=run&pos=0&seed=3&transform=tiny&transform_fp=0123456789abcdef&window=2"},
	}
	for _, tt := range tests {
		req := Request{DS: ds, IDs: []int{1, 0}, Origin: tt.origin}
		if got := req.values().Encode(); got != tt.want {
			t.Errorf("%+v: %s\nwant %s", tt.origin, got, tt.want)
		}
	}
	fields := Request{DS: Dataset{Name: "p", Fields: "image,caption", Index: ds.Index}}
	if got := fields.values().Get("columns"); got != "image,caption" {
		t.Errorf("a view's request names columns=%q, want its fields", got)
	}
}

// TestDecodeSteps: the question before an edit names the edit's first
// step, and for an edit of a chain the dataset, epoch and position
// together, and release=true the end of its holds; the question a Client
// asks decodes as it was asked.
func TestDecodeSteps(t *testing.T) {
	tests := []struct {
		query string
		want  StepsQuestion
		ok    bool
	}{
		{"from=0", StepsQuestion{}, true},
		{"from=4096", StepsQuestion{From: 4096}, true},
		{"from=3&dataset=d&epoch=2&pos=40", StepsQuestion{From: 3, Dataset: "d", Epoch: 2, Pos: 40}, true},
		{"", StepsQuestion{}, false},
		{"from=-1", StepsQuestion{}, false},
		{"from=x", StepsQuestion{}, false},
		{"from=1&from=2", StepsQuestion{}, false},
		{"from=1&job=j", StepsQuestion{}, false},
		{"from=1&dataset=d&epoch=2", StepsQuestion{}, false},
		{"from=1&dataset=&epoch=2&pos=1", StepsQuestion{}, false},
		{"from=1&dataset=d&epoch=2&pos=-1", StepsQuestion{}, false},
		{"from=3&release=true", StepsQuestion{From: 3, Release: true}, true},
		{"from=3&dataset=d&epoch=2&pos=40&release=true", StepsQuestion{From: 3, Dataset: "d", Epoch: 2, Pos: 40, Release: true}, true},
		{"from=3&release=1", StepsQuestion{}, false},
		{"from=3&release=true&release=true", StepsQuestion{}, false},
		{"from=3&dataset=d&release=true", StepsQuestion{}, false},
	}
	for _, tt := range tests {
		got, err := DecodeSteps(httptest.NewRequest("GET", StepsPath+"j?"+tt.query, nil))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("%q: %+v %v; want %+v (ok %v)", tt.query, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v is not a bad request", tt.query, err)
		}
	}
}

// TestFeedbackAnswers: a sealing node's question for another node's part
// of an epoch's importance feedback round trips — the job in the path,
// the dataset, index and epoch in their parameters (peerreq's
// TestFeedbackRoundTrip reads them as the gateway's handler does) — and
// the records answered come back whole; an answer that is
// not whole records, or holds more records than the dataset has
// samples, or a refusal, is an error, never feedback merged into a seal.
// (The merge itself is internal/job/feedback's TestSealMergesNodes; the
// endpoint's statuses, gateway's TestInternalEndpoints.)
func TestFeedbackAnswers(t *testing.T) {
	ds, _ := testDataset(t) // two samples: at most 16 bytes of records
	two := []byte("01234567abcdefgh")
	// Each case is a job whose name the node answers by: the answers are
	// fixed before the node starts, so no request races the test.
	tests := []struct {
		job    string
		answer []byte
		status int
		ok     bool
	}{
		{"none-reported", nil, http.StatusOK, true},
		{"two-records", two, http.StatusOK, true},
		{"half-a-record", two[:12], http.StatusOK, false},
		{"more-records-than-samples", append(two, two[:8]...), http.StatusOK, false},
		{"refused", nil, http.StatusNotFound, false},
	}
	const seal, sealed = "0123456789abcdef", "fedcba9876543210"
	var settled []string // the settlements the node was told, as job:version
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("dataset") != ds.Name || q.Get("index") != ds.ID() || q.Get(paramEpoch) != "3" || q.Get(paramSeal) != seal ||
			r.Method == http.MethodGet && q.Has(paramSealed) {
			http.Error(w, fmt.Sprintf("asked %v", q), http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodPost {
			settled = append(settled, strings.TrimPrefix(r.URL.Path, FeedbackPath)+":"+q.Get(paramSealed))
			return
		}
		for _, tc := range tests {
			if r.URL.Path == FeedbackPath+tc.job {
				w.WriteHeader(tc.status)
				w.Write(tc.answer)
				return
			}
		}
		http.Error(w, "no such job", http.StatusBadRequest)
	}))
	defer srv.Close()
	// The sealing node asks each of its Peers (feedback.Nodes), as a seal
	// does; not started, it probes none of them.
	n := New(Config{Self: "http://self.invalid", Timeout: 5 * time.Second, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	defer n.Close()
	n.Probe([]string{srv.URL}, &watched{})
	peers := n.Peers()
	if len(peers) != 1 {
		t.Fatalf("peers %v, want the one node", peers)
	}
	for _, tc := range tests {
		got, err := n.Asks().Feedback(context.Background(), peers[0], ds, tc.job, 3, seal)
		if tc.ok != (err == nil) || tc.ok && !bytes.Equal(got, tc.answer) {
			t.Errorf("%s: %q, %v; want ok %v with the records answered", tc.job, got, err, tc.ok)
		}
	}
	// How the seal ended, told back: sealed as a version, or nothing.
	for _, version := range []string{sealed, ""} {
		if err := n.Asks().Settle(context.Background(), peers[0], ds, "two-records", 3, seal, version); err != nil {
			t.Fatalf("settling with %q: %v", version, err)
		}
	}
	if want := []string{"two-records:" + sealed, "two-records:"}; !slices.Equal(settled, want) {
		t.Fatalf("the node was told %q, want %q", settled, want)
	}
}
