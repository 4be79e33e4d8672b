package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// tokenStride makes every token of the token fixture tell its document
// and place: token t of document d is d·tokenStride + t.
const tokenStride = 1000

// tokenCorpus is the token fixture's documents, per prefix: 3 prefixes of
// 150 documents, of 1 to 999 tokens (most short, a tail past 300).
func tokenCorpus() [][][]int64 {
	var out [][][]int64
	d := 0
	for p := range 3 {
		docs := megatrontest.Corpus(150, 600, 1, uint64(p))
		for i := range docs {
			for t := range docs[i] {
				docs[i][t] = int64(d*tokenStride + t)
			}
			d++
		}
		out = append(out, docs)
	}
	return out
}

// tokenStore writes the corpus as Megatron files of dtype dtype and
// indexes them in place, in chunks of about 8 KiB.
func tokenStore(t testing.TB, dtype string, corpus [][][]int64) s3backend.Store {
	t.Helper()
	return tokenStoreSized(t, dtype, corpus, 8<<10)
}

// tokenStoreSized is tokenStore in chunks of about chunk bytes.
func tokenStoreSized(t testing.TB, dtype string, corpus [][][]int64, chunk int64) s3backend.Store {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for p, docs := range corpus {
		bin, idx := megatrontest.Files(dtype, docs)
		for name, b := range map[string][]byte{fmt.Sprintf("data/p%d_text_document.bin", p): bin, fmt.Sprintf("data/p%d_text_document.idx", p): idx} {
			if _, err := st.Put(ctx, name, bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{
		Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: chunk}}); err != nil {
		t.Fatal(err)
	}
	return st
}

func startTokens(t testing.TB, st s3backend.Store, mutate func(*gateway.Config)) *httptest.Server {
	t.Helper()
	_, srv := start(t, st, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{megatron.Format{}}
		if mutate != nil {
			mutate(c)
		}
	})
	return srv
}

// seqSample is one sequence of a token batch.
type seqSample struct {
	key      string
	ids, pos []int32
}

// tokenBatch GETs a batch of a token job and reads its sequences.
func tokenBatch(t testing.TB, url string) ([]seqSample, *http.Response) {
	t.Helper()
	resp, body := get(t, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	var out []seqSample
	for _, s := range readTar(t, body) {
		if len(s.files) != 2 {
			t.Fatalf("sequence %s has members %v, want input_ids.npy and position_ids.npy", s.key, len(s.files))
		}
		ids, err := client.Int32s(s.files[client.InputIDs])
		if err != nil {
			t.Fatal(err)
		}
		pos, err := client.Int32s(s.files[client.PositionIDs])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, seqSample{s.key, ids, pos})
	}
	if n, _ := strconv.Atoi(resp.Header.Get("Brand-Batch-Samples")); n != len(out) {
		t.Fatalf("Brand-Batch-Samples %d, the body holds %d sequences", n, len(out))
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
		t.Fatalf("Content-Length %s, body %d bytes", cl, len(body))
	}
	return out, resp
}

// tokenEpoch reads every batch of an epoch of a token job at one rank.
func tokenEpoch(t testing.TB, base, query string, epoch int) []seqSample {
	t.Helper()
	var all []seqSample
	first, resp := tokenBatch(t, fmt.Sprintf("%s/epoch/%d/batch/0?%s", base, epoch, query))
	all = append(all, first...)
	n, err := strconv.Atoi(resp.Header.Get("Brand-Epoch-Batches"))
	if err != nil {
		t.Fatal(err)
	}
	for m := 1; m < n; m++ {
		b, _ := tokenBatch(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", base, epoch, m, query))
		all = append(all, b...)
	}
	return all
}

// segments cuts a sequence where position_ids restart at 0: each
// segment's tokens.
func segments(t testing.TB, s seqSample) [][]int32 {
	t.Helper()
	var out [][]int32
	for i := range s.ids {
		if s.pos[i] == 0 {
			out = append(out, nil)
		} else if i == 0 || s.pos[i] != s.pos[i-1]+1 {
			t.Fatalf("sequence %s: position_ids %d after %d at %d", s.key, s.pos[i], s.pos[max(i-1, 0)], i)
		}
		out[len(out)-1] = append(out[len(out)-1], s.ids[i])
	}
	return out
}

// A bestfit epoch serves every token of every document exactly once: the
// documents reassembled from position_ids' segments are the corpus, and
// none shorter than seq is cut. Pad (an ID no document holds) is one last
// segment. Two epochs differ in order.
func TestTokensBestFitExactlyOnce(t *testing.T) {
	corpus := tokenCorpus()
	srv := startTokens(t, tokenStore(t, "int32", corpus), nil)
	const seq, pad = 512, 999999
	var docs [][]int64
	for _, p := range corpus {
		docs = append(docs, p...)
	}
	var first [][]int32 // epoch 0's sequences' tokens
	for epoch := range 2 {
		all := tokenEpoch(t, srv.URL, fmt.Sprintf("seq=%d&pad=%d&batch_size=4&window=2", seq, pad), epoch)
		// Per document: its tokens at their places, and how many times
		// each was seen; a long document's pieces come in any order.
		got := make([][]int32, len(docs))
		seen := make([][]int, len(docs))
		for d, want := range docs {
			got[d], seen[d] = make([]int32, len(want)), make([]int, len(want))
		}
		pieces := make([]int, len(docs))
		var ids [][]int32
		for _, s := range all {
			ids = append(ids, s.ids)
			if len(s.ids) != seq {
				t.Fatalf("sequence %s of %d tokens", s.key, len(s.ids))
			}
			segs := segments(t, s)
			for i, sg := range segs {
				if sg[0] == pad {
					if i != len(segs)-1 || slices.ContainsFunc(sg, func(x int32) bool { return x != pad }) {
						t.Fatalf("sequence %s: pad is not its one last segment", s.key)
					}
					continue
				}
				d, off := int(sg[0])/tokenStride, int(sg[0])%tokenStride
				if d >= len(docs) || off+len(sg) > len(docs[d]) {
					t.Fatalf("sequence %s: a piece of %d tokens from %d, past document %d", s.key, len(sg), sg[0], d)
				}
				copy(got[d][off:], sg)
				for i := range sg {
					seen[d][off+i]++
				}
				pieces[d]++
			}
		}
		for d, want := range docs {
			for i, n := range seen[d] {
				if n != 1 {
					t.Fatalf("epoch %d: document %d token %d served %d times", epoch, d, i, n)
				}
			}
			for i := range want {
				if int64(got[d][i]) != want[i] {
					t.Fatalf("epoch %d: document %d token %d is %d, want %d", epoch, d, i, got[d][i], want[i])
				}
			}
			if len(want) < seq && pieces[d] != 1 {
				t.Fatalf("document %d of %d tokens cut into %d pieces", d, len(want), pieces[d])
			}
		}
		if epoch == 0 {
			first = ids
		} else if slices.EqualFunc(first, ids, slices.Equal) {
			t.Fatal("epochs 0 and 1 serve the same sequences in the same order")
		}
	}
	if len(first) < 40 {
		t.Fatalf("%d sequences an epoch: the fixture is too small to cross windows", len(first))
	}
}

// A concat epoch is a permutation of the documents, each followed by the
// EOS, cut every seq tokens: only the last sequence has pad.
func TestTokensConcatPermutation(t *testing.T) {
	corpus := tokenCorpus()
	srv := startTokens(t, tokenStore(t, "int32", corpus), nil)
	const seq, eos, pad = 256, 888888, 999999
	var docs [][]int64
	for _, p := range corpus {
		docs = append(docs, p...)
	}
	all := tokenEpoch(t, srv.URL, fmt.Sprintf("seq=%d&pack=concat&eos=%d&pad=%d&batch_size=3", seq, eos, pad), 0)
	var stream []int32
	for i, s := range all {
		stream = append(stream, s.ids...)
		if i < len(all)-1 && slices.Contains(s.ids, pad) {
			t.Fatalf("sequence %d of %d has pad", i, len(all))
		}
	}
	for len(stream) > 0 && stream[len(stream)-1] == pad {
		stream = stream[:len(stream)-1]
	}
	seen := make([]bool, len(docs))
	for len(stream) > 0 {
		d := int(stream[0]) / tokenStride
		want := docs[d]
		if seen[d] || len(stream) < len(want)+1 {
			t.Fatalf("document %d again, or cut short", d)
		}
		for i := range want {
			if int64(stream[i]) != want[i] {
				t.Fatalf("document %d token %d is %d, want %d", d, i, stream[i], want[i])
			}
		}
		if stream[len(want)] != eos {
			t.Fatalf("document %d is followed by %d, not the EOS", d, stream[len(want)])
		}
		seen[d] = true
		stream = stream[len(want)+1:]
	}
	for d, ok := range seen {
		if !ok {
			t.Fatalf("document %d never served", d)
		}
	}
}

// Global steps are the same sequences at world 1 and as the union of
// world 8's ranks, in order; a job resumed mid-epoch at another world
// size (offset= in sequences) continues where it stopped.
func TestTokensWorldAndResume(t *testing.T) {
	srv := startTokens(t, tokenStore(t, "uint16", megatrontestCorpus16()), nil)
	const q = "seq=128&window=2"
	one := tokenEpoch(t, srv.URL, q+"&batch_size=16&world=1&rank=0", 0)
	// World 8, batch_size 2: the same global batches of 16.
	var eight []seqSample
	for m := 0; ; m++ {
		var step []seqSample
		for r := range 8 {
			url := fmt.Sprintf("%s/epoch/0/batch/%d?%s&batch_size=2&world=8&rank=%d", srv.URL, m, q, r)
			resp, body := get(t, url)
			if resp.StatusCode == http.StatusNotFound {
				goto done
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %s %s", url, resp.Status, body)
			}
			b, _ := tokenBatch(t, url)
			step = append(step, b...)
		}
		eight = append(eight, step...)
	}
done:
	equalSequences(t, "world 8's union", eight, one)
	// World 2 for 5 steps of 8, then world 4 from offset 40.
	var resumed []seqSample
	for m := range 5 {
		for r := range 2 {
			b, _ := tokenBatch(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&batch_size=4&world=2&rank=%d", srv.URL, m, q, r))
			resumed = append(resumed, b...)
		}
	}
	rest := tokenEpochRanks(t, srv.URL, q+"&batch_size=2&offset=40", 4)
	resumed = append(resumed, rest...)
	equalSequences(t, "world 2 resumed at world 4", resumed, one)
}

// tokenEpochRanks reads an epoch at world ranks, each global batch's
// ranks in order.
func tokenEpochRanks(t testing.TB, base, query string, world int) []seqSample {
	t.Helper()
	var all []seqSample
	_, resp := tokenBatch(t, fmt.Sprintf("%s/epoch/0/batch/0?%s&world=%d&rank=0", base, query, world))
	n, _ := strconv.Atoi(resp.Header.Get("Brand-Epoch-Batches"))
	for m := range n {
		for r := range world {
			b, _ := tokenBatch(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&world=%d&rank=%d", base, m, query, world, r))
			all = append(all, b...)
		}
	}
	return all
}

func equalSequences(t testing.TB, what string, got, want []seqSample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d sequences, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].key != want[i].key || !slices.Equal(got[i].ids, want[i].ids) || !slices.Equal(got[i].pos, want[i].pos) {
			t.Fatalf("%s: sequence %d is %s, want %s (or its tokens differ)", what, i, got[i].key, want[i].key)
		}
	}
}

// megatrontestCorpus16 is a corpus whose IDs fit uint16.
func megatrontestCorpus16() [][][]int64 {
	var out [][][]int64
	for p := range 2 {
		out = append(out, megatrontest.Corpus(120, 300, 50000, uint64(10+p)))
	}
	return out
}

// What a token job cannot be is refused with 400, saying why; the epoch
// counts sequences; HEAD knows the length; the ETag names the packing.
func TestTokensRefusedAndDescribed(t *testing.T) {
	srv := startTokens(t, tokenStore(t, "uint16", megatrontestCorpus16()), nil)
	for _, tc := range []struct{ query, says string }{
		{"seq=0", "seq must be between 1 and 1048576"},
		{"seq=1048577", "seq must be between 1 and 1048576"},
		{"seq=64&pad=65536", "does not fit dataset test's tokens (uint16"},
		{"seq=64&pack=concat", "give eos=ID"},
		{"seq=64&pack=concat&eos=70000", "eos=70000 does not fit"},
		{"seq=64&eos=1", "only with pack=concat"},
		{"pad=1", "token job (seq=)"},
	} {
		resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+tc.query)
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(tc.says)) {
			t.Errorf("%s: %s %s, want 400 saying %q", tc.query, resp.Status, body, tc.says)
		}
	}
	resp, body := get(t, srv.URL+"/epoch/0?seq=64&batch_size=4")
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"tokens"`)) || !bytes.Contains(body, []byte(`"fill"`)) {
		t.Fatalf("/epoch/0 of a token job: %s %s", resp.Status, body)
	}
	head, _ := do(t, http.MethodHead, srv.URL+"/epoch/0/batch/1?seq=64&batch_size=4", nil)
	b, got := get(t, srv.URL+"/epoch/0/batch/1?seq=64&batch_size=4")
	if head.Header.Get("Content-Length") != strconv.Itoa(len(got)) || head.Header.Get("ETag") != b.Header.Get("ETag") {
		t.Fatalf("HEAD: length %s etag %s; GET: %d bytes, etag %s", head.Header.Get("Content-Length"), head.Header.Get("ETag"), len(got), b.Header.Get("ETag"))
	}
	etags := map[string]string{}
	for _, q := range []string{"seq=64", "seq=65", "seq=64&pad=1", "seq=64&pack=concat&eos=1", "seq=64&pack=concat&eos=2", ""} {
		r, _ := do(t, http.MethodHead, srv.URL+"/epoch/0/batch/0?batch_size=4&"+q, nil)
		if prev, ok := etags[r.Header.Get("ETag")]; ok {
			t.Errorf("%q and %q have one ETag", prev, q)
		}
		etags[r.Header.Get("ETag")] = q
	}
}

// seq= on a dataset that is not a token dataset (one served in place
// whose samples are lines of text) is refused, naming it.
func TestTokensNotATokenDataset(t *testing.T) {
	f := formattest.Lines{}
	st, _ := inPlaceStore(t, f)
	srv := startInPlace(t, st, f)
	for _, path := range []string{"/epoch/0/batch/0", "/epoch/0"} {
		resp, body := get(t, srv.URL+path+"?seq=64")
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("test is not one")) {
			t.Errorf("%s: %s %s, want 400 naming the dataset", path, resp.Status, body)
		}
	}
}

// /stats and /metrics count a token job's sequences, tokens, fill and
// split pieces; after one whole epoch the fill is the epoch's. /plan with
// seq= answers.
func TestTokensStatsAndPlan(t *testing.T) {
	srv := startTokens(t, tokenStore(t, "uint16", megatrontestCorpus16()), nil)
	const q = "seq=128&batch_size=4"
	_, body := get(t, srv.URL+"/stats")
	if bytes.Contains(body, []byte(`"tokens"`)) {
		t.Fatalf("/stats has tokens before any token job: %s", body)
	}
	all := tokenEpoch(t, srv.URL, q, 0)
	var info struct {
		Samples int
		Tokens  struct {
			Tokens int64
			Fill   float64
			Split  int
		}
	}
	_, body = get(t, srv.URL+"/epoch/0?"+q)
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Tokens struct {
			Sequences, Tokens int64
			NonPad            int64 `json:"nonpad_tokens"`
			Fill              float64
			SplitPieces       int64 `json:"split_pieces"`
		}
	}
	_, body = get(t, srv.URL+"/stats")
	if err := json.Unmarshal(body, &stats); err != nil {
		t.Fatal(err)
	}
	st := stats.Tokens
	if st.Sequences != int64(len(all)) || int(st.Sequences) != info.Samples || st.Tokens != 128*st.Sequences ||
		st.NonPad != info.Tokens.Tokens || st.Fill != info.Tokens.Fill || st.SplitPieces < int64(2*info.Tokens.Split) {
		t.Fatalf("/stats tokens %+v; the epoch: %d sequences %+v", st, len(all), info.Tokens)
	}
	if info.Tokens.Fill <= 0.5 || info.Tokens.Fill > 1 {
		t.Fatalf("fill %v", info.Tokens.Fill)
	}
	_, body = get(t, srv.URL+"/metrics")
	if !bytes.Contains(body, fmt.Appendf(nil, "brand_token_nonpad_total %d", st.NonPad)) ||
		!bytes.Contains(body, fmt.Appendf(nil, "brand_token_sequences_total %d", st.Sequences)) {
		t.Fatalf("/metrics lacks the token counters")
	}
	// /plan answers a token job's plan (internal/plans's TestPlanOfATokenJob
	// has what it holds).
	if resp, body := get(t, srv.URL+"/plan?"+q+"&epochs=2&cache_size=1MiB"); resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"documents_per_batch"`)) {
		t.Fatalf("/plan of a token job: %s %s", resp.Status, body)
	}
}

// A mixture of three token datasets mixes sequences: every global batch
// (one mixing block) holds each source within one sequence of its share,
// so shares in tokens hold within ±1 sequence per batch and over any
// window of batches; each sequence is its source's documents alone, and
// Brand-Mix-Components names it. Datasets of different dtypes are
// refused in one mixture, naming both.
func TestTokensMixture(t *testing.T) {
	var specs []gateway.DatasetSpec
	for k, name := range []string{"web", "code", "books"} {
		corpus := [][][]int64{megatrontest.Corpus(200, 300, 1, uint64(20+k))}
		for d := range corpus[0] {
			for i := range corpus[0][d] {
				corpus[0][d][i] = int64(k*10_000_000 + d*tokenStride + i)
			}
		}
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: tokenStore(t, "int32", corpus),
			Formats: []format.Format{megatron.Format{}}})
	}
	other := megatrontestCorpus16()
	specs = append(specs, gateway.DatasetSpec{Name: "small", URL: "file:///small", Store: tokenStore(t, "uint16", other),
		Formats: []format.Format{megatron.Format{}}})
	_, srv := start(t, nil, func(c *gateway.Config) { c.Datasets = specs })
	const batch = 10
	weights := []float64{0.5, 0.3, 0.2}
	const pad = 2_000_000_000
	q := fmt.Sprintf("mix=web:0.5,code:0.3,books:0.2&seq=64&batch_size=%d&window=2&pad=%d", batch, pad)
	_, resp := tokenBatch(t, srv.URL+"/epoch/0/batch/0?"+q)
	n, _ := strconv.Atoi(resp.Header.Get("Brand-Epoch-Batches"))
	if n < 20 {
		t.Fatalf("%d batches: too few to check shares", n)
	}
	total := make([]int, 3)
	for m := range n - 1 { // the last batch may be short
		seqs, resp := tokenBatch(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv.URL, m, q))
		comps := strings.Split(resp.Header.Get("Brand-Mix-Components"), ",")
		if len(comps) != len(seqs) {
			t.Fatalf("batch %d: %d components named for %d sequences", m, len(comps), len(seqs))
		}
		count := make([]int, 3)
		for i, s := range seqs {
			c, _ := strconv.Atoi(comps[i])
			count[c]++
			for _, id := range s.ids {
				if id != pad && int(id)/10_000_000 != c {
					t.Fatalf("batch %d: sequence %d of component %d holds token %d", m, i, c, id)
				}
			}
		}
		for c, w := range weights {
			total[c] += count[c]
			if want := w * batch; math.Abs(float64(count[c])-want) >= 1 {
				t.Errorf("batch %d: component %d has %d sequences (%d tokens), share %.1f", m, c, count[c], 64*count[c], want)
			}
			if want := w * batch * float64(m+1); math.Abs(float64(total[c])-want) >= 1 {
				t.Errorf("batches 0..%d: component %d has %d sequences, share %.1f", m, c, total[c], want)
			}
		}
	}
	resp, body := get(t, srv.URL+"/epoch/0/batch/0?mix=web:1,small:1&seq=64")
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("web holds int32, small holds uint16")) {
		t.Fatalf("a mixture of two dtypes: %s %s", resp.Status, body)
	}
}

// The Go client reads a token job's epochs (Options.Job.Seq, Pack): its
// plan counts sequences, Batch.Sequences views them as []int32, and
// EpochFrom resumes at an offset in sequences, as the gateway serves them.
func TestTokensClient(t *testing.T) {
	srv := startTokens(t, tokenStore(t, "uint16", megatrontestCorpus16()), nil)
	const q = "seq=128&pack=concat&eos=3&batch_size=4&seed=9&window=2"
	want := tokenEpoch(t, srv.URL, q, 1)
	c, err := client.New(srv.URL, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 9, BatchSize: 4, Window: 2},
		Seq: 128, Pack: "concat", EOS: 3, EOSSet: true}})
	if err != nil {
		t.Fatal(err)
	}
	read := func(offset int) []seqSample {
		var got []seqSample
		for b, err := range c.EpochFrom(context.Background(), 1, offset) {
			if err != nil {
				t.Fatal(err)
			}
			seqs, err := b.Sequences()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range seqs {
				got = append(got, seqSample{s.Key, slices.Clone(s.InputIDs), slices.Clone(s.PositionIDs)})
			}
			b.Release()
		}
		return got
	}
	equalSequences(t, "the client's epoch", read(0), want)
	equalSequences(t, "the client's epoch from offset 12", read(12), want[12:])
}

// BenchmarkTokenBatches: warm batches of a token job (seq=4096, 8
// sequences a batch, bestfit, uint16 documents of a realistic length
// mix, chunks of 1 MiB, windows of 2) served over HTTP by one in-process gateway whose cache holds the
// dataset, epoch after epoch, the body read and discarded; Mtokens/s
// counts the sequences' tokens (each epoch's last batch counted whole).
func BenchmarkTokenBatches(b *testing.B) {
	var corpus [][][]int64
	for p := range 4 {
		corpus = append(corpus, megatrontest.Corpus(2000, 8192, 50000, uint64(100+p)))
	}
	srv := startTokens(b, tokenStoreSized(b, "uint16", corpus, 1<<20), func(c *gateway.Config) { c.CacheSize = 1 << 30 })
	const q = "seq=4096&batch_size=8"
	_, resp := tokenBatch(b, srv.URL+"/epoch/0/batch/0?"+q)
	n, _ := strconv.Atoi(resp.Header.Get("Brand-Epoch-Batches"))
	for m := range n { // warm: every chunk in the cache
		get(b, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv.URL, m, q))
	}
	// Epoch after epoch, as a job reads them, from epoch 1.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.ResetTimer()
	tokens := 0
	for i := 0; b.Loop(); i++ {
		resp, err := hc.Get(fmt.Sprintf("%s/epoch/%d/batch/%d?%s", srv.URL, 1+i/n, i%n, q))
		if err != nil {
			b.Fatal(err)
		}
		nb, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.SetBytes(nb)
		tokens += 8 * 4096
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds()/1e6, "Mtokens/s")
}
