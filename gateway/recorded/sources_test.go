package recorded

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
)

// sources are the recorded datasets, the versions of the one appended
// to, and the vision rule of the vocabulary the image-text data is
// tokenized with.
type sources struct {
	specs          []gateway.DatasetSpec
	linesV, linesX string // lines before and after its append
	rule           string
	vocab          int
}

// stamp is the modification time of every data file: before the clock
// of a synctest bubble (2000-01-01 UTC), so that an index made in one
// records the same identity and creation time on every run, and so the
// same index ID, ETags and tar headers.
var stamp = time.Date(1999, 6, 1, 0, 0, 0, 0, time.UTC)

// makeSources writes every dataset into a store of its own and indexes
// it inside a synctest bubble.
func makeSources(t *testing.T) *sources {
	s := &sources{}
	root := t.TempDir() // made outside the bubble, which would remove it
	tok, err := os.ReadFile("../../tokenize/testdata/hf-golden-tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tokenize.Load(tok)
	if err != nil {
		t.Fatal(err)
	}
	s.vocab = enc.VocabSize()
	s.rule = fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d,images:4", s.vocab, s.vocab+1, s.vocab+2)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		// put writes a dataset's objects, stamped, and serves it.
		put := func(name string, objects map[string][]byte, f ...format.Format) *s3backend.Local {
			st, err := s3backend.NewLocal(filepath.Join(root, name))
			if err != nil {
				t.Fatal(err)
			}
			putAll(t, st, objects)
			s.specs = append(s.specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: st, Formats: f})
			return st
		}
		index := func(res *dataset.Result, err error) *chunkindex.Index {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return res.Index
		}
		inPlace := func(name string, objects map[string][]byte, f format.Format, o format.Options) string {
			st := put(name, objects, f)
			return index(dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{f}, Name: name, Options: o})).ID()
		}
		for _, d := range []struct {
			name        string
			shards, per int
		}{{"web", 6, 10}, {"code", 3, 10}, {"books", 1, 12}} {
			st := put(d.name, sampleShards(t, d.name, d.shards, d.per, d.name == "web"))
			index(dataset.IndexShards(ctx, st, dataset.IndexOptions{Parallel: 1, Name: d.name}))
		}

		// lines: in place, then a file appended (a version extending
		// the first).
		files := map[string][]string{}
		for f := range 3 {
			for l := range 40 {
				name := fmt.Sprintf("data/f%d.lines", f)
				files[name] = append(files[name], fmt.Sprintf("file %d line %d %s", f, l, strings.Repeat("x", (f*40+l)%23)))
			}
		}
		s.linesV = inPlace("lines", formattest.Write(files), formattest.Lines{}, format.Options{ChunkBytes: 300})
		var added []string
		for l := range 20 {
			added = append(added, fmt.Sprintf("added line %d", l))
		}
		st := s.specs[len(s.specs)-1].Store.(*s3backend.Local)
		putAll(t, st, formattest.Write(map[string][]string{"data/f9.lines": added}))
		s.linesX = index(dataset.AppendInPlace(ctx, st, st, dataset.AppendOptions{Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 300}})).ID()

		// pics: the photos of web, their sizes written beside the index
		// (brand index --sizes), which bucket jobs read.
		st = put("pics", sampleShards(t, "pics", 4, 10, true))
		if _, err := dataset.WriteSizes(ctx, st, index(dataset.IndexShards(ctx, st, dataset.IndexOptions{Parallel: 1, Name: "pics"})), 0, 1); err != nil {
			t.Fatal(err)
		}

		// tok and tok2: Megatron uint16 token files.
		for k, name := range []string{"tok", "tok2"} {
			bin, idx := megatrontest.Files("uint16", megatrontest.Corpus(120-60*k, 300, 50000, uint64(10+k)))
			inPlace(name, map[string][]byte{"data/p0_text_document.bin": bin, "data/p0_text_document.idx": idx}, megatron.Format{}, format.Options{ChunkBytes: 8 << 10})
		}

		// vis: WebDataset image-text pairs with their facts; txt: a
		// Parquet text column tokenized by the same tokenizer.
		st = put("vis", visionShards(t, 4, 16))
		if _, err := dataset.WriteVisionFacts(ctx, st, index(dataset.IndexShards(ctx, st, dataset.IndexOptions{Parallel: 1, Name: "vis"})), tok, 0, 1); err != nil {
			t.Fatal(err)
		}
		inPlace("txt", map[string][]byte{"data/train-0.parquet": textParquet(t, 60)}, parquet.Format{}, format.Options{Text: "text", Tokenizer: tok})

		// video: the MP4 files package mp4's tests keep (ffmpeg's, 32×32
		// at 10 frames a second), each twice, a tree of videos.
		mp4s := map[string][]byte{}
		for _, name := range []string{"bframes", "fragmented", "cut"} {
			b, err := os.ReadFile("../../format/video/mp4/testdata/" + name + ".mp4")
			if err != nil {
				t.Fatal(err)
			}
			mp4s[name+"/a.mp4"], mp4s[name+"/b.mp4"] = b, b
		}
		inPlace("video", mp4s, video.Format{}, format.Options{ChunkBytes: 4 << 10})
	})
	return s
}

// putAll writes objects into st, each stamped.
func putAll(t *testing.T, st *s3backend.Local, objects map[string][]byte) {
	t.Helper()
	for k, b := range objects {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(st.Dir(), filepath.FromSlash(k)), stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
}

// A member is a tar member: its name (key.ext) and bytes.
type member struct {
	name string
	data []byte
}

// tarShard is a tar of members, in order.
func tarShard(t *testing.T, members []member) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range members {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sampleShards are shards × per samples of name: a class and, with
// images, a photo-like JPEG of 40 to 70 pixels a side (otherwise bytes
// of a varying length).
func sampleShards(t *testing.T, name string, shards, per int, images bool) map[string][]byte {
	out := map[string][]byte{}
	for s := range shards {
		var members []member
		for i := range per {
			id := s*per + i
			img := bytes.Repeat([]byte{byte(id), byte(s)}, 50+(id*37)%400)
			if images {
				p, err := photos.Sized(3, id, 40+id%31, 70-id%29, 90)
				if err != nil {
					t.Fatal(err)
				}
				img = p.JPEG
			}
			key := fmt.Sprintf("%s/class%d/s%04d", name, id%3, id)
			members = append(members, member{key + ".cls", []byte(fmt.Sprint(id % 3))}, member{key + ".jpg", img})
		}
		out[fmt.Sprintf("shards/%03d.tar", s)] = tarShard(t, members)
	}
	return out
}

// visionShards are image-text samples: captions (placeholders inline or
// none) and LLaVA conversations, with 0 to 2 PNG images (uncompressed,
// so that no change of a compressor moves their bytes) of 28 to 80
// pixels a side.
func visionShards(t *testing.T, shards, per int) map[string][]byte {
	rng := rand.New(rand.NewPCG(70, 3))
	texts := []string{"A photo of a cat on a mat.", "Ein Hund läuft über die Wiese, 🐕!", "写真の中の山と川。", "def f(x):\n    return x * 2"}
	text := func() string { return texts[rng.IntN(len(texts))] }
	enc := png.Encoder{CompressionLevel: png.NoCompression}
	out := map[string][]byte{}
	for s := range shards {
		var members []member
		for i := range per {
			key := fmt.Sprintf("v%d/s%03d", s, i)
			k := rng.IntN(3)
			for j := range k {
				w, h := 28+rng.IntN(53), 28+rng.IntN(53)
				im := image.NewNRGBA(image.Rect(0, 0, w, h))
				for y := range h {
					for x := range w {
						im.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8(rng.Uint32()), 255})
					}
				}
				var b bytes.Buffer
				if err := enc.Encode(&b, im); err != nil {
					t.Fatal(err)
				}
				members = append(members, member{fmt.Sprintf("%s.%d.png", key, j), b.Bytes()})
			}
			if i%4 == 3 {
				q := strings.Repeat("<image>\n", k) + "What is here? " + text()
				doc, _ := json.Marshal(map[string]any{"conversations": []map[string]string{{"from": "human", "value": q}, {"from": "gpt", "value": text()}}})
				members = append(members, member{key + ".json", doc})
				continue
			}
			var sb strings.Builder
			inline := rng.IntN(2) == 0
			for range k {
				if inline {
					sb.WriteString("<image> ")
				}
				sb.WriteString(text() + " ")
			}
			sb.WriteString(text())
			members = append(members, member{key + ".txt", []byte(sb.String())})
		}
		out[fmt.Sprintf("shards/%03d.tar", s)] = tarShard(t, members)
	}
	return out
}

// textParquet is a Parquet file of n texts of 5 to 100 words in a column
// "text", row groups of 16.
func textParquet(t *testing.T, n int) []byte {
	rng := rand.New(rand.NewPCG(70, 4))
	words := strings.Fields("the river runs past the old mill and under a stone bridge while children count boats 川 山 🐕 Wiese")
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for range n {
		var sb strings.Builder
		for range 5 + rng.IntN(96) {
			sb.WriteString(words[rng.IntN(len(words))] + " ")
		}
		b.Field(0).(*array.StringBuilder).Append(sb.String())
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(16)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
