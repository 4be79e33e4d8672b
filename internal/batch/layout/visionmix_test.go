package layout

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
)

// visionMixWords are the words of the fixtures' texts.
var visionMixWords = strings.Fields("a photo of the river past an old mill under the stone bridge while children count boats 川 山 🐕 Wiese")

// visionMixFixture is visionMixSources under package tokenize's
// Llama-3-style tokenizer, and a vision rule over its vocabulary (at
// most 3 images a sequence).
func visionMixFixture(t *testing.T) (vis, txt *catalog.Dataset, rule string) {
	t.Helper()
	tokenizer, err := os.ReadFile("../../../tokenize/testdata/hf-golden-tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	model, err := tokenize.Load(tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	vis, txt = visionMixSources(t, tokenizer)
	v := model.VocabSize()
	return vis, txt, fmt.Sprintf("min:3136,max:12544,patch:14,merge:2,image:%d,start:%d,end:%d,images:3", v, v+1, v+2)
}

// visionMixSources are an image-text dataset (vis: 48 samples of a
// caption and 0 to 2 PNG images, its facts written with tokenizer) and a
// text corpus (txt: 150 texts of 3 to 120 words in a Parquet column,
// tokenized with tokenizer), loaded as a gateway loads them and viewed
// as a vision mixture reads them.
func visionMixSources(t *testing.T, tokenizer []byte) (vis, txt *catalog.Dataset) {
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
	if txt, err = TokenView(txt); err != nil {
		t.Fatal(err)
	}
	return vis, txt
}

// visionMixRun lays out every global batch of epoch e of job over m from
// global batch from on, at every rank, checks that each sequence reads
// exactly its own documents, and returns each sequence as
// "component:sequence" by its epoch position, and the components of
// each whole global batch.
func visionMixRun(t *testing.T, o *Orders, m *Mixed, job api.Job, e uint64) (map[int]string, [][]int) {
	t.Helper()
	out := map[int]string{}
	var steps [][]int
	for g, batches := 0, 1; g < batches; g++ {
		var step []int
		for r := range job.World {
			j := job
			j.Rank = r
			b, err := o.Layout(context.Background(), Source{Mix: m}, j, e, uint64(g))
			if err != nil {
				t.Fatalf("epoch %d batch %d rank %d: %v", e, g, r, err)
			}
			batches = b.Batches
			vb := b.Vision()
			if vb == nil {
				t.Fatalf("batch %d: a %T, not a vision batch", g, b.Content)
			}
			if got := vb.Components(); !slices.Equal(got, vb.Comps) || len(got) != b.Len() {
				t.Fatalf("batch %d: components %v of %d sequences", g, got, b.Len())
			}
			for i, q := range vb.Seqs {
				c := vb.Comps[i]
				var docs []int
				var s string
				if vb.IsText(i) {
					n := vb.Text[i].Pad
					for _, pc := range vb.Text[i].Pieces {
						docs, n = append(docs, pc.Doc), n+pc.Len
					}
					if n != job.Seq || c != 1 {
						t.Fatalf("batch %d: text sequence %d of component %d, %d tokens", g, i, c, n)
					}
					s = fmt.Sprintf("%d:%v", c, vb.Text[i])
				} else {
					if c != 0 || len(q.Samples) == 0 {
						t.Fatalf("batch %d: image-text sequence %d of component %d holds %v", g, i, c, q.Samples)
					}
					docs, s = q.Samples, fmt.Sprintf("%d:%v", c, q)
				}
				for k, at := range vb.At[i] {
					tk := b.Take[at]
					if p := b.Parts[tk.Part]; p.Comp != c || p.Samples.IDs[tk.At] != docs[k] {
						t.Fatalf("batch %d: sequence %d of component %d reads document %d of component %d, not its %d", g, i, c, p.Samples.IDs[tk.At], p.Comp, docs[k])
					}
				}
				if _, dup := out[vb.Pos[i]]; dup {
					t.Fatalf("position %d laid out twice", vb.Pos[i])
				}
				out[vb.Pos[i]] = s
				step = append(step, c)
			}
		}
		steps = append(steps, step)
	}
	return out, steps
}

// A mixture of an image-text dataset and a text corpus of its tokenizer
// (mix=vis:1,txt:2 with seq=&vision=): every global batch (one mixing
// block of 6 sequences) holds each component exactly at its share (2
// and 4); each sequence is its component's own: the draw's pass and
// index of the vision job's epoch over the component's stream, or of the
// text token job's packing; each sequence reads exactly its documents.
// The layout is a pure function of the parameters (another Orders lays
// out the same), and a resume at world 3 from an offset lays out the
// same sequences at the same positions. Two image-text datasets, none,
// and balance= are refused saying why.
func TestVisionMixture(t *testing.T) {
	vis, txt, rule := visionMixFixture(t)
	raw := "mix=vis:1,txt:2&seq=256&mix_block=6&batch_size=3&world=2&window=3&vision=" + rule
	job := tokenJob(t, raw)
	ds := []*catalog.Dataset{vis, txt}
	o := New(nil)
	m, err := o.Mixture(job.Mix, ds, job)
	if err != nil {
		t.Fatal(err)
	}
	got, steps := visionMixRun(t, o, m, job, 0)
	if len(got) != m.Order.NumSamples() || len(steps) < 6 {
		t.Fatalf("%d sequences laid out in %d steps; the mixture's epoch has %d", len(got), len(steps), m.Order.NumSamples())
	}
	for g, step := range steps[:len(steps)-1] {
		n := [2]int{}
		for _, c := range step {
			n[c]++
		}
		if n != [2]int{2, 4} {
			t.Fatalf("global batch %d holds %v sequences of each component; its shares are 2 and 4", g, n)
		}
	}

	passes := map[[2]uint64]bool{}
	for _, d := range epochDraws(t, m, job, 0) {
		passes[[2]uint64{uint64(d.Component), d.Pass}] = true
	}
	t.Logf("%d sequences in %d global batches, from component passes %v", len(got), len(steps), passes)

	// Each draw is its component's own sequence.
	r, err := vision.ParseRule(rule)
	if err != nil {
		t.Fatal(err)
	}
	for pos, d := range epochDraws(t, m, job, 0) {
		own := job
		own.Mix, own.Window = nil, m.Order.ComponentWindow(d.Component, job.Window)
		var want string
		if d.Component == 0 {
			ve, _, err := o.units.vision.epoch(vis, own, d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			// And the vision job's epoch is vision.NewEpoch of the
			// stream's order and the facts' items.
			e, err := o.Epoch(StreamOf(vis, own), d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			facts := vis.Vision().Facts.Samples
			items, _, err := r.Items(func(id int) vision.Facts { return facts[id] }, vis.Index.SampleKey, len(facts), job.Seq, vision.Fail)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := vision.NewEpoch(windows{o.base, StreamOf(vis, own).Order(), d.Pass, e}, func(id int) vision.Item { return items[id] }, job.Seq, r.MaxImages, job.Seed, d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ve.Sequence(d.Index).Samples, ref.Sequence(d.Index).Samples) {
				t.Fatalf("pass %d sequence %d: the vision job's %v, NewEpoch's %v", d.Pass, d.Index, ve.Sequence(d.Index), ref.Sequence(d.Index))
			}
			want = fmt.Sprintf("0:%v", ve.Sequence(d.Index))
		} else {
			p, err := o.units.tokens.epoch(txt, own, d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			want = fmt.Sprintf("1:%v", o.units.tokens.sequences(nil, p, d.Index, d.Index+1)[0])
		}
		if got[pos] != want {
			t.Fatalf("position %d (component %d, pass %d, sequence %d): %s; its own job's is %s", pos, d.Component, d.Pass, d.Index, got[pos], want)
		}
	}

	// Pure: another Orders lays out the same; a resume at world 3 from
	// offset 12 lays out the same sequences at the same positions.
	o2 := New(nil)
	m2, err := o2.Mixture(job.Mix, ds, job)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := visionMixRun(t, o2, m2, job, 0); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatal("another Orders lays out another epoch")
	}
	w3 := tokenJob(t, raw+"&offset=12")
	w3.World = 3
	rest, _ := visionMixRun(t, o2, m2, w3, 0)
	if len(rest) != len(got)-12 {
		t.Fatalf("world 3 from offset 12 lays out %d sequences; want %d", len(rest), len(got)-12)
	}
	for pos, s := range rest {
		if pos < 12 || got[pos] != s {
			t.Fatalf("world 3 position %d: %s; world 2's %s", pos, s, got[pos])
		}
	}

	// Refused, saying why (another vocabulary:
	// TestVisionMixtureOfAnotherVocabulary).
	for _, tc := range []struct {
		name string
		ds   []*catalog.Dataset
		raw  string
		want string
	}{
		{"two image-text", []*catalog.Dataset{vis, vis}, "mix=a:1,b:1", "vis and vis are both image-text"},
		{"none", []*catalog.Dataset{txt, txt}, "mix=a:1,b:1", "every one of its datasets is a token dataset"},
		{"balance", ds, "mix=vis:1,txt:2", "balance="},
	} {
		j := tokenJob(t, tc.raw+"&seq=256&vision="+rule)
		if tc.name == "balance" {
			j.Balance = api.BalanceAttention // the table refuses it today; the layout on its own
		}
		if _, err := New(nil).Mixture(j.Mix, tc.ds, j); !errors.Is(err, ErrVision) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrVision saying %q", tc.name, err, tc.want)
		}
	}
}

// A schedule of the two (mix_schedule= with seq=&vision=): 1:2 for five
// steps, then 2:1; every step (a mixing block of 6 sequences, the global
// batch) holds each component exactly at its phase's share, each
// sequence reads exactly its documents, and a resume at world 3 lays out
// the same sequences at the same positions.
func TestVisionSchedule(t *testing.T) {
	vis, txt, rule := visionMixFixture(t)
	raw := "mix_schedule=0:vis:1,txt:2%3B5:vis:2,txt:1&seq=256&mix_block=6&batch_size=3&world=2&window=3&vision=" + rule
	job := tokenJob(t, raw)
	o := New(nil)
	m, err := o.Mixture(job.Mix, []*catalog.Dataset{vis, txt}, job)
	if err != nil {
		t.Fatal(err)
	}
	got, steps := visionMixRun(t, o, m, job, 0)
	if len(steps) < 10 {
		t.Fatalf("%d steps; want 10 or more", len(steps))
	}
	for g, step := range steps[:len(steps)-1] {
		n := [2]int{}
		for _, c := range step {
			n[c]++
		}
		want := [2]int{2, 4}
		if g >= 5 {
			want = [2]int{4, 2}
		}
		if n != want {
			t.Fatalf("step %d holds %v sequences of each component; its phase's shares are %v", g, n, want)
		}
	}
	w3 := tokenJob(t, raw+"&offset=12")
	w3.World = 3
	rest, _ := visionMixRun(t, o, m, w3, 0)
	if len(rest) != len(got)-12 {
		t.Fatalf("world 3 from offset 12 lays out %d sequences; want %d", len(rest), len(got)-12)
	}
	for pos, s := range rest {
		if pos < 12 || got[pos] != s {
			t.Fatalf("world 3 position %d: %s; world 2's %s", pos, s, got[pos])
		}
	}
}
