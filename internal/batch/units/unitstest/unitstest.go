// Package unitstest is test support for the kinds of batch
// (internal/batch/units) and the common layout they are laid out by: a
// batch's content by its kind, mixtures composed as the resolver composes
// them, the units of an Orders, jobs parsed as requests are, and the
// token and image-text datasets their tests serve.
package unitstest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	uclip "github.com/brandgw/brand/internal/batch/units/clips"
	umix "github.com/brandgw/brand/internal/batch/units/mixture"
	utok "github.com/brandgw/brand/internal/batch/units/tokens"
	uvis "github.com/brandgw/brand/internal/batch/units/vision"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
	"github.com/rs/zerolog"
)

func Tokens(b *layout.Batch) *utok.TokenBatch {
	t, _ := b.Content.(*utok.TokenBatch)
	return t
}

func Clips(b *layout.Batch) *uclip.ClipBatch {
	c, _ := b.Content.(*uclip.ClipBatch)
	return c
}

func Vision(b *layout.Batch) *uvis.VisionBatch {
	v, _ := b.Content.(*uvis.VisionBatch)
	return v
}

func WithoutDocuments(b *layout.Batch, missing []int) *layout.Batch {
	if Tokens(b) == nil {
		return b
	}
	nb, _ := Tokens(b).Without(b, missing)
	return nb
}

func WithoutClips(b *layout.Batch, missing []int) *layout.Batch {
	if Clips(b) == nil {
		return b
	}
	nb, _ := Clips(b).Without(b, missing)
	return nb
}

func WithoutClipsAt(b *layout.Batch, at []int) *layout.Batch {
	if Clips(b) == nil {
		return b
	}
	return Clips(b).WithoutAt(b, at)
}

// Mixture is the mixture of ds (in mix's order) a job reads, as the
// resolver composes it (layout.Orders.Compose of the job's unit).
func Mixture(o *layout.Orders, mix api.Mix, ds []*catalog.Dataset, job api.Job) (*umix.Mixed, error) {
	job.Mix = mix
	c, err := o.Compose(o.UnitOf(features.Requested(job)), ds, job)
	if err != nil {
		return nil, err
	}
	return c.(*umix.Mixed), nil
}

// Mixed is src's mixture.
func Mixed(src layout.Source) *umix.Mixed { return src.Unit.(*umix.Mixed) }

// Share is mixture component i's share of a global batch of global
// samples: its weight's, at least 1.
func Share(m *umix.Mixed, i, global int) int {
	var sum uint64
	for _, w := range m.Order.Weights() {
		sum += w
	}
	return max(1, int(uint64(global)*m.Order.Weights()[i]/sum))
}

// TokenUnit and visionUnit are o's units of token and vision jobs.
func TokenUnit(o *layout.Orders) *utok.Unit {
	return o.UnitOf(features.Of(features.Tokens)).(*utok.Unit)
}

func VisionUnit(o *layout.Orders) *uvis.Unit {
	return o.UnitOf(features.Of(features.Tokens, features.Vision)).(*uvis.Unit)
}

// ParseJob is the job of the query string raw as the gateway parses it,
// with defaults seed 5, window 2, world 1 and batch size batch.
func ParseJob(t testing.TB, raw string, batch int) api.Job {
	t.Helper()
	var l query.Limits
	l.Fill()
	q, err := query.Parse(raw, query.JobParams, query.Query{Job: api.Job{Params: shuffle.Params{Seed: 5, BatchSize: batch, Window: 2, World: 1}}}, l)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return q.Job
}

// TokenJob parses raw as a request's query of a token job (seed 5,
// window 2, batch size 4 unless it says otherwise).
func TokenJob(t testing.TB, raw string) api.Job {
	t.Helper()
	return ParseJob(t, raw, 4)
}

// TokenSources are three Megatron token datasets (web, code, books) of
// 240, 160 and 90 documents of 1 to 96 tokens, loaded as a gateway loads
// them and viewed as a token job reads them.
func TokenSources(t *testing.T) []*catalog.Dataset {
	t.Helper()
	var out []*catalog.Dataset
	for k, n := range []int{240, 160, 90} {
		name := []string{"web", "code", "books"}[k]
		out = append(out, TokenDataset(t, name, "int32", megatrontest.Corpus(n, 96, 50000, uint64(40+k))))
	}
	return out
}

// TokenDataset is docs written as the Megatron files of dtype dtype,
// indexed in place in chunks of about 2 KiB, loaded as a gateway loads
// them and viewed as a token job reads them.
func TokenDataset(t testing.TB, name, dtype string, docs [][]int64) *catalog.Dataset {
	t.Helper()
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, idx := megatrontest.Files(dtype, docs)
	for key, b := range map[string][]byte{"data/p_text_document.bin": bin, "data/p_text_document.idx": idx} {
		if _, err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{
		Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: 2 << 10}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: name, URL: "file:///" + name, Store: st, Formats: []format.Format{megatron.Format{}}},
		s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = utok.TokenView(ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// EpochDraws is every draw of epoch e of m's order, in position order.
func EpochDraws(t *testing.T, m *umix.Mixed, job api.Job, e uint64) []shuffle.Draw {
	t.Helper()
	d, err := m.Order.Draws(context.Background(), nil, job.Seed, e, 0, m.Order.NumSamples())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// VLMDataset is a dataset of n image-text samples whose facts mix as a
// VLM's training data does: most samples a caption or a turn of text
// with one image, some several images, some text alone and longer, and
// a tail of large images. Its facts are stored beside its index and
// loaded; its samples are never read (a layout reads none).
func VLMDataset(t *testing.T, n int) *catalog.Dataset {
	t.Helper()
	ix := catalogtest.Dataset(t, "vlm", n/100, 100).Index
	rng := rand.New(rand.NewPCG(70, 70))
	r, err := vision.ParseRule(VLMRule)
	if err != nil {
		t.Fatal(err)
	}
	facts := make([]vision.Facts, ix.NumSamples())
	for i := range facts {
		f := vision.Facts{Text: 20 + rng.IntN(300)}
		k := 0
		switch x := rng.IntN(10); {
		case x < 6:
			k = 1
		case x < 8:
			k = 2 + rng.IntN(3)
		default:
			f.Text = 50 + rng.IntN(2000)
		}
		tokens := f.Text
		for range k {
			side := 56 + rng.IntN(700)
			if rng.IntN(10) == 0 {
				side = 900 + rng.IntN(700)
			}
			im := vision.ImageFacts{W: side, H: side * (2 + rng.IntN(3)) / 3}
			w, h, err := r.Size(im.W, im.H)
			if err != nil {
				t.Fatal(err)
			}
			if tokens += r.Tokens(w, h) + 2; tokens > VLMSeq {
				break // every sample fits a sequence
			}
			f.Images = append(f.Images, im)
		}
		facts[i] = f
	}
	ds := catalogtest.WithVisionFacts(t, "vlm", "", ix, facts)
	return ds
}

// VisionMixFixture is visionMixSources under package tokenize's
// Llama-3-style tokenizer, and a vision rule over its vocabulary (at
// most 3 images a sequence).
func VisionMixFixture(t *testing.T) (vis, txt *catalog.Dataset, rule string) {
	t.Helper()
	tokenizer, err := os.ReadFile(tokenizeTestdata("hf-golden-tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	model, err := tokenize.Load(tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	vis, txt = VisionMixSources(t, tokenizer)
	v := model.VocabSize()
	return vis, txt, fmt.Sprintf("min:3136,max:12544,patch:14,merge:2,image:%d,start:%d,end:%d,images:3", v, v+1, v+2)
}

// VisionMixSources are an image-text dataset (vis: 48 samples of a
// caption and 0 to 2 PNG images, its facts written with tokenizer) and a
// text corpus (txt: 150 texts of 3 to 120 words in a Parquet column,
// tokenized with tokenizer), loaded as a gateway loads them and viewed
// as a vision mixture reads them.
func VisionMixSources(t *testing.T, tokenizer []byte) (vis, txt *catalog.Dataset) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 70))
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(visionMixWords[rng.IntN(len(visionMixWords))] + " ")
		}
		return sb.String()
	}
	vst, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for s := range 3 {
		var shard bytes.Buffer
		tw := tar.NewWriter(&shard)
		put := func(name string, b []byte) {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 16 {
			key := fmt.Sprintf("v%d/%03d", s, i)
			for j := range rng.IntN(3) {
				w, h := 28+rng.IntN(60), 28+rng.IntN(60)
				im := image.NewNRGBA(image.Rect(0, 0, w, h))
				for y := range h {
					for x := range w {
						im.SetNRGBA(x, y, color.NRGBA{uint8(x * 7), uint8(y * 5), uint8(i), 255})
					}
				}
				var b bytes.Buffer
				if err := png.Encode(&b, im); err != nil {
					t.Fatal(err)
				}
				put(fmt.Sprintf("%s.%d.png", key, j), b.Bytes())
			}
			put(key+".txt", []byte(text(3+rng.IntN(40))))
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := vst.Put(ctx, fmt.Sprintf("shards/%03d.tar", s), bytes.NewReader(shard.Bytes()), int64(shard.Len())); err != nil {
			t.Fatal(err)
		}
	}
	res, err := dataset.IndexShards(ctx, vst, dataset.IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.WriteVisionFacts(ctx, vst, res.Index, tokenizer, 0, 2); err != nil {
		t.Fatal(err)
	}
	if vis, err = catalog.Load(ctx, catalog.Spec{Name: "vis", URL: "file:///vis", Store: vst}, s3backend.Config{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if _, err := vis.LoadVision(ctx); err != nil {
		t.Fatal(err)
	}

	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(16)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for range 150 {
		b.Field(0).(*array.StringBuilder).Append(text(3 + rng.IntN(118)))
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
	tst, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tst.Put(ctx, "data/train-0.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	formats := []format.Format{parquet.Format{}}
	if _, err := dataset.IndexInPlace(ctx, tst, tst, dataset.InPlaceOptions{Formats: formats,
		Options: format.Options{Text: "text", Tokenizer: tokenizer}}); err != nil {
		t.Fatal(err)
	}
	if txt, err = catalog.Load(ctx, catalog.Spec{Name: "txt", URL: "file:///txt", Store: tst, Formats: formats}, s3backend.Config{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if txt, err = utok.TokenView(txt); err != nil {
		t.Fatal(err)
	}
	return vis, txt
}

// VLMRule is a Qwen2-VL-like dynamic rule: 28 pixels a vision token.
const VLMRule = "min:3136,max:1003520,patch:14,merge:2,image:151655,start:151652,end:151653"

// VLMSeq is the sequence length of vlmDataset's jobs.
const VLMSeq = 4096

// visionMixWords are the words of the fixtures' texts.
var visionMixWords = strings.Fields("a photo of the river past an old mill under the stone bridge while children count boats 川 山 🐕 Wiese")

// tokenizeTestdata is the path of package tokenize's test file name,
// found from this file's own place in the module (a test's working
// directory is its package's, at any depth).
func tokenizeTestdata(name string) string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..", "..", "tokenize", "testdata", name)
}
