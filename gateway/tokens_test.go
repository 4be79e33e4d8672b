package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// tokenStride makes every token of the token fixture tell its document
// and place: token t of document d is d·tokenStride + t.
const tokenStride = 1000

// tokenStore writes the corpus as Megatron files of dtype dtype and
// indexes them in place, in chunks of about chunk bytes.
func tokenStore(t testing.TB, dtype string, corpus [][][]int64, chunk int64) s3backend.Store {
	t.Helper()
	st, err := megatrontest.Store(t.TempDir(), dtype, corpus, dataset.InPlaceOptions{
		Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: chunk}})
	if err != nil {
		t.Fatal(err)
	}
	return st
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

// A token job's HTTP contract (what its batches hold, and why a job is
// refused — a dataset of no tokens, a mixture's two dtypes among the
// reasons — is internal/batch/layout's TestTokenJobEpoch, TestTokenJobAtAnyWorld,
// TestTokenMixtureShares, TestTokenJobRefused and TestTokenJobETags; the
// client's reads, client's TestTokensClient): what cannot be served is a
// 400 saying why, from the query or the dataset, on a batch and on
// /epoch/N; /epoch/N counts
// sequences and describes the packing; HEAD knows the length and ETag;
// Brand-Mix-Components names each sequence's source; /stats and /metrics
// count sequences, tokens, fill and split pieces (after one whole epoch
// the fill is the epoch's), and /plan with seq= answers
// (internal/job/plans's TestPlanOfATokenJob has what it holds).
func TestTokensOverHTTP(t *testing.T) {
	other := [][][]int64{megatrontest.Corpus(120, 300, 50000, 10), megatrontest.Corpus(120, 300, 50000, 11)} // IDs that fit uint16
	var specs []gateway.DatasetSpec
	for _, name := range []string{"test", "small"} {
		specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: tokenStore(t, "uint16", other, 8<<10),
			Formats: []format.Format{megatron.Format{}}})
	}
	_, srv := start(t, nil, func(c *gateway.Config) { c.Datasets = specs })
	_, body := get(t, srv.URL+"/stats")
	if bytes.Contains(body, []byte(`"tokens"`)) {
		t.Fatalf("/stats has tokens before any token job: %s", body)
	}
	const q = "seq=128&batch_size=4"
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
	if err := json.Unmarshal(body, &info); err != nil || !bytes.Contains(body, []byte(`"fill"`)) {
		t.Fatalf("/epoch/0 of a token job: %v %s", err, body)
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
	for _, tc := range []struct{ path, says string }{
		{"/epoch/0/batch/0?seq=0", "seq must be between 1 and 1048576"},
		{"/epoch/0/batch/0?seq=64&pad=65536", "does not fit dataset test's tokens (uint16"},
		{"/epoch/0/batch/0?seq=64&pack=concat", "give eos=ID"},
		{"/epoch/0?seq=64&pack=concat", "give eos=ID"},
	} {
		resp, body := get(t, srv.URL+tc.path)
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(tc.says)) {
			t.Errorf("%s: %s %s, want 400 saying %q", tc.path, resp.Status, body, tc.says)
		}
	}
	head, _ := do(t, http.MethodHead, srv.URL+"/epoch/0/batch/1?seq=64&batch_size=4", nil)
	b, got := get(t, srv.URL+"/epoch/0/batch/1?seq=64&batch_size=4")
	if head.Header.Get("Content-Length") != strconv.Itoa(len(got)) || head.Header.Get("ETag") != b.Header.Get("ETag") {
		t.Fatalf("HEAD: length %s etag %s; GET: %d bytes, etag %s", head.Header.Get("Content-Length"), head.Header.Get("ETag"), len(got), b.Header.Get("ETag"))
	}
	seqs, resp := tokenBatch(t, srv.URL+"/epoch/0/batch/0?mix=test:0.5,small:0.5&seq=64&batch_size=4")
	if comps := strings.Split(resp.Header.Get(api.HeaderMixComponents), ","); len(comps) != len(seqs) {
		t.Fatalf("%d components named for %d sequences", len(comps), len(seqs))
	}
	if resp, body := get(t, srv.URL+"/plan?"+q+"&epochs=2&cache_size=1MiB"); resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"documents_per_batch"`)) {
		t.Fatalf("/plan of a token job: %s %s", resp.Status, body)
	}
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
	_, srv := start(b, tokenStore(b, "uint16", corpus, 1<<20), func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{megatron.Format{}}
		c.CacheSize = 1 << 30
	})
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
