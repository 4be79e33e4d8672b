package transform

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/gen/photos"
)

// TestGPUGeometryDraws: the box and flip the GPU path uses are
// imagenet-train's — Geometry's draws, which Apply uses — for many keys
// and image sizes, and the cut region is the smallest one holding the
// box whose corner lies on an iMCU boundary, for every iMCU shape.
func TestGPUGeometryDraws(t *testing.T) {
	set := mustSet(t, `{}`, Options{})
	p := mustGet(t, set, ImagenetTrain)
	r := rand.New(rand.NewPCG(3, 4))
	sizes := [][2]int{{500, 375}, {375, 500}, {500, 333}, {224, 224}, {1, 1}, {17, 9}, {2000, 1333}}
	for range 200 {
		sizes = append(sizes, [2]int{1 + r.IntN(1200), 1 + r.IntN(1200)})
	}
	flips := 0
	for _, s := range sizes {
		w, h := s[0], s[1]
		for _, m := range [][2]int{{8, 8}, {16, 8}, {8, 16}, {16, 16}, {32, 8}} {
			for range 5 {
				key := Key{Seed: r.Uint64(), Epoch: r.Uint64N(100), Sample: r.Uint64()}
				g, err := p.cutGeometry(w, h, m[0], m[1], key)
				if err != nil {
					t.Fatal(err)
				}
				geo, err := p.Geometry(w, h, key)
				if err != nil {
					t.Fatal(err)
				}
				d := geo.Draws()
				if len(d.Crops) != 1 || len(d.Flips) != 1 || g.Box != d.Crops[0] || g.Flip != d.Flips[0] {
					t.Fatalf("%d×%d %+v: box %+v flip %v, imagenet-train draws %+v", w, h, key, g.Box, g.Flip, d)
				}
				if ow, oh := geo.Size(); g.Out != [2]int{ow, oh} || g.Source != [2]int{w, h} {
					t.Fatalf("%d×%d: out %v source %v, want %d×%d", w, h, g.Out, g.Source, ow, oh)
				}
				checkCut(t, g, m[0], m[1])
				if g.Flip {
					flips++
				}
			}
		}
	}
	if n := len(sizes) * 25; flips < n/3 || flips > 2*n/3 {
		t.Errorf("%d flips in %d draws", flips, n)
	}
}

// checkCut: g's cut region lies in the image, holds the box, starts on
// an mw×mh boundary within one iMCU of the box and ends where it ends:
// no smaller aligned region holds the box.
func checkCut(t *testing.T, g GPUGeometry, mw, mh int) {
	t.Helper()
	c, b := g.Cut, g.Box
	if !c.inside(g.Source[0], g.Source[1]) || !b.within(c) || c.X%mw != 0 || c.Y%mh != 0 ||
		b.X-c.X >= mw || b.Y-c.Y >= mh || c.X+c.W != b.X+b.W || c.Y+c.H != b.Y+b.H {
		t.Fatalf("cut %+v of box %+v in %v with %d×%d iMCUs", c, b, g.Source, mw, mh)
	}
}

// TestGPUGeometryJPEG: on JPEG bytes the geometry reads the size and
// iMCU from the header: 16×16 for image/jpeg's 4:2:0, 8×8 for gray.
func TestGPUGeometryJPEG(t *testing.T) {
	p := mustGet(t, mustSet(t, `{}`, Options{}), ImagenetTrain)
	for i := range 8 {
		ph, err := photos.One(5, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			data   []byte
			mw, mh int
		}{{ph.JPEG, 16, 16}, {grayJPEG(t, ph.JPEG), 8, 8}} {
			key := Key{Seed: 9, Sample: uint64(i)}
			g, err := p.GPUGeometry(c.data, key)
			if err != nil {
				t.Fatal(err)
			}
			geo, _ := p.Geometry(ph.W, ph.H, key)
			if d := geo.Draws(); g.Box != d.Crops[0] || g.Flip != d.Flips[0] {
				t.Fatalf("photo %d: %+v, draws %+v", i, g, d)
			}
			checkCut(t, g, c.mw, c.mh)
		}
	}
}

// TestGPUGeometryRefuses: what the GPU path does not cut is refused with
// NotCut, for the caller to use Apply; a broken image is ErrDecode.
func TestGPUGeometryRefuses(t *testing.T) {
	set := mustSet(t, `{"pipelines": {
		"train-exif": {"ops": [{"op": "random_resized_crop", "size": 224}, {"op": "hflip"}], "exif": "apply"},
		"flip-first": {"ops": [{"op": "hflip", "p": 1}, {"op": "random_resized_crop", "size": 224}]},
		"pad": {"ops": [{"op": "center_crop", "size": 4000}]}}}`, Options{})
	for _, c := range []struct {
		pipeline, file string
		notCut         bool
	}{
		{ImagenetTrain, "photo.png", true},
		{ImagenetEval, "photo.jpg", true}, // a resize, then a window of it
		{"flip-first", "photo.jpg", true},
		{"pad", "photo.jpg", true},
		{"train-exif", "exif-6.jpg", true},
		{ImagenetTrain, "exif-6.jpg", false}, // the orientation ignored, as Apply does
		{ImagenetTrain, "garbage.jpg", false},
		{ImagenetTrain, "bomb.jpg", false},
	} {
		_, err := mustGet(t, set, c.pipeline).GPUGeometry(readFixture(t, c.file), Key{Seed: 1})
		switch {
		case c.notCut && !NotCut(err):
			t.Errorf("%s on %s: %v, want a NotCut refusal", c.pipeline, c.file, err)
		case !c.notCut && NotCut(err):
			t.Errorf("%s on %s: %v, a NotCut refusal", c.pipeline, c.file, err)
		case c.file == "garbage.jpg" && !errors.Is(err, ErrDecode), c.file == "bomb.jpg" && !errors.Is(err, ErrTooLarge):
			t.Errorf("%s: %v", c.file, err)
		case c.file == "exif-6.jpg" && !c.notCut && err != nil:
			t.Errorf("%s: %v", c.file, err)
		}
	}
}

// grayJPEG is a grayscale JPEG of data's luminance, as image/jpeg
// writes one (a single component, 1×1).
func grayJPEG(t testing.TB, data []byte) []byte {
	t.Helper()
	m, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	y := m.(*image.YCbCr)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, &image.Gray{Pix: y.Y, Stride: y.YStride, Rect: y.Rect}, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCropJPEGBuild: a build with libjpeg cuts; the pure-Go build cuts
// nothing (NotCut, for the caller to use Apply), says which build does,
// and hands dst back.
func TestCropJPEGBuild(t *testing.T) {
	turbo := DefaultJPEGDecoder().Name() != "go"
	_, _, _, err := CropJPEG(readFixture(t, "photo.jpg"), 3, 5, 20, 20)
	if turbo && err != nil || !turbo && (!NotCut(err) || !strings.Contains(err.Error(), "brand_turbojpeg")) {
		t.Errorf("CropJPEG in the %s build: %v", DefaultJPEGDecoder().Name(), err)
	}
	c, err := mustGet(t, mustSet(t, `{}`, Options{}), ImagenetTrain).GPUCrop([]byte("kept"), readFixture(t, "photo.jpg"), Key{})
	if turbo && (err != nil || string(c.JPEG[:4]) != "kept") || !turbo && (!NotCut(err) || string(c.JPEG) != "kept") {
		t.Errorf("GPUCrop in the %s build: %v, dst %q", DefaultJPEGDecoder().Name(), err, c.JPEG[:min(len(c.JPEG), 8)])
	}
}
