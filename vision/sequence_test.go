package vision

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/transform"
)

// model is a byte-level BPE tokenizer of the tokenize package's tests.
func model(t testing.TB) *tokenize.Model {
	t.Helper()
	b, err := os.ReadFile("../tokenize/testdata/hf-golden-tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokenize.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pngOf is a w×h RGB PNG of seeded noise over a gradient: a resize of
// it is no average of flat colour.
func pngOf(w, h int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	im := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			n := rng.Uint32()
			im.SetNRGBA(x, y, color.NRGBA{uint8(x*255/w) ^ uint8(n&31), uint8(y*255/h) ^ uint8(n>>5&31), uint8(n >> 10), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, im); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// tarOf is a sample's members, in order.
func tarOf(members ...any) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i < len(members); i += 2 {
		data := members[i+1].([]byte)
		_ = tw.WriteHeader(&tar.Header{Name: members[i].(string), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(data)
	}
	_ = tw.Close()
	return b.Bytes()
}

// A made sample is what the test knows of a sample it wrote: its text
// and its images' sizes and bytes, apart from what Read finds.
type made struct {
	key    string
	text   string
	sizes  [][2]int // w, h
	images [][]byte
	exts   []string // png or jpg
	tar    []byte
}

// corpus is n image-text samples: captions and questions in several
// scripts, 0 to 3 images each of 28 to 224 pixels a side, placeholders
// inline, or none (images first).
func corpus(n int) []made {
	rng := rand.New(rand.NewPCG(70, 2))
	texts := []string{"A photo of a cat on a mat.", "Ein Hund läuft über die Wiese, 🐕 schnell!", "写真の中の山と川。", "def f(x):\n    return x * 2",
		"Describe the picture in detail, please.", "Сравните два изображения."}
	out := make([]made, n)
	for i := range out {
		m := made{key: fmt.Sprintf("s%04d", i)}
		k := rng.IntN(4)
		inline := rng.IntN(3) > 0
		var sb strings.Builder
		for j := range k {
			w, h := 28+rng.IntN(197), 28+rng.IntN(197)
			m.sizes = append(m.sizes, [2]int{w, h})
			b, ext := pngOf(w, h, uint64(i*10+j)), "png"
			if (i+j)%3 == 0 {
				b, ext = jpegOf(b), "jpg"
			}
			m.images = append(m.images, b)
			m.exts = append(m.exts, ext)
			if inline {
				sb.WriteString(Placeholder + "\n")
			}
			sb.WriteString(texts[rng.IntN(len(texts))] + " ")
		}
		if k == 0 {
			sb.WriteString(texts[rng.IntN(len(texts))])
		}
		m.text = sb.String()
		members := []any{m.key + ".txt", []byte(m.text)}
		for j, b := range m.images {
			name := fmt.Sprintf("%s.%d.%s", m.key, j, m.exts[j])
			if k == 1 {
				name = m.key + "." + m.exts[j]
			}
			members = append(members, name, b)
		}
		// Images before the text in the tar: order comes from the names.
		members = append(members[2:], members[:2]...)
		m.tar = tarOf(members...)
		out[i] = m
	}
	return out
}

// expect is sample m's IDs and loss as the package doc states them,
// built from what the test made (not from Read): the text's pieces
// between placeholders tokenized one by one, each image start, image ×
// its tokens, end.
func expect(t *testing.T, m made, r Rule, enc *tokenize.Model) (ids []int32, loss []uint8) {
	pieces := strings.Split(m.text, Placeholder)
	if len(pieces) == 1 && len(m.images) > 0 {
		pieces = append(make([]string, len(m.images)), pieces[0])
	}
	for i, p := range pieces {
		got, err := enc.Encode([]byte(p))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
		for range got {
			loss = append(loss, 1)
		}
		if i < len(m.sizes) {
			w, h, err := r.Size(m.sizes[i][0], m.sizes[i][1])
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.Start)
			for range (h / r.Patch) * (w / r.Patch) / (r.Merge * r.Merge) {
				ids = append(ids, r.Image)
			}
			ids = append(ids, r.End)
			for len(loss) < len(ids) {
				loss = append(loss, 0)
			}
		}
	}
	return ids, loss
}

// written is a sequence as a trainer reads it back.
type written struct {
	ids, pos, spans, sizes []int32
	loss                   []uint8
	images                 [][]byte // CHW data
	shapes                 [][]int64
}

func readBack(t *testing.T, b []byte, key string) written {
	t.Helper()
	got := map[string][]byte{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		d, _ := io.ReadAll(tr)
		got[h.Name] = d
		names = append(names, h.Name)
	}
	arr := func(name, descr string) ([]byte, []int64) {
		h, data, err := npy.Read(got[key+name])
		if err != nil || h.Descr != descr {
			t.Fatalf("%s%s: %v, %q", key, name, err, h.Descr)
		}
		return data, h.Shape
	}
	ints := func(name string) []int32 {
		d, _ := arr(name, "<i4")
		v := make([]int32, len(d)/4)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(d[4*i:]))
		}
		return v
	}
	var w written
	w.ids, w.pos, w.spans, w.sizes = ints(".input_ids.npy"), ints(".position_ids.npy"), ints(".image_spans.npy"), ints(".image_sizes.npy")
	w.loss, _ = arr(".loss_mask.npy", "|u1")
	for k := range len(w.spans) / 2 {
		d, shape := arr(fmt.Sprintf(".image.%d.npy", k), "|u1")
		w.images = append(w.images, d)
		w.shapes = append(w.shapes, shape)
	}
	if want := 5 + len(w.images); len(names) != want {
		t.Fatalf("%s: members %v; want %d", key, names, want)
	}
	return w
}

// job is a vision job over a corpus, for the tests.
type job struct {
	corpus []made
	reader *Reader
	writer *Writer
	src    Source
}

func newJob(t testing.TB, n, seq int, rule string) job {
	enc := model(t)
	v := enc.VocabSize()
	r, err := ParseRule(fmt.Sprintf(rule, v, v+1, v+2))
	if err != nil {
		t.Fatal(err)
	}
	c := corpus(n)
	return job{
		corpus: c,
		reader: &Reader{Rule: r, Encoder: enc},
		writer: &Writer{Seq: seq, Pad: 0},
		src:    func(id int) (string, []byte, error) { return c[id].key, c[id].tar, nil },
	}
}

// rule is the dynamic rule of the tests: Qwen2-VL's patch and merge,
// 4 to 64 tokens an image; %d are the image, start and end IDs.
const rule = "min:3136,max:50176,patch:14,merge:2,image:%d,start:%d,end:%d,images:4"

// write writes sequence i of e, read from j's source, and holds
// Writer.Size to the bytes written.
func (j job) write(t *testing.T, e *Epoch, items []Item, q Sequence, key string) []byte {
	t.Helper()
	samples, err := j.reader.ReadSequence(j.src, q, items)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := j.writer.Write(tw, key, samples); err != nil {
		t.Fatal(err)
	}
	_ = tw.Flush()
	if size := j.writer.Size(key, samples); size != int64(b.Len()) {
		t.Fatalf("sequence %s: Size says %d bytes, Write wrote %d", key, size, b.Len())
	}
	_ = tw.Close()
	return b.Bytes()
}

// TestSequencesEndToEnd: samples read, laid out, written and read back
// as a trainer does: each sequence's IDs, positions and loss mask are
// the test's own expansion of its samples (in the reference packer's
// order), each image's span holds exactly its vision tokens between
// start and end with no placeholder elsewhere, its size is the rule's,
// and its tensor is that size; and the pixels are Pillow's resize of the
// stored image: exactly for a PNG (and a JPEG with libjpeg-turbo), within
// image/jpeg's IDCT bound for a JPEG with the pure-Go decoder.
func TestSequencesEndToEnd(t *testing.T) {
	const seq = 512
	j := newJob(t, 80, seq, rule)
	r := j.reader.Rule
	items, skipped, err := j.reader.Items(j.src, len(j.corpus), seq, Fail)
	if err != nil || skipped.Total() != 0 {
		t.Fatal(err, skipped)
	}
	order, err := shuffle.NewEpoch([]int{20, 20, 20, 20}, 5, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEpoch(order, func(id int) Item { return items[id] }, seq, r.MaxImages, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := referencePack(windowsOf(order), items, seq, r.MaxImages, 5, 0)
	type pil struct {
		path string
		w, h int
		got  []byte
	}
	var pils []pil
	dir := t.TempDir()
	enc := j.reader.Encoder.(*tokenize.Model)
	for i := range e.NumSequences() {
		key := fmt.Sprintf("seq/0/%010d", i)
		w := readBack(t, j.write(t, e, items, e.Sequence(i), key), key)
		var ids, pos []int32
		var loss []uint8
		var spans, sizes []int32
		var stored [][]byte
		for _, id := range ref[i].Samples {
			m := j.corpus[id]
			sid, sl := expect(t, m, r, enc)
			at := len(ids)
			for k := range sid {
				if sid[k] == r.Start {
					n := 0
					for sid[k+1+n] == r.Image {
						n++
					}
					spans = append(spans, int32(at+k+1), int32(n))
				}
			}
			for k, sz := range m.sizes {
				ow, oh, _ := r.Size(sz[0], sz[1])
				sizes = append(sizes, int32(oh), int32(ow))
				path := filepath.Join(dir, fmt.Sprintf("%s.%d.%s", m.key, k, m.exts[k]))
				if err := os.WriteFile(path, m.images[k], 0o644); err != nil {
					t.Fatal(err)
				}
				stored = append(stored, []byte(path))
			}
			ids = append(ids, sid...)
			loss = append(loss, sl...)
			for k := range sid {
				pos = append(pos, int32(k))
			}
		}
		for k := range seq - len(ids) {
			ids, loss, pos = append(ids, 0), append(loss, 0), append(pos, int32(k))
		}
		switch {
		case !slices.Equal(w.ids, ids):
			t.Fatalf("%s: input_ids differ from the samples' expansion", key)
		case !slices.Equal(w.pos, pos):
			t.Fatalf("%s: position_ids %v; want %v", key, w.pos, pos)
		case !slices.Equal(w.loss, loss):
			t.Fatalf("%s: loss_mask differs", key)
		case !slices.Equal(w.spans, spans):
			t.Fatalf("%s: image_spans %v; want %v", key, w.spans, spans)
		case !slices.Equal(w.sizes, sizes):
			t.Fatalf("%s: image_sizes %v; want %v", key, w.sizes, sizes)
		}
		placeholders := 0
		for k := range w.spans[0:len(w.spans):len(w.spans)] {
			if k%2 == 1 {
				continue
			}
			start, n := int(w.spans[k]), int(w.spans[k+1])
			oh, ow := int(w.sizes[k]), int(w.sizes[k+1])
			if n != r.Tokens(ow, oh) || w.ids[start-1] != r.Start || w.ids[start+n] != r.End {
				t.Fatalf("%s: span (%d, %d) of an image of %d×%d is not its %d vision tokens between start and end", key, start, n, ow, oh, r.Tokens(ow, oh))
			}
			for _, id := range w.ids[start : start+n] {
				if id != r.Image {
					t.Fatalf("%s: span (%d, %d) holds %d", key, start, n, id)
				}
			}
			if sh := w.shapes[k/2]; !slices.Equal(sh, []int64{3, int64(oh), int64(ow)}) {
				t.Fatalf("%s: image %d of shape %v; its size is %d×%d", key, k/2, sh, ow, oh)
			}
			placeholders += n
			pils = append(pils, pil{string(stored[k/2]), ow, oh, w.images[k/2]})
		}
		if c := countOf(w.ids, r.Image); c != placeholders {
			t.Fatalf("%s: %d placeholder tokens, %d in spans", key, c, placeholders)
		}
	}
	if len(pils) < 50 {
		t.Fatalf("only %d images written", len(pils))
	}

	python := pythontest.Need(t, "scripts/ensure-pil.sh", "PIL")
	cases := make([][3]any, len(pils))
	for k, p := range pils {
		cases[k] = [3]any{p.path, p.w, p.h}
	}
	b, _ := json.Marshal(cases)
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, python, "testdata/pil_resize.py", filepath.Join(dir, "cases.json"), dir).CombinedOutput(); err != nil {
		t.Fatalf("pil_resize.py: %v\n%s", err, out)
	}
	jpegs := 0
	for k, p := range pils {
		want, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.raw", k)))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.got) != len(want) {
			t.Fatalf("image %s: %d bytes; Pillow's %d", p.path, len(p.got), len(want))
		}
		diff, most := 0, 0
		for i := range want {
			if d := max(int(p.got[i])-int(want[i]), int(want[i])-int(p.got[i])); d > 0 {
				diff++
				most = max(most, d)
			}
		}
		// A PNG decodes alike everywhere: equal. A JPEG is equal with
		// libjpeg-turbo, what Pillow links; Go's image/jpeg differs by its
		// IDCT within transform's bound (docs/transform.md §6).
		bound := 0
		if strings.HasSuffix(p.path, ".jpg") {
			jpegs++
			if transform.DefaultJPEGDecoder().Name() == "go" {
				bound = 3
			}
		}
		if most > bound {
			t.Errorf("image %s resized to %d×%d: %d of %d bytes differ from Pillow's, by up to %d (bound %d)", p.path, p.w, p.h, diff, len(want), most, bound)
		}
	}
	if jpegs == 0 || jpegs == len(pils) {
		t.Fatalf("%d JPEGs of %d images: want both kinds", jpegs, len(pils))
	}
}

// jpegOf is a PNG re-encoded as a JPEG of quality 90.
func jpegOf(pngBytes []byte) []byte {
	im, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, im, &jpeg.Options{Quality: 90}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func countOf(v []int32, x int32) int {
	n := 0
	for _, y := range v {
		if y == x {
			n++
		}
	}
	return n
}

// TestResumeAtAnotherWorld: the epoch is a pure function of the job's
// parameters: built again from the samples it is the same; a global
// batch cut at world 2 (3 sequences a rank) and at world 3 (2 a rank)
// is the same sequences, written to the same bytes; and a run of world 2
// stopped after 4 steps and resumed at world 3 with its offset reads
// exactly the sequences the run would have read next.
func TestResumeAtAnotherWorld(t *testing.T) {
	const seq = 768
	j := newJob(t, 60, seq, rule)
	epoch := func() (*Epoch, []Item) {
		items, _, err := j.reader.Items(j.src, len(j.corpus), seq, Fail)
		if err != nil {
			t.Fatal(err)
		}
		order, err := shuffle.NewEpoch([]int{15, 15, 15, 15}, 9, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEpoch(order, func(id int) Item { return items[id] }, seq, j.reader.Rule.MaxImages, 9, 3)
		if err != nil {
			t.Fatal(err)
		}
		return e, items
	}
	e, items := epoch()
	again, _ := epoch()
	if e.NumSequences() < 12 {
		t.Fatalf("%d sequences: too few for the test", e.NumSequences())
	}
	global := func(e *Epoch, world, batch, offset, m int) []Sequence {
		var out []Sequence
		for rank := range world {
			p := shuffle.Params{Seed: 9, Window: 2, BatchSize: batch, World: world, Rank: rank, Offset: offset}
			b, err := e.Batch(p, m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		return out
	}
	bytesOf := func(qs []Sequence) [][]byte {
		var out [][]byte
		for i, q := range qs {
			out = append(out, j.write(t, e, items, q, fmt.Sprintf("k%d", i)))
		}
		return out
	}
	equal := func(a, b []Sequence) bool {
		return slices.EqualFunc(a, b, func(x, y Sequence) bool { return slices.Equal(x.Samples, y.Samples) && x.Pad == y.Pad })
	}
	for m := range e.NumSequences() / 6 {
		at2, at3 := global(e, 2, 3, 0, m), global(again, 3, 2, 0, m)
		if !equal(at2, at3) || !slices.EqualFunc(bytesOf(at2), bytesOf(at3), bytes.Equal) {
			t.Fatalf("global batch %d differs between world 2 and world 3", m)
		}
	}
	const steps = 4
	consumed := steps * 2 * 3
	for m := 0; (m+1)*6 <= e.NumSequences()-consumed; m++ {
		resumed, continued := global(again, 3, 2, consumed, m), global(e, 2, 3, 0, steps+m)
		if !equal(resumed, continued) {
			t.Fatalf("resumed at world 3, batch %d is not the run's batch %d", m, steps+m)
		}
	}
}

// TestBadSamples: each kind of bad sample fails the epoch under Fail,
// with its sentinel and naming the sample, and under Skip is counted by
// its kind and in no sequence, the others' sequences still aligned.
func TestBadSamples(t *testing.T) {
	const seq = 512
	good := pngOf(64, 48, 1)
	truncated := good[:len(good)/2] // the header reads, the pixels do not
	j := newJob(t, 20, seq, rule)
	j.reader.MaxPixels = 224 * 224 // the corpus's largest
	for _, tc := range []struct {
		name     string
		sample   []byte
		sentinel error
		count    func(Skipped) int
	}{
		{"undecodable", tarOf("x.jpg", []byte("\xff\xd8\xffnot a jpeg at all"), "x.txt", []byte("a <image> b")), ErrBadImage, func(s Skipped) int { return s.BadImage }},
		{"not an image", tarOf("x.png", []byte("GIF89a......"), "x.txt", []byte("a")), ErrBadImage, func(s Skipped) int { return s.BadImage }},
		{"empty image", tarOf("x.png", []byte{}, "x.txt", []byte("<image> b")), ErrBadImage, func(s Skipped) int { return s.BadImage }},
		{"image missing", tarOf("x.txt", []byte("look: <image>")), ErrPlaceholders, func(s Skipped) int { return s.Placeholders }},
		{"two placeholders, one image", tarOf("x.png", good, "x.txt", []byte("<image> and <image>")), ErrPlaceholders, func(s Skipped) int { return s.Placeholders }},
		{"one placeholder, two images", tarOf("x.0.png", good, "x.1.png", good, "x.txt", []byte("<image>")), ErrPlaceholders, func(s Skipped) int { return s.Placeholders }},
		{"image under a token", tarOf("x.png", pngOf(20, 300, 2), "x.txt", []byte("<image>")), ErrImageBounds, func(s Skipped) int { return s.Bounds }},
		{"image past the pixel bound", tarOf("x.png", pngOf(225, 224, 3), "x.txt", []byte("<image>")), ErrBadImage, func(s Skipped) int { return s.BadImage }},
		{"longer than seq", tarOf("x.txt", bytes.Repeat([]byte("many words here "), 200)), ErrTooLong, func(s Skipped) int { return s.TooLong }},
		{"more images than the cap", tarOf("x.0.png", good, "x.1.png", good, "x.2.png", good, "x.3.png", good, "x.4.png", good, "x.txt", []byte("five")), ErrTooLong, func(s Skipped) int { return s.TooLong }},
		{"no text", tarOf("x.png", good), ErrSample, func(s Skipped) int { return s.NotSample }},
		{"one image twice", tarOf("x.0.png", good, "x.00.png", good, "x.txt", []byte("a")), ErrSample, func(s Skipped) int { return s.NotSample }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bad = 7
			src := func(id int) (string, []byte, error) {
				if id == bad {
					return "bad-one", tc.sample, nil
				}
				return j.src(id)
			}
			_, _, err := j.reader.Items(src, len(j.corpus), seq, Fail)
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), "bad-one") {
				t.Fatalf("Fail: %v; want %v naming the sample", err, tc.sentinel)
			}
			items, sk, err := j.reader.Items(src, len(j.corpus), seq, Skip)
			if err != nil || sk.Total() != 1 || tc.count(sk) != 1 || items[bad] != (Item{}) {
				t.Fatalf("Skip: %v, %+v, item %+v; want it counted as %s alone", err, sk, items[bad], tc.name)
			}
			order, _ := shuffle.NewEpoch([]int{20}, 1, 0, 1)
			e, err := NewEpoch(order, func(id int) Item { return items[id] }, seq, 4, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			in := 0
			for i := range e.NumSequences() {
				q := e.Sequence(i)
				if slices.Contains(q.Samples, bad) {
					t.Fatalf("the skipped sample is in sequence %d", i)
				}
				in += len(q.Samples)
				key := fmt.Sprintf("k%d", i)
				w := readBack(t, j.write(t, e, items, q, key), key)
				for k := 0; k < len(w.spans); k += 2 {
					start, n := int(w.spans[k]), int(w.spans[k+1])
					if countOf(w.ids[start:start+n], j.reader.Rule.Image) != n || n != j.reader.Rule.Tokens(int(w.sizes[k+1]), int(w.sizes[k])) {
						t.Fatalf("sequence %d: span (%d, %d) misaligned", i, start, n)
					}
				}
			}
			if in != len(j.corpus)-1 {
				t.Fatalf("%d samples in sequences; want %d", in, len(j.corpus)-1)
			}
		})
	}
	// A header that reads over pixels that do not: laid out, then the
	// write fails naming the member, never a sequence without its image.
	s, err := j.reader.Read("trunc", tarOf("t.png", truncated, "t.txt", []byte("<image> x")))
	if err != nil {
		t.Fatal(err)
	}
	err = j.writer.Write(tar.NewWriter(io.Discard), "k", []Sample{s})
	if !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), "t.png") {
		t.Fatalf("truncated pixels: %v; want ErrBadImage naming t.png", err)
	}
	// A sample that reads otherwise than it was laid out is refused.
	items := []Item{{Tokens: s.Tokens() + 1, Images: 1}}
	if _, err := j.reader.ReadSequence(func(int) (string, []byte, error) {
		return "trunc", tarOf("t.png", truncated, "t.txt", []byte("<image> x")), nil
	}, Sequence{Samples: []int{0}}, items); !errors.Is(err, ErrSequence) {
		t.Fatalf("a changed sample: %v; want ErrSequence", err)
	}
}
