package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// planAsServed asks a node for /plan of the round's job under cut, its
// epochs first to first+len(served)−1, and holds the plan to what the
// round served (issue 80, case 6): each planned epoch's samples — a
// token job's sequences — are served[i], its global batches the cut's
// of them, and batches_per_epoch the first's; on a cluster the
// prediction for its nodes (the default). A job whose features the
// table serves but does not plan (resolved: those only the server
// knows) is 501 with the table's reason instead.
func (j *mJob) planAsServed(cut jobmodel.Cut, first int, served []int, resolved []string) {
	t := j.t
	t.Helper()
	q := j.query(cut, -1)
	path := fmt.Sprintf("/plan?%s&first_epoch=%d&epochs=%d", q.Encode(), first, max(len(served), 2))
	// A node of the round's choosing, drawn from no random source: the
	// round's draws after the plan are what they were without it.
	resp, body := get(t, j.nodes.urls[len(j.reads)%len(j.nodes.urls)]+path)
	if r, ok := jobmodel.NotPlanned(append(jobmodel.Detect(q), resolved...)); ok {
		why := features.Lookup(features.Feature(r.A), features.Feature(r.B)).Plan
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(errorOf(body), why) {
			t.Fatalf("%s: %s %s; the table does not plan %s with %s: want 501 saying %q", path, resp.Status, body, r.A, r.B, why)
		}
		return
	}
	var p struct {
		BatchesPerEpoch *int `json:"batches_per_epoch"`
		Epochs          []struct {
			Epoch   int  `json:"epoch"`
			Samples *int `json:"samples"`
			Batches *int `json:"batches"`
		} `json:"epochs"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("%s: %s %s", path, resp.Status, body)
	}
	var planned, want []string
	for _, e := range p.Epochs {
		s, b := -1, -1
		if e.Samples != nil && e.Batches != nil {
			s, b = *e.Samples, *e.Batches
		}
		planned = append(planned, fmt.Sprintf("epoch %d: %d samples in %d batches", e.Epoch, s, b))
	}
	for i, n := range served {
		want = append(want, fmt.Sprintf("epoch %d: %d samples in %d batches", first+i, n, cut.Batches(n)))
	}
	if strings.Join(planned[:min(len(planned), len(want))], "; ") != strings.Join(want, "; ") ||
		p.BatchesPerEpoch == nil || *p.BatchesPerEpoch != cut.Batches(served[0]) {
		got := -1
		if p.BatchesPerEpoch != nil {
			got = *p.BatchesPerEpoch
		}
		t.Fatalf("%s plans\n\t%s\n\t(%d batches per epoch)\nthe round served\n\t%s", path, strings.Join(planned, "\n\t"), got, strings.Join(want, "\n\t"))
	}
}

// lengths are the samples of the job's epochs first to first+n−1, by
// the model (which every batch served was held to).
func (j *mJob) lengths(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = len(j.order(uint64(first + i)))
	}
	return out
}

// TestModelPlanOfWhatIsNotPlanned: planAsServed's other branch — a job
// of a pair the table serves but does not plan, sampling=importance on
// a cluster of three, before its first snapshot as after — is held to
// the table's 501 (issue 80, case 6: it was planned, 200).
func TestModelPlanOfWhatIsNotPlanned(t *testing.T) {
	r := roundRand(7)
	w := newMWorld(t, r)
	j := &mJob{t: t, r: r, w: w, nodes: startMNodes(t, w, 3)}
	j.q = url.Values{"dataset": {mTar}, "sampling": {"importance"}, "job": {"imp"}}
	j.planAsServed(jobmodel.Cut{B: 2, World: 2}, 0, []int{1, 1}, j.resolved([]string{mTar}))
}
