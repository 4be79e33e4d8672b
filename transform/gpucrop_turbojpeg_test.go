//go:build cgo && brand_turbojpeg

package transform

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/gen/photos"
)

// cutFiles are JPEGs of every chroma layout the cut handles: image/jpeg's
// 4:2:0 and gray at ImageNet-like and odd sizes, and Pillow's 4:4:4,
// 4:2:2, progressive and gray fixtures (testdata/make_cut_fixtures.py,
// make_fixtures.py).
func cutFiles(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	for i, s := range [][2]int{{500, 375}, {333, 500}, {203, 157}, {17, 9}, {40, 23}} {
		p, err := photos.Sized(8, i, s[0], s[1], 90)
		if err != nil {
			t.Fatal(err)
		}
		files[p.Name] = p.JPEG
		files["gray-"+p.Name] = grayJPEG(t, p.JPEG)
	}
	for _, name := range []string{"cut444.jpg", "cut422.jpg", "cut420-progressive.jpg", "cut444-progressive.jpg",
		"cut-gray.jpg", "cut-gray-progressive.jpg", "photo.jpg", "photo422.jpg", "photo444.jpg", "progressive.jpg", "gray.jpg"} {
		files[name] = readFixture(t, name)
	}
	return files
}

// cutMargin is how far from the cut region's edges inside the image the
// cut image's decoded pixels may differ from the whole image's, along an
// axis where chroma is subsampled: libjpeg's fancy upsampling blends each
// chroma sample with its neighbour, which the cut image replaces by its
// own edge sample. Elsewhere, and everywhere for 4:4:4 and gray, they
// are equal — but for a cut at most 4 pixels wide with horizontally
// subsampled chroma: libjpeg fancy-upsamples only chroma more than 2
// samples wide and replicates narrower chroma, so such a cut's pixels
// differ from the whole image's anywhere (imagenet-train's boxes are that
// narrow only on images of fewer than 20×20 pixels).
const cutMargin = 1

// TestCropJPEGPixels: the cut of random boxes (and of imagenet-train's)
// in every chroma layout is a baseline JPEG of the region's size with the
// source's sampling, the box at (ox, oy) within one iMCU of its corner,
// and decoded by libjpeg (the package's decoder) its pixels are the whole
// image's in that region, bit for bit, except within cutMargin of its
// edges inside the image along a subsampled axis.
func TestCropJPEGPixels(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dec := TurboJPEG{}
	worst := 0 // the farthest from an inner edge a pixel differed
	narrow := 0
	for name, data := range cutFiles(t) {
		h, err := readHeader(data, DefaultMaxPixels, IgnoreEXIF)
		if err != nil {
			t.Fatal(err)
		}
		f := readJPEGFrame(data)
		mw, mh := iMCU(f.comps)
		subH, subV := mw > 8 && len(f.comps) > 1, mh > 8 && len(f.comps) > 1
		whole, _, err := dec.DecodeJPEG(nil, data, h, 1, Rect{W: h.w, H: h.h})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			box := Rect{X: r.IntN(h.w), Y: r.IntN(h.h)}
			box.W, box.H = 1+r.IntN(h.w-box.X), 1+r.IntN(h.h-box.Y)
			switch i % 4 {
			case 0: // the right and bottom edges
				box.W, box.H = h.w-box.X, h.h-box.Y
			case 1: // the top-left corner
				box.X, box.Y = 0, 0
			}
			out, ox, oy, err := CropJPEG(data, box.X, box.Y, box.W, box.H)
			if err != nil {
				t.Fatalf("%s %+v: %v", name, box, err)
			}
			cut := Rect{X: box.X - ox, Y: box.Y - oy, W: ox + box.W, H: oy + box.H}
			if cut != cutRegion(box, mw, mh) {
				t.Fatalf("%s %+v: cut at %+v, want %+v", name, box, cut, cutRegion(box, mw, mh))
			}
			ch, err := readHeader(out, DefaultMaxPixels, IgnoreEXIF)
			if err != nil || ch.w != cut.W || ch.h != cut.H {
				t.Fatalf("%s %+v: cut JPEG %d×%d (%v), want %d×%d", name, box, ch.w, ch.h, err, cut.W, cut.H)
			}
			cf := readJPEGFrame(out)
			if cf.progressive || len(cf.comps) != len(f.comps) || len(f.comps) == 3 && cf.comps[0] != f.comps[0] {
				t.Fatalf("%s: cut frame %+v of %+v", name, cf, f)
			}
			got, _, err := dec.DecodeJPEG(nil, out, ch, 1, Rect{W: ch.w, H: ch.h})
			if err != nil {
				t.Fatal(err)
			}
			if subH && cut.W <= 4 && h.w > 4 {
				narrow++
				continue
			}
			for y := range cut.H {
				for x := range cut.W {
					a := got.Image.pix[(y*cut.W+x)*3:][:3]
					b := whole.Image.pix[((cut.Y+y)*h.w+cut.X+x)*3:][:3]
					if bytes.Equal(a, b) {
						continue
					}
					d := 1 << 30 // distance to the nearest inner edge along a subsampled axis
					if subH && cut.X > 0 {
						d = min(d, x)
					}
					if subH && cut.X+cut.W < h.w {
						d = min(d, cut.W-1-x)
					}
					if subV && cut.Y > 0 {
						d = min(d, y)
					}
					if subV && cut.Y+cut.H < h.h {
						d = min(d, cut.H-1-y)
					}
					worst = max(worst, d)
					if d >= cutMargin {
						t.Fatalf("%s: cut %+v pixel (%d, %d) %v, the whole image's %v", name, cut, x, y, a, b)
					}
				}
			}
		}
	}
	t.Logf("pixels differed at most %d pixels from an inner edge (margin %d); %d narrow cuts not compared", worst, cutMargin, narrow)
}

// TestCropJPEGRefuses: a CMYK JPEG and a PNG are refused (NotCut: the
// caller transforms them with Apply); a truncated JPEG and a box outside
// the image are errors (ErrDecode).
func TestCropJPEGRefuses(t *testing.T) {
	for _, c := range []struct {
		file   string
		box    Rect
		notCut bool
		says   string
	}{
		{"cmyk.jpg", Rect{W: 8, H: 8}, true, "CMYK"},
		{"photo.png", Rect{W: 8, H: 8}, true, "PNG"},
		{"truncated.jpg", Rect{W: 48, H: 32}, false, "Premature end"},
		{"photo.jpg", Rect{X: 40, W: 9, H: 8}, false, "outside"},
		{"garbage.jpg", Rect{W: 8, H: 8}, false, ""},
	} {
		_, _, _, err := CropJPEG(readFixture(t, c.file), c.box.X, c.box.Y, c.box.W, c.box.H)
		if err == nil || NotCut(err) != c.notCut || !c.notCut && !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s %+v: %v", c.file, c.box, err)
		}
	}
	// Through the pipeline: dst comes back as it was.
	p := mustGet(t, mustSet(t, `{}`, Options{}), ImagenetTrain)
	if c, err := p.GPUCrop([]byte("kept"), readFixture(t, "cmyk.jpg"), Key{}); !NotCut(err) || string(c.JPEG) != "kept" {
		t.Errorf("GPUCrop of a CMYK JPEG: %v, dst %q", err, c.JPEG)
	}
}

// TestGPUCropBytes: over 300 ImageNet-like photos, imagenet-train's cut
// for the GPU: the crop lies inside the cut image at the box's offset,
// with Apply's flip and size, and the cut JPEGs' bytes against the
// sources' (the target: at most 0.65 over an epoch), with
// libjpeg's standard Huffman tables (what GPUCrop writes) and optimized
// ones.
func TestGPUCropBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("300 photos")
	}
	p := mustGet(t, mustSet(t, `{}`, Options{}), ImagenetTrain)
	var src, std, opt int
	var buf []byte
	for i := range 300 {
		ph, err := photos.One(2, i)
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.GPUCrop(buf[:0], ph.JPEG, Key{Seed: 7, Sample: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		buf = c.JPEG
		g := c.Geometry
		if c.Crop != (Rect{X: g.Box.X - g.Cut.X, Y: g.Box.Y - g.Cut.Y, W: g.Box.W, H: g.Box.H}) || !c.Crop.inside(g.Cut.W, g.Cut.H) || c.Out != [2]int{224, 224} || c.Flip != g.Flip {
			t.Fatalf("photo %d: %+v", i, c)
		}
		if w, h, err := Dims(c.JPEG, DefaultMaxPixels); err != nil || w != g.Cut.W || h != g.Cut.H {
			t.Fatalf("photo %d: cut JPEG %d×%d (%v), cut %+v", i, w, h, err, g.Cut)
		}
		o, _, _, err := cutJPEG(nil, ph.JPEG, g.Box.X, g.Box.Y, g.Box.W, g.Box.H, true)
		if err != nil {
			t.Fatal(err)
		}
		src += len(ph.JPEG)
		std += len(c.JPEG)
		opt += len(o)
	}
	ratio := float64(std) / float64(src)
	t.Logf("300 photos, %d KB a source: cut %.3f of the source bytes (standard Huffman tables), %.3f (optimized)",
		src/300/1000, ratio, float64(opt)/float64(src))
	if ratio >= 0.8 {
		t.Errorf("cut %.3f of the source bytes", ratio)
	}
}

// TestGPUCropCPU logs the data node's CPU per image for imagenet-train's
// cut (header, plan, cut) beside imagenet-train itself (decode at reduced
// size where allowed, resample, flip, .npy) with libjpeg-turbo, on the
// same 300 ImageNet-like photos, alternating, in one run (the issue's
// target: the cut at most half). BenchmarkGPUCrop is the figure of
// record; this is its quick look.
func TestGPUCropCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	p := mustGet(t, mustSet(t, `{}`, Options{}), ImagenetTrain)
	set := make([][]byte, 300)
	for i := range set {
		ph, err := photos.One(1, i)
		if err != nil {
			t.Fatal(err)
		}
		set[i] = ph.JPEG
	}
	var sc Scratch
	var out, cut []byte
	var apply, crop time.Duration
	for round := range 2 { // the first warms the buffers
		apply, crop = 0, 0
		for i, data := range set {
			key := Key{Seed: 7, Sample: uint64(i + round)}
			res, err := p.Apply(out[:0], data, key, &sc)
			if err != nil {
				t.Fatal(err)
			}
			out, apply = res.Out, apply+res.CPU
			c, err := p.GPUCrop(cut[:0], data, key)
			if err != nil {
				t.Fatal(err)
			}
			cut, crop = c.JPEG, crop+c.CPU
		}
	}
	n := time.Duration(len(set))
	t.Logf("thread CPU per image: imagenet-train %v, cut %v: %.2f of imagenet-train's", apply/n, crop/n, crop.Seconds()/apply.Seconds())
}

// BenchmarkGPUCrop is imagenet-train's cut for the GPU over 300
// ImageNet-like photos (seed 1), an image an iteration, beside
// BenchmarkGPUCropApply, imagenet-train's tensor of the same photos and
// keys: their ratio is the data node's CPU per image of the GPU path
// against the tensor path's (docs/transform.md §13).
func BenchmarkGPUCrop(b *testing.B) { benchGPUPath(b, true) }

// BenchmarkGPUCropApply: BenchmarkGPUCrop's photos through Apply.
func BenchmarkGPUCropApply(b *testing.B) { benchGPUPath(b, false) }

func benchGPUPath(b *testing.B, cut bool) {
	p, err := New(ImagenetTrain, Builtins()[ImagenetTrain], Options{})
	if err != nil {
		b.Fatal(err)
	}
	set := make([][]byte, 300)
	for i := range set {
		ph, err := photos.One(1, i)
		if err != nil {
			b.Fatal(err)
		}
		set[i] = ph.JPEG
	}
	var sc Scratch
	var out []byte
	for i := 0; b.Loop(); i++ {
		key := Key{Seed: 7, Sample: uint64(i)}
		if cut {
			c, err := p.GPUCrop(out[:0], set[i%len(set)], key)
			if err != nil {
				b.Fatal(err)
			}
			out = c.JPEG
			continue
		}
		res, err := p.Apply(out[:0], set[i%len(set)], key, &sc)
		if err != nil {
			b.Fatal(err)
		}
		out = res.Out
	}
}
