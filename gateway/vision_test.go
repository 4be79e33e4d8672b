package gateway_test

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
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/vision"
)

// visionSample is what the test made of an image-text sample: its
// turns (text and whether the loss covers it), its images' sizes, and
// its members as a tar.
type visionSample struct {
	key   string
	turns []visionTurn
	sizes [][2]int // w, h
	tar   []byte
}

type visionTurn struct {
	text      string
	assistant bool
}

// visionStore is the byte-level BPE tokenizer file of package
// tokenize's golden tests, its model, and an empty local store.
func visionStore(t *testing.T) ([]byte, *tokenize.Model, *s3backend.Local) {
	t.Helper()
	tok, err := os.ReadFile("../tokenize/testdata/hf-golden-tokenizer.json")
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

// visionCorpus writes shards of image-text samples into st: captions (a
// txt, placeholders inline or none) and LLaVA conversations (a json),
// 0 to 2 images each, PNG or JPEG, of 28 to 160 pixels a side.
func visionCorpus(t *testing.T, st *s3backend.Local, shards, perShard int) map[string]visionSample {
	t.Helper()
	rng := rand.New(rand.NewPCG(70, 3))
	texts := []string{"A photo of a cat on a mat.", "Ein Hund läuft über die Wiese, 🐕!", "写真の中の山と川。", "def f(x):\n    return x * 2", "Сравните два изображения."}
	out := map[string]visionSample{}
	for s := range shards {
		var shard bytes.Buffer
		tw := tar.NewWriter(&shard)
		for i := range perShard {
			m := visionSample{key: fmt.Sprintf("p%d/s%03d", s, i)}
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
				m.sizes = append(m.sizes, [2]int{w, h})
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
				put(fmt.Sprintf("%s.%d.%s", m.key, j, ext), b.Bytes())
			}
			if i%4 == 3 {
				q := strings.Repeat("<image>\n", k) + "What is here? " + texts[rng.IntN(len(texts))]
				m.turns = []visionTurn{{q, false}, {texts[rng.IntN(len(texts))], true}}
				doc, _ := json.Marshal(map[string]any{"conversations": []map[string]string{{"from": "human", "value": q}, {"from": "gpt", "value": m.turns[1].text}}})
				put(m.key+".json", doc)
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
				m.turns = []visionTurn{{sb.String(), true}}
				put(m.key+".txt", []byte(sb.String()))
			}
			if err := otw.Close(); err != nil {
				t.Fatal(err)
			}
			m.tar = own.Bytes()
			out[m.key] = m
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

// expand is sample m's IDs and loss mask as docs/http-api.md states them,
// built from what the test made: each turn's pieces between
// placeholders tokenized one by one, each image start, image × its
// tokens, end (loss 0); a text with no placeholder takes its images
// first.
func (m visionSample) expand(t *testing.T, r vision.Rule, enc *tokenize.Model) (ids []int32, loss []uint8) {
	t.Helper()
	next := 0
	img := func() {
		w, h, err := r.Size(m.sizes[next][0], m.sizes[next][1])
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
	for _, tr := range m.turns {
		holes += strings.Count(tr.text, vision.Placeholder)
	}
	if holes == 0 {
		for range m.sizes {
			img()
		}
	}
	for _, tr := range m.turns {
		pieces := strings.Split(tr.text, vision.Placeholder)
		for i, p := range pieces {
			got, err := enc.Encode([]byte(p))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, got...)
			for range got {
				loss = append(loss, map[bool]uint8{true: 1, false: 0}[tr.assistant])
			}
			if i < len(pieces)-1 {
				img()
			}
		}
	}
	return ids, loss
}

// TestVisionOverHTTP: a WebDataset of image-text samples indexed with
// `brand index --tokenizer`'s facts (dataset.WriteVisionFacts) is served
// as a vision job over HTTP. /epoch/0 counts the epoch's sequences as
// vision.NewEpoch packs the test's own item of each sample (its tokens
// expanded here, its images counted by the rule); each sequence of the
// first two global batches at world 2 holds those samples, token for
// token as the test expands them (input_ids, loss_mask, position_ids),
// with each image's span and size, and its members byte for byte what
// the library's Reader and Writer make of the samples (images resized by
// transform's resampler, held to Pillow in package vision). A dataset
// without facts, and pack=concat, are 400 saying why; /plan answers.
// The rest of the epoch, a resume at another world size, balance= and
// mixtures are the layout's (internal/batch/layout's TestVisionMixture,
// TestVisionSchedule, TestVisionBalance, TestVisionBadSamples), the
// model's vision rounds (TestModel) through HTTP; Parquet served in
// place, and a cluster, integration's TestVisionParquetOnMinIO.
func TestVisionOverHTTP(t *testing.T) {
	ctx := context.Background()
	tok, enc, st := visionStore(t)
	corpus := visionCorpus(t, st, 4, 16)
	res, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	bare := "/epoch/0/batch/0?seq=64&vision=size:28x28,patch:14,image:1"
	_, srv := start(t, st, nil)
	if resp, body := get(t, srv.URL+bare); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("brand index --tokenizer")) {
		t.Fatalf("a dataset without facts: %s %s; want 400 saying how to write them", resp.Status, body)
	}
	if _, err := dataset.WriteVisionFacts(ctx, st, ix, tok, 0, 2); err != nil {
		t.Fatal(err)
	}
	_, srv = start(t, st, nil)

	const seq, seed, window = 512, 42, 2
	v := enc.VocabSize()
	ruleText := fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d,images:4", v, v+1, v+2)
	r, err := vision.ParseRule(ruleText)
	if err != nil {
		t.Fatal(err)
	}
	job := url.Values{"seq": {strconv.Itoa(seq)}, "vision": {ruleText}, "seed": {strconv.Itoa(seed)}, "window": {strconv.Itoa(window)}}

	// The test's expectation: each sample's IDs and loss, its item, the
	// epoch's order of the index's samples, packed by the library.
	n := ix.NumSamples()
	ids, loss := make([][]int32, n), make([][]uint8, n)
	items := make([]vision.Item, n)
	m2 := uint64(r.Merge * r.Merge)
	for id := range n {
		m := corpus[ix.SampleKey(id)]
		ids[id], loss[id] = m.expand(t, r, enc)
		items[id] = vision.Item{Tokens: len(ids[id]), Images: len(m.sizes)}
		for _, s := range m.sizes {
			w, h, _ := r.Size(s[0], s[1])
			p := uint64(r.Tokens(w, h)) * m2
			items[id].Encoder += p * p
			items[id].Vision += r.Tokens(w, h)
		}
	}
	order, err := shuffle.NewEpoch(ix.SampleCounts(), seed, 0, window)
	if err != nil {
		t.Fatal(err)
	}
	want, err := vision.NewEpoch(order, func(id int) vision.Item { return items[id] }, seq, r.MaxImages, seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, n)
	for i := range want.NumSequences() {
		for _, id := range want.Sequence(i).Samples {
			seen[id]++
		}
	}
	if slices.ContainsFunc(seen, func(c int) bool { return c != 1 }) || want.NumSequences() < 8 {
		t.Fatalf("the expected epoch holds samples %v times over %d sequences; want each once over 8 or more", seen, want.NumSequences())
	}

	// The library's own members of each expected sequence.
	rd := &vision.Reader{Rule: r, Encoder: enc}
	wr := &vision.Writer{Seq: seq, Images: transform.Options{}}
	libraryMembers := func(pos int) map[string][]byte {
		var samples []vision.Sample
		for _, id := range want.Sequence(pos).Samples {
			s, err := rd.Read(ix.SampleKey(id), corpus[ix.SampleKey(id)].tar)
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, s)
		}
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if err := wr.Write(tw, "k", samples); err != nil {
			t.Fatal(err)
		}
		_ = tw.Close()
		return readTar(t, b.Bytes())[0].files
	}

	check := func(key string, files map[string][]byte) int {
		t.Helper()
		parts := strings.Split(key, "/")
		pos, err := strconv.Atoi(parts[len(parts)-1])
		if len(parts) != 3 || parts[0] != "seq" || parts[1] != "0" || err != nil || pos >= want.NumSequences() {
			t.Fatalf("a sequence keyed %q", key)
		}
		q := want.Sequence(pos)
		var wantIDs, wantPos []int32
		var wantLoss []uint8
		for _, id := range q.Samples {
			wantIDs = append(wantIDs, ids[id]...)
			wantLoss = append(wantLoss, loss[id]...)
			for i := range ids[id] {
				wantPos = append(wantPos, int32(i))
			}
		}
		for i := range seq - len(wantIDs) {
			wantIDs, wantLoss, wantPos = append(wantIDs, 0), append(wantLoss, 0), append(wantPos, int32(i))
		}
		if got := npyInt32s(t, files["input_ids.npy"]); !slices.Equal(got, wantIDs) {
			t.Fatalf("sequence %d: input_ids\n%v\nwant (samples %v)\n%v", pos, got, q.Samples, wantIDs)
		}
		if got := npyInt32s(t, files["position_ids.npy"]); !slices.Equal(got, wantPos) {
			t.Fatalf("sequence %d: position_ids %v; want %v", pos, got, wantPos)
		}
		if _, got, err := npy.Read(files["loss_mask.npy"]); err != nil || !bytes.Equal(got, wantLoss) {
			t.Fatalf("sequence %d: loss_mask %v (%v); want %v", pos, got, err, wantLoss)
		}
		spans := npyInt32s(t, files["image_spans.npy"])
		for k := 0; k < len(spans); k += 2 {
			start, l := int(spans[k]), int(spans[k+1])
			if start < 1 || wantIDs[start-1] != r.Start || wantIDs[start+l] != r.End || slices.ContainsFunc(wantIDs[start:start+l], func(x int32) bool { return x != r.Image }) {
				t.Fatalf("sequence %d: image span (%d, %d) is not an image's placeholders", pos, start, l)
			}
		}
		lib := libraryMembers(pos)
		if len(lib) != len(files) {
			t.Fatalf("sequence %d: %d members; the library writes %d", pos, len(files), len(lib))
		}
		for name, b := range lib {
			if !bytes.Equal(files[name], b) {
				t.Fatalf("sequence %d: member %s differs from the library's", pos, name)
			}
		}
		return pos
	}

	// /epoch/0, and the first two global batches at world 2.
	w2 := url.Values{}
	for k, x := range job {
		w2[k] = x
	}
	w2.Set("batch_size", "2")
	w2.Set("world", "2")
	resp, body := get(t, srv.URL+"/epoch/0?"+w2.Encode())
	var info struct {
		Samples int
		Tokens  struct{ Documents int }
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Samples != want.NumSequences() || info.Tokens.Documents != n {
		t.Fatalf("/epoch/0: %s %s; want %d sequences of %d samples", resp.Status, body, want.NumSequences(), n)
	}
	served := map[int]int{}
	for m := range 2 {
		for rank := range 2 {
			w2.Set("rank", strconv.Itoa(rank))
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", srv.URL, m, w2.Encode()))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("batch %d rank %d: %s %s", m, rank, resp.Status, body)
			}
			for _, s := range readTar(t, body) {
				served[check(s.key, s.files)]++
			}
		}
	}
	if len(served) != 8 {
		t.Fatalf("two global batches of 4 served sequences %v", served)
	}
	w2.Del("rank")

	// What cannot be served says why.
	concat := url.Values{}
	for k, x := range w2 {
		concat[k] = x
	}
	concat.Set("pack", "concat")
	concat.Set("eos", "1")
	if resp, body := get(t, srv.URL+"/epoch/0/batch/0?"+concat.Encode()); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("pack=concat")) {
		t.Fatalf("pack=concat: %s %s; want 400 naming it", resp.Status, body)
	}
	if resp, body := get(t, srv.URL+"/plan?"+w2.Encode()); resp.StatusCode != http.StatusOK {
		t.Fatalf("/plan: %s %s; want its plan (TestVisionPlanOverHTTP)", resp.Status, body)
	}
}

// npyInt32s reads an int32 .npy member.
func npyInt32s(t *testing.T, b []byte) []int32 {
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
