package transform

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestResamplePIL requires the resampler to equal Pillow's
// Image.resize(BILINEAR) bit for bit on the same pixels (photo.png, a
// lossless source), downscaling, upscaling, both at once, one axis alone,
// and torchvision's crop-then-resize.
func TestResamplePIL(t *testing.T) {
	src, err := decodePNG(nil, readFixture(t, "photo.png"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		want string
		box  Rect
		w, h int
	}{
		{"resize-down", Rect{W: 48, H: 32}, 20, 13},
		{"resize-up", Rect{W: 48, H: 32}, 77, 50},
		{"resize-mixed", Rect{W: 48, H: 32}, 30, 45},
		{"resize-crop", Rect{X: 5, Y: 3, W: 31, H: 22}, 16, 16},
		{"resize-width", Rect{W: 48, H: 32}, 17, 32},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			view := crop(nil, src, tt.box)
			job := resampleJob{inW: tt.box.W, inH: tt.box.H, x1: float64(tt.box.W), y1: float64(tt.box.H), outW: tt.w, outH: tt.h, win: Rect{W: tt.w, H: tt.h}}
			got, _ := resample(nil, nil, view, job)
			want := readNPY(t, filepath.Join("testdata", tt.want+".pil.npy"))
			if maxd, mean := diff(t, got, want); maxd != 0 {
				t.Errorf("max |Δ| %d, mean %.3f from Pillow; want identical", maxd, mean)
			}
		})
	}
}

// TestResampleWindow: any window of a resize is exactly that part of the
// whole resize (what fuses Resize and CenterCrop), and a window of an
// unresized image is a crop.
func TestResampleWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := image8{w: 61, h: 47}
	src.pix = make([]byte, src.w*src.h*3)
	for i := range src.pix {
		src.pix[i] = byte(r.IntN(256))
	}
	for range 200 {
		outW, outH := 1+r.IntN(90), 1+r.IntN(90)
		if r.IntN(4) == 0 {
			outW, outH = src.w, src.h
		}
		full := resampleJob{inW: src.w, inH: src.h, x1: float64(src.w), y1: float64(src.h), outW: outW, outH: outH, win: Rect{W: outW, H: outH}}
		whole, _ := resample(nil, nil, src, full)
		win := Rect{X: r.IntN(outW), Y: r.IntN(outH)}
		win.W, win.H = 1+r.IntN(outW-win.X), 1+r.IntN(outH-win.Y)
		part := full
		part.win = win
		got, _ := resample(nil, nil, src, part)
		want := crop(nil, whole, win)
		if !bytes.Equal(got.pix, want.pix) {
			t.Fatalf("%d×%d → %d×%d window %+v differs from the whole resize's", src.w, src.h, outW, outH, win)
		}
	}
}

// crop copies box r (inside img) into buf.
func crop(buf []byte, img image8, r Rect) image8 {
	if r == (Rect{W: img.w, H: img.h}) {
		return img
	}
	out := image8{pix: grow(buf, r.W*r.H*3), w: r.W, h: r.H}
	for y := range r.H {
		s := ((r.Y+y)*img.w + r.X) * 3
		copy(out.pix[y*r.W*3:(y+1)*r.W*3], img.pix[s:s+r.W*3])
	}
	return out
}
