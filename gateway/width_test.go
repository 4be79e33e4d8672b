package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// TestAdmissionKnowsAJobsWidth: the use table bounds the batches being
// served per rank of a job, not per job. The reproduction: one gateway,
// ranks r of world C of one job, each with one request in flight; at
// C = 128 and more every request past the 64th was answered 503
// ("this job has 64 batches being served already; read fewer ahead"),
// and a synchronous job stalled its step 2 s at each. A rank that asks
// for hundreds of batches at once is still told to read fewer ahead,
// alone or among the ranks of a wide job.
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
	ranks := func(from int) []string { // batch 0 of ranks from..world-1 of job "wide"
		var ps []string
		for r := from; r < world; r++ {
			ps = append(ps, fmt.Sprintf("/epoch/0/batch/0?job=wide&batch_size=%d&world=%d&rank=%d", bs, world, r))
		}
		return ps
	}
	tests := []struct {
		name         string
		paths        []string
		wantRefused  int // answered 503 at once
		wantServing  int // in flight until the store lets go
		wantComplete bool
	}{
		{name: "128 ranks of one job, one batch each", paths: ranks(0), wantServing: world, wantComplete: true},
		{name: "one rank asking for 300 batches at once", wantRefused: ahead - 64, wantServing: 64,
			paths: func() []string {
				var ps []string
				for i := range ahead { // 128 batches of 16 an epoch
					ps = append(ps, fmt.Sprintf("/epoch/%d/batch/%d?job=ahead&batch_size=%d", i/128, i%128, bs))
				}
				return ps
			}()},
		{name: "127 ranks of one job and its rank 0 asking for 300 at once", wantRefused: ahead - 64, wantServing: world - 1 + 64,
			paths: func() []string {
				ps := ranks(1)
				for e := range ahead { // one batch an epoch at world 128
					ps = append(ps, fmt.Sprintf("/epoch/%d/batch/0?job=wide&batch_size=%d&world=%d&rank=0", e, bs, world))
				}
				return ps
			}()},
	}
	f := newFixture(t, 16, 128) // 2,048 samples: one global batch of 128 ranks of 16
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The store's reads of chunks wait, once held, until let go:
			// the batches that need them stay in flight, past
			// admission, for as long as the test counts them.
			store := s3test.Wrap(f.store)
			_, srv := start(t, store, nil)
			gate := store.Gate(func(c s3test.Call) bool { return c.Op == s3backend.OpGet && !strings.HasPrefix(c.Key, "_brand/") })
			t.Cleanup(gate.Open) // before the gateway closes

			type answer struct {
				path   string
				status int
				retry  string
				body   []byte
				err    error
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(tt.paths)}}
			t.Cleanup(client.CloseIdleConnections)
			answers := make(chan answer, len(tt.paths))
			for _, p := range tt.paths {
				go func() {
					resp, err := client.Get(srv.URL + p)
					if err != nil {
						answers <- answer{path: p, err: err}
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					answers <- answer{path: p, status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), body: b, err: err}
				}()
			}

			// Every request is either refused or in flight before any
			// chunk is read.
			refused := 0
			deadline := time.Now().Add(time.Minute)
			for refused < tt.wantRefused || serving(t, srv.URL) < tt.wantServing {
				select {
				case a := <-answers:
					if a.err != nil || a.status != http.StatusServiceUnavailable || a.retry == "" {
						t.Fatalf("%s while the store is held: %d (Retry-After %q) %v: %s", a.path, a.status, a.retry, a.err, a.body)
					}
					if !strings.Contains(string(a.body), "rank") {
						t.Errorf("%s refused without naming the rank's bound: %s", a.path, a.body)
					}
					refused++
					if refused > tt.wantRefused {
						t.Fatalf("%d refused, want %d; the last, %s: %s", refused, tt.wantRefused, a.path, a.body)
					}
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("after a minute: %d refused (want %d), %d being served (want %d)", refused, tt.wantRefused, serving(t, srv.URL), tt.wantServing)
				}
			}
			if n := serving(t, srv.URL); n != tt.wantServing {
				t.Fatalf("%d batches being served, want %d", n, tt.wantServing)
			}

			gate.Open()
			seen := map[string]int{}
			for range len(tt.paths) - refused {
				a := <-answers
				if a.err != nil || a.status != http.StatusOK {
					t.Fatalf("%s once the store let go: %d %v: %s", a.path, a.status, a.err, a.body)
				}
				if tt.wantComplete {
					f.verify(t, readTar(t, a.body), seen)
				}
			}
			if tt.wantComplete {
				exactlyOnce(t, seen, 16*128, "the global batch of 128 ranks")
			}
		})
	}
}

// serving is the gateway's batches admitted and not yet holding their
// chunks, as its /metrics says.
func serving(t testing.TB, base string) int {
	return int(scrapeMetrics(t, base).Sum("brand_batches_serving"))
}
