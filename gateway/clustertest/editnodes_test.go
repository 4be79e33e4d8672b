package clustertest_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway/gatewaytest"
)

// editNodesJob is the job of TestEditUnaskedWithinTheProbeBound over
// gatewaytest.NewFixture(t, 8, 16): 128 samples, 16 steps an epoch. (What every
// node says of an edit another made, at once — issue 80, case 5 — is
// internal/job/resolve's TestEditSeenByEveryMember: the gateway's
// GET /jobs/{job}/exclude, /edits and /epoch/N read what it reads.)
const editNodesJob = "seed=7&window=4&batch_size=8&job=run"

// TestEditUnaskedWithinTheProbeBound: a member that takes a question and
// never answers it (paused: its process stopped, its connections open)
// fails an edit with 503 naming it within the probe's
// bound and no more — 2 s, of which docs/http-api.md and
// docs/scale-out.md give 2–2.5 s — and nothing is made: the answer
// waited another 2 s telling the paused member the edit was refused
// (4.0 s).
func TestEditUnaskedWithinTheProbeBound(t *testing.T) {
	f := gatewaytest.NewFixture(t, 8, 16)
	var paused atomic.Bool
	wrap := func(k int, h http.Handler) http.Handler {
		if k != 2 {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if paused.Load() {
				<-r.Context().Done() // never answered, as a stopped process
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	cl := gatewaytest.StartClusterWrapped(t, f.Store, 3, wrap, nil)
	paused.Store(true)
	body := []byte(`{"from_step": 3, "keys": ["class0/sample00000"]}`)
	start := time.Now()
	resp, b := gatewaytest.Do(t, http.MethodPost, cl[0].Srv.URL+"/jobs/run/exclude?"+editNodesJob, body)
	took := time.Since(start)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), cl[2].Srv.URL) {
		t.Fatalf("an exclusion with member 2 paused: %s %s; want 503 naming %s", resp.Status, b, cl[2].Srv.URL)
	}
	if took < 2*time.Second || took > 2500*time.Millisecond {
		t.Errorf("an exclusion with a member paused answered 503 after %s; the docs say 2–2.5 s", took)
	}
	paused.Store(false)
	if resp, b := gatewaytest.Get(t, cl[1].Srv.URL+"/jobs/run/exclude?"+editNodesJob); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an exclusion refused was made: %s %s", resp.Status, b)
	}
}
