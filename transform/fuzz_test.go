package transform

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// absurdConfigs are configurations a careless or hostile operator might
// give --transform-config: every one is refused at start or defines
// pipelines that behave (the seed corpus of FuzzParseConfig, with the
// valid ones beside them).
var absurdConfigs = []string{
	`{"pipelines": {"mine": {"ops": [{"op": "random_resized_crop", "size": 128}, {"op": "hflip", "p": 0.25}]}}}`,
	`{"pipelines": {"imagenet-eval": {"ops": [{"op": "resize", "size": 232, "max_size": 500}, {"op": "center_crop", "size": [224, 200]}], "layout": "hwc", "exif": "apply", "background": [255, 255, 255], "reduced_decode": false}}}`,
	`{"pipelines": {}}`,
	`{}`,
	`{"pipelines": null}`,
	`null`,
	`[]`,
	`""`,
	``,
	`{"pipelines": {"x": null}}`,
	`{"pipelines": {"x": {"ops": null}}}`,
	`{"pipelines": {"x": {"ops": [null]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "rotate"}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": 0}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": -1}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": 16385}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": 1e309}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": 9223372036854775808}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": [2, 3, 4]}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": "256"}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "resize", "size": 256, "max_size": 256}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "center_crop", "size": [16384, 16384]}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "random_resized_crop", "size": 224, "scale": [0, 0]}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "random_resized_crop", "size": 224, "ratio": [1e-300, 1e300]}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "random_resized_crop", "size": 224, "ratio": [0.001, 1000]}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "hflip", "p": -0}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "hflip", "p": "0.5"}]}}}`,
	`{"pipelines": {"x": {"ops": [], "layout": "nchw", "exif": "rotate"}}}`,
	`{"pipelines": {"x": {"ops": [], "background": [256, 0, 0]}}}`,
	`{"pipelines": {"Bad Name": {"ops": []}}}`,
	`{"pipelines": {"": {"ops": []}}}`,
	`{"pipelines": {"` + strings.Repeat("a", 65) + `": {"ops": []}}}`,
	`{"pipelines": {"x": {"ops": [` + strings.Repeat(`{"op": "hflip"},`, 32) + `{"op": "hflip"}]}}}`,
	`{"pipelines": {"x": {"ops": []}, "x": {"ops": [{"op": "hflip"}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "hflip", "p": 0.1, "p": 0.9}]}}}`,
	`{"pipelines": {"x": {"ops": [{"op": "center_crop", "sise": 3}]}}}`,
	`{"pipelines": {"x": {"ops": []}}} {}`,
	`{"pipelines": {"x": {"ops": []}}`,
	`{"pipelines": {"x": {"ops": [], "ops": []}}, "pipelines": {}}`,
	strings.Repeat(`[`, 10000) + strings.Repeat(`]`, 10000),
}

// FuzzParseConfig holds the configuration parser to its contract,
// whatever the file: no panic; a refusal wraps ErrSpec; an accepted
// configuration names no member twice; its pipelines either build or
// are refused with ErrSpec; those that build are the same once the
// configuration is written out and read back, validate again as they
// are, and make, of a small image, a tensor of the size Size said.
func FuzzParseConfig(f *testing.F) {
	for _, c := range absurdConfigs {
		f.Add([]byte(c))
	}
	img := smallPNG(f, 7, 5)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("refused without ErrSpec: %v", err)
			}
			return
		}
		if repeatedName(b) != nil {
			t.Fatalf("accepted with a name given twice: %s", b)
		}
		s, err := NewSet(c, Options{MaxPixels: 1 << 20})
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("a pipeline refused without ErrSpec: %v", err)
			}
			return
		}
		// Written out and read back, it defines the same pipelines (a
		// zero size may come back unmarked as a square: sizes are
		// compared as the pipelines use them).
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("an accepted configuration does not encode: %v", err)
		}
		back, err := ParseConfig(enc)
		if err != nil {
			t.Fatalf("written as %s, read back: %v", enc, err)
		}
		s2, err := NewSet(back, Options{MaxPixels: 1 << 20})
		if err != nil || !reflect.DeepEqual(s2.Names(), s.Names()) {
			t.Fatalf("written as %s, built: %v", enc, err)
		}
		for _, name := range s.Names() {
			p, _ := s.Get(name)
			if p2, _ := s2.Get(name); p2.Fingerprint() != p.Fingerprint() {
				t.Fatalf("pipeline %q written as %s reads back as another: %+v, %+v", name, enc, p.Spec(), p2.Spec())
			}
			if again, err := New(name, p.Spec(), Options{MaxPixels: 1 << 20}); err != nil || again.Fingerprint() != p.Fingerprint() {
				t.Fatalf("pipeline %q: its completed spec validates again as %v", name, err)
			}
			key := SampleKey(1, "d", 0, uint64(len(b)))
			n, err := p.Size(img, key)
			if err != nil {
				t.Fatalf("pipeline %q: Size of a 7×5 PNG: %v", name, err)
			}
			if n > 1<<20 {
				continue // a large output is Size's to state, not the fuzzer's to allocate
			}
			res, err := p.Apply(nil, img, key, nil)
			if err != nil || len(res.Out) != n {
				t.Fatalf("pipeline %q: Apply made %d bytes (%v); Size said %d", name, len(res.Out), err, n)
			}
		}
	})
}

// FuzzImageHeader holds the image header readers — the format sniff,
// the JPEG and PNG headers that size a tensor before any pixel is
// decoded, the EXIF orientation — to their contract, whatever the
// bytes: no panic; a refusal wraps ErrDecode or ErrTooLarge; a header
// accepted is within the pixel bound, with an orientation of 1 to 8;
// Size refuses what the header reader refuses; and an image small
// enough to decode here either fails in its pixels with ErrDecode or
// becomes a tensor of the size Size said. The seeds are the probes of
// hostile images: header and zlib pixel bombs, truncated files, random
// bytes, a GIF named .jpg.
func FuzzImageHeader(f *testing.F) {
	for _, name := range []string{"bomb.jpg", "bomb.png", "truncated.jpg", "garbage.jpg", "photo.jpg", "progressive.jpg",
		"exif-6.jpg", "cmyk.jpg", "gray.jpg", "palette.png", "alpha.png", "gray-alpha.png"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// A zlib bomb: a small file whose pixels inflate to a megabyte.
	var zbomb bytes.Buffer
	if err := png.Encode(&zbomb, image.NewGray(image.Rect(0, 0, 1024, 1024))); err != nil {
		f.Fatal(err)
	}
	f.Add(zbomb.Bytes())
	// A GIF, as a .jpg member would carry it.
	var g bytes.Buffer
	if err := gif.Encode(&g, image.NewPaletted(image.Rect(0, 0, 4, 4), color.Palette{color.Black, color.White}), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(g.Bytes())
	// Random bytes, and random bytes behind each format's signature.
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 512)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	f.Add(noise)
	f.Add(append([]byte("\xff\xd8\xff"), noise...))
	f.Add(append([]byte("\x89PNG\r\n\x1a\n"), noise...))
	// A JPEG cut after its header, and one of a single pixel.
	var one bytes.Buffer
	if err := jpeg.Encode(&one, image.NewGray(image.Rect(0, 0, 1, 1)), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(one.Bytes()[:len(one.Bytes())/2])
	f.Add(one.Bytes())

	const maxPixels = 1 << 24
	plain, err := New("plain", Spec{}, Options{MaxPixels: maxPixels})
	if err != nil {
		f.Fatal(err)
	}
	upright, err := New("upright", Spec{Ops: []Op{{Op: OpResize, Size: Size{H: 9, W: 9, Square: true}}}, EXIF: ApplyEXIF}, Options{MaxPixels: maxPixels})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if o := jpegOrientation(b); o < 1 || o > 8 {
			t.Fatalf("EXIF orientation %d", o)
		}
		for _, p := range []*Pipeline{plain, upright} {
			h, err := readHeader(b, maxPixels, p.spec.EXIF)
			n, sizeErr := p.Size(b, Key{})
			if (err == nil) != (sizeErr == nil) {
				t.Fatalf("the header reader says %v, Size %v", err, sizeErr)
			}
			if err != nil {
				if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("refused without ErrDecode or ErrTooLarge: %v", err)
				}
				continue
			}
			if h.w < 1 || h.h < 1 || int64(h.w)*int64(h.h) > maxPixels || h.orientation < 1 || h.orientation > 8 {
				t.Fatalf("accepted a header of %d×%d, orientation %d", h.w, h.h, h.orientation)
			}
			if (h.format == formatJPEG) != bytes.HasPrefix(b, []byte("\xff\xd8\xff")) {
				t.Fatalf("format %s for bytes starting %q", h.format, b[:min(len(b), 8)])
			}
			if h.w*h.h > 1<<16 {
				continue // decoding a large image is no header's test
			}
			res, err := p.Apply(nil, b, Key{}, nil)
			switch {
			case err != nil && !errors.Is(err, ErrDecode):
				t.Fatalf("failed in its pixels without ErrDecode: %v", err)
			case err == nil && len(res.Out) != n:
				t.Fatalf("Apply made %d bytes; Size said %d", len(res.Out), n)
			}
		}
	})
}

// smallPNG is a w×h RGB PNG of a gradient.
func smallPNG(tb testing.TB, w, h int) []byte {
	tb.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{R: uint8(x * 30), G: uint8(y * 40), B: 128, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
