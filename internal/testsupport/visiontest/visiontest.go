// Package visiontest writes image-text samples as a WebDataset — captions
// and LLaVA conversations with 0 to 2 PNG or JPEG images each — and
// expands each into the tokens and loss a vision job makes of it, as
// docs/http-api.md states them, for the tests of vision jobs: the visit's
// over the stages, the gateway's model-based test over HTTP.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package visiontest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/vision"
)

// Sample is what Corpus made of an image-text sample: its
// turns (text and whether the loss covers it), its images' sizes, and
// its members as a tar.
type Sample struct {
	Key   string
	Turns []Turn
	Sizes [][2]int // w, h
	Tar   []byte
}

// Turn is a turn of a sample's text, and whether the loss covers it.
type Turn struct {
	Text      string
	Assistant bool
}

// Store is the byte-level BPE tokenizer file of package
// tokenize's golden tests, its model, and an empty local store.
func Store(t testing.TB) ([]byte, *tokenize.Model, *s3backend.Local) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	tok, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../../tokenize/testdata/hf-golden-tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tokenize.Load(tok)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return tok, enc, st
}

// Corpus writes shards of image-text samples into st: captions (a
// txt, placeholders inline or none) and LLaVA conversations (a json),
// 0 to 2 images each, PNG or JPEG, of 28 to 160 pixels a side.
func Corpus(t testing.TB, st *s3backend.Local, shards, perShard int) map[string]Sample {
	t.Helper()
	rng := rand.New(rand.NewPCG(70, 3))
	texts := []string{"A photo of a cat on a mat.", "Ein Hund läuft über die Wiese, 🐕!", "写真の中の山と川。", "def f(x):\n    return x * 2", "Сравните два изображения."}
	out := map[string]Sample{}
	for s := range shards {
		var shard bytes.Buffer
		tw := tar.NewWriter(&shard)
		for i := range perShard {
			m := Sample{Key: fmt.Sprintf("p%d/s%03d", s, i)}
			var own bytes.Buffer
			otw := tar.NewWriter(&own)
			put := func(name string, b []byte) {
				for _, w := range []*tar.Writer{tw, otw} {
					if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
						t.Fatal(err)
					}
					if _, err := w.Write(b); err != nil {
						t.Fatal(err)
					}
				}
			}
			k := rng.IntN(3)
			for j := range k {
				w, h := 28+rng.IntN(133), 28+rng.IntN(133)
				m.Sizes = append(m.Sizes, [2]int{w, h})
				im := image.NewNRGBA(image.Rect(0, 0, w, h))
				for y := range h {
					for x := range w {
						n := rng.Uint32()
						im.SetNRGBA(x, y, color.NRGBA{uint8(x*255/w) ^ uint8(n&31), uint8(y*255/h) ^ uint8(n>>5&31), uint8(n >> 10), 255})
					}
				}
				var b bytes.Buffer
				ext := "png"
				if (i+j)%3 == 0 {
					ext = "jpg"
					if err := jpeg.Encode(&b, im, &jpeg.Options{Quality: 90}); err != nil {
						t.Fatal(err)
					}
				} else if err := png.Encode(&b, im); err != nil {
					t.Fatal(err)
				}
				put(fmt.Sprintf("%s.%d.%s", m.Key, j, ext), b.Bytes())
			}
			if i%4 == 3 {
				q := strings.Repeat("<image>\n", k) + "What is here? " + texts[rng.IntN(len(texts))]
				m.Turns = []Turn{{q, false}, {texts[rng.IntN(len(texts))], true}}
				doc, _ := json.Marshal(map[string]any{"conversations": []map[string]string{{"from": "human", "value": q}, {"from": "gpt", "value": m.Turns[1].Text}}})
				put(m.Key+".json", doc)
			} else {
				var sb strings.Builder
				inline := rng.IntN(2) == 0
				for range k {
					if inline {
						sb.WriteString("<image> ")
					}
					sb.WriteString(texts[rng.IntN(len(texts))] + " ")
				}
				sb.WriteString(texts[rng.IntN(len(texts))])
				m.Turns = []Turn{{sb.String(), true}}
				put(m.Key+".txt", []byte(sb.String()))
			}
			if err := otw.Close(); err != nil {
				t.Fatal(err)
			}
			m.Tar = own.Bytes()
			out[m.Key] = m
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(context.Background(), fmt.Sprintf("shards/%03d.tar", s), bytes.NewReader(shard.Bytes()), int64(shard.Len())); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Expand is sample m's IDs and loss mask as docs/http-api.md states them,
// built from what the test made: each turn's pieces between
// placeholders tokenized one by one, each image start, image × its
// tokens, end (loss 0); a text with no placeholder takes its images
// first.
func (m Sample) Expand(t testing.TB, r vision.Rule, enc *tokenize.Model) (ids []int32, loss []uint8) {
	t.Helper()
	next := 0
	img := func() {
		w, h, err := r.Size(m.Sizes[next][0], m.Sizes[next][1])
		if err != nil {
			t.Fatal(err)
		}
		next++
		ids = append(ids, r.Start)
		for range r.Tokens(w, h) {
			ids = append(ids, r.Image)
		}
		ids = append(ids, r.End)
		for len(loss) < len(ids) {
			loss = append(loss, 0)
		}
	}
	holes := 0
	for _, tr := range m.Turns {
		holes += strings.Count(tr.Text, vision.Placeholder)
	}
	if holes == 0 {
		for range m.Sizes {
			img()
		}
	}
	for _, tr := range m.Turns {
		pieces := strings.Split(tr.Text, vision.Placeholder)
		for i, p := range pieces {
			got, err := enc.Encode([]byte(p))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, got...)
			for range got {
				loss = append(loss, map[bool]uint8{true: 1, false: 0}[tr.Assistant])
			}
			if i < len(pieces)-1 {
				img()
			}
		}
	}
	return ids, loss
}

// Int32s reads an int32 .npy member.
func Int32s(t testing.TB, b []byte) []int32 {
	t.Helper()
	h, data, err := npy.Read(b)
	if err != nil || h.Descr != "<i4" {
		t.Fatalf("not an int32 .npy: %+v %v", h, err)
	}
	out := make([]int32, len(data)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}
