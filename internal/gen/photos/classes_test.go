package photos

import (
	"bytes"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// classOf reads a class back from the mean colour of a region of a
// decoded photo, as python/bench/train.py's class_of does from a batch:
// RGB to (Cb, Cr) offsets (JFIF's matrix), then the grid cell.
func classOf(m image.Image, rect image.Rectangle, n int) int {
	var sr, sg, sb float64
	for y := rect.Min.Y; y < rect.Max.Y; y++ {
		for x := rect.Min.X; x < rect.Max.X; x++ {
			r, g, b, _ := m.At(x, y).RGBA()
			sr, sg, sb = sr+float64(r>>8), sg+float64(g>>8), sb+float64(b>>8)
		}
	}
	px := float64(rect.Dx() * rect.Dy())
	r, g, b := sr/px, sg/px, sb/px
	cb := -0.168736*r - 0.331264*g + 0.5*b
	cr := 0.5*r - 0.418688*g - 0.081312*b
	side := gridSide(n)
	step := 2 * chromaSpan / float64(side)
	cell := func(v float64) int { return min(max(int(math.Floor((v+chromaSpan)/step)), 0), side-1) }
	return cell(cb)*side + cell(cr)
}

// TestClassTreeColourCarriesClass: any crop of at least 8 % of a photo
// (RandomResizedCrop's least), decoded by Go's decoder, reads back as its
// class, at 100 and at 1,000 classes, ImageNet-sized and small.
func TestClassTreeColourCarriesClass(t *testing.T) {
	for _, tr := range []ClassTree{
		{Samples: 40, Classes: 100, Seed: 3},
		{Samples: 40, Classes: 1000, Seed: 4},
		{Samples: 40, Classes: 10, Side: 64, Seed: 5},
	} {
		r := rand.New(rand.NewPCG(1, 2))
		for i := range tr.Samples {
			p, err := tr.Photo(i)
			if err != nil {
				t.Fatal(err)
			}
			m, err := jpeg.Decode(bytes.NewReader(p.JPEG))
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				area := 0.08 + 0.92*r.Float64()
				cw := max(1, int(math.Sqrt(area)*float64(p.W)))
				ch := max(1, int(math.Sqrt(area)*float64(p.H)))
				x0, y0 := r.IntN(p.W-cw+1), r.IntN(p.H-ch+1)
				rect := image.Rect(x0, y0, x0+cw, y0+ch)
				if got := classOf(m, rect, tr.classes()); got != tr.Class(i) {
					t.Errorf("%+v photo %d (%dx%d), crop %v: class %d, want %d", tr, i, p.W, p.H, rect, got, tr.Class(i))
				}
			}
		}
	}
}

// TestClassTreeSizes: ImageNet-like sizes and file weights — most long
// sides 500 pixels, a tail past 1,000, a mean file of 110 KB ± 15 %.
func TestClassTreeSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 200 photos")
	}
	tr := ClassTree{Samples: 200, Seed: 1}
	var total, long500, tail int
	for i := range tr.Samples {
		p, err := tr.Photo(i)
		if err != nil {
			t.Fatal(err)
		}
		total += len(p.JPEG)
		switch l := max(p.W, p.H); {
		case l == 500:
			long500++
		case l > 1000:
			tail++
		}
	}
	mean := float64(total) / float64(tr.Samples)
	t.Logf("mean %.0f bytes; long side 500: %d; past 1,000: %d of %d", mean, long500, tail, tr.Samples)
	if mean < 0.85*110e3 || mean > 1.15*110e3 {
		t.Errorf("mean file %.0f bytes, want 110 KB ± 15 %%", mean)
	}
	if long500 < tr.Samples*7/10 || tail == 0 {
		t.Errorf("long side 500: %d, past 1,000: %d of %d", long500, tail, tr.Samples)
	}
}

func TestClassTreeWrite(t *testing.T) {
	dir := t.TempDir()
	tr := ClassTree{Samples: 12, Classes: 5, Side: 32, Seed: 9}
	total, err := tr.Write(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for i := range tr.Samples {
		base := filepath.Join(dir, filepath.FromSlash(tr.Key(i)))
		b, err := os.ReadFile(base + ".jpg")
		if err != nil {
			t.Fatal(err)
		}
		sum += int64(len(b))
		cls, err := os.ReadFile(base + ".cls")
		if err != nil || string(cls) != strconv.Itoa(i%5) {
			t.Errorf("%s.cls: %q, %v", tr.Key(i), cls, err)
		}
	}
	if sum != total {
		t.Errorf("Write said %d bytes, the files hold %d", total, sum)
	}
}
