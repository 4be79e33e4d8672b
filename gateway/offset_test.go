package gateway_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
)

// TestResumeContract: offset= and drop_last= reach the order (package
// order's TestResumeAtAnotherWorldSize lays out every resume): the epoch's
// description and each batch say the offset, the batch ETag covers it,
// the cut past the end is a 404 and a negative offset a 400.
func TestResumeContract(t *testing.T) {
	f := newFixture(t, 10, 25) // 250 samples
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 3, Seed: 11}
	})
	info := func(query string) api.EpochInfo {
		t.Helper()
		resp, body := get(t, fmt.Sprintf("%s/epoch/2?%s", srv.URL, query))
		if resp.StatusCode != 200 {
			t.Fatalf("/epoch/2?%s: %d %s", query, resp.StatusCode, body)
		}
		var e api.EpochInfo
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	// 90 samples left at world 3: 3 whole global batches of 24, and 18
	// more without drop_last.
	for q, batches := range map[string]int{"world=3&rank=0&offset=160&drop_last=true": 3, "world=3&rank=0&offset=160": 4} {
		if e := info(q); e.Offset != 160 || e.Samples != 250 || e.Batches != batches {
			t.Errorf("?%s: epoch info %+v, want offset 160 and %d batches", q, e, batches)
		}
	}
	resp, body := get(t, srv.URL+"/epoch/2/batch/0?world=3&rank=2&offset=160")
	if resp.StatusCode != 200 || resp.Header.Get(api.HeaderOffset) != "160" || len(readTar(t, body)) != 8 {
		t.Errorf("a batch at offset 160: %s, Brand-Offset %q", resp.Status, resp.Header.Get(api.HeaderOffset))
	}
	r0, _ := get(t, srv.URL+"/epoch/2/batch/0")
	r1, _ := get(t, srv.URL+"/epoch/2/batch/0?offset=1")
	if r0.Header.Get("ETag") == r1.Header.Get("ETag") || r1.Header.Get(api.HeaderOffset) != "1" {
		t.Errorf("offset 0 and 1: ETags %s and %s, Brand-Offset %q", r0.Header.Get("ETag"), r1.Header.Get("ETag"), r1.Header.Get(api.HeaderOffset))
	}
	if e := info("offset=250"); e.Batches != 0 || e.RankSamples != 0 {
		t.Errorf("offset at the end: %+v, want no batches", e)
	}
	for _, q := range []string{"/epoch/2?offset=251", "/epoch/2/batch/0?offset=251", "/epoch/2/batch/0?offset=250"} {
		if resp, body := get(t, srv.URL+q); resp.StatusCode != 404 {
			t.Errorf("%s: %d %s, want 404", q, resp.StatusCode, body)
		}
	}
	if resp, body := get(t, srv.URL+"/epoch/2?offset=-1"); resp.StatusCode != 400 {
		t.Errorf("negative offset: %d %s, want 400", resp.StatusCode, body)
	}
}
