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

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
)

type oneVersion struct{ ds *catalog.Dataset }

func (v oneVersion) Version(name, id string) (*catalog.Dataset, error) {
	if name != v.ds.Name || id != v.ds.ID() {
		return nil, catalog.ErrVersion
	}
	return v.ds, nil
}

// TestOriginRoundTrip: a sample request carries the job stream it is for —
// its order, its name and its weight, an importance job's snapshot, an
// exclusion list's version (its positions are of the order without it) — so
// that the owner's schedule follows the same job its asker does: two named
// jobs of one order apart, each with its weight.
func TestOriginRoundTrip(t *testing.T) {
	ds, _ := testDataset(t)
	for _, o := range []Origin{
		{Stream: layout.Stream{DS: ds, Seed: 7, Window: 4}, Epoch: 3, Pos: 1},
		{Stream: layout.Stream{DS: ds, Seed: 7, Window: 4, Name: "lr-0.1"}, Epoch: 0, Pos: 0, Weight: 2.5},
		{Stream: layout.Stream{DS: ds, Seed: 1, Window: 2, Name: "imp", Imp: layout.Importance{Job: "imp", Version: "0123456789abcdef", Hot: 3}}, Epoch: 2, Pos: 1},
		{Stream: layout.Stream{DS: ds, Seed: 1, Window: 2, Name: "imp", Imp: layout.Importance{Job: "imp"}}, Epoch: 0, Pos: 0},
		{Stream: layout.Stream{DS: ds, Seed: 3, Window: 2, Name: "run", Edit: "fedcba9876543210"}, Epoch: 1, Pos: 2},
	} {
		req := Request{DS: ds, IDs: []int{1, 0}, Origin: &o}
		hr := httptest.NewRequest("POST", SamplesPath+"?"+req.values().Encode(), bytes.NewReader(req.body()))
		got, err := DecodeRequest(hr, oneVersion{ds}, query.Limits{MaxBatchSize: 16, MaxBatchBytes: 1 << 20, MaxWindow: 64, MaxWorld: 64, MaxEpoch: 1 << 40})
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if got.Origin == nil || *got.Origin != o {
			t.Errorf("origin %+v came back as %+v", o, got.Origin)
		}
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
		if err != nil && !errors.Is(err, query.ErrBadRequest) {
			t.Errorf("%q: %v is not a bad request", tt.query, err)
		}
	}
}

// TestFeedbackAnswers: a sealing node's question for another node's part
// of an epoch's importance feedback round trips — the job in the path,
// the dataset, index and epoch decoded as the gateway's handler decodes
// them — and the records answered come back whole; an answer that is
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
	lim := query.Limits{MaxBatchSize: 16, MaxBatchBytes: 1 << 20, MaxWindow: 64, MaxWorld: 64, MaxEpoch: 1 << 40}
	const seal, sealed = "0123456789abcdef", "fedcba9876543210"
	var settled []string // the settlements the node was told, as job:version
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fr, err := DecodeFeedback(r, oneVersion{ds}, lim)
		if err != nil || fr.DS != ds || fr.Epoch != 3 || fr.Seal != seal || r.Method == http.MethodGet && fr.Sealed != "" {
			http.Error(w, fmt.Sprintf("asked %+v: %v", fr, err), http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodPost {
			settled = append(settled, strings.TrimPrefix(r.URL.Path, FeedbackPath)+":"+fr.Sealed)
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
