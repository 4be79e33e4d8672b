package gateway_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/url"
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
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
)

// pair is one image-text sample as a Parquet row holds it: an image (nil
// for none), and a caption or a conversation of (from, value) turns.
type pair struct {
	image   []byte
	ext     string // the image's: jpg or png
	caption string
	turns   [][2]string
}

// visionPairs makes files × rows image-text samples of at most one
// image each (a Parquet row's one image column), PNG or JPEG of 28 to
// 160 pixels a side: captions with the placeholder inline or none, and
// LLaVA conversations.
func visionPairs(t *testing.T, files, rows int) [][]pair {
	t.Helper()
	rng := rand.New(rand.NewPCG(70, 12))
	texts := []string{"A photo of a cat on a mat.", "Ein Hund läuft über die Wiese, 🐕!", "写真の中の山と川。", "def f(x):\n    return x * 2", "Сравните два изображения."}
	out := make([][]pair, files)
	for f := range files {
		for i := range rows {
			var p pair
			k := rng.IntN(4) % 2 // one image in two samples
			if k == 1 {
				w, h := 28+rng.IntN(133), 28+rng.IntN(133)
				im := image.NewNRGBA(image.Rect(0, 0, w, h))
				for y := range h {
					for x := range w {
						n := rng.Uint32()
						im.SetNRGBA(x, y, color.NRGBA{uint8(x*255/w) ^ uint8(n&31), uint8(y*255/h) ^ uint8(n>>5&31), uint8(n >> 10), 255})
					}
				}
				var b bytes.Buffer
				p.ext = "png"
				if i%3 == 0 {
					p.ext = "jpg"
					if err := jpeg.Encode(&b, im, &jpeg.Options{Quality: 90}); err != nil {
						t.Fatal(err)
					}
				} else if err := png.Encode(&b, im); err != nil {
					t.Fatal(err)
				}
				p.image = b.Bytes()
			}
			if i%4 == 3 {
				q := strings.Repeat("<image>\n", k) + "What is here? " + texts[rng.IntN(len(texts))]
				p.turns = [][2]string{{"human", q}, {"gpt", texts[rng.IntN(len(texts))]}}
			} else {
				var sb strings.Builder
				if k == 1 && rng.IntN(2) == 0 {
					sb.WriteString("<image> ")
				}
				sb.WriteString(texts[rng.IntN(len(texts))] + " " + texts[rng.IntN(len(texts))])
				p.caption = sb.String()
			}
			out[f] = append(out[f], p)
		}
	}
	return out
}

// pairShards writes pairs as WebDataset shards into st, one a file:
// KEY.jpg or KEY.png, and KEY.txt or a conversation KEY.json.
func pairShards(t *testing.T, st *s3backend.Local, pairs [][]pair) {
	t.Helper()
	for f, rows := range pairs {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		put := func(name string, data []byte) {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		}
		for i, p := range rows {
			key := fmt.Sprintf("p%d/s%03d", f, i)
			if p.image != nil {
				put(key+"."+p.ext, p.image)
			}
			if p.turns == nil {
				put(key+".txt", []byte(p.caption))
				continue
			}
			var conv []map[string]string
			for _, m := range p.turns {
				conv = append(conv, map[string]string{"from": m[0], "value": m[1]})
			}
			doc, _ := json.Marshal(map[string]any{"conversations": conv})
			put(key+".json", doc)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		putFile(t, st, fmt.Sprintf("shards/%03d.tar", f), b.Bytes())
	}
}

// pairParquet writes pairs as Parquet files into st, one row group a
// file (arrow-go's writer): an image bytes column, a caption string
// column and a conversations column of {from, value} structs, each null
// where the sample has none.
func pairParquet(t *testing.T, st *s3backend.Local, pairs [][]pair) {
	t.Helper()
	turn := arrow.StructOf(arrow.Field{Name: "from", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.String})
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "image", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "caption", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "conversations", Type: arrow.ListOf(turn), Nullable: true},
	}, nil)
	for f, rows := range pairs {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		ib, cb := b.Field(0).(*array.BinaryBuilder), b.Field(1).(*array.StringBuilder)
		lb := b.Field(2).(*array.ListBuilder)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		for _, p := range rows {
			if p.image != nil {
				ib.Append(p.image)
			} else {
				ib.AppendNull()
			}
			if p.turns == nil {
				cb.Append(p.caption)
				lb.AppendNull()
				continue
			}
			cb.AppendNull()
			lb.Append(true)
			for _, m := range p.turns {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append(m[0])
				sb.FieldBuilder(1).(*array.StringBuilder).Append(m[1])
			}
		}
		rec := b.NewRecordBatch()
		var buf bytes.Buffer
		w, err := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
		putFile(t, st, fmt.Sprintf("d/part-%d.parquet", f), buf.Bytes())
	}
}

// pairDuckDB writes pairs as Parquet files into st with DuckDB
// (testdata/vision_duckdb.cjs), a writer independent of arrow-go: an
// image BLOB, a caption VARCHAR and a conversations
// STRUCT("from" VARCHAR, "value" VARCHAR)[], each null where the sample
// has none, a file of one row group each.
func pairDuckDB(t *testing.T, st *s3backend.Local, pairs [][]pair) {
	t.Helper()
	node, mods := nodetest.Find(t, nodetest.DuckDB)
	work := t.TempDir()
	if err := errors.Join(os.MkdirAll(filepath.Join(work, "images"), 0o755), os.MkdirAll(filepath.Join(work, "d"), 0o755)); err != nil {
		t.Fatal(err)
	}
	var manifest bytes.Buffer
	for f, rows := range pairs {
		for i, p := range rows {
			line := map[string]any{"part": f, "row": i, "file": nil, "caption": nil, "conversations": nil}
			if p.image != nil {
				file := filepath.Join(work, "images", fmt.Sprintf("%d-%03d.%s", f, i, p.ext))
				if err := os.WriteFile(file, p.image, 0o644); err != nil {
					t.Fatal(err)
				}
				line["file"] = file
			}
			if p.turns == nil {
				line["caption"] = p.caption
			} else {
				var conv []map[string]string
				for _, m := range p.turns {
					conv = append(conv, map[string]string{"from": m[0], "value": m[1]})
				}
				line["conversations"] = conv
			}
			b, _ := json.Marshal(line)
			manifest.Write(append(b, '\n'))
		}
	}
	mf := filepath.Join(work, "manifest.jsonl")
	if err := os.WriteFile(mf, manifest.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "vision_duckdb.cjs"), mf, work, strconv.Itoa(len(pairs)))
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node vision_duckdb.cjs: %v\n%s", err, out)
	}
	for f := range pairs {
		b, err := os.ReadFile(filepath.Join(work, "d", fmt.Sprintf("part-%d.parquet", f)))
		if err != nil {
			t.Fatal(err)
		}
		putFile(t, st, fmt.Sprintf("d/part-%d.parquet", f), b)
	}
}

// parquetVision indexes the Parquet dataset in st in place and writes
// its image-text facts, as `brand index --tokenizer` does.
func parquetVision(t *testing.T, st *s3backend.Local, tok []byte) *dataset.Result {
	t.Helper()
	ctx := context.Background()
	res, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{parquet.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.WriteVisionFactsInPlace(ctx, st, st, res.Index, res.Manifest.InPlace.Format, res.Decoder, tok, 0, 2); err != nil {
		t.Fatal(err)
	}
	return res
}

// inParquet serves a gateway's dataset as Parquet in place.
func inParquet(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{parquet.Format{}} }

// visionRule is a dynamic-resolution rule whose placeholder IDs follow
// enc's vocabulary.
func visionRule(enc *tokenize.Model) string {
	v := enc.VocabSize()
	return fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d,images:4", v, v+1, v+2)
}

// sequencesOf reads every batch of epoch 0 of job q (its world ranks,
// from step from) and returns each sequence's members by its key, and
// the keys in the order served.
func sequencesOf(t *testing.T, srv string, q url.Values, from int) (map[string]map[string][]byte, []string) {
	t.Helper()
	resp, body := get(t, srv+"/epoch/0?"+q.Encode())
	var info struct{ Batches int }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Batches == 0 {
		t.Fatalf("/epoch/0?%s: %s %s", q.Encode(), resp.Status, body)
	}
	world, _ := strconv.Atoi(q.Get("world"))
	seqs := map[string]map[string][]byte{}
	var order []string
	for m := from; m < info.Batches; m++ {
		for rank := range max(world, 1) {
			q.Set("rank", strconv.Itoa(rank))
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv, m, q.Encode()))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("batch %d rank %d: %s %s", m, rank, resp.Status, body)
			}
			for _, s := range readTar(t, body) {
				if _, ok := seqs[s.key]; ok {
					t.Fatalf("sequence %s served twice", s.key)
				}
				seqs[s.key] = s.files
				order = append(order, s.key)
			}
		}
	}
	q.Del("rank")
	return seqs, order
}

// TestVisionParquetOverHTTP: the same image-text samples as WebDataset
// shards and as Parquet rows served in place (an image bytes column, a
// caption column, a conversations column of {from, value} structs),
// written by arrow-go and by DuckDB (image BLOB, conversations
// STRUCT("from" VARCHAR, "value" VARCHAR)[]), each indexed with its
// image-text facts, make the same vision epoch:
// every sequence of the Parquet dataset at world 2 is the tar dataset's,
// member for member (input_ids, position_ids, loss_mask, image_spans,
// and the images resized on the data node, pixel for pixel), in the
// same order. A resume over the Parquet dataset at world 3 from the
// third global batch reads exactly the rest, each sequence as the tar
// dataset serves it.
func TestVisionParquetOverHTTP(t *testing.T) {
	ctx := context.Background()
	tok, enc, tarSt := visionStore(t)
	pairs := visionPairs(t, 4, 12)
	pairShards(t, tarSt, pairs)
	tres, err := dataset.IndexShards(ctx, tarSt, dataset.IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.WriteVisionFacts(ctx, tarSt, tres.Index, tok, 0, 2); err != nil {
		t.Fatal(err)
	}
	_, tarSrv := start(t, tarSt, nil)
	for _, w := range []struct {
		name  string
		write func(*testing.T, *s3backend.Local, [][]pair)
	}{{"arrow-go", pairParquet}, {"duckdb", pairDuckDB}} {
		t.Run(w.name, func(t *testing.T) {
			pqSt, err := s3backend.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			w.write(t, pqSt, pairs)
			visionSameAsShards(t, tarSrv.URL, tres, pqSt, tok, enc)
		})
	}
}

// visionSameAsShards serves the Parquet dataset in pqSt, indexed with
// its facts, and holds its vision epoch to the shards' (tres, served at
// tarSrv): the same sequences, member for member, in the same order at
// world 2, and exactly the rest at world 3 from a step's offset.
func visionSameAsShards(t *testing.T, tarSrv string, tres *dataset.Result, pqSt *s3backend.Local, tok []byte, enc *tokenize.Model) {
	t.Helper()
	pres := parquetVision(t, pqSt, tok)
	var fields []string
	for _, f := range pres.Manifest.InPlace.Fields {
		fields = append(fields, f.Name+"."+f.Ext+" "+f.Type)
	}
	t.Logf("Parquet fields: %q", fields)
	if len(fields) != 3 || !strings.HasPrefix(fields[0], "image. ") || !strings.HasSuffix(fields[0], "(image)") || !strings.HasPrefix(fields[1], "caption.txt ") || !strings.HasPrefix(fields[2], "conversations.json list<") {
		t.Fatalf("Parquet fields %q; want an image, a caption (txt) and a list of conversation turns (json)", fields)
	}
	if !slices.Equal(pres.Index.SampleCounts(), tres.Index.SampleCounts()) {
		t.Fatalf("Parquet chunks of %v samples; the shards hold %v", pres.Index.SampleCounts(), tres.Index.SampleCounts())
	}
	_, pqSrv := start(t, pqSt, inParquet)

	q := url.Values{"seq": {"128"}, "vision": {visionRule(enc)}, "seed": {"7"}, "window": {"2"}, "batch_size": {"2"}, "world": {"2"}}
	want, wantOrder := sequencesOf(t, tarSrv, q, 0)
	got, gotOrder := sequencesOf(t, pqSrv.URL, q, 0)
	if len(want) < 8 || !slices.Equal(gotOrder, wantOrder) {
		t.Fatalf("Parquet served sequences %v; the shards %v", gotOrder, wantOrder)
	}
	images := 0
	for k, files := range want {
		images += len(npyInt32s(t, files["image_spans.npy"])) / 2
		if len(got[k]) != len(files) {
			t.Fatalf("sequence %s: %d members from Parquet, %d from the shards", k, len(got[k]), len(files))
		}
		for name, b := range files {
			if !bytes.Equal(got[k][name], b) {
				t.Fatalf("sequence %s: member %s from Parquet differs from the shards'", k, name)
			}
		}
	}
	if images < 10 {
		t.Fatalf("the epoch's sequences hold %d images; the test wants images to compare", images)
	}

	// Two steps at world 2, then world 3 from the offset they end at.
	const done = 2
	first := map[string]bool{}
	for m := range done {
		for rank := range 2 {
			q.Set("rank", strconv.Itoa(rank))
			_, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", pqSrv.URL, m, q.Encode()))
			for _, s := range readTar(t, body) {
				first[s.key] = true
			}
		}
	}
	w3 := url.Values{"seq": q["seq"], "vision": q["vision"], "seed": q["seed"], "window": q["window"], "batch_size": {"2"}, "world": {"3"}, "offset": {strconv.Itoa(done * 2 * 2)}}
	rest, _ := sequencesOf(t, pqSrv.URL, w3, 0)
	for i, k := range wantOrder {
		if first[k] == (rest[k] != nil) || first[k] != (i < done*4) {
			t.Fatalf("sequence %s (%d of the epoch): read before the resize %v, after %v; want once, in its place", k, i, first[k], rest[k] != nil)
		}
		if rest[k] != nil {
			for name, b := range want[k] {
				if !bytes.Equal(rest[k][name], b) {
					t.Fatalf("sequence %s after the resize: member %s differs", k, name)
				}
			}
		}
	}
}

// TestVisionParquetBadImages: Parquet rows whose image bytes are not an
// image vision reads — a PNG cut after its signature, bytes of no
// image's, empty bytes, a WebP — are bad images, not rows without one:
// 422 naming a bad image under --on-bad-image=fail, and left out,
// counted, under skip, whose epoch holds every other row and none of
// theirs. A Parquet dataset of no image column is
// refused at index time naming its columns, and so is a vision job over
// a format served in place whose samples are not image-text samples.
func TestVisionParquetBadImages(t *testing.T) {
	ctx := context.Background()
	tok, enc, st := visionStore(t)
	pairs := visionPairs(t, 2, 8)
	for _, b := range []struct {
		file, row int
		image     []byte
		caption   string
	}{
		{1, 2, []byte("\x89PNG\r\n\x1a\ncut short"), "zebra <image>"},       // a PNG whose header does not read
		{0, 1, []byte("not an image at all"), "zebra crossing"},             // bytes of no image's: .bin
		{0, 5, []byte("RIFF\x10\x00\x00\x00WEBPVP8 rest"), "zebra stripes"}, // an image vision does not read: .webp
		{1, 6, []byte{}, "zebra herd"},                                      // empty: .bin
	} {
		p := &pairs[b.file][b.row]
		p.image, p.caption, p.turns = b.image, b.caption, nil
	}
	pairParquet(t, st, pairs)
	parquetVision(t, st, tok)

	q := url.Values{"seq": {"512"}, "batch_size": {"2"}, "vision": {visionRule(enc)}}
	_, failing := start(t, st, inParquet)
	if resp, body := get(t, failing.URL+"/epoch/0/batch/0?"+q.Encode()); resp.StatusCode != http.StatusUnprocessableEntity || !bytes.Contains(body, []byte("bad image")) {
		t.Fatalf("fail: %s %s; want 422 naming a bad image", resp.Status, body)
	}
	_, skipping := start(t, st, func(c *gateway.Config) { inParquet(c); c.OnBadImage = gateway.OnDamagedSkip })
	resp, body := get(t, skipping.URL+"/epoch/0?"+q.Encode())
	var info struct{ Tokens struct{ Documents int } }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Tokens.Documents != 12 {
		t.Fatalf("skip: /epoch/0 %s %s; want the 12 good rows", resp.Status, body)
	}
	q.Set("world", "1")
	seqs, _ := sequencesOf(t, skipping.URL, q, 0)
	zebra, _ := enc.Encode([]byte("zebra"))
	for k, files := range seqs {
		if bytes.Contains(int32s(npyInt32s(t, files["input_ids.npy"])), int32s(zebra)) {
			t.Fatalf("skip: sequence %s holds the bad row's text", k)
		}
	}

	// No image column: refused, naming the columns.
	text, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "caption", Type: arrow.BinaryTypes.String}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	b.Field(0).(*array.StringBuilder).Append("a caption with no picture")
	b.Field(1).(*array.Int64Builder).Append(3)
	rec := b.NewRecordBatch()
	var buf bytes.Buffer
	w, _ := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	putFile(t, text, "d/part-0.parquet", buf.Bytes())
	res, err := dataset.IndexInPlace(ctx, text, text, dataset.InPlaceOptions{Formats: []format.Format{parquet.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dataset.WriteVisionFactsInPlace(ctx, text, text, res.Index, "parquet", res.Decoder, tok, 0, 1)
	if !errors.Is(err, format.ErrNotImageText) || !strings.Contains(err.Error(), "no image column") || !strings.Contains(err.Error(), "caption (string") || !strings.Contains(err.Error(), "label (int64") {
		t.Fatalf("facts of a Parquet dataset of no image column: %v; want ErrNotImageText naming its columns", err)
	}
	_, srv := start(t, text, inParquet)
	if resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+q.Encode()); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("no image column")) {
		t.Fatalf("a vision job over a Parquet dataset of no image column: %s %s; want 400 naming it", resp.Status, body)
	}

	// A format served in place whose samples are not image-text samples.
	lines, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, lines, "a.lines", []byte("one\ntwo\nthree\n"))
	if _, err := dataset.IndexInPlace(ctx, lines, lines, dataset.InPlaceOptions{Formats: []format.Format{formattest.Lines{}}}); err != nil {
		t.Fatal(err)
	}
	_, srv = start(t, lines, func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{formattest.Lines{}} })
	if resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+q.Encode()); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("is not read as image-text samples")) {
		t.Fatalf("a vision job over a dataset of lines: %s %s; want 400 saying its format is not read as image-text samples", resp.Status, body)
	}
}
