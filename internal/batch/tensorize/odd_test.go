package tensorize

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg"
	"image/png"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/transform"
)

// png16 is a 16-bit RGBA PNG of w×h pixels.
func png16(t testing.TB, w, h int) string {
	t.Helper()
	m := image.NewRGBA64(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetRGBA64(x, y, color.RGBA64{R: uint16(x * 4000), G: uint16(y * 3000), B: 0x8080, A: 0xffff})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestOddImages: CMYK, grayscale, 16-bit, alpha and palette PNGs,
// progressive and EXIF-rotated JPEGs (named .jpg or .jpeg) become
// three-channel tensors, each the pipeline's own of the image under the
// sample's key, of the image's size unless the pipeline resizes (rotated
// when it applies EXIF orientation).
func TestOddImages(t *testing.T) {
	files := []struct {
		ext, data string
		swapped   bool // EXIF orientation 6 or 8: upright swaps the axes
	}{
		{"jpg", fixture(t, "cmyk.jpg"), false},
		{"jpg", fixture(t, "gray.jpg"), false},
		{"png", fixture(t, "alpha.png"), false},
		{"png", fixture(t, "gray-alpha.png"), false},
		{"png", png16(t, 12, 9), false},
		{"jpg", fixture(t, "exif-6.jpg"), true},
		{"jpeg", fixture(t, "exif-8.jpg"), true},
		{"png", fixture(t, "palette.png"), false},
		{"jpg", fixture(t, "progressive.jpg"), false},
	}
	cfg, err := transform.ParseConfig([]byte(`{"pipelines": {"plain": {"ops": []}, "upright": {"ops": [], "exif": "apply"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := transform.NewSet(cfg, transform.Options{MaxPixels: 4000 * 4000})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Pipelines: set, Workers: 2, Buffers: &budget{size: 1 << 30}, Decodes: decodes(1 << 30), MaxBytes: 1 << 30, Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	t.Cleanup(s.Close)
	var in []Sample
	for i, f := range files {
		name := fmt.Sprintf("odd/%d", i)
		in = append(in, Sample{Name: name, Dataset: "d", Key: transform.SampleKey(3, "d", 0, uint64(i)),
			Data: sampleOf(t, name, [2]string{name + ".cls", "1"}, [2]string{name + "." + f.ext, f.data})})
	}
	for _, name := range []string{"plain", "upright", transform.ImagenetEval} {
		t.Run(name, func(t *testing.T) {
			p := pipeline(t, s, name)
			out, err := s.Apply(context.Background(), Request{Pipeline: p, Samples: in, On: Fail})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			if len(out.Parts) != len(files) || out.Images != len(files) || len(out.Failed) != 0 {
				t.Fatalf("%d parts, %d images, failed %v (%v)", len(out.Parts), out.Images, out.Failed, out.Errors)
			}
			for i, part := range out.Parts {
				ms := members(t, part)
				if len(ms) != 2 || ms[1].name != fmt.Sprintf("odd/%d.npy", i) {
					t.Fatalf("%s: members %v", files[i].ext, ms)
				}
				got := ms[1].data
				if want := tensor(t, p, files[i].data, in[i].Key); !bytes.Equal(got, want) {
					t.Errorf("image %d: tensor differs from the pipeline's", i)
				}
				hdr, _, err := npy.Read(got)
				shape := hdr.Shape
				if err != nil || len(shape) != 3 || shape[0] != 3 {
					t.Errorf("image %d: shape %v (%v), want three channels first", i, shape, err)
					continue
				}
				cfg, _, err := image.DecodeConfig(bytes.NewReader([]byte(files[i].data)))
				if err != nil || name == transform.ImagenetEval {
					continue
				}
				w, h := cfg.Width, cfg.Height
				if name == "upright" && files[i].swapped {
					w, h = h, w
				}
				if shape[1] != int64(h) || shape[2] != int64(w) {
					t.Errorf("image %d: shape %v, want [3 %d %d]", i, shape, h, w)
				}
			}
		})
	}
}
