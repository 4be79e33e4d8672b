package gateway_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
)

// TestResumeAtAnotherWorldSize is elastic resume over HTTP: a job reads 5
// batches at world 4, then resumes from the global position it reached
// (offset = 5 × 8 × 4) at world 3, 8 and 1. Every sample of the epoch
// arrives exactly once over both parts, with and without drop_last.
func TestResumeAtAnotherWorldSize(t *testing.T) {
	f := newFixture(t, 10, 25) // 250 samples
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.Defaults = gateway.Defaults{BatchSize: 8, Window: 3, Seed: 11}
	})
	read := func(query string, m int) []sample {
		t.Helper()
		resp, body := get(t, fmt.Sprintf("%s/epoch/2/batch/%d?%s", srv.URL, m, query))
		if resp.StatusCode != 200 {
			t.Fatalf("batch %d ?%s: %d %s", m, query, resp.StatusCode, body)
		}
		return readTar(t, body)
	}
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
	for _, dropLast := range []bool{false, true} {
		for _, world := range []int{3, 8, 1} {
			t.Run(fmt.Sprintf("world 4 to %d drop_last %t", world, dropLast), func(t *testing.T) {
				seen := map[string]int{}
				for m := range 5 {
					for r := range 4 {
						for _, s := range read(fmt.Sprintf("world=4&rank=%d", r), m) {
							seen[s.key]++
						}
					}
				}
				const offset = 5 * 8 * 4
				q := fmt.Sprintf("world=%d&offset=%d&drop_last=%t", world, offset, dropLast)
				e := info(q + "&rank=0")
				rest := 250 - offset
				if e.Offset != offset || e.Samples != 250 {
					t.Fatalf("epoch info %+v", e)
				}
				got := 0
				for m := range e.Batches {
					for r := range world {
						for _, s := range read(fmt.Sprintf("%s&rank=%d", q, r), m) {
							seen[s.key]++
							got++
						}
					}
				}
				want := rest
				if dropLast {
					want = rest - rest%(8*world)
				}
				if got != want {
					t.Errorf("the remainder served %d samples, want %d", got, want)
				}
				total := 0
				for k, n := range seen {
					if n != 1 {
						t.Errorf("sample %s served %d times", k, n)
					}
					total++
				}
				if total != offset+want {
					t.Errorf("%d distinct samples, want %d", total, offset+want)
				}
			})
		}
	}
	// The batch ETag covers the offset; the cut past the end is a 404.
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
