package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
)

// TestVisionPlanOverHTTP: /plan of a vision job answers (no longer 501)
// with, per planned epoch, what the served epoch gives: its sequences,
// global batches, tokens and fill as GET /epoch/N says them, and its
// images, vision tokens and ranks' vision tokens (the busiest rank over
// the mean, averaged over the full global batches and at worst) as the test
// counts them from every rank's batches — under the job's balance=vision
// and under the plain cut, which a job without balance= plans alike.
func TestVisionPlanOverHTTP(t *testing.T) {
	base, _, _, enc := visionServed(t, 10, 16)
	v := enc.VocabSize()
	pad := int32(v + 10)
	const world = 4
	job := url.Values{"seq": {"160"}, "seed": {"4"}, "window": {"2"}, "pad": {strconv.Itoa(int(pad))},
		"batch_size": {"2"}, "world": {strconv.Itoa(world)},
		"vision": {fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d", v, v+1, v+2)}}
	// served is what the test reads of epoch e of job q: each global
	// batch's ranks' vision tokens, and the epoch's images and vision
	// tokens.
	// Each (job, epoch) is read once: the plain cut is read for both
	// kinds, and balance="" is the plain cut.
	type read struct {
		ranks  [][]uint64
		images int
		tokens int64
	}
	reads := map[string]read{}
	served := func(q url.Values, e, batches int) ([][]uint64, int, int64) {
		q.Del("rank")
		k := fmt.Sprintf("%d?%s", e, q.Encode())
		if r, ok := reads[k]; ok {
			return r.ranks, r.images, r.tokens
		}
		var (
			ranks  [][]uint64
			images int
			tokens int64
		)
		for m := range batches {
			load, seqs := make([]uint64, world), 0
			for r := range world {
				q.Set("rank", strconv.Itoa(r))
				u := fmt.Sprintf("%s/epoch/%d/batch/%d?%s", base, e, m, q.Encode())
				resp, body := get(t, u)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %s %s", u, resp.Status, body)
				}
				for _, s := range readTar(t, body) {
					seqs++
					spans := npyInt32s(t, s.files["image_spans.npy"])
					for k := 0; k+1 < len(spans); k += 2 {
						load[r] += uint64(spans[k+1])
						images++
						tokens += int64(spans[k+1])
					}
				}
			}
			if seqs == world*2 { // a full global batch: the plan weighs those
				ranks = append(ranks, load)
			}
		}
		q.Del("rank")
		reads[k] = read{ranks, images, tokens}
		return ranks, images, tokens
	}
	ratios := func(batches [][]uint64) (mean, worst float64) {
		for _, ranks := range batches {
			r := balance.Ratio(ranks)
			mean += r
			worst = max(worst, r)
		}
		return mean / float64(len(batches)), worst
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

	for _, kind := range []string{api.BalanceVision, ""} {
		q := url.Values{}
		for k, x := range job {
			q[k] = x
		}
		if kind != "" {
			q.Set("balance", kind)
		}
		resp, body := get(t, base+"/plan?"+q.Encode()+"&epochs=2")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/plan balance=%q: %s %s", kind, resp.Status, body)
		}
		var plan struct {
			Tokens api.TokenPlan `json:"tokens"`
		}
		if err := json.Unmarshal(body, &plan); err != nil {
			t.Fatal(err)
		}
		if len(plan.Tokens.Epochs) != 2 || plan.Tokens.DocumentsPerBatch < 1 {
			t.Fatalf("/plan balance=%q: tokens %+v", kind, plan.Tokens)
		}
		for e, pe := range plan.Tokens.Epochs {
			var info api.EpochInfo
			epochJSON(t, fmt.Sprintf("%s/epoch/%d?%s", base, e, q.Encode()), &info)
			if pe.Epoch != e || pe.Sequences != info.Samples || pe.Batches != info.Batches || pe.Tokens != info.Tokens.Tokens || pe.Fill != info.Tokens.Fill {
				t.Fatalf("balance=%q epoch %d: planned %+v; /epoch/%d says %d sequences, %d batches, %d tokens, fill %v",
					kind, e, pe, e, info.Samples, info.Batches, info.Tokens.Tokens, info.Tokens.Fill)
			}
			ranks, images, tokens := served(q, e, info.Batches)
			plainQ := url.Values{}
			for k, x := range q {
				plainQ[k] = x
			}
			plainQ.Del("balance")
			plain, _, _ := served(plainQ, e, info.Batches)
			mean, worst := ratios(ranks)
			pmean, pworst := ratios(plain)
			vp := pe.Vision
			if vp == nil || vp.Images != images || vp.VisionTokens != tokens || !near(vp.MaxOverMean, mean) || !near(vp.MaxOverMeanWorst, worst) ||
				!near(vp.PlainMaxOverMean, pmean) || !near(vp.PlainMaxOverMeanWorst, pworst) {
				t.Fatalf("balance=%q epoch %d: planned %+v; served %d images, %d vision tokens, max/mean %v (worst %v), plain %v (worst %v)",
					kind, e, vp, images, tokens, mean, worst, pmean, pworst)
			}
			t.Logf("balance=%q epoch %d: fill %.4f, %d images, vision tokens per rank max/mean %.3f (worst %.3f), plain %.3f (worst %.3f)",
				kind, e, pe.Fill, images, mean, worst, pmean, pworst)
		}
	}
}

// TestVisionParquetBalanceAndPlan: a vision job over Parquet served in
// place is balanced as one over shards — balance=vision at world 3
// serves the plain cut's sequences, member for member, each under its
// key, with Brand-Balance and the same Brand-Rank-Costs on every rank —
// and planned: /plan answers with its fill as /epoch/0 says it and its
// images as the epoch holds them.
func TestVisionParquetBalanceAndPlan(t *testing.T) {
	tok, enc, st := visionStore(t)
	pairParquet(t, st, visionPairs(t, 4, 12))
	parquetVision(t, st, tok)
	_, srv := start(t, st, inParquet)
	q := url.Values{"seq": {"128"}, "vision": {visionRule(enc)}, "seed": {"7"}, "window": {"2"}, "batch_size": {"2"}, "world": {"3"}}
	plain, _ := sequencesOf(t, srv.URL, q, 0)
	q.Set("balance", api.BalanceVision)
	balanced, _ := sequencesOf(t, srv.URL, q, 0)
	images := 0
	for k, files := range plain {
		images += len(npyInt32s(t, files["image_spans.npy"])) / 2
		for name, b := range files {
			if !bytes.Equal(balanced[k][name], b) {
				t.Fatalf("sequence %s: member %s balanced differs from the plain cut's", k, name)
			}
		}
	}
	if len(balanced) != len(plain) || images == 0 {
		t.Fatalf("%d sequences balanced, %d plain, %d images", len(balanced), len(plain), images)
	}
	var costs string
	for r := range 3 {
		q.Set("rank", strconv.Itoa(r))
		resp, _ := get(t, srv.URL+"/epoch/0/batch/0?"+q.Encode())
		c := resp.Header.Get(api.HeaderRankCosts)
		if resp.Header.Get(api.HeaderBalance) != api.BalanceVision || c == "" || costs != "" && c != costs {
			t.Fatalf("rank %d: Brand-Balance %q, Brand-Rank-Costs %q (rank 0's %q)", r, resp.Header.Get(api.HeaderBalance), c, costs)
		}
		costs = c
	}
	q.Del("rank")
	var info api.EpochInfo
	epochJSON(t, srv.URL+"/epoch/0?"+q.Encode(), &info)
	resp, body := get(t, srv.URL+"/plan?"+q.Encode()+"&epochs=2")
	var plan struct {
		Tokens api.TokenPlan `json:"tokens"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &plan) != nil || len(plan.Tokens.Epochs) != 2 {
		t.Fatalf("/plan: %s %s", resp.Status, body)
	}
	if pe := plan.Tokens.Epochs[0]; pe.Fill != info.Tokens.Fill || pe.Sequences != info.Samples || pe.Vision == nil || pe.Vision.Images != images {
		t.Fatalf("/plan's epoch %+v (vision %+v); /epoch/0: fill %v, %d sequences; served %d images", pe, pe.Vision, info.Tokens.Fill, info.Samples, images)
	}
}
