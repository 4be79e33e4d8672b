package gateway_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/gateway"
)

// startTokenSources serves three int32 Megatron datasets, web, code and
// books, of 120 documents each, whose every token names its source
// (token / 10,000,000), document and place.
func startTokenSources(t *testing.T) *httptest.Server {
	t.Helper()
	var specs []gateway.DatasetSpec
	for k, name := range []string{"web", "code", "books"} {
		corpus := [][][]int64{megatrontest.Corpus(120, 200, 1, uint64(60+k))}
		for d := range corpus[0] {
			for i := range corpus[0][d] {
				corpus[0][d][i] = int64(k*10_000_000 + d*tokenStride + i)
			}
		}
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: tokenStore(t, "int32", corpus, 8<<10),
			Formats: []format.Format{megatron.Format{}}})
	}
	_, srv := start(t, nil, func(c *gateway.Config) { c.Datasets = specs })
	return srv
}

// A schedule over token datasets, stored under a job's name and edited
// mid-run over HTTP: one naming a dataset not served is 404; /epoch/N
// counts a step as a global batch of mix_block=8 sequences; a step's
// batches name their phase's mixture and version and each sequence's
// source; the steps are counted in sequences, so the latest step the
// gateway says it served is the one read, epoch 1's past epoch 0's; an
// edit from a served step is refused (409 naming it); after an edit the
// steps before it are the same bytes; /stats counts the schedule's
// sequences as any token job's, under its first phase's mixture. What
// the steps hold — each source's share, the past kept by an edit, a
// resumed run — is internal/batch/layout's
// TestTokenSchedulePhaseSharesPer1000Batches,
// TestTokenScheduleEditKeepsThePast and TestTokenScheduleResumeAfterTwoEdits;
// a schedule's refusals, api's TestParseScheduleSaysWhy and
// internal/batch/layout's TestTokenMixtureShares (two dtypes); /plan's,
// internal/job/plans's TestPlanRefused; the client's reads of it, client's
// TestTokensClient.
func TestTokenScheduleEditOverHTTP(t *testing.T) {
	srv := startTokenSources(t)
	const tok = "seq=64&batch_size=4&world=2&mix_block=8&window=2"
	if resp, b := get(t, srv.URL+"/epoch/0/batch/0?"+tok+"&mix_schedule="+url.QueryEscape("0:web:1,nope:1")); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "nope") {
		t.Errorf("a schedule of a dataset not served: %d %s, want 404 naming it", resp.StatusCode, b)
	}
	// step reads global batch b of epoch e: its body hash, each
	// sequence's source from its tokens checked against
	// Brand-Mix-Components, counted in served.
	served := 0
	step := func(e, b int) (string, http.Header) {
		t.Helper()
		h := sha256.New()
		var hdr http.Header
		for r := range 2 {
			u := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&job=run&schedule=latest&rank=%d", srv.URL, e, b, tok, r)
			seqs, resp := tokenBatch(t, u)
			hdr = resp.Header
			named := strings.Split(resp.Header.Get(api.HeaderMixComponents), ",")
			for i, s := range seqs {
				if c := strconv.Itoa(int(s.ids[0]) / 10_000_000); named[i] != c {
					t.Fatalf("%s: sequence %d holds source %s's tokens, named %s", u, i, c, named[i])
				}
				fmt.Fprint(h, s.ids)
			}
			served += len(seqs)
		}
		return fmt.Sprintf("%x", h.Sum(nil)[:8]), hdr
	}
	first := "0:web:0.5,code:0.25,books:0.25"
	st, v1, body := editSchedule(t, srv.URL, first, 0, "")
	if st != http.StatusCreated {
		t.Fatalf("PUT: %d %s", st, body)
	}
	resp, b := get(t, srv.URL+"/epoch/0?"+tok+"&job=run&schedule=latest")
	var info api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &info) != nil {
		t.Fatalf("/epoch/0 of a token schedule: %d %s", resp.StatusCode, b)
	}
	steps := info.Batches // one global batch of 8 sequences a step
	if steps < 12 || info.Samples != 8*steps {
		t.Fatalf("an epoch of %d sequences in %d steps", info.Samples, steps)
	}
	step5, hdr := step(0, 5)
	if hdr.Get(api.HeaderMixSchedule) != first || hdr.Get(api.HeaderScheduleVersion) != v1.Version {
		t.Fatalf("step 5: Brand-Mix-Schedule %q, version %q; want %q, %s", hdr.Get(api.HeaderMixSchedule), hdr.Get(api.HeaderScheduleVersion), first, v1.Version)
	}
	latest := func(want uint64) {
		t.Helper()
		resp, b := get(t, srv.URL+"/jobs/run/schedule")
		var cur storedVersion
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &cur) != nil || cur.LatestStep == nil || *cur.LatestStep != want {
			t.Fatalf("GET: %d %s; want latest step %d", resp.StatusCode, b, want)
		}
	}
	latest(5)
	if st, _, body := editSchedule(t, srv.URL, "5:web:0,code:0,books:1", 5, v1.Version); st != http.StatusConflict || !strings.Contains(body, "step 5") {
		t.Fatalf("an edit from step 5 after it was served: %d %s", st, body)
	}
	if st, _, body := editSchedule(t, srv.URL, "6:web:0.125,code:0.125,books:0.75", 6, v1.Version); st != http.StatusOK {
		t.Fatalf("edit from step 6: %d %s", st, body)
	}
	if sum, _ := step(0, 5); sum != step5 {
		t.Fatal("step 5 changed under the edit from step 6")
	}
	step(1, 0)
	latest(uint64(steps))
	var stats struct {
		Tokens   struct{ Sequences, Tokens int64 }
		Mixtures []struct{ Mix string }
	}
	if _, b := get(t, srv.URL+"/stats"); json.Unmarshal(b, &stats) != nil || stats.Tokens.Sequences != int64(served) ||
		stats.Tokens.Tokens != 64*int64(served) || len(stats.Mixtures) != 1 || "0:"+stats.Mixtures[0].Mix != first {
		t.Fatalf("/stats after %d sequences of a token schedule: %s", served, b)
	}
}
