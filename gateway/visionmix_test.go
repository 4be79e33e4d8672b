package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/s3backend"
)

// textTokenStore writes texts as a Parquet text column and indexes it
// in place tokenized with tokenizer (the dataset's vocabulary is its
// fingerprint), into a store of its own.
func textTokenStore(t *testing.T, tokenizer []byte, texts []string) *s3backend.Local {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(16)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for _, s := range texts {
		b.Field(0).(*array.StringBuilder).Append(s)
	}
	rec := b.NewRecordBatch()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	b.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, "data/train-0.parquet", buf.Bytes())
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{Formats: []format.Format{parquet.Format{}},
		Options: format.Options{Text: "text", Tokenizer: tokenizer}}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestVisionMixtureOverHTTP: a mixture of an image-text dataset (vis,
// 64 samples with facts) and a text corpus tokenized with the same
// tokenizer (txt, a Parquet text column) is served as a vision job
// (mix=vis:1,txt:1&seq=&vision=). Every sequence of the mixed epoch,
// read at world 2, is the vision job's or the text job's own sequence of
// its component's stream (the component's window, /epoch/0's): an
// image-text sequence byte for byte, a text sequence with its input_ids
// and position_ids and the vision members of text alone (loss on every
// token, 0 on the pad, no span, no image). Each global batch (one mixing
// block of 4 sequences) holds each component within one sequence of its
// share, as Brand-Mix-Components names them. Resumed at world 3 from the
// offset of two global batches, the rest is exactly the same sequences
// under the same keys. A text corpus of another tokenizer, and
// balance=, are refused saying why; /plan is 501.
func TestVisionMixtureOverHTTP(t *testing.T) {
	ctx := context.Background()
	tok, enc, vst := visionStore(t)
	visionCorpus(t, vst, 4, 16)
	res, err := dataset.IndexShards(ctx, vst, dataset.IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.WriteVisionFacts(ctx, vst, res.Index, tok, 0, 2); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(70, 4))
	words := strings.Fields("the river runs past the old mill and under a stone bridge while children count boats 川 山 🐕 Wiese")
	var texts []string
	for range 120 {
		var sb strings.Builder
		for range 5 + rng.IntN(150) {
			sb.WriteString(words[rng.IntN(len(words))] + " ")
		}
		texts = append(texts, sb.String())
	}
	tst := textTokenStore(t, tok, texts)
	formats := []format.Format{parquet.Format{}}
	_, srv := start(t, vst, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "vis", URL: "file:///vis", Store: vst},
			{Name: "txt", URL: "file:///txt", Store: tst, Formats: formats}}
	})

	const seq = 512
	v := enc.VocabSize()
	rule := fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d,images:4", v, v+1, v+2)
	job := url.Values{"mix": {"vis:1,txt:1"}, "seq": {strconv.Itoa(seq)}, "vision": {rule}, "seed": {"42"}, "window": {"2"}, "batch_size": {"2"}, "mix_block": {"4"}}
	with := func(q url.Values, kv ...string) url.Values {
		out := url.Values{}
		for k, x := range q {
			out[k] = slices.Clone(x)
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				out.Del(kv[i])
			} else {
				out.Set(kv[i], kv[i+1])
			}
		}
		return out
	}
	var info struct {
		Samples, Batches int
		Mix              struct {
			Block      int
			Components []struct {
				Dataset string
				Window  int
			}
		}
	}
	epochInfo := func(q url.Values) {
		t.Helper()
		resp, body := get(t, srv.URL+"/epoch/0?"+q.Encode())
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("/epoch/0?%s: %s %s", q.Encode(), resp.Status, body)
		}
	}
	epochInfo(with(job, "world", "2"))
	if info.Mix.Block != 4 || len(info.Mix.Components) != 2 {
		t.Fatalf("/epoch/0: %+v; want a block of 4 over two components", info)
	}

	// Each component's own job over its stream (its window, its
	// passes 0 to 2), every sequence by the digest of its members.
	digest := func(files map[string][]byte) string {
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		slices.Sort(names)
		h := sha256.New()
		for _, n := range names {
			fmt.Fprintf(h, "%s:%d:", n, len(files[n]))
			h.Write(files[n])
		}
		return string(h.Sum(nil))
	}
	own := map[string]bool{} // c/window/digest; vis: every member, txt: input_ids and position_ids
	ownOf := func(c, window int, files map[string][]byte) bool {
		t.Helper()
		key := func(d string) string { return fmt.Sprintf("%d/%d/%s", c, window, d) }
		if !own[key("")] {
			own[key("")] = true
			name := []string{"vis", "txt"}[c]
			q := url.Values{"dataset": {name}, "seq": {strconv.Itoa(seq)}, "seed": {"42"}, "batch_size": {"8"}, "window": {strconv.Itoa(window)}}
			if c == 0 {
				q.Set("vision", rule)
			}
			for e := range 3 {
				for _, s := range readAll(t, srv.URL, q, e) {
					if c == 1 {
						s.files = map[string][]byte{"input_ids.npy": s.files["input_ids.npy"], "position_ids.npy": s.files["position_ids.npy"]}
					}
					own[key(digest(s.files))] = true
				}
			}
		}
		if c == 1 {
			files = map[string][]byte{"input_ids.npy": files["input_ids.npy"], "position_ids.npy": files["position_ids.npy"]}
		}
		return own[key(digest(files))]
	}

	// check is one mixed sequence of component c: its component's own.
	check := func(key string, c int, files map[string][]byte) {
		t.Helper()
		if !ownOf(c, info.Mix.Components[c].Window, files) {
			t.Fatalf("sequence %s of component %d is not one of its own job's (window %d)", key, c, info.Mix.Components[c].Window)
		}
		if c == 0 {
			return
		}
		if len(files) != 5 {
			t.Fatalf("text sequence %s has %d members; want the vision job's five, no image", key, len(files))
		}
		ids := npyInt32s(t, files["input_ids.npy"])
		pad := len(ids)
		for pad > 0 && ids[pad-1] == 0 {
			pad--
		}
		_, loss, err := npy.Read(files["loss_mask.npy"])
		if err != nil || len(loss) != seq {
			t.Fatalf("text sequence %s: loss_mask %v", key, err)
		}
		for i, l := range loss {
			if want := uint8(map[bool]int{true: 1}[i < pad]); l != want && !(i < pad && ids[i] == 0) {
				t.Fatalf("text sequence %s: loss %d at %d of %d tokens", key, l, i, pad)
			}
		}
		for _, m := range []string{"image_spans.npy", "image_sizes.npy"} {
			h, data, err := npy.Read(files[m])
			if err != nil || !slices.Equal(h.Shape, []int64{0, 2}) || len(data) != 0 {
				t.Fatalf("text sequence %s: %s %+v %v; want int32 [0, 2]", key, m, h, err)
			}
		}
	}

	// read reads the mixed epoch from global batch from on at world,
	// each sequence's digest by its key; each whole global batch's
	// components within one of their share (share(m, c) of it) when
	// share is not nil.
	half := func(int, int) float64 { return 0.5 }
	read := func(q url.Values, world, from int, share func(m, c int) float64) map[string]string {
		t.Helper()
		q = with(q, "world", strconv.Itoa(world))
		epochInfo(q)
		got := map[string]string{}
		for m := from; m < info.Batches; m++ {
			count := [2]int{}
			n := 0
			for rank := range world {
				q.Set("rank", strconv.Itoa(rank))
				resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv.URL, m, q.Encode()))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("batch %d rank %d: %s %s", m, rank, resp.Status, body)
				}
				var comps []string
				if h := resp.Header.Get("Brand-Mix-Components"); h != "" {
					comps = strings.Split(h, ",")
				}
				seqs := readTar(t, body)
				if len(comps) != len(seqs) {
					t.Fatalf("batch %d rank %d: %d sequences, Brand-Mix-Components %q", m, rank, len(seqs), comps)
				}
				for i, s := range seqs {
					c, _ := strconv.Atoi(comps[i])
					check(s.key, c, s.files)
					count[c]++
					n++
					if _, dup := got[s.key]; dup {
						t.Fatalf("sequence %s served twice", s.key)
					}
					got[s.key] = fmt.Sprintf("%d:%x", c, digest(s.files))
				}
			}
			if n == 2*world && share != nil {
				for c := range 2 {
					if d := float64(count[c]) - share(m, c)*float64(n); d <= -1 || d >= 1 {
						t.Fatalf("global batch %d at world %d: component %d has %d of %d sequences; its share is %.2f", m, world, c, count[c], n, share(m, c))
					}
				}
			}
		}
		return got
	}
	whole := read(job, 2, 0, half)
	if len(whole) != info.Samples || info.Samples < 16 {
		t.Fatalf("world 2 read %d sequences of the epoch's %d", len(whole), info.Samples)
	}
	images := 0
	for _, d := range whole {
		if d[0] == '0' {
			images++
		}
	}
	if images == 0 || images == len(whole) {
		t.Fatalf("%d of %d sequences are image-text; want both kinds", images, len(whole))
	}

	// Two global batches at world 2 (8 sequences), then world 3 from
	// there: exactly the rest, under the same keys.
	resume := func(q url.Values, whole map[string]string) {
		t.Helper()
		done := map[string]string{}
		for k, d := range whole {
			if pos, _ := strconv.Atoi(k[strings.LastIndexByte(k, '/')+1:]); pos >= 8 {
				done[k] = d
			}
		}
		rest := read(with(q, "offset", "8"), 3, 0, nil)
		if len(rest) != len(done) {
			t.Fatalf("world 3 from offset 8 read %d sequences; want the %d after the first 8", len(rest), len(done))
		}
		for k, d := range done {
			if rest[k] != d {
				t.Fatalf("sequence %s at world 3 differs from world 2's", k)
			}
		}
	}
	resume(job, whole)

	// A schedule of the two (mix_schedule=): 3:1 for four steps, then
	// 1:1, each step one global batch within one sequence of its
	// phase's share; resumed at world 3 as exactly.
	sched := with(job, "mix", "", "mix_schedule", "0:vis:3,txt:1;4:vis:1,txt:1")
	steps := func(m, c int) float64 {
		if m < 4 {
			return []float64{0.75, 0.25}[c]
		}
		return 0.5
	}
	resume(sched, read(sched, 2, 0, steps))

	// What cannot be served says why: a text corpus of another
	// tokenizer (a SentencePiece model), naming both; balance=; /plan.
	sp, err := os.ReadFile("../tokenize/testdata/golden-bpe.model")
	if err != nil {
		t.Fatal(err)
	}
	sst := textTokenStore(t, sp, texts[:8])
	_, mis := start(t, vst, func(c *gateway.Config) {
		c.Datasets = []gateway.DatasetSpec{{Name: "vis", URL: "file:///vis", Store: vst},
			{Name: "sp", URL: "file:///sp", Store: sst, Formats: formats}}
	})
	q := with(job, "mix", "vis:1,sp:1")
	if resp, body := get(t, mis.URL+"/epoch/0/batch/0?"+q.Encode()); resp.StatusCode != http.StatusBadRequest ||
		!bytes.Contains(body, []byte("vis's facts were tokenized by "+enc.Fingerprint())) || !bytes.Contains(body, []byte("sp's vocabulary")) {
		t.Fatalf("another tokenizer: %s %s; want 400 naming both", resp.Status, body)
	}
	if resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+with(job, "balance", "tokens").Encode()); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("balance")) {
		t.Fatalf("balance=: %s %s; want 400 naming it", resp.Status, body)
	}
	if resp, body := get(t, srv.URL+"/plan?"+with(job, "world", "2").Encode()); resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("/plan: %s %s; want 501", resp.Status, body)
	}
}

// readAll reads every batch of epoch e of a job over one dataset at
// world 1.
func readAll(t *testing.T, base string, q url.Values, e int) []sample {
	t.Helper()
	var out []sample
	for m, n := 0, 1; m < n; m++ {
		resp, body := get(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s", base, e, m, q.Encode()))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s epoch %d batch %d: %s %s", q.Encode(), e, m, resp.Status, body)
		}
		n, _ = strconv.Atoi(resp.Header.Get("Brand-Epoch-Batches"))
		out = append(out, readTar(t, body)...)
	}
	return out
}
