package transform

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/codec/npy"
)

// readNPY reads a uint8 HWC .npy fixture as an image8.
func readNPY(t *testing.T, path string) image8 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hdr, data, err := npy.Read(b)
	if err != nil || hdr.Descr != "|u1" || hdr.Fortran {
		t.Fatalf("%s: %+v: %v", path, hdr, err)
	}
	if shape := hdr.Shape; len(shape) != 3 || shape[2] != 3 {
		t.Fatalf("%s: shape %v, want [h w 3]", path, shape)
	}
	return image8{pix: data, w: int(hdr.Shape[1]), h: int(hdr.Shape[0])}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// diff returns the largest and the mean absolute difference of two images
// of one size.
func diff(t *testing.T, got, want image8) (maxd int, mean float64) {
	t.Helper()
	if got.w != want.w || got.h != want.h {
		t.Fatalf("size %d×%d, want %d×%d", got.w, got.h, want.w, want.h)
	}
	sum := 0
	for i := range got.pix {
		d := int(got.pix[i]) - int(want.pix[i])
		d = max(d, -d)
		maxd = max(maxd, d)
		sum += d
	}
	return maxd, float64(sum) / float64(len(got.pix))
}

// decodeAll decodes a fixture as a pipeline does, orientation included.
func decodeAll(t *testing.T, data []byte, exif Orientation, bg *[3]uint8, dec JPEGDecoder) (image8, error) {
	t.Helper()
	h, err := readHeader(data, DefaultMaxPixels, exif)
	if err != nil {
		return image8{}, err
	}
	var img image8
	if h.format == formatJPEG {
		var reg Region
		reg, _, err = dec.DecodeJPEG(nil, data, h, 1, Rect{W: h.w, H: h.h})
		img = reg.Image
	} else {
		img, err = decodePNG(nil, data, bg)
	}
	if err != nil {
		return img, err
	}
	return orient(nil, img, h.orientation), nil
}

// The bounds of a JPEG decode against Pillow's (libjpeg-turbo) on the
// fixtures: the chroma upsampling and colour conversion are libjpeg's, so
// what remains is image/jpeg's IDCT against libjpeg's islow one, ±3 here
// (docs/transform.md §6 for the bound over 2,000 photos). PNG is exact.
const (
	jpegMaxDiff  = 3
	jpegMeanDiff = 0.1
)

// TestDecodeAgainstPillow decodes every fixture and compares it with what
// Pillow's convert("RGB") gave when the fixtures were made
// (testdata/make_fixtures.py).
func TestDecodeAgainstPillow(t *testing.T) {
	tests := []struct {
		file, want string
		exif       Orientation
		exact      bool
	}{
		{"photo.png", "photo.png.pil.npy", IgnoreEXIF, true},
		{"alpha.png", "alpha.png.pil.npy", IgnoreEXIF, true}, // alpha dropped, as convert("RGB")
		{"gray-alpha.png", "gray-alpha.png.pil.npy", IgnoreEXIF, true},
		{"palette.png", "palette.png.pil.npy", IgnoreEXIF, true},
		{"photo.jpg", "photo.jpg.pil.npy", IgnoreEXIF, false},
		{"photo444.jpg", "photo444.jpg.pil.npy", IgnoreEXIF, false},
		{"progressive.jpg", "progressive.jpg.pil.npy", IgnoreEXIF, false},
		{"photo422.jpg", "photo422.jpg.pil.npy", IgnoreEXIF, false},
		{"gray.jpg", "gray.jpg.pil.npy", IgnoreEXIF, false},
		{"cmyk.jpg", "cmyk.jpg.pil.npy", IgnoreEXIF, false},
		{"exif-3.jpg", "exif-3.jpg.pil.npy", IgnoreEXIF, false},
		{"exif-3.jpg", "exif-3.jpg.exif.pil.npy", ApplyEXIF, false},
		{"exif-6.jpg", "exif-6.jpg.pil.npy", IgnoreEXIF, false},
		{"exif-6.jpg", "exif-6.jpg.exif.pil.npy", ApplyEXIF, false},
		{"exif-8.jpg", "exif-8.jpg.exif.pil.npy", ApplyEXIF, false},
	}
	for _, dec := range decoders() {
		for _, tt := range tests {
			t.Run(dec.Name()+"/"+tt.want, func(t *testing.T) {
				got, err := decodeAll(t, readFixture(t, tt.file), tt.exif, nil, dec)
				if err != nil {
					t.Fatal(err)
				}
				want := readNPY(t, filepath.Join("testdata", tt.want))
				maxd, mean := diff(t, got, want)
				t.Logf("max |Δ| %d, mean |Δ| %.3f", maxd, mean)
				if tt.exact && maxd != 0 {
					t.Errorf("max |Δ| %d from Pillow, want 0", maxd)
				}
				if maxd > jpegMaxDiff || mean > jpegMeanDiff {
					t.Errorf("max |Δ| %d, mean %.3f from Pillow: beyond %d, %.1f", maxd, mean, jpegMaxDiff, jpegMeanDiff)
				}
			})
		}
	}
}

// TestEXIFOrientation reads the orientation tag of the fixtures and of
// hand-made segments, broken ones included (which must read as 1).
func TestEXIFOrientation(t *testing.T) {
	for _, o := range []string{"3", "6", "8"} {
		if got := jpegOrientation(readFixture(t, "exif-"+o+".jpg")); string(rune('0'+got)) != o {
			t.Errorf("exif-%s.jpg: orientation %d", o, got)
		}
	}
	if got := jpegOrientation(readFixture(t, "photo.jpg")); got != 1 {
		t.Errorf("photo.jpg: orientation %d, want 1", got)
	}
	seg := func(tiff string) []byte {
		body := "Exif\x00\x00" + tiff
		n := len(body) + 2
		return []byte("\xff\xd8\xff\xe1" + string([]byte{byte(n >> 8), byte(n)}) + body + "\xff\xd9")
	}
	entry := "\x12\x01\x03\x00\x01\x00\x00\x00\x06\x00\x00\x00" // II: 0x0112 SHORT 1 = 6
	tests := []struct {
		name string
		b    []byte
		want int
	}{
		{"little-endian", seg("II*\x00\x08\x00\x00\x00\x01\x00" + entry), 6},
		{"big-endian", seg("MM\x00*\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01\x00\x08\x00\x00"), 8},
		{"IFD offset out of range", seg("II*\x00\xff\x00\x00\x00\x01\x00" + entry), 1},
		{"entry cut short", seg("II*\x00\x08\x00\x00\x00\x01\x00" + entry[:6]), 1},
		{"orientation 9", seg("II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x03\x00\x01\x00\x00\x00\x09\x00\x00\x00"), 1},
		{"wrong type", seg("II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x04\x00\x01\x00\x00\x00\x06\x00\x00\x00"), 1},
		{"segment length past the end", []byte("\xff\xd8\xff\xe1\xff\xffExif\x00\x00II*\x00"), 1},
		{"not TIFF", seg("XX*\x00\x08\x00\x00\x00"), 1},
		{"empty", nil, 1},
	}
	for _, tt := range tests {
		if got := jpegOrientation(tt.b); got != tt.want {
			t.Errorf("%s: orientation %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestBadInput: every failure wraps a sentinel and names what failed; a
// pixel bomb is refused from its header.
func TestBadInput(t *testing.T) {
	tests := []struct {
		file     string
		max      int64
		sentinel error
		mention  string
	}{
		{"truncated.jpg", 0, ErrDecode, "jpeg"},
		{"garbage.jpg", 0, ErrDecode, "jpeg"},
		{"bomb.jpg", 0, ErrTooLarge, "60000×60000"},
		{"bomb.png", 0, ErrTooLarge, "100000×100000"},
		{"photo.png", 48*32 - 1, ErrTooLarge, "48×32"},
		{"make_fixtures.py", 0, ErrDecode, "neither JPEG nor PNG"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p, err := New("t", Builtins()[ImagenetTrain], Options{MaxPixels: tt.max})
			if err != nil {
				t.Fatal(err)
			}
			dst := []byte("kept")
			res, err := p.Apply(dst, readFixture(t, tt.file), Key{}, nil)
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("error %v, want %v mentioning %q", err, tt.sentinel, tt.mention)
			}
			if string(res.Out) != "kept" {
				t.Errorf("Out %q after a failure, want dst unchanged", res.Out)
			}
		})
	}
	// The bomb is refused without decoding: AllocsPerRun would see the
	// 10 GB image otherwise; a header read allocates a few small buffers.
	p, _ := New("t", Builtins()[ImagenetTrain], Options{})
	bomb := readFixture(t, "bomb.png")
	sc := new(Scratch)
	if a := testing.AllocsPerRun(10, func() { p.Apply(nil, bomb, Key{}, sc) }); a > 40 {
		t.Errorf("refusing a pixel bomb made %.0f allocations", a)
	}
}

// TestSixteenBitAndAlpha: 16-bit PNGs keep each sample's high byte; alpha
// is dropped, or composited on the spec's background.
func TestSixteenBitAndAlpha(t *testing.T) {
	g16 := image.NewGray16(image.Rect(0, 0, 4, 1))
	rgb16 := image.NewRGBA64(image.Rect(0, 0, 4, 1))
	nrgba := image.NewNRGBA(image.Rect(0, 0, 4, 1))
	vals := []uint16{0x0000, 0x12ff, 0x8000, 0xffff}
	alphas := []uint8{255, 128, 1, 0}
	for x, v := range vals {
		g16.SetGray16(x, 0, color.Gray16{Y: v})
		rgb16.SetRGBA64(x, 0, color.RGBA64{R: v, G: 0xffff - v, B: v / 2, A: 0xffff})
		nrgba.SetNRGBA(x, 0, color.NRGBA{R: 200, G: 100, B: 0, A: alphas[x]})
	}
	enc := func(m image.Image) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	bg := [3]uint8{255, 255, 255}
	tests := []struct {
		name string
		data []byte
		bg   *[3]uint8
		want []byte
	}{
		{"gray16", enc(g16), nil, []byte{0, 0, 0, 0x12, 0x12, 0x12, 0x80, 0x80, 0x80, 0xff, 0xff, 0xff}},
		{"rgb16", enc(rgb16), nil, []byte{0, 0xff, 0, 0x12, 0xed, 0x09, 0x80, 0x7f, 0x40, 0xff, 0, 0x7f}},
		{"alpha dropped", enc(nrgba), nil, []byte{200, 100, 0, 200, 100, 0, 200, 100, 0, 200, 100, 0}},
		// (c·a + 255·(255−a) + 127) / 255
		{"alpha on white", enc(nrgba), &bg, []byte{200, 100, 0, 227, 177, 127, 255, 254, 254, 255, 255, 255}},
	}
	for _, tt := range tests {
		got, err := decodeAll(t, tt.data, IgnoreEXIF, tt.bg, StdJPEG{})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !bytes.Equal(got.pix, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got.pix, tt.want)
		}
	}
}

// TestJPEGDecoderBuild: the build's decoder is named for people as what it
// is — libjpeg-turbo with its version under brand_turbojpeg, image/jpeg
// otherwise — since `brand version` and the start-up log rely on it.
func TestJPEGDecoderBuild(t *testing.T) {
	got := JPEGDecoderBuild()
	want := `^Go's image/jpeg \(pure Go\)$`
	if DefaultJPEGDecoder().Name() == "turbojpeg" {
		want = `^libjpeg-turbo \d+\.\d+\.\d+$`
	}
	if !regexp.MustCompile(want).MatchString(got) {
		t.Fatalf("JPEGDecoderBuild() = %q, want %s (decoder %s)", got, want, DefaultJPEGDecoder().Name())
	}
}
