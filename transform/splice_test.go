package transform

import (
	"bytes"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"testing"

	"github.com/brandgw/brand/internal/gen/photos"
)

// TestSpliceGoDecodes holds the splice to a decoder of its own: Go's
// image/jpeg, which upsamples no chroma, decodes each cut of a
// sequential JPEG (image/jpeg's 4:2:0 and gray, Pillow's 4:4:4 and 4:2:2,
// tables of its own) to exactly the whole image's planes in the cut
// region, Y, Cb and Cr, edges included. It runs in every build (the
// splice is Go; libjpeg's path and its byte-for-byte comparison are in
// splice_turbojpeg_test.go).
func TestSpliceGoDecodes(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	files := map[string][]byte{}
	for i, s := range [][2]int{{500, 375}, {333, 500}, {203, 157}, {17, 9}} {
		p, err := photos.Sized(8, i, s[0], s[1], 90)
		if err != nil {
			t.Fatal(err)
		}
		files[p.Name], files["gray-"+p.Name] = p.JPEG, grayJPEG(t, p.JPEG)
	}
	for _, name := range []string{"cut444.jpg", "cut422.jpg", "cut-gray.jpg", "cut420-optimized.jpg", "photo.jpg", "photo422.jpg", "photo444.jpg"} {
		files[name] = readFixture(t, name)
	}
	for name, data := range files {
		whole, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		size := whole.Bounds().Size()
		for _, b := range spliceBoxes(r, size.X, size.Y, 30) {
			out, ox, oy, ok := spliceJPEG(nil, data, b.X, b.Y, b.W, b.H)
			if !ok {
				t.Fatalf("%s %+v: declined", name, b)
			}
			m, err := jpeg.Decode(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("%s %+v: %v", name, b, err)
			}
			x0, y0 := b.X-ox, b.Y-oy
			if got := m.Bounds().Size(); got != (image.Point{ox + b.W, oy + b.H}) {
				t.Fatalf("%s %+v: cut %v, want %d×%d", name, b, got, ox+b.W, oy+b.H)
			}
			if !samePlanes(whole, m, x0, y0) {
				t.Fatalf("%s %+v: the cut's planes are not the whole image's at (%d, %d)", name, b, x0, y0)
			}
		}
	}
}

// samePlanes: cut's every sample equals whole's at (x0, y0) on.
func samePlanes(whole, cut image.Image, x0, y0 int) bool {
	size := cut.Bounds().Size()
	switch w := whole.(type) {
	case *image.Gray:
		c, ok := cut.(*image.Gray)
		if !ok {
			return false
		}
		for y := range size.Y {
			for x := range size.X {
				if c.GrayAt(x, y) != w.GrayAt(x0+x, y0+y) {
					return false
				}
			}
		}
		return true
	case *image.YCbCr:
		c, ok := cut.(*image.YCbCr)
		if !ok || c.SubsampleRatio != w.SubsampleRatio {
			return false
		}
		for y := range size.Y {
			for x := range size.X {
				if c.Y[c.YOffset(x, y)] != w.Y[w.YOffset(x0+x, y0+y)] ||
					c.Cb[c.COffset(x, y)] != w.Cb[w.COffset(x0+x, y0+y)] ||
					c.Cr[c.COffset(x, y)] != w.Cr[w.COffset(x0+x, y0+y)] {
					return false
				}
			}
		}
		return true
	}
	return false
}

// spliceBoxes are n random boxes of a w×h image, every fourth reaching
// its right and bottom edges and every fourth its top-left corner.
func spliceBoxes(r *rand.Rand, w, h, n int) []Rect {
	boxes := make([]Rect, n)
	for i := range boxes {
		b := Rect{X: r.IntN(w), Y: r.IntN(h)}
		b.W, b.H = 1+r.IntN(w-b.X), 1+r.IntN(h-b.Y)
		switch i % 4 {
		case 0:
			b.W, b.H = w-b.X, h-b.Y
		case 1:
			b.X, b.Y = 0, 0
		}
		boxes[i] = b
	}
	return boxes
}
