package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// tokenTexts are documents in 12 languages and 9 scripts, a tenth with
// invalid UTF-8 (stray continuation bytes, truncated sequences, overlong
// forms, surrogates, bytes past U+10FFFF), some empty, a few long.
func tokenTexts(n int) []string {
	parts := []string{
		"The quick brown fox jumps over the lazy dog. ", "Größenordnung: über 3 000 km² — naïve café. ",
		"Съешь же ещё этих мягких французских булок. ", "東京は日本の首都です。人口は約1400万人。",
		"北京是中华人民共和国的首都。", "서울은 대한민국의 수도이다. ", "مرحبا بالعالم، هذا نص عربي. ",
		"שלום עולם, זה טקסט בעברית. ", "नमस्ते दुनिया, यह हिंदी है। ", "Γειά σου Κόσμε, αυτό είναι ελληνικά. ",
		"สวัสดีชาวโลก นี่คือภาษาไทย ", "🙂 emoji 👩‍💻 and combining e\u0301 a\u0308 ", "tabs\tand\nnewlines\r\n  1234567890 ",
	}
	bad := []string{"\x80", "\xe6\x97", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff"}
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		k := (i * 7) % 19
		if i%40 == 39 {
			k = 300
		}
		for j := range k {
			b.WriteString(parts[(i*5+j*3)%len(parts)])
			if i%10 == 3 && j%3 == 1 {
				b.WriteString(bad[(i+j)%len(bad)])
			}
		}
		out[i] = b.String()
	}
	return out
}

// referenceEncode has the reference SentencePiece library (Debian's
// python3-sentencepiece, through package tokenize's testdata/reference.py)
// encode texts with the model at path; without it the test skips, or
// fails with CI=true.
func referenceEncode(t *testing.T, model string, texts []string) [][]int32 {
	t.Helper()
	py := pythontest.Need(t, "scripts/ensure-sentencepiece.sh", "sentencepiece")
	dir := t.TempDir()
	var b strings.Builder
	for _, s := range texts {
		b.WriteString(hex.EncodeToString([]byte(s)) + "\n")
	}
	abs, _ := filepath.Abs(model)
	spec, _ := json.Marshal(map[string]any{"texts": filepath.Join(dir, "texts.hex"), "models": map[string]string{"m": abs}})
	if err := os.WriteFile(filepath.Join(dir, "texts.hex"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "../tokenize/testdata/reference.py", "encode", filepath.Join(dir, "spec.json"), filepath.Join(dir, "out.json")).CombinedOutput(); err != nil {
		t.Fatalf("reference.py: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]struct {
		IDs [][]int32 `json:"ids"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res["m"].IDs) != len(texts) {
		t.Fatalf("reference.py's output: %v", err)
	}
	return res["m"].IDs
}

// A Parquet text column, written by arrow-go, indexed in place with
// `brand index --text text --tokenizer s3://…/MODEL` (the model an object
// beside the data) and served by `brand serve`:
// the index counts each document's tokens as the reference library does,
// and every sample of an epoch of a job reading the field "tokens" is its
// row's tokens, exactly the reference's IDs (invalid UTF-8 included),
// tokenized by the gateway; a list column indexed with --tokens is
// served as it is stored, with the counts the index holds.
func TestTokenDatasetsOnMinIO(t *testing.T) {
	const model = "../tokenize/testdata/golden-bpe.model"
	const rows, rowGroup = 240, 50
	texts := tokenTexts(rows)
	ref := referenceEncode(t, model, texts)
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	bin := buildBrand(t)
	env := brandEnv(srv)

	sc := arrow.NewSchema([]arrow.Field{
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	var recs []arrow.RecordBatch
	for lo := 0; lo < rows; lo += rowGroup {
		recs = append(recs, newRecord(sc, func(b *array.RecordBuilder) {
			for i := lo; i < min(lo+rowGroup, rows); i++ {
				b.Field(0).(*array.StringBuilder).Append(texts[i])
				lb := b.Field(1).(*array.ListBuilder)
				lb.Append(true)
				lb.ValueBuilder().(*array.Int32Builder).AppendValues(ref[i], nil)
			}
		}))
	}
	src, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, src, "data/train-0.parquet", writeParquet(t, sc, pq.NewWriterProperties(pq.WithMaxRowGroupLength(rowGroup)), recs...))
	// The model beside the data, read from the store by brand index.
	mb, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, src, "tokenizer/golden-bpe.model", mb)

	total := 0
	for _, ids := range ref {
		total += len(ids)
	}
	out := runBrand(t, bin, env, "index", "--src", "s3://"+hub, "--dst", "s3://"+own+"/text", "--s3-endpoint", srv.URL(),
		"--text", "text", "--tokenizer", "s3://"+hub+"/tokenizer/golden-bpe.model")
	if want := fmt.Sprintf("token dataset: %d documents, %s tokens of int32 in field \"tokens\"", rows, comma(total)); !strings.Contains(out, want) {
		t.Fatalf("brand index --text said %q; want %q", out, want)
	}
	out = runBrand(t, bin, env, "index", "--src", "s3://"+hub, "--dst", "s3://"+own+"/list", "--s3-endpoint", srv.URL(),
		"--tokens", "input_ids")
	if want := fmt.Sprintf("token dataset: %d documents, %s tokens of int32 in field \"input_ids\"", rows, comma(total)); !strings.Contains(out, want) {
		t.Fatalf("brand index --tokens said %q; want %q", out, want)
	}
	gw := serveProc(t, bin, env, srv.URL(), "--cache-size", "64MiB",
		"--dataset", "text=s3://"+own+"/text", "--dataset", "list=s3://"+own+"/list")
	// The text dataset has input_ids too, so its tokens are "tokens.npy".
	for _, tc := range []struct{ dataset, field, ext string }{{"text", "tokens", "tokens.npy"}, {"list", "input_ids", "npy"}} {
		t.Run(tc.dataset, func(t *testing.T) {
			seen := map[string]int{}
			job := api.Job{Dataset: tc.dataset, Columns: []string{tc.field}, Params: shuffle.Params{Seed: 5, BatchSize: 32}}
			readEpochOf(t, gw.url, job, 0, func(_ int, _ *client.Batch, s client.Sample) {
				seen[s.Key]++
				row, err := strconv.Atoi(strings.TrimPrefix(s.Key, "data/train-0/"))
				if err != nil || row >= rows {
					t.Fatalf("sample %s", s.Key)
				}
				tn, err := client.ParseNPY(s.Files[tc.ext])
				if err != nil || tn.DType != "<i4" || len(tn.Shape) != 1 || tn.Shape[0] != len(ref[row]) || len(s.Files) != 1 {
					t.Fatalf("sample %s: %v %v %v (%d members), want %d int32 tokens", s.Key, tn.DType, tn.Shape, err, len(s.Files), len(ref[row]))
				}
				for j, id := range ref[row] {
					if g := int32(binary.LittleEndian.Uint32(tn.Data[4*j:])); g != id {
						t.Fatalf("sample %s token %d: %d, the reference's %d", s.Key, j, g, id)
					}
				}
			})
			exactlyOnce(t, seen, rows, tc.dataset+"'s epoch")
		})
	}
	// Both token datasets pack into sequences: the text's with pack=concat
	// and the EOS its model names (no eos= given), the list's with
	// pack=bestfit and the model's pad ID.
	t.Run("concat text", func(t *testing.T) {
		const seq, eos = 64, 2 // golden-bpe.model's EOS (tokenize/testdata/golden.json)
		var stream []int32
		job := api.Job{Dataset: "text", Seq: seq, Pack: "concat", Params: shuffle.Params{Seed: 5, BatchSize: 8}}
		readSequences(t, gw.url, job, func(sq client.Sequence) { stream = append(stream, sq.InputIDs...) })
		last := len(stream) - 1
		for last >= 0 && stream[last] != eos {
			last--
		}
		if tail := stream[last+1:]; len(tail) >= seq || slices.ContainsFunc(tail, func(id int32) bool { return id != 0 }) {
			t.Fatalf("after the epoch's last EOS: %d tokens %v, want fewer than %d pads (0)", len(tail), tail, seq)
		}
		var docs []string
		for doc := range bytes.SplitSeq(int32Bytes(stream[:last]), int32Bytes([]int32{eos})) {
			docs = append(docs, string(doc))
		}
		sameDocuments(t, docs, ref, "the concat epoch's documents")
	})
	t.Run("bestfit list", func(t *testing.T) {
		const seq, pad = 64, 3 // the model's pad, which no document holds
		var pieces []string
		job := api.Job{Dataset: "list", Seq: seq, Pad: pad, Params: shuffle.Params{Seed: 5, BatchSize: 8}}
		readSequences(t, gw.url, job, func(sq client.Sequence) {
			start := 0
			for i := 1; i <= seq; i++ {
				if i < seq && sq.PositionIDs[i] != 0 {
					continue
				}
				seg := sq.InputIDs[start:i]
				if i < seq || slices.ContainsFunc(seg, func(id int32) bool { return id != pad }) {
					pieces = append(pieces, string(int32Bytes(seg)))
				}
				start = i
			}
		})
		// Every document of at most seq tokens is one piece; the longer
		// ones are cut into pieces whose tokens, with the others, are
		// every token of the epoch once.
		var short [][]int32
		var want, got []int32
		for _, ids := range ref {
			if len(ids) > 0 && len(ids) <= seq { // an empty document packs into nothing
				short = append(short, ids)
			}
			want = append(want, ids...)
		}
		for _, p := range pieces {
			got = append(got, bytesInt32(p)...)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("the bestfit epoch's tokens (%d) are not the documents' (%d) once each", len(got), len(want))
		}
		counts := map[string]int{}
		for _, p := range pieces {
			counts[p]++
		}
		for _, ids := range short {
			k := string(int32Bytes(ids))
			if counts[k] == 0 {
				t.Fatalf("a document of %d tokens was cut or lost", len(ids))
			}
			counts[k]--
		}
	})
}

// readSequences reads epoch 0 of a token job at world 1, its sequences in
// order.
func readSequences(t *testing.T, url string, job api.Job, each func(client.Sequence)) {
	t.Helper()
	readEpochBatches(t, url, job, func(b *client.Batch) {
		seqs, err := b.Sequences()
		if err != nil {
			t.Fatal(err)
		}
		for _, sq := range seqs {
			if len(sq.InputIDs) != job.Seq {
				t.Fatalf("a sequence of %d tokens, want %d", len(sq.InputIDs), job.Seq)
			}
			each(sq)
		}
	})
}

// readEpochBatches reads epoch 0 of job at world 1, batch by batch.
func readEpochBatches(t *testing.T, url string, job api.Job, each func(*client.Batch)) {
	t.Helper()
	c, err := client.New(url, client.Options{Job: job, Ahead: 2})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for b, err := range c.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatalf("epoch 0 of %s: %v", job.Dataset, err)
		}
		each(b)
		b.Release()
		n++
	}
	if n == 0 {
		t.Fatalf("epoch 0 of %s: no batches", job.Dataset)
	}
}

// sameDocuments fails unless docs (each a document's tokens as
// int32Bytes) are ref's documents, each once.
func sameDocuments(t *testing.T, docs []string, ref [][]int32, what string) {
	t.Helper()
	want := make([]string, len(ref))
	for i, ids := range ref {
		want[i] = string(int32Bytes(ids))
	}
	slices.Sort(docs)
	slices.Sort(want)
	if !slices.Equal(docs, want) {
		t.Fatalf("%s: %d documents, not the %d written, each once", what, len(docs), len(want))
	}
}

func int32Bytes(ids []int32) []byte {
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
	return b
}

func bytesInt32(s string) []int32 {
	ids := make([]int32, len(s)/4)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32([]byte(s[4*i:])))
	}
	return ids
}

// comma writes n with thousands separators, as brand index prints it.
func comma(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
