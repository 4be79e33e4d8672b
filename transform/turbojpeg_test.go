//go:build cgo && brand_turbojpeg

package transform

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/brandgw/brand/internal/gen/photos"
)

// TestPartialDecodeExact: the part libjpeg decodes of a region is, pixel
// for pixel, that part of the whole image decoded at the same scale — at
// every scale, for regions touching every edge — so partial decoding
// changes nothing the pipeline computes.
func TestPartialDecodeExact(t *testing.T) {
	var files [][]byte
	for i := range 12 {
		p, err := photos.One(21, i)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, p.JPEG)
	}
	files = append(files, readFixture(t, "photo444.jpg"), readFixture(t, "gray.jpg"), readFixture(t, "photo.jpg"), readFixture(t, "progressive.jpg"), readFixture(t, "photo422.jpg"))
	r := rand.New(rand.NewPCG(7, 8))
	dec := TurboJPEG{}
	for fi, data := range files {
		h, err := readHeader(data, DefaultMaxPixels, IgnoreEXIF)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []int{1, 2, 4, 8} {
			sw, sh := ceilDiv(h.w, d), ceilDiv(h.h, d)
			whole, _, err := dec.DecodeJPEG(nil, data, h, d, Rect{W: sw, H: sh})
			if err != nil || whole.X != 0 || whole.Y != 0 || whole.Image.w != sw || whole.Image.h != sh {
				t.Fatalf("file %d 1/%d: whole decode %+v %v", fi, d, whole.Image.w, err)
			}
			for range 20 {
				need := Rect{X: r.IntN(sw), Y: r.IntN(sh)}
				need.W, need.H = 1+r.IntN(sw-need.X), 1+r.IntN(sh-need.Y)
				if r.IntN(4) == 0 { // touch the right and bottom edges
					need.W, need.H = sw-need.X, sh-need.Y
				}
				part, _, err := dec.DecodeJPEG(nil, data, h, d, need)
				if err != nil {
					t.Fatal(err)
				}
				got := Rect{X: part.X, Y: part.Y, W: part.Image.w, H: part.Image.h}
				if !need.within(got) {
					t.Fatalf("file %d 1/%d: region %+v does not hold %+v", fi, d, got, need)
				}
				for y := need.Y; y < need.Y+need.H; y++ {
					a := whole.Image.pix[(y*sw+need.X)*3 : (y*sw+need.X+need.W)*3]
					o := ((y-part.Y)*part.Image.w + need.X - part.X) * 3
					if b := part.Image.pix[o : o+need.W*3]; !bytes.Equal(a, b) {
						t.Fatalf("file %d 1/%d: region %+v row %d differs from the whole decode", fi, d, need, y)
					}
				}
			}
		}
	}
}

// TestTruncatedTurbo: libjpeg pads a truncated image with grey and warns;
// the decoder turns that warning into an error, as PIL and image/jpeg do.
func TestTruncatedTurbo(t *testing.T) {
	data := readFixture(t, "truncated.jpg")
	h, err := readHeader(data, DefaultMaxPixels, IgnoreEXIF)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = TurboJPEG{}.DecodeJPEG(nil, data, h, 1, Rect{W: h.w, H: h.h})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("Premature end")) {
		t.Errorf("truncated JPEG: %v", err)
	}
}

// BenchmarkGoDecoderDelta reports how far the pure-Go decoder's pixels are
// from libjpeg-turbo's (which are Pillow's) over the benchmark's photos:
// max-Δ and mean-Δ levels (docs/transform.md §6.2). Run with
// -benchtime 2000x to cover the set once.
func BenchmarkGoDecoderDelta(b *testing.B) {
	set, _ := benchSet(b)
	maxd, sum := 0, 0.0
	for i := range b.N {
		data := set[i%len(set)]
		h, err := readHeader(data, DefaultMaxPixels, IgnoreEXIF)
		if err != nil {
			b.Fatal(err)
		}
		full := Rect{W: h.w, H: h.h}
		g, _, err := StdJPEG{}.DecodeJPEG(nil, data, h, 1, full)
		if err != nil {
			b.Fatal(err)
		}
		t, _, err := TurboJPEG{}.DecodeJPEG(nil, data, h, 1, full)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for j := range g.Image.pix {
			d := int(g.Image.pix[j]) - int(t.Image.pix[j])
			d = max(d, -d)
			maxd = max(maxd, d)
			n += d
		}
		sum += float64(n) / float64(len(g.Image.pix))
	}
	b.ReportMetric(float64(maxd), "max-Δ")
	b.ReportMetric(sum/float64(b.N), "mean-Δ")
}
