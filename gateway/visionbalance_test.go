package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
)

// visionSeq is a served vision sequence as the test reads it: its key,
// its token IDs, and its cost under each balance= kind, counted from its
// members alone — samples are the runs its position_ids restart at 0
// (the pad's run is all pad), the vision tokens the image_spans.
type visionSeq struct {
	key  string
	ids  []int32
	cost map[string]uint64
}

// visionSeqs reads a vision job's batch at u: its sequences, and the
// response. merge is the rule's, pad the job's pad ID (one no sample
// holds).
func visionSeqs(t *testing.T, u string, merge int, pad int32) ([]visionSeq, *http.Response) {
	t.Helper()
	resp, body := get(t, u)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", u, resp.Status, body)
	}
	var out []visionSeq
	for _, s := range readTar(t, body) {
		ids, pos := npyInt32s(t, s.files["input_ids.npy"]), npyInt32s(t, s.files["position_ids.npy"])
		q := visionSeq{key: s.key, ids: ids, cost: map[string]uint64{}}
		for i := 0; i < len(ids); {
			j := i + 1
			for j < len(ids) && pos[j] != 0 {
				j++
			}
			if ids[i] != pad {
				n := uint64(j - i)
				q.cost[api.BalanceTokens] += n
				q.cost[api.BalanceAttention] += n * n
			}
			i = j
		}
		spans := npyInt32s(t, s.files["image_spans.npy"])
		for k := 0; k+1 < len(spans); k += 2 {
			p := uint64(spans[k+1]) * uint64(merge*merge) // the image's patches
			q.cost[api.BalanceVision] += uint64(spans[k+1])
			q.cost[api.BalanceAttention] += p * p
		}
		out = append(out, q)
	}
	return out, resp
}

// epochJSON decodes the 200 answer of GET u into v.
func epochJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, body := get(t, u)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", u, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// TestVisionBalanceOverHTTP: a vision job with balance=vision, attention
// or tokens answers each rank's batch with Brand-Balance and
// Brand-Rank-Costs — the same costs on every rank, each rank's the cost
// of the sequences it was served, as the test counts it from their
// members — and the ranks together hold the plain cut's sequences, each
// under its key and with its tokens. balance=vision brings the ranks'
// vision tokens nearer even than the plain cut (max ÷ mean over the
// epoch's global batches). A run balanced at world 4 resumes at world 2
// from its offset exactly: every sequence once, in its global batch.
func TestVisionBalanceOverHTTP(t *testing.T) {
	base, _, _, enc := visionServed(t, 10, 16)
	v := enc.VocabSize()
	pad := int32(v + 10)
	job := url.Values{"seq": {"160"}, "seed": {"9"}, "window": {"2"}, "pad": {strconv.Itoa(int(pad))},
		"vision": {fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d", v, v+1, v+2)}}
	with := func(kv ...string) url.Values {
		q := url.Values{}
		for k, x := range job {
			q[k] = x
		}
		for i := 0; i < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	const world = 4
	var info struct{ Samples, Batches int }
	epochJSON(t, base+"/epoch/0?"+with("batch_size", "2", "world", "4").Encode(), &info)
	if info.Batches < 4 {
		t.Fatalf("%d sequences in %d global batches: too few to weigh", info.Samples, info.Batches)
	}
	whole := map[string]string{}       // every sequence's tokens, by key
	plains := map[[2]int][]visionSeq{} // the plain cut's, by batch and rank
	for _, kind := range []string{api.BalanceVision, api.BalanceAttention, api.BalanceTokens} {
		var plainVis, balancedVis float64
		full := 0
		for m := range info.Batches {
			var costs string
			var bal, cut []string
			vis, pvis := make([]uint64, world), make([]uint64, world)
			for r := range world {
				q := with("batch_size", "2", "world", "4", "rank", strconv.Itoa(r), "balance", kind)
				seqs, resp := visionSeqs(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", base, m, q.Encode()), 2, pad)
				if resp.Header.Get(api.HeaderBalance) != kind {
					t.Fatalf("%s batch %d rank %d: Brand-Balance %q", kind, m, r, resp.Header.Get(api.HeaderBalance))
				}
				c := resp.Header.Get(api.HeaderRankCosts)
				if costs != "" && c != costs {
					t.Fatalf("%s batch %d: rank %d says the costs are %s, rank 0 %s", kind, m, r, c, costs)
				}
				costs = c
				each := strings.Split(c, ",")
				if len(each) != world {
					t.Fatalf("%s batch %d: Brand-Rank-Costs %q for world %d", kind, m, c, world)
				}
				var mine uint64
				for _, s := range seqs {
					mine += s.cost[kind]
					vis[r] += s.cost[api.BalanceVision]
					bal = append(bal, s.key+" "+fmt.Sprint(s.ids))
				}
				if strconv.FormatUint(mine, 10) != each[r] {
					t.Fatalf("%s batch %d rank %d: its sequences cost %d, the header says %s", kind, m, r, mine, each[r])
				}
				q.Del("balance")
				plain, ok := plains[[2]int{m, r}] // the plain cut, read once for the three kinds
				if !ok {
					plain, _ = visionSeqs(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", base, m, q.Encode()), 2, pad)
					plains[[2]int{m, r}] = plain
				}
				for _, s := range plain {
					pvis[r] += s.cost[api.BalanceVision]
					cut = append(cut, s.key+" "+fmt.Sprint(s.ids))
					whole[s.key] = fmt.Sprint(s.ids)
				}
			}
			if !slices.Equal(slices.Sorted(slices.Values(bal)), slices.Sorted(slices.Values(cut))) {
				t.Fatalf("%s batch %d: the balanced ranks hold other sequences, or keys, than the plain cut's", kind, m)
			}
			if len(cut) == world*2 {
				plainVis += balance.Ratio(pvis)
				balancedVis += balance.Ratio(vis)
				full++
			}
		}
		plainVis, balancedVis = plainVis/float64(full), balancedVis/float64(full)
		t.Logf("balance=%s: %d global batches; vision tokens per rank max/mean %.3f balanced, %.3f plain", kind, full, balancedVis, plainVis)
		if kind == api.BalanceVision && balancedVis >= plainVis {
			t.Errorf("balance=vision: vision tokens per rank max/mean %.3f, the plain cut's %.3f", balancedVis, plainVis)
		}
	}
	if len(whole) != info.Samples {
		t.Fatalf("the plain cut served %d sequences of %d", len(whole), info.Samples)
	}

	// Two global batches at world 4, then world 2 from their offset.
	const done = 2
	read := map[string]int{}
	step := func(q url.Values, m int, ranks int) {
		for r := range ranks {
			q.Set("rank", strconv.Itoa(r))
			seqs, _ := visionSeqs(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", base, m, q.Encode()), 2, pad)
			for _, s := range seqs {
				if whole[s.key] != fmt.Sprint(s.ids) {
					t.Fatalf("%s at world %s: sequence %s is not the plain cut's", q.Get("offset"), q.Get("world"), s.key)
				}
				read[s.key]++
			}
		}
	}
	for m := range done {
		step(with("batch_size", "2", "world", "4", "balance", api.BalanceVision), m, world)
	}
	first := map[string]bool{}
	for k := range read {
		first[k] = true
	}
	resumed := with("batch_size", "2", "world", "2", "balance", api.BalanceVision, "offset", strconv.Itoa(done*world*2))
	var rest struct{ Batches int }
	epochJSON(t, base+"/epoch/0?"+resumed.Encode(), &rest)
	for m := range rest.Batches {
		before := len(read)
		step(resumed, m, 2)
		if m == 0 && len(read) == before {
			t.Fatal("the resumed run's first batch is empty")
		}
	}
	for pos := range info.Samples {
		k := fmt.Sprintf("seq/0/%010d", pos)
		if read[k] != 1 || first[k] != (pos < done*world*2) {
			t.Fatalf("sequence %s read %d times across the resize, before it %t; want once, in its global batch", k, read[k], first[k])
		}
	}
}
