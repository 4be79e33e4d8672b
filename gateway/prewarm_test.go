package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// TestPrewarm: POST /prewarm reads a job's first steps into the cache
// before the job starts, a JSON line a step and a last one once warm;
// every rank's first batch is then served without a store read on its
// path, and its time to first batch is logged beside a cold one's. A
// refused job is a status before any line; a batch refused mid-way is
// the last line's error.
func TestPrewarm(t *testing.T) {
	f := newFixture(t, 16, 8)
	store := s3test.Wrap(f.store)
	_, srv := start(t, store, func(c *gateway.Config) { c.PrefetchConcurrency = -1 })
	job := "seed=3&batch_size=4&world=2&window=2"

	first := func(rank string) time.Duration {
		start := time.Now()
		resp, body := get(t, srv.URL+"/epoch/0/batch/0?seed=3&batch_size=4&world=2&window=2&rank="+rank)
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("first batch: %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	store.Take()
	cold := first("0") // another job's seed would be colder still; this one's rank 0 reads its chunks
	coldReads := store.Take().Sum().Reads

	resp, body := do(t, http.MethodPost, srv.URL+"/prewarm?seed=3&batch_size=4&world=2&window=2&epoch=1&steps=3", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("prewarm: %d %s", resp.StatusCode, body)
	}
	var lines []api.PrewarmProgress
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var p api.PrewarmProgress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("%s: %v", sc.Bytes(), err)
		}
		lines = append(lines, p)
	}
	last := lines[len(lines)-1]
	if len(lines) != 4 || !last.Warm || last.Steps != 3 || last.Batches != 6 || last.Bytes == 0 {
		t.Fatalf("prewarm answered %+v", lines)
	}
	warmReads := store.Take().Sum().Reads
	for _, rank := range []string{"0", "1"} {
		start := time.Now()
		resp, _ := get(t, srv.URL+"/epoch/1/batch/0?"+job+"&rank="+rank)
		took := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("rank %s: %d", rank, resp.StatusCode)
		}
		if n := store.Take().Sum().Reads; n != 0 {
			t.Fatalf("rank %s's first batch after the prewarm read the store %d times", rank, n)
		}
		t.Logf("rank %s's first batch of epoch 1, prewarmed: %v (a cold first batch: %v, %d store reads; the prewarm: %d)", rank, took, cold, coldReads, warmReads)
	}

	// The control: the same batch of a gateway that was not prewarmed
	// reads the store on its path.
	other := s3test.Wrap(f.store)
	_, cold2 := start(t, other, func(c *gateway.Config) { c.PrefetchConcurrency = -1 })
	other.Take()
	began := time.Now()
	get(t, cold2.URL+"/epoch/1/batch/0?"+job+"&rank=0")
	if n := other.Take().Sum().Reads; n == 0 {
		t.Fatal("a first batch not prewarmed read nothing from the store: the check above proves nothing")
	} else {
		t.Logf("the same first batch on a gateway not prewarmed: %v, %d store reads", time.Since(began), n)
	}

	// A job the table refuses is refused before any line; the bounds.
	for _, q := range []string{"seed=3&steps=0", "seed=3&steps=x", "seed=3&epoch=-1", "seed=3&nope=1"} {
		if resp, body := do(t, http.MethodPost, srv.URL+"/prewarm?"+q, nil); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("prewarm?%s: %d %s", q, resp.StatusCode, body)
		}
	}
	// Past the epoch's steps, a prewarm reads what there is.
	_, body = do(t, http.MethodPost, srv.URL+"/prewarm?"+job+"&steps=4096", nil)
	if !bytes.Contains(body, []byte(`"warm":true`)) {
		t.Fatalf("a prewarm of more steps than the epoch has: %s", body)
	}
}
