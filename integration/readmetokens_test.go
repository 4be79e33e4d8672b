package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/s3backend"
)

// The README's "Train a language model from Megatron or Hugging Face
// token data", run as written: a Megatron prefix in one bucket and two
// Hub datasets in a mirror — token IDs in a list column, and text with the
// SentencePiece model beside it — are indexed with the README's three
// `brand index` commands and served with its `brand serve` (given only the
// store's endpoint besides, and serve a port); every dataset is a token
// dataset of all its documents, the mirror and the corpus are never
// written, and the README's loop reads two epochs of the Megatron
// dataset in (8, 4096) int32 steps holding every token of every document
// once (documents reassembled from position_ids, none shorter than seq
// cut), its cu_seqlens those position_ids' starts and the end.
func TestReadmeTokens(t *testing.T) {
	const heading = "## Train a language model from Megatron or Hugging Face token data"
	sh, snippet := docBlocks(t, "../README.md", heading)
	py := pythontest.Need(t, "scripts/test-python.sh", "torch", "numpy")
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	for _, b := range []string{"corpus", "mirror", "brand"} {
		if err := srv.MakeBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newStoreProxy(t, srv.URL(), "corpus", "mirror")
	bin := buildBrand(t)
	env := brandEnv(srv)
	open := func(url string) s3backend.Store {
		st, err := s3backend.Open(ctx, url, srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// The Megatron prefix: document d's token j is (d+1)·stride + j, so
	// every token names its document and place, and none is the pad (0).
	const stride = 100_000
	docs := megatrontest.Corpus(150, 9000, 1, 17)
	for d := range docs {
		for j := range docs[d] {
			docs[d][j] = int64((d+1)*stride + j)
		}
	}
	corpus := open("s3://corpus/web")
	bin2, idx := megatrontest.Files("int32", docs)
	putBytes(t, corpus, "web_text_document.bin", bin2)
	putBytes(t, corpus, "web_text_document.idx", idx)

	// The Hub datasets: token IDs, and text with its model.
	const rows = 120
	listSchema := arrow.NewSchema([]arrow.Field{{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	putBytes(t, open("s3://mirror/fineweb"), "data/train-00000-of-00001.parquet", writeParquet(t, listSchema, pq.NewWriterProperties(),
		newRecord(listSchema, func(b *array.RecordBuilder) {
			lb := b.Field(0).(*array.ListBuilder)
			for i := range rows {
				lb.Append(true)
				for j := range 1 + i%50 {
					lb.ValueBuilder().(*array.Int32Builder).Append(int32(i*100 + j + 1))
				}
			}
		})))
	textSchema := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	stories := open("s3://mirror/stories")
	putBytes(t, stories, "data/train-00000-of-00001.parquet", writeParquet(t, textSchema, pq.NewWriterProperties(),
		newRecord(textSchema, func(b *array.RecordBuilder) {
			for _, s := range tokenTexts(rows) {
				b.Field(0).(*array.StringBuilder).Append(s)
			}
		})))
	model, err := os.ReadFile("../tokenize/testdata/golden-bpe.model")
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, stories, "tokenizer.model", model)
	before := map[string]map[string]s3backend.ObjectInfo{"corpus": listing(t, corpus), "mirror": listing(t, open("s3://mirror"))}

	var gw *clusterProc
	indexed := map[string]string{}
	for _, line := range strings.Split(sh, "\n") {
		if !strings.HasPrefix(line, "brand ") {
			continue
		}
		args := strings.Fields(line)[1:]
		switch args[0] {
		case "index":
			out := runBrand(t, bin, env, append(args, "--s3-endpoint", proxy.URL)...)
			t.Logf("%s\n→ %s", line, strings.TrimSpace(out))
			indexed[args[len(args)-1]] = out
		case "serve":
			gw = serveProc(t, bin, env, proxy.URL, args[1:]...)
			t.Logf("%s\n→ serving at %s", line, gw.url)
		default:
			t.Fatalf("the README runs brand %s, which this test does not know how to run", args[0])
		}
	}
	if gw == nil {
		t.Fatalf("the README's commands start no gateway:\n%s", sh)
	}
	for dst, n := range map[string]int{"s3://brand/web": len(docs), "s3://brand/fineweb": rows, "s3://brand/stories": rows} {
		if want := fmt.Sprintf("token dataset: %d documents", n); !strings.Contains(indexed[dst], want) {
			t.Errorf("brand index --dst %s said %q; want %q", dst, indexed[dst], want)
		}
	}
	// Every dataset served packs into sequences of all its documents.
	for ds, n := range map[string]int{"web": len(docs), "fineweb": rows, "stories": rows} {
		resp, err := http.Get(gw.url + "/epoch/0?seq=4096&dataset=" + ds)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var info struct{ Tokens struct{ Documents int } }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Tokens.Documents != n {
			t.Errorf("dataset %s with seq=4096: %s %s; want %d documents", ds, resp.Status, body, n)
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "snippet.py"), []byte(snippet), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("..")
	cmd := exec.Command(py, filepath.Join("testdata", "readme_tokens.py"), filepath.Join(dir, "snippet.py"), gw.url)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"))
	out, err := runBounded(cmd, 3*time.Minute)
	if err != nil {
		t.Fatalf("the README's loop: %v\n%s", err, out)
	}
	var got struct {
		Epochs map[string][][3]any
		Shapes []string
		Errors []string
	}
	if err := json.Unmarshal(lastLine(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Errors) > 0 {
		t.Fatalf("the loop's steps: %v", got.Errors)
	}
	if s := strings.Join(got.Shapes, ";"); s != "input_ids torch.int32 (4096,);position_ids torch.int32 (4096,)" {
		t.Fatalf("the loop's tensors: %s", s)
	}
	if len(got.Epochs) != 2 {
		t.Fatalf("the loop read %d epochs, want 2", len(got.Epochs))
	}
	for e, segs := range got.Epochs {
		pieces := map[int][][2]int{}
		for _, s := range segs {
			first, n, run := int(s[0].(float64)), int(s[1].(float64)), s[2].(bool)
			d, j := first/stride-1, first%stride
			if !run || d < 0 || d >= len(docs) || j+n > len(docs[d]) {
				t.Fatalf("epoch %s: a segment of %d tokens from %d (consecutive: %v) is no piece of a document", e, n, first, run)
			}
			pieces[d] = append(pieces[d], [2]int{j, n})
		}
		for d, doc := range docs {
			ps := pieces[d]
			sort.Slice(ps, func(a, b int) bool { return ps[a][0] < ps[b][0] })
			if len(doc) < 4096 && len(ps) != 1 {
				t.Fatalf("epoch %s: document %d of %d tokens in %d pieces %v", e, d, len(doc), len(ps), ps)
			}
			at := 0
			for _, p := range ps {
				if p[0] != at {
					t.Fatalf("epoch %s: document %d's pieces %v do not cover it once", e, d, ps)
				}
				at += p[1]
			}
			if at != len(doc) {
				t.Fatalf("epoch %s: document %d's pieces %v cover %d of its %d tokens", e, d, ps, at, len(doc))
			}
		}
	}
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the corpus or the mirror: %v", w)
	}
	sameListing(t, "the corpus", before["corpus"], listing(t, corpus))
	sameListing(t, "the mirror", before["mirror"], listing(t, open("s3://mirror")))
}
