package visit_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/s3backend"
)

// TestAdmissionKnowsAJobsWidth: the use table bounds the batches being
// served per rank of a job, not per job, and the visit tells it each
// batch's rank. The reproduction: one gateway, ranks r of world C of one
// job, each with one request in flight; at C = 128 and more every
// request past the 64th was answered 503 ("this job has 64 batches being
// served already; read fewer ahead"), and a synchronous job stalled its
// step 2 s at each. A rank that asks for hundreds of batches at once is
// still told to read fewer ahead (503, which the gateway answers with
// Retry-After as every 503), alone or among the ranks of a wide job.
// (The bound itself: internal/cache/usetable's TestInflightBounded.)
//
// The store is held, so every batch admitted stays in flight until the
// test has counted them: the refusals and the batches being served are
// then exact, whatever the machine's speed.
func TestAdmissionKnowsAJobsWidth(t *testing.T) {
	const (
		world = 128
		ahead = 300 // batches one rank asks for at once
		bs    = 16
	)
	type req struct {
		raw      string
		epoch, m uint64
	}
	ranks := func(from int) []req { // batch 0 of ranks from..world-1 of job "wide"
		var rs []req
		for r := from; r < world; r++ {
			rs = append(rs, req{fmt.Sprintf("job=wide&batch_size=%d&world=%d&rank=%d", bs, world, r), 0, 0})
		}
		return rs
	}
	tests := []struct {
		name         string
		reqs         []req
		wantRefused  int // answered 503 at once
		wantServing  int // in flight until the store lets go
		wantComplete bool
	}{
		{name: "128 ranks of one job, one batch each", reqs: ranks(0), wantServing: world, wantComplete: true},
		{name: "one rank asking for 300 batches at once", wantRefused: ahead - 64, wantServing: 64,
			reqs: func() []req {
				var rs []req
				for i := range ahead { // 128 batches of 16 an epoch
					rs = append(rs, req{fmt.Sprintf("job=ahead&batch_size=%d", bs), uint64(i / 128), uint64(i % 128)})
				}
				return rs
			}()},
		{name: "127 ranks of one job and its rank 0 asking for 300 at once", wantRefused: ahead - 64, wantServing: world - 1 + 64,
			reqs: func() []req {
				rs := ranks(1)
				for e := range ahead { // one batch an epoch at world 128
					rs = append(rs, req{fmt.Sprintf("job=wide&batch_size=%d&world=%d&rank=0", bs, world), uint64(e), 0})
				}
				return rs
			}()},
	}
	set := packTar(t, "test", "", 16, 128, 0) // 2,048 samples: one global batch of 128 ranks of 16
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The store's reads of chunks wait, once held, until let go:
			// the batches that need them stay in flight, past
			// admission, for as long as the test counts them.
			store := s3test.Wrap(set.store)
			spec := set.spec
			spec.Store = store
			s := stagetest.New(t, stagetest.Config{Datasets: []stagetest.Spec{spec}})
			gate := store.Gate(func(c s3test.Call) bool { return c.Op == s3backend.OpGet && !strings.HasPrefix(c.Key, "_brand/") })
			t.Cleanup(gate.Open) // before the stages close
			serving := func() int { return int(s.Metric(t, "brand_batches_serving")) }

			type answer struct {
				req  req
				body []byte
				err  error
			}
			answers := make(chan answer, len(tt.reqs))
			for _, r := range tt.reqs {
				go func() {
					_, body, err := s.Batch(context.Background(), r.raw, r.epoch, r.m)
					answers <- answer{r, body, err}
				}()
			}

			// Every request is either refused or in flight before any
			// chunk is read.
			refused := 0
			deadline := time.Now().Add(time.Minute)
			for refused < tt.wantRefused || serving() < tt.wantServing {
				select {
				case a := <-answers:
					if a.err == nil || stagetest.Status(a.err) != http.StatusServiceUnavailable {
						t.Fatalf("%+v while the store is held: %v (status %d)", a.req, a.err, stagetest.Status(a.err))
					}
					if !strings.Contains(stagetest.Message(a.err), "rank") {
						t.Errorf("%+v refused without naming the rank's bound: %s", a.req, stagetest.Message(a.err))
					}
					refused++
					if refused > tt.wantRefused {
						t.Fatalf("%d refused, want %d; the last, %+v: %v", refused, tt.wantRefused, a.req, a.err)
					}
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("after a minute: %d refused (want %d), %d being served (want %d)", refused, tt.wantRefused, serving(), tt.wantServing)
				}
			}
			if n := serving(); n != tt.wantServing {
				t.Fatalf("%d batches being served, want %d", n, tt.wantServing)
			}

			gate.Open()
			seen := map[string]int{}
			for range len(tt.reqs) - refused {
				a := <-answers
				if a.err != nil {
					t.Fatalf("%+v once the store let go: %v", a.req, a.err)
				}
				if tt.wantComplete {
					set.verify(t, a.body, seen)
				}
			}
			if tt.wantComplete && (len(seen) != 16*128 || !onceEach(seen)) {
				t.Fatalf("the global batch of 128 ranks: %d distinct samples, want 2,048, each once", len(seen))
			}
		})
	}
}

// onceEach says whether every key of seen was counted once.
func onceEach(seen map[string]int) bool {
	for _, n := range seen {
		if n != 1 {
			return false
		}
	}
	return true
}
