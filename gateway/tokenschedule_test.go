package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/shuffle"
)

// startTokenSources serves three int32 Megatron datasets, web, code and
// books, of 120 documents each, whose every token names its source
// (token / 10,000,000), document and place; and small, of uint16 tokens.
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
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: tokenStore(t, "int32", corpus),
			Formats: []format.Format{megatron.Format{}}})
	}
	specs = append(specs, gateway.DatasetSpec{Name: "small", URL: "file:///small", Store: tokenStore(t, "uint16", megatrontestCorpus16()),
		Formats: []format.Format{megatron.Format{}}})
	_, srv := start(t, nil, func(c *gateway.Config) { c.Datasets = specs })
	return srv
}

// A schedule over token datasets, stored under a job's name and edited
// mid-run over HTTP: bad schedules are refused naming the fault, /plan
// has none; /epoch/N counts a step as a global batch of mix_block=8
// sequences; a step's batches name their phase's mixture and version
// and each sequence's source; the steps are counted in sequences, so the
// latest step the gateway says it served is the one read, epoch 1's past
// epoch 0's; an edit from a served step is refused (409 naming it); after
// an edit the steps before it are the same bytes. What the steps hold —
// each source's share, the past kept by an edit, a resumed run — is
// internal/order's TestTokenSchedulePhaseSharesPer1000Batches,
// TestTokenScheduleEditKeepsThePast and TestTokenScheduleResumeAfterTwoEdits.
func TestTokenScheduleEditOverHTTP(t *testing.T) {
	srv := startTokenSources(t)
	const tok = "seq=64&batch_size=4&world=2&mix_block=8&window=2"
	// step reads global batch b of epoch e under q: its body hash, and
	// each sequence's source from its tokens, checked against
	// Brand-Mix-Components.
	step := func(q string, e, b int) (string, []int, http.Header) {
		t.Helper()
		h := sha256.New()
		var comps []int
		var hdr http.Header
		for r := range 2 {
			u := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&%s&rank=%d", srv.URL, e, b, tok, q, r)
			seqs, resp := tokenBatch(t, u)
			hdr = resp.Header
			named := strings.Split(resp.Header.Get(api.HeaderMixComponents), ",")
			for i, s := range seqs {
				c := int(s.ids[0]) / 10_000_000
				if named[i] != strconv.Itoa(c) {
					t.Fatalf("%s: sequence %d holds source %d's tokens, named %s", u, i, c, named[i])
				}
				comps = append(comps, c)
				for _, id := range s.ids {
					h.Write([]byte(strconv.Itoa(int(id)) + ","))
				}
			}
		}
		return fmt.Sprintf("%x", h.Sum(nil)[:8]), comps, hdr
	}
	// A token schedule's bad inputs: a phase of weights summing to 0, a
	// dataset not served, two dtypes; each refused, naming what is wrong.
	for _, tc := range []struct {
		sched, says string
		status      int
	}{
		{"0:web:1,code:1;4:web:0,code:0", "sum to 0", http.StatusBadRequest},
		{"0:web:1,nope:1", "nope", http.StatusNotFound},
		{"0:web:1,small:0;4:web:1,small:1", "web holds int32, small holds uint16", http.StatusBadRequest},
	} {
		resp, b := get(t, srv.URL+"/epoch/0/batch/0?"+tok+"&mix_schedule="+url.QueryEscape(tc.sched))
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.says) {
			t.Errorf("mix_schedule=%s: %d %s, want %d saying %q", tc.sched, resp.StatusCode, b, tc.status, tc.says)
		}
	}
	// /plan has no plan of a token mixture or schedule: 400, saying so.
	for _, q := range []string{"mix=web:1,code:1", "mix_schedule=" + url.QueryEscape("0:web:1,code:1;5:web:1,code:3")} {
		resp, b := get(t, srv.URL+"/plan?"+tok+"&"+q)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "token mixture or schedule") {
			t.Fatalf("/plan?%s: %d %s, want 400", q, resp.StatusCode, b)
		}
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
	job := "job=run&schedule=latest"
	step5, _, hdr := step(job, 0, 5)
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
	if sum, _, _ := step(job, 0, 5); sum != step5 {
		t.Fatal("step 5 changed under the edit from step 6")
	}
	step(job, 1, 0)
	latest(uint64(steps))
}

// The Go client reads a token job's schedule (Options.Job.Seq with
// Schedule, or with a stored schedule's ScheduleVersion) as the gateway
// serves it over HTTP, from the start and resumed at an offset.
func TestTokenScheduleClient(t *testing.T) {
	srv := startTokenSources(t)
	const sched = "0:web:0.5,code:0.3,books:0.2;4:web:0.1,code:0.1,books:0.8;10~20:web:1,code:1,books:1"
	s, err := api.ParseSchedule(sched)
	if err != nil {
		t.Fatal(err)
	}
	want := tokenEpoch(t, srv.URL, "seq=64&batch_size=4&seed=9&window=2&mix_block=8&mix_schedule="+url.QueryEscape(sched), 1)
	// /stats counts the schedule's sequences as any token job's.
	var stats struct {
		Tokens   struct{ Sequences, Tokens int64 }
		Mixtures []struct{ Mix string }
	}
	if _, b := get(t, srv.URL+"/stats"); json.Unmarshal(b, &stats) != nil || stats.Tokens.Sequences != int64(len(want)) ||
		stats.Tokens.Tokens != 64*int64(len(want)) || len(stats.Mixtures) != 1 || stats.Mixtures[0].Mix != s[0].Mix.String() {
		t.Fatalf("/stats after an epoch of %d sequences of a token schedule: %s", len(want), b)
	}
	if st, _, body := editSchedule(t, srv.URL, sched, 0, ""); st != http.StatusCreated {
		t.Fatalf("PUT: %d %s", st, body)
	}
	p := shuffle.Params{Seed: 9, BatchSize: 4, Window: 2}
	for _, tc := range []struct {
		name string
		job  api.Job
	}{
		{"Schedule", api.Job{Params: p, Seq: 64, MixBlock: 8, Schedule: s}},
		{"ScheduleVersion", api.Job{Params: p, Seq: 64, MixBlock: 8, Name: "run", ScheduleVersion: "latest"}},
	} {
		c, err := client.New(srv.URL, client.Options{Job: tc.job})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		read := func(offset int) []seqSample {
			var got []seqSample
			for b, err := range c.EpochFrom(context.Background(), 1, offset) {
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				seqs, err := b.Sequences()
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range seqs {
					got = append(got, seqSample{q.Key, slices.Clone(q.InputIDs), slices.Clone(q.PositionIDs)})
				}
				b.Release()
			}
			return got
		}
		equalSequences(t, tc.name+": the client's epoch", read(0), want)
		equalSequences(t, tc.name+": the client's epoch from offset 24", read(24), want[24:])
	}
}
