package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/job/features"
)

// TestBalanceOverHTTP: a token job with balance=attention at world 4
// answers each rank's batch with Brand-Balance and Brand-Rank-Costs —
// the same four costs on every rank, each rank's its sequences' — and the
// ranks together hold the plain cut's sequences, each under its key in
// the plain cut (its position in the epoch: seq/E/POSITION); /stats reports the
// batches weighed, balanced and as cut; a balance= the job cannot be
// weighed by is 400, saying why.
func TestBalanceOverHTTP(t *testing.T) {
	corpus := [][][]int64{megatrontest.LogNormal(600, 200, 1.2, 50000, 5)}
	spec := gateway.DatasetSpec{Name: "test", URL: "file:///test", Store: tokenStore(t, "uint16", corpus, 16<<10),
		Formats: []format.Format{megatron.Format{}}}
	_, srv := start(t, nil, func(c *gateway.Config) { c.Datasets = []gateway.DatasetSpec{spec} })
	const q = "seq=512&batch_size=6&world=4&window=64&pad=65535" // a pad no token of the corpus is
	// Per global batch, the costs its header gave.
	var stepCosts []string
	for m := range 3 {
		var costs string
		var bal, cut []string
		for r := range 4 {
			seqs, resp := tokenBatch(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d&balance=attention", srv.URL, m, q, r))
			if resp.Header.Get(api.HeaderBalance) != "attention" {
				t.Fatalf("batch %d rank %d: Brand-Balance %q", m, r, resp.Header.Get(api.HeaderBalance))
			}
			c := resp.Header.Get(api.HeaderRankCosts)
			if costs != "" && c != costs {
				t.Fatalf("batch %d: rank %d says the costs are %s, rank 0 %s", m, r, c, costs)
			}
			costs = c
			each := strings.Split(c, ",")
			if len(each) != 4 {
				t.Fatalf("batch %d: Brand-Rank-Costs %q for world 4", m, c)
			}
			var mine uint64
			for _, s := range seqs {
				mine += attention(s)
				// A sequence is keyed by its position in the epoch, as
				// the plain cut keys it, not by its place in the rank.
				bal = append(bal, s.key+" "+fmt.Sprint(s.ids))
			}
			if strconv.FormatUint(mine, 10) != each[r] {
				t.Fatalf("batch %d rank %d: its sequences cost %d, the header says %s", m, r, mine, each[r])
			}
			plain, _ := tokenBatch(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d", srv.URL, m, q, r))
			for _, s := range plain {
				cut = append(cut, s.key+" "+fmt.Sprint(s.ids))
			}
		}
		if !slices.Equal(slices.Sorted(slices.Values(bal)), slices.Sorted(slices.Values(cut))) {
			t.Fatalf("batch %d: the balanced ranks hold other sequences, or keys, than the plain cut's", m)
		}
		stepCosts = append(stepCosts, costs)
	}
	var stats struct {
		Balance []api.BalanceStats
	}
	_, body := get(t, srv.URL+"/stats")
	if err := json.Unmarshal(body, &stats); err != nil {
		t.Fatal(err)
	}
	if len(stats.Balance) != 1 || stats.Balance[0].Balance != "attention" || stats.Balance[0].Batches != 12 ||
		stats.Balance[0].RatioMean < 1 || stats.Balance[0].RatioMean > stats.Balance[0].PlainRatioMean {
		t.Fatalf("/stats balance: %+v", stats.Balance)
	}
	// Each global batch once in the recent steps, however many of its
	// ranks were served, with the costs its header gave.
	recent := stats.Balance[0].Recent
	if len(recent) != len(stepCosts) {
		t.Fatalf("/stats lists %d recent global batches, want %d: %+v", len(recent), len(stepCosts), recent)
	}
	for m, st := range recent {
		got := make([]string, len(st.Costs))
		for r, c := range st.Costs {
			got[r] = strconv.FormatUint(c, 10)
		}
		if st.Epoch != 0 || st.Batch != uint64(m) || strings.Join(got, ",") != stepCosts[m] || len(st.PlainCosts) != 4 || st.Global == "" {
			t.Fatalf("/stats recent step %d: %+v, the headers said %s", m, st, stepCosts[m])
		}
	}
	for _, tc := range []struct{ path, says string }{
		{"/epoch/0/batch/0?balance=attention", features.Lookup(features.Samples, features.BalanceC).Message},
		{"/epoch/0/batch/0?seq=64&balance=bytes", features.Lookup(features.Tokens, features.BalanceB).Message},
		{"/epoch/0/batch/0?balance=bytes", features.Lookup(features.InPlace, features.BalanceB).Message},
		{"/epoch/0?balance=pixels", "balance must be one of attention, tokens, bytes"},
	} {
		resp, body := get(t, srv.URL+tc.path)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %s %s, want 400 saying %q", tc.path, resp.Status, body, tc.says)
		}
	}
}

// attention is a sequence's attention cost from its members: each piece
// restarts position_ids at 0, and the last segment is pad (which costs
// nothing) when its tokens are the pad, 65535.
func attention(s seqSample) uint64 {
	var starts []int
	for i, p := range s.pos {
		if p == 0 {
			starts = append(starts, i)
		}
	}
	starts = append(starts, len(s.pos))
	var c uint64
	for k := range len(starts) - 1 {
		if s.ids[starts[k]] == 65535 {
			continue
		}
		n := uint64(starts[k+1] - starts[k])
		c += n * n
	}
	return c
}
