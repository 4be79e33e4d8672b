package transform

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/codec/npy"
)

func mustSet(t *testing.T, cfg string, opt Options) *Set {
	t.Helper()
	var c Config
	if cfg != "" {
		var err error
		if c, err = ParseConfig([]byte(cfg)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSet(c, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustGet(t *testing.T, s *Set, name string) *Pipeline {
	t.Helper()
	p, err := s.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tensorHWC returns an applied member's pixels as an HWC image8,
// transposing a CHW tensor back.
func tensorHWC(t *testing.T, member []byte, layout Layout) image8 {
	t.Helper()
	hdr, data, err := npy.Read(member)
	if err != nil || hdr.Descr != "|u1" || hdr.Fortran || len(hdr.Shape) != 3 {
		t.Fatalf("member %+v: %v", hdr, err)
	}
	shape := []int{int(hdr.Shape[0]), int(hdr.Shape[1]), int(hdr.Shape[2])}
	if layout == HWC {
		return image8{pix: data, w: shape[1], h: shape[0]}
	}
	c, h, w := shape[0], shape[1], shape[2]
	if c != 3 {
		t.Fatalf("shape %v", shape)
	}
	out := image8{pix: make([]byte, h*w*3), w: w, h: h}
	for ch := range 3 {
		for i := range h * w {
			out.pix[i*3+ch] = data[ch*h*w+i]
		}
	}
	return out
}

// TestApplyComposition: a pipeline's output is its plan carried out
// operator by operator with the primitives (each proven against Pillow):
// crop, resize, mirror — for both built-ins, on the lossless fixture and a
// JPEG, across samples that flip and not, in both layouts.
func TestApplyComposition(t *testing.T) {
	set := mustSet(t, `{"pipelines": {"hwc-train": {"ops": [
		{"op": "random_resized_crop", "size": [20, 28], "scale": [0.3, 1]}, {"op": "hflip"}], "layout": "hwc"},
		"small-eval": {"ops": [{"op": "resize", "size": 20}, {"op": "center_crop", "size": 16}]}}}`, Options{})
	for _, name := range []string{ImagenetTrain, ImagenetEval, "hwc-train", "small-eval"} {
		p := mustGet(t, set, name)
		for _, file := range []string{"photo.png", "photo.jpg"} {
			data := readFixture(t, file)
			src, err := decodeAll(t, data, IgnoreEXIF, nil, p.opt.JPEG)
			if err != nil {
				t.Fatal(err)
			}
			flips := map[bool]int{}
			for sample := range uint64(12) {
				key := Key{Seed: 3, Epoch: 1, Sample: sample}
				res, err := p.Apply(nil, data, key, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := tensorHWC(t, res.Out, p.Spec().Layout)
				want, flipped := byHand(t, p, src, key)
				flips[flipped]++
				if !bytes.Equal(got.pix, want.pix) || got.w != want.w {
					t.Fatalf("%s %s sample %d: the pipeline's output differs from its operators applied one by one", name, file, sample)
				}
				wantShape := [3]int{3, want.h, want.w}
				if p.Spec().Layout == HWC {
					wantShape = [3]int{want.h, want.w, 3}
				}
				if res.Shape != wantShape || res.Source != [2]int{48, 32} || res.Denom != 1 {
					t.Errorf("%s: result %+v", name, res)
				}
			}
			if strings.Contains(name, "train") && (flips[true] == 0 || flips[false] == 0) {
				t.Errorf("%s: flips %v over 12 samples", name, flips)
			}
		}
	}
}

// byHand applies p's operators one at a time, unfused, as torchvision
// would: crop, resize to the whole size, crop, mirror.
func byHand(t *testing.T, p *Pipeline, img image8, key Key) (image8, bool) {
	t.Helper()
	flipped := false
	for i, op := range p.Spec().Ops {
		switch op.Op {
		case OpResize:
			w, h := resizedSize(img.w, img.h, op.Size.H, op.MaxSize)
			img, _ = resample(nil, nil, img, resampleJob{inW: img.w, inH: img.h, x1: float64(img.w), y1: float64(img.h), outW: w, outH: h, win: Rect{W: w, H: h}})
		case OpCenterCrop:
			img = padCrop(nil, img, centerCropBox(img.w, img.h, op.Size.W, op.Size.H))
		case OpRandomResizedCrop:
			s := key.stream(i)
			box, _ := randomResizedCropBox(&s, img.w, img.h, *op.Scale, *op.Ratio)
			img = crop(nil, img, box)
			img, _ = resample(nil, nil, img, resampleJob{inW: img.w, inH: img.h, x1: float64(img.w), y1: float64(img.h), outW: op.Size.W, outH: op.Size.H, win: Rect{W: op.Size.W, H: op.Size.H}})
		case OpHFlip:
			s := key.stream(i)
			if flipDraw(&s, *op.P) {
				img = image8{pix: bytes.Clone(img.pix), w: img.w, h: img.h}
				mirror(img)
				flipped = !flipped
			}
		}
	}
	return img, flipped
}

// TestApplyDeterministic: the same key gives the same bytes whatever the
// Scratch held before and whichever images came between; another epoch
// or sample gives other draws.
func TestApplyDeterministic(t *testing.T) {
	p := mustGet(t, mustSet(t, "", Options{}), ImagenetTrain)
	files := []string{"photo.jpg", "exif-6.jpg", "photo.png", "gray.jpg", "cmyk.jpg", "alpha.png"}
	first := map[string][]byte{}
	sc := new(Scratch)
	var pool []byte
	for round := range 3 {
		for i, f := range files {
			res, err := p.Apply(pool[:0], readFixture(t, f), Key{Seed: 1, Epoch: 2, Sample: uint64(i)}, sc)
			if err != nil {
				t.Fatal(err)
			}
			if round == 0 {
				first[f] = bytes.Clone(res.Out)
			} else if !bytes.Equal(res.Out, first[f]) {
				t.Fatalf("%s: round %d differs from round 0", f, round)
			}
			pool = res.Out
		}
	}
	a, _ := p.Apply(nil, readFixture(t, "photo.jpg"), Key{Seed: 1, Epoch: 3, Sample: 0}, nil)
	if bytes.Equal(a.Out, first["photo.jpg"]) {
		t.Error("epoch 3 gave epoch 2's tensor")
	}
}

// TestEXIFInPipeline: with "exif": "apply" the operators see the image as
// displayed (a 32×48 image for orientation 6), with "ignore" as stored.
func TestEXIFInPipeline(t *testing.T) {
	set := mustSet(t, `{"pipelines": {
		"upright": {"ops": [{"op": "center_crop", "size": [40, 30]}], "exif": "apply", "layout": "hwc"},
		"stored": {"ops": [{"op": "center_crop", "size": [30, 40]}], "layout": "hwc"}}}`, Options{})
	for _, tt := range []struct {
		pipeline, want string
		source         [2]int
	}{
		{"upright", "exif-6.jpg.exif.pil.npy", [2]int{32, 48}},
		{"stored", "exif-6.jpg.pil.npy", [2]int{48, 32}},
	} {
		res, err := mustGet(t, set, tt.pipeline).Apply(nil, readFixture(t, "exif-6.jpg"), Key{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != tt.source {
			t.Errorf("%s: operators saw %v, want %v", tt.pipeline, res.Source, tt.source)
		}
		full := readNPY(t, "testdata/"+tt.want)
		want := crop(nil, full, centerCropBox(full.w, full.h, tensorHWC(t, res.Out, HWC).w, tensorHWC(t, res.Out, HWC).h))
		if maxd, _ := diff(t, tensorHWC(t, res.Out, HWC), want); maxd > jpegMaxDiff {
			t.Errorf("%s: max |Δ| %d from Pillow's", tt.pipeline, maxd)
		}
	}
}

// TestCenterCropPads: a crop larger than the image pads with zeros, the
// odd pixel after, as torchvision's center_crop.
func TestCenterCropPads(t *testing.T) {
	set := mustSet(t, `{"pipelines": {"pad": {"ops": [{"op": "center_crop", "size": [35, 51]}], "layout": "hwc"}}}`, Options{})
	res, err := mustGet(t, set, "pad").Apply(nil, readFixture(t, "photo.png"), Key{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := tensorHWC(t, res.Out, HWC)
	src := readNPY(t, "testdata/photo.png.pil.npy")
	// torchvision: left pad (51−48)/2 = 1, top pad (35−32)/2 = 1.
	for y := range 35 {
		for x := range 51 {
			var want []byte
			if sx, sy := x-1, y-1; sx >= 0 && sx < 48 && sy >= 0 && sy < 32 {
				want = src.pix[(sy*48+sx)*3 : (sy*48+sx)*3+3]
			} else {
				want = []byte{0, 0, 0}
			}
			if !bytes.Equal(got.pix[(y*51+x)*3:(y*51+x)*3+3], want) {
				t.Fatalf("pixel (%d, %d) = %v, want %v", x, y, got.pix[(y*51+x)*3:(y*51+x)*3+3], want)
			}
		}
	}
}

// TestPlanGeometry pins torchvision's size rules the plan follows.
func TestPlanGeometry(t *testing.T) {
	sizes := []struct{ w, h, size, max, ww, wh int }{
		{500, 375, 256, 0, 341, 256},
		{375, 500, 256, 0, 256, 341},
		{333, 500, 256, 0, 256, 384},
		{256, 256, 256, 0, 256, 256},
		{1000, 100, 256, 1000, 1000, 100}, // 2560 > 1000: scaled so the longer is 1000
		{10, 7, 256, 0, 365, 256},
	}
	for _, s := range sizes {
		if w, h := resizedSize(s.w, s.h, s.size, s.max); w != s.ww || h != s.wh {
			t.Errorf("resize %d×%d to %d (max %d): %d×%d, want %d×%d", s.w, s.h, s.size, s.max, w, h, s.ww, s.wh)
		}
	}
	crops := []struct {
		w, h, cw, ch int
		want         Rect
	}{
		{341, 256, 224, 224, Rect{X: 58, Y: 16, W: 224, H: 224}}, // (341−224)/2 = 58.5 → 58, half to even
		{343, 256, 224, 224, Rect{X: 60, Y: 16, W: 224, H: 224}}, // 59.5 → 60
		{100, 100, 224, 224, Rect{X: -62, Y: -62, W: 224, H: 224}},
		{101, 100, 224, 224, Rect{X: -61, Y: -62, W: 224, H: 224}},
	}
	for _, c := range crops {
		if got := centerCropBox(c.w, c.h, c.cw, c.ch); got != c.want {
			t.Errorf("center crop %d×%d of %d×%d: %+v, want %+v", c.cw, c.ch, c.w, c.h, got, c.want)
		}
	}
	// imagenet-eval on 500×375 is one fused step: resize to 341×256,
	// keep the centre 224×224.
	p := mustGet(t, mustSet(t, "", Options{}), ImagenetEval)
	pl := p.makePlan(500, 375, Key{})
	want := []step{{src: Rect{W: 500, H: 375}, outW: 341, outH: 256, win: Rect{X: 58, Y: 16, W: 224, H: 224}}}
	if fmt.Sprint(pl.steps) != fmt.Sprint(want) || pl.mirror {
		t.Errorf("imagenet-eval plan %+v, want %+v", pl.steps, want)
	}
	// imagenet-train is one step too: the drawn box resized to 224×224.
	pl = mustGet(t, mustSet(t, "", Options{}), ImagenetTrain).makePlan(500, 375, Key{Seed: 1})
	if len(pl.steps) != 1 || pl.steps[0].src != pl.crops[0].Box || pl.steps[0].outW != 224 || pl.mirror != pl.flips[0] {
		t.Errorf("imagenet-train plan %+v", pl)
	}
}

// TestDecodeDenom: reduced-size decoding only where the step still
// downscales from the smaller image, as PIL's draft.
func TestDecodeDenom(t *testing.T) {
	tests := []struct {
		src        Rect
		outW, outH int
		want       int
	}{
		{Rect{W: 500, H: 375}, 224, 224, 1},
		{Rect{W: 460, H: 450}, 224, 224, 2},
		{Rect{W: 1800, H: 1800}, 224, 224, 8},
		{Rect{W: 1000, H: 448}, 224, 224, 2},
		{Rect{X: -1, W: 1000, H: 1000}, 224, 224, 1}, // padded: full size
	}
	for _, tt := range tests {
		pl := plan{steps: []step{{src: tt.src, outW: tt.outW, outH: tt.outH, win: Rect{W: tt.outW, H: tt.outH}}}}
		if got := decodeDenom(pl, 2000, 2000); got != tt.want {
			t.Errorf("%+v → %d×%d: 1/%d, want 1/%d", tt.src, tt.outW, tt.outH, got, tt.want)
		}
	}
}

// TestConfig: the configuration format's errors, defaults and names.
func TestConfig(t *testing.T) {
	bad := []struct{ cfg, mention string }{
		{`{"pipelines": {"x": {"ops": [{"op": "rotate"}]}}}`, `unknown operator "rotate"`},
		{`{"pipelines": {"x": {"ops": [{"op": "resize", "size": [2, 3], "max_size": 9}]}}}`, "max_size applies to a size of one number"},
		{`{"pipelines": {"x": {"ops": [{"op": "hflip", "p": 1.5}]}}}`, "p 1.5"},
		{`{"pipelines": {"x": {"ops": [{"op": "hflip", "size": 3}]}}}`, `hflip takes no "size"`},
		{`{"pipelines": {"x": {"ops": [{"op": "random_resized_crop", "size": 224, "scale": [0.5, 0.1]}]}}}`, "scale"},
		{`{"pipelines": {"x": {"ops": [{"op": "random_resized_crop", "size": 224, "ratio": [2, 1]}]}}}`, "ratio"},
		{`{"pipelines": {"x": {"ops": [{"op": "center_crop", "size": 0}]}}}`, "size must be"},
		{`{"pipelines": {"x": {"ops": [{"op": "center_crop", "sise": 3}]}}}`, `unknown field "sise"`},
		{`{"pipelines": {"x": {"ops": [], "layout": "nchw"}}}`, "layout"},
		{`{"pipelines": {"x": {"ops": [], "exif": "rotate"}}}`, "exif"},
		{`{"pipelines": {"Bad Name": {"ops": []}}}`, "pipeline name"},
		{`{"pipelines": {}} {}`, "after the object"},
		// Given twice, the last would win silently (POST /plan refuses
		// the same): a pipeline, a field, the whole map.
		{`{"pipelines": {"x": {"ops": []}, "y": {"ops": []}, "x": {"ops": [{"op": "hflip"}]}}}`, `pipeline "x" is defined twice`},
		{`{"pipelines": {"x": {"ops": [{"op": "hflip"}, {"op": "resize", "size": 256, "size": 128}]}}}`, `"size" is given twice in one object (at pipelines.x.ops[1].size)`},
		{`{"pipelines": {"x": {"ops": [], "layout": "hwc", "layout": "chw"}}}`, `"layout" is given twice in one object (at pipelines.x.layout)`},
		{`{"pipelines": {"x": {"ops": []}}, "pipelines": {"y": {"ops": []}}}`, `"pipelines" is given twice`},
	}
	for _, tt := range bad {
		c, err := ParseConfig([]byte(tt.cfg))
		if err == nil {
			_, err = NewSet(c, Options{})
		}
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: error %v, want ErrSpec mentioning %q", tt.cfg, err, tt.mention)
		}
	}
	s := mustSet(t, `{"pipelines": {"mine": {"ops": [{"op": "random_resized_crop", "size": 128}, {"op": "hflip", "p": 0.25}]},
		"imagenet-eval": {"ops": [{"op": "resize", "size": 232}, {"op": "center_crop", "size": 224}]}}}`, Options{})
	want := "[imagenet-eval imagenet-train mine]"
	if canCut {
		want = "[imagenet-eval imagenet-train imagenet-train-gpu mine]"
	}
	if got := fmt.Sprint(s.Names()); got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	mine := mustGet(t, s, "mine").Spec()
	if *mine.Ops[0].Scale != [2]float64{0.08, 1} || *mine.Ops[0].Ratio != [2]float64{0.75, 4.0 / 3.0} || *mine.Ops[1].P != 0.25 || mine.Layout != CHW || mine.EXIF != IgnoreEXIF {
		t.Errorf("defaults not filled: %+v", mine)
	}
	if mustGet(t, s, ImagenetEval).Spec().Ops[0].Size.H != 232 {
		t.Error("a configured pipeline did not replace the built-in of its name")
	}
	_, err := s.Get("imagenet")
	if !errors.Is(err, ErrUnknownPipeline) || !strings.Contains(err.Error(), strings.ReplaceAll(want[1:len(want)-1], " ", ", ")) {
		t.Errorf("unknown pipeline: %v", err)
	}
}

// TestNPYHeader: a tensor's header is the codec's, which
// internal/codec/npy's TestGolden holds to numpy.save's bytes for these
// shapes; its data starts 64-byte aligned.
func TestNPYHeader(t *testing.T) {
	for _, shape := range [][]int{{3, 224, 224}, {224, 224, 3}, {1, 1, 3}, {3, 16384, 16384}} {
		h := NPYHeader(shape...)
		if len(h)%64 != 0 || h[len(h)-1] != '\n' {
			t.Errorf("%v: header of %d bytes", shape, len(h))
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		if n > 1<<20 {
			continue
		}
		got, data, err := npy.Read(append(h, make([]byte, n)...))
		if err != nil || len(data) != n || got.Descr != "|u1" || got.Fortran || fmt.Sprint(got.Shape) != fmt.Sprint(shape) {
			t.Errorf("%v: read back %+v, %d data bytes: %v", shape, got, len(data), err)
		}
	}
	want := "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (3, 224, 224), }"
	if h := string(NPYHeader(3, 224, 224)); !strings.HasPrefix(h, want) || strings.TrimRight(h[len(want):], " \n") != "" {
		t.Errorf("header %q", h)
	}
}

// TestMeterAndCores: the figures a server reports and the planner's
// arithmetic.
func TestMeterAndCores(t *testing.T) {
	var m Meter
	m.Add(Result{CPU: 3 * time.Millisecond}, nil)
	m.Add(Result{CPU: 2 * time.Millisecond}, nil)
	m.Add(Result{CPU: 1 * time.Millisecond}, ErrDecode)
	s := m.Stats()
	if s.Images != 2 || s.Failed != 1 || s.CPU != 6*time.Millisecond || s.PerImage() != 3*time.Millisecond {
		t.Errorf("stats %+v, per image %v", s, s.PerImage())
	}
	if got := s.ImagesPerCoreSecond(); math.Abs(got-2/0.006) > 1e-9 {
		t.Errorf("images per core-second %v", got)
	}
	tests := []struct {
		rate float64
		cost time.Duration
		want float64
	}{
		{1000, 2 * time.Millisecond, 2},
		{5000, 1500 * time.Microsecond, 7.5},
		{0, time.Millisecond, 0},
		{100, 0, 0},
		{math.NaN(), time.Millisecond, 0},
	}
	for _, tt := range tests {
		if got := CoresFor(tt.rate, tt.cost); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("CoresFor(%v, %v) = %v, want %v", tt.rate, tt.cost, got, tt.want)
		}
	}
	// Apply measures CPU: a real decode costs more than nothing.
	p := mustGet(t, mustSet(t, "", Options{}), ImagenetTrain)
	res, err := p.Apply(nil, readFixture(t, "photo.jpg"), Key{}, nil)
	if err != nil || res.CPU <= 0 {
		t.Errorf("Apply CPU %v, error %v", res.CPU, err)
	}
}

// TestOutputName: which members a pipeline reads, and what it names them.
func TestOutputName(t *testing.T) {
	tests := []struct{ in, out string }{
		{"n01/img_13.jpg", "n01/img_13.npy"},
		{"a.b/c.JPEG", "a.b/c.npy"},
		{"x.png", "x.npy"},
		{"x.cls", ""},
		{"x.jpg/y", ""},
		{"noext", ""},
	}
	for _, tt := range tests {
		got, ok := OutputName(tt.in)
		if got != tt.out || ok != (tt.out != "") {
			t.Errorf("OutputName(%q) = %q, %v; want %q", tt.in, got, ok, tt.out)
		}
	}
}

// TestScratchTrim: a Scratch reuses its buffers, but gives back any larger
// than ScratchKeep, so a worker does not keep a huge image's memory.
func TestScratchTrim(t *testing.T) {
	var big bytes.Buffer
	if err := jpeg.Encode(&big, image.NewGray(image.Rect(0, 0, 2100, 2100)), nil); err != nil {
		t.Fatal(err)
	}
	p := mustGet(t, mustSet(t, "", Options{}), ImagenetEval)
	var sc Scratch
	if _, err := p.Apply(nil, readFixture(t, "photo.jpg"), Key{}, &sc); err != nil {
		t.Fatal(err)
	}
	if sc.decoded == nil || sc.ping == nil && sc.pong == nil {
		t.Fatal("a small image's buffers were not kept")
	}
	if _, err := p.Apply(nil, big.Bytes(), Key{}, &sc); err != nil {
		t.Fatal(err)
	}
	for i, b := range [][]byte{sc.decoded, sc.oriented, sc.view, sc.tmp, sc.ping, sc.pong} {
		if cap(b) > ScratchKeep {
			t.Errorf("buffer %d keeps %d bytes after a 2100×2100 image", i, cap(b))
		}
	}
}

// TestApplyConcurrent: one Pipeline applied from several goroutines, each
// with its own Scratch (as a worker pool does), gives each image the bytes
// a lone caller gets. Run under -race, it also checks the sharing.
func TestApplyConcurrent(t *testing.T) {
	p := mustGet(t, mustSet(t, "", Options{}), ImagenetTrain)
	files := []string{"photo.jpg", "exif-6.jpg", "photo.png", "gray.jpg", "cmyk.jpg", "alpha.png", "photo444.jpg"}
	want := make([][]byte, len(files))
	for i, f := range files {
		res, err := p.Apply(nil, readFixture(t, f), Key{Seed: 5, Sample: uint64(i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Out
	}
	data := make([][]byte, len(files))
	for i, f := range files {
		data[i] = readFixture(t, f)
	}
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			var sc Scratch
			var buf []byte
			for round := range 20 {
				i := (w + round) % len(files)
				res, err := p.Apply(buf[:0], data[i], Key{Seed: 5, Sample: uint64(i)}, &sc)
				if err == nil && !bytes.Equal(res.Out, want[i]) {
					err = fmt.Errorf("worker %d: %s differs from a lone Apply", w, files[i])
				}
				if err != nil {
					errs <- err
					return
				}
				buf = res.Out
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
