package integration

import (
	"bytes"
	"context"
	"fmt"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// hfReferenceEncode is nodetest.EncodeHF of strings.
func hfReferenceEncode(t *testing.T, tokenizer string, texts []string) [][]int32 {
	b := make([][]byte, len(texts))
	for i, s := range texts {
		b[i] = []byte(s)
	}
	return nodetest.EncodeHF(t, tokenizer, b)
}

// The byte-level twin of TestTokenDatasetsOnMinIO: `brand index --text
// text --tokenizer s3://…/tokenizer.json` (package tokenize's committed
// Llama-3-style file, an object beside the data) counts each document's
// tokens as Hugging Face's tokenizers does, and `brand serve` serves
// every document's tokens, exactly the reference's IDs (invalid UTF-8
// and special tokens in the text included), in an epoch of the field
// "tokens" and in a seq=64&pack=concat job (eos= given: a tokenizer.json
// names no EOS).
func TestTokenDatasetsOnMinIOByteLevel(t *testing.T) {
	const tokenizer = "../tokenize/testdata/hf-golden-tokenizer.json"
	const rows, rowGroup = 240, 50
	texts := tokenTexts(rows)
	for i := 5; i < rows; i += 17 {
		texts[i] = "<|begin_of_text|>" + texts[i] + "<|eot_id|>"
	}
	ref := hfReferenceEncode(t, tokenizer, texts)
	eos := hfReferenceEncode(t, tokenizer, []string{"<|end_of_text|>"})[0]
	if len(eos) != 1 {
		t.Fatalf("<|end_of_text|> is %v", eos)
	}
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	bin := buildBrand(t)
	env := brandEnv(srv)
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	var recs []arrow.RecordBatch
	for lo := 0; lo < rows; lo += rowGroup {
		recs = append(recs, newRecord(sc, func(b *array.RecordBuilder) {
			for i := lo; i < min(lo+rowGroup, rows); i++ {
				b.Field(0).(*array.StringBuilder).Append(texts[i])
			}
		}))
	}
	src, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, src, "data/train-0.parquet", writeParquet(t, sc, pq.NewWriterProperties(pq.WithMaxRowGroupLength(rowGroup)), recs...))
	tb, err := os.ReadFile(tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, src, "tokenizer/tokenizer.json", tb)
	total := 0
	for _, ids := range ref {
		total += len(ids)
	}
	out := runBrand(t, bin, env, "index", "--src", "s3://"+hub, "--dst", "s3://"+own+"/text", "--s3-endpoint", srv.URL(),
		"--text", "text", "--tokenizer", "s3://"+hub+"/tokenizer/tokenizer.json")
	if want := fmt.Sprintf("token dataset: %d documents, %s tokens of int32 in field \"tokens\"", rows, comma(total)); !strings.Contains(out, want) {
		t.Fatalf("brand index --text said %q; want %q", out, want)
	}
	gw := serveProc(t, bin, env, srv.URL(), "--cache-size", "64MiB", "--dataset", "text=s3://"+own+"/text")
	t.Run("epoch", func(t *testing.T) {
		var docs []string
		job := api.Job{Dataset: "text", Columns: []string{"tokens"}, Params: shuffle.Params{Seed: 5, BatchSize: 32}}
		readEpochOf(t, gw.url, job, 0, func(_ int, _ *client.Batch, s client.Sample) {
			tn, err := client.ParseNPY(s.Files["npy"])
			if err != nil || tn.DType != "<i4" || len(tn.Shape) != 1 {
				t.Fatalf("sample %s: %v %v %v", s.Key, tn.DType, tn.Shape, err)
			}
			docs = append(docs, string(tn.Data))
		})
		sameDocuments(t, docs, ref, "the epoch's documents")
	})
	t.Run("concat", func(t *testing.T) {
		const seq = 64
		var stream []int32
		job := api.Job{Dataset: "text", Seq: seq, Pack: "concat", EOS: int(eos[0]), EOSSet: true, Params: shuffle.Params{Seed: 5, BatchSize: 8}}
		readSequences(t, gw.url, job, func(sq client.Sequence) { stream = append(stream, sq.InputIDs...) })
		last := len(stream) - 1
		for last >= 0 && stream[last] != eos[0] {
			last--
		}
		if tail := stream[last+1:]; len(tail) >= seq || slices.ContainsFunc(tail, func(id int32) bool { return id != 0 }) {
			t.Fatalf("after the epoch's last EOS: %d tokens %v, want fewer than %d pads (0)", len(tail), tail, seq)
		}
		var docs []string
		for doc := range bytes.SplitSeq(int32Bytes(stream[:last]), int32Bytes(eos)) {
			docs = append(docs, string(doc))
		}
		sameDocuments(t, docs, ref, "the concat epoch's documents")
	})
}
