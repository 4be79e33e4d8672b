package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// tokPad is the token jobs' pad: no token of the corpus is it.
const tokPad = 65535

// mSeq is one sequence of a token batch: its key, its members' bytes,
// and its cost under each balance= (its pieces' Σ length², Σ length; the
// pad costs nothing). A vision sequence's pieces are its samples, its
// attention adds its images' patches² (mVisMerge² patches a vision
// token), and vis is its vision tokens, from its image_spans.
type mSeq struct {
	key                  string
	body                 []byte
	attention, toks, vis uint64
}

// cost is s's cost under balance=kind.
func (s mSeq) cost(kind string) uint64 {
	return map[string]uint64{api.BalanceAttention: s.attention, api.BalanceTokens: s.toks, api.BalanceVision: s.vis}[kind]
}

// readSeqs reads a token batch's sequences.
func readSeqs(t *testing.T, body []byte) []mSeq {
	t.Helper()
	var out []mSeq
	for _, s := range readTar(t, body) {
		ids, err := client.Int32s(s.files[client.InputIDs])
		if err != nil {
			t.Fatal(err)
		}
		pos, err := client.Int32s(s.files[client.PositionIDs])
		if err != nil {
			t.Fatal(err)
		}
		q := mSeq{key: s.key, body: append(slices.Clone(s.files[client.InputIDs]), s.files[client.PositionIDs]...)}
		for _, name := range slices.Sorted(maps.Keys(s.files)) { // a vision sequence's other members
			if name != client.InputIDs && name != client.PositionIDs {
				q.body = append(q.body, s.files[name]...)
			}
		}
		if b, ok := s.files["image_spans.npy"]; ok {
			spans := npyInt32s(t, b)
			for k := 0; k+1 < len(spans); k += 2 {
				p := uint64(spans[k+1]) * mVisMerge * mVisMerge
				q.vis += uint64(spans[k+1])
				q.attention += p * p
			}
		}
		for i := 0; i < len(pos); {
			k := i + 1
			for k < len(pos) && pos[k] != 0 {
				k++
			}
			if ids[i] != tokPad {
				n := uint64(k - i)
				q.attention += n * n
				q.toks += n
			}
			i = k
		}
		out = append(out, q)
	}
	return out
}

// tokenRound is a round of a token job (seq=) over the token corpus:
// packed sequences are not modelled, so the job is held to its cut — each
// sequence keyed by its epoch position (seq/E/POSITION), the plain cut's
// positions for each rank (locality has no effect on a token job), and
// with balance=attention or tokens §13.3's assignment of the global
// batch by the sequences' costs — and to the epoch read at world 1, the
// same bytes at every position; an epoch serves every position once; a
// resume at another world size from a random position and a gateway
// started over the same stores serve the same; the job's edits are
// refused by the table. With balanced, the job is balanced by a cost at
// a world of 2 or more; otherwise perhaps.
func tokenRound(t *testing.T, seed uint64, nodes int, balanced bool) {
	r := roundRand(seed)
	w := newMWorld(t, r)
	ns := startMNodes(t, w, nodes)
	j := &mJob{t: t, r: r, w: w, nodes: ns, q: url.Values{}}
	seq := []int{64, 96, 160}[r.IntN(3)]
	j.q.Set("dataset", mTok)
	j.q.Set("seq", strconv.Itoa(seq))
	j.q.Set("pad", strconv.Itoa(tokPad))
	if r.IntN(3) == 0 {
		j.q.Set("pack", "concat")
		j.q.Set("eos", "1")
	}
	j.q.Set("seed", strconv.FormatUint(r.Uint64()>>1, 10))
	j.q.Set("window", strconv.Itoa(1+r.IntN(4)))
	if r.IntN(2) == 0 {
		j.q.Set("locality", "false")
	}
	j.q.Set("job", fmt.Sprintf("tok%d", r.IntN(1000)))
	balance := []string{"", "attention", "tokens"}[r.IntN(3)]
	if balanced && balance == "" {
		balance = api.BalanceAttention
	}
	plain := url.Values{}
	for k, v := range j.q {
		plain[k] = v
	}
	plain.Del("job")
	if balance != "" {
		j.q.Set("balance", balance)
	}
	j.cut = jobmodel.Cut{B: 1 + r.IntN(4), World: 1 + r.IntN(6), DropLast: r.IntN(3) == 0}
	if balanced {
		j.cut.World = 2 + r.IntN(5)
	}
	t.Logf("job %s, %+v", j.q.Encode(), j.cut)
	j.tokenRun(seed, plain, balance)
}

// tokenRun holds a token job (its parameters j.q, plain the same but
// its name and balance=, and its cut j.cut) to its cut and to the epoch
// read at world 1, over epoch 0 whole and epoch 1 resumed at another
// world size from a random position; reads every batch again from a
// gateway started over the same stores; holds its /plan of epochs 0 and
// 1 to their sequences and batches; and asks for its edits, the round's
// share of the refused pairs and random requests, each refused as the
// rules say.
func (j *mJob) tokenRun(seed uint64, plain url.Values, balance string) {
	t, r, w, ns := j.t, j.r, j.w, j.nodes
	t.Helper()
	var reads []mRead
	ref := tokenReference(t, ns.urls[j.anyNode(0)], plain, 0)
	var all []string
	for m := range j.cut.Batches(len(ref)) {
		all = append(all, tokenStep(j, ref, 0, m, j.cut, balance, &reads)...)
	}
	if !j.cut.DropLast {
		slices.Sort(all)
		for p, k := range all {
			if k != sequences.Key(0, p) {
				t.Fatalf("epoch 0: the sequences served are %v; want every position of %d once", all, len(ref))
			}
		}
	}
	// A resume at another world size from a random position of epoch 1.
	first := len(ref)
	ref = tokenReference(t, ns.urls[j.anyNode(0)], plain, 1)
	// The plan of epochs 0 and 1: the sequences and batches served.
	j.planAsServed(j.cut, 0, []int{first, len(ref)}, j.resolved(datasetsOf(j.q)))
	cut := jobmodel.Cut{B: 1 + r.IntN(4), World: 1 + r.IntN(6), Offset: r.IntN(len(ref) + 1), DropLast: r.IntN(2) == 0}
	t.Logf("resumed: %+v", cut)
	for m := range cut.Batches(len(ref)) {
		tokenStep(j, ref, 1, m, cut, balance, &reads)
	}
	// Every batch again from a gateway started over the same stores.
	fresh := startMNodes(t, w, 1)
	for _, rd := range reads {
		resp, body := get(t, fresh.urls[0]+rd.path)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, rd.body) {
			t.Fatalf("%s on a restarted gateway: %s, same bytes %v", rd.path, resp.Status, bytes.Equal(body, rd.body))
		}
	}
	// A token job's edits are the table's to refuse.
	for _, edit := range []struct{ kind, feature, body string }{
		{"exclude", "exclusion", `{"from_step": 1000, "keys": ["x"]}`},
		{"append", "append", `{"from_step": 1000, "index": "0123456789abcdef"}`},
	} {
		kind, feature, body := edit.kind, edit.feature, edit.body
		v := j.query(jobmodel.Cut{B: j.cut.B, World: j.cut.World}, -1)
		verdict := jobmodel.Judge(v, []string{feature})
		expectRefusal(t, ns.urls[j.anyNode(0)], fmt.Sprintf("/jobs/%s/%s?%s", j.q.Get("job"), kind, v.Encode()), []byte(body), tableRefusal(t, verdict), true)
	}
	j.refusePairs(seed)
	j.refuseRandom(4)
}

// tokenReference reads epoch e of the token job of parameters q whole at
// world 1 and returns its sequences by position, each keyed by it.
func tokenReference(t *testing.T, base string, q url.Values, e uint64) []mSeq {
	t.Helper()
	resp, body := get(t, fmt.Sprintf("%s/epoch/%d?%s", base, e, q.Encode()))
	var info api.EpochInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Tokens == nil {
		t.Fatalf("/epoch/%d?%s: %s %s", e, q.Encode(), resp.Status, body)
	}
	var out []mSeq
	for m := 0; len(out) < info.Samples; m++ {
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&batch_size=16", base, e, m, q.Encode()))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("epoch %d batch %d at world 1: %s %s", e, m, resp.Status, body)
		}
		out = append(out, readSeqs(t, body)...)
	}
	for p, s := range out {
		if s.key != sequences.Key(e, p) {
			t.Fatalf("epoch %d at world 1: position %d holds %s", e, p, s.key)
		}
	}
	return out
}

// tokenStep reads global batch m of epoch e of the token job under cut
// and holds it to the cut and to ref, the epoch's sequences by position:
// each rank's sequences the plain cut's slice, or with balance §13.3's
// assignment of the global batch by their costs, and each one ref's
// sequence at its position, byte for byte. It records each rank's read
// and returns the global batch's keys.
func tokenStep(j *mJob, ref []mSeq, e uint64, m int, cut jobmodel.Cut, balance string, reads *[]mRead) []string {
	t := j.t
	t.Helper()
	n := len(ref)
	gs, ge := cut.Global(n, m)
	shares := cut.Shares(n, m)
	var want [][]int
	if balance == "" {
		for r := range cut.World {
			s, e := cut.Rank(n, m, r)
			var ps []int
			for p := s; p < e; p++ {
				ps = append(ps, p)
			}
			want = append(want, ps)
		}
	} else {
		costs := make([]uint64, ge-gs)
		for i := range costs {
			costs[i] = ref[gs+i].cost(balance)
		}
		for _, places := range jobmodel.Assign(costs, shares) {
			var ps []int
			for _, p := range places {
				ps = append(ps, gs+p)
			}
			want = append(want, ps)
		}
	}
	var all []string
	var header string
	for r := range cut.World {
		node := j.anyNode(r)
		path := fmt.Sprintf("/epoch/%d/batch/%d?%s", e, m, j.query(cut, r).Encode())
		resp, body := get(t, j.nodes.urls[node]+path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("node %d %s: %s %s", node, path, resp.Status, body)
		}
		*reads = append(*reads, mRead{path: path, node: node, etag: resp.Header.Get("ETag"), body: body})
		var keys []string
		var cost uint64
		for _, s := range readSeqs(t, body) {
			p, err := strconv.Atoi(s.key[strings.LastIndex(s.key, "/")+1:])
			if err != nil || p < 0 || p >= n || s.key != sequences.Key(e, p) || !bytes.Equal(s.body, ref[p].body) {
				t.Fatalf("node %d %s: sequence %s is not the epoch's sequence at its position", node, path, s.key)
			}
			keys = append(keys, s.key)
			cost += s.cost(balance)
		}
		var wantKeys []string
		for _, p := range want[r] {
			wantKeys = append(wantKeys, sequences.Key(e, p))
		}
		if !slices.Equal(keys, wantKeys) {
			t.Fatalf("epoch %d batch %d rank %d (%+v, balance %q): %v; want %v", e, m, r, cut, balance, keys, wantKeys)
		}
		if balance != "" {
			h := resp.Header.Get(api.HeaderRankCosts)
			if header != "" && h != header || strings.Split(h, ",")[r] != strconv.FormatUint(cost, 10) {
				t.Fatalf("epoch %d batch %d rank %d: Brand-Rank-Costs %q (rank 0's %q); its sequences cost %d", e, m, r, h, header, cost)
			}
			header = h
		}
		all = append(all, keys...)
	}
	return all
}
