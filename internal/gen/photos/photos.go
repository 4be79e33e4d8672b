// Package photos makes photo-like JPEGs: of ImageNet-like sizes for the
// transform stage's calibration (`brand plan --transform`, /plan), its
// benchmarks and tests of image decoding, small ones for the dataset
// `brand demo` serves (Tree), and a class-folder tree sized like
// ImageNet's whose photos carry their class in their colour, for the
// training benchmark (ClassTree). Deterministic from a seed, with the
// statistics that decide a decoder's cost — sides of 300 to 500 pixels,
// 4:2:0 chroma, quality 75 to 95, and enough texture that the files weigh
// what photos of that size do (about 77 KiB on average, as the
// ImageNet-like set of issue 34's measurements).
//
// A flat or noise-only image would not do: a decoder's cost follows the
// entropy-coded bytes (Huffman decoding) and the pixel count (IDCT,
// upsampling, colour conversion), so both must be realistic. Each image
// is a smooth colour field (a coarse random grid, bilinearly
// interpolated: sky, walls, out-of-focus background), a few shaded
// objects with hard edges, fine texture (value noise a few pixels across:
// foliage, fabric) and sensor noise.
package photos

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
)

// Photo is one generated JPEG.
type Photo struct {
	Name    string
	JPEG    []byte
	W, H    int
	Quality int
}

// Generate returns n photos seeded by seed. The same arguments always give
// the same bytes (image/jpeg's encoder is deterministic).
func Generate(seed uint64, n int) ([]Photo, error) {
	out := make([]Photo, n)
	for i := range n {
		p, err := One(seed, i)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// One returns photo i of the set seeded by seed.
func One(seed uint64, i int) (Photo, error) {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	w, h := 300+r.IntN(201), 300+r.IntN(201)
	q := 75 + r.IntN(21)
	return encode(r, i, w, h, q)
}

// Sized returns a photo of w×h pixels at quality q, for tests that need
// sizes outside the ImageNet-like range (large images, reduced decoding).
func Sized(seed uint64, i, w, h, q int) (Photo, error) {
	return encode(rand.New(rand.NewPCG(seed, uint64(i))), i, w, h, q)
}

func encode(r *rand.Rand, i, w, h, q int) (Photo, error) {
	m := render(r, w, h)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
		return Photo{}, fmt.Errorf("photos: encoding photo %d: %w", i, err)
	}
	return Photo{Name: fmt.Sprintf("photo_%05d.jpg", i), JPEG: b.Bytes(), W: w, H: h, Quality: q}, nil
}

// Texture and noise strengths, chosen so that the set's mean file size is
// about 75 KiB (TestSizes bounds it at 77 KiB ± 10 %).
const (
	textureAmp = 68.0
	noiseAmp   = 22.0
)

func render(r *rand.Rand, w, h int) *image.YCbCr {
	// The colour field: a grid of 5×5 random colours.
	const g = 5
	var grid [g][g][3]float64
	for y := range g {
		for x := range g {
			for c := range 3 {
				grid[y][x][c] = 30 + 200*r.Float64()
			}
		}
	}
	// Objects: shaded ellipses with hard edges.
	type blob struct {
		cx, cy, rx, ry, shade float64
		col                   [3]float64
	}
	blobs := make([]blob, 3+r.IntN(5))
	for i := range blobs {
		blobs[i] = blob{cx: r.Float64() * float64(w), cy: r.Float64() * float64(h),
			rx: 20 + r.Float64()*float64(w)/3, ry: 20 + r.Float64()*float64(h)/3, shade: 0.3 + r.Float64()*0.7,
			col: [3]float64{r.Float64() * 255, r.Float64() * 255, r.Float64() * 255}}
	}
	// Texture: value noise on a lattice 3 pixels apart.
	const cell = 3
	lw, lh := w/cell+2, h/cell+2
	lattice := make([]float64, lw*lh)
	for i := range lattice {
		lattice[i] = r.Float64()*2 - 1
	}
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	rgb := make([]float64, w*h*3)
	for y := range h {
		gy := float64(y) / float64(h-1) * (g - 1)
		y0 := min(int(gy), g-2)
		fy := gy - float64(y0)
		ly := y / cell
		ty := float64(y%cell) / cell
		for x := range w {
			gx := float64(x) / float64(w-1) * (g - 1)
			x0 := min(int(gx), g-2)
			fx := gx - float64(x0)
			var px [3]float64
			for c := range 3 {
				top := grid[y0][x0][c]*(1-fx) + grid[y0][x0+1][c]*fx
				bot := grid[y0+1][x0][c]*(1-fx) + grid[y0+1][x0+1][c]*fx
				px[c] = top*(1-fy) + bot*fy
			}
			for _, b := range blobs {
				dx, dy := (float64(x)-b.cx)/b.rx, (float64(y)-b.cy)/b.ry
				if d := dx*dx + dy*dy; d < 1 {
					s := 1 - b.shade*d
					for c := range 3 {
						px[c] = b.col[c] * s
					}
				}
			}
			lx := x / cell
			tx := float64(x%cell) / cell
			t := (lattice[ly*lw+lx]*(1-tx)+lattice[ly*lw+lx+1]*tx)*(1-ty) +
				(lattice[(ly+1)*lw+lx]*(1-tx)+lattice[(ly+1)*lw+lx+1]*tx)*ty
			n := textureAmp*t + noiseAmp*(r.Float64()*2-1)
			for c := range 3 {
				rgb[(y*w+x)*3+c] = px[c] + n
			}
		}
	}
	for y := range h {
		for x := range w {
			p := rgb[(y*w+x)*3:]
			yy := 0.299*p[0] + 0.587*p[1] + 0.114*p[2]
			m.Y[y*m.YStride+x] = clamp(yy)
		}
	}
	for cy := range (h + 1) / 2 {
		for cx := range (w + 1) / 2 {
			var cb, cr float64
			n := 0.0
			for dy := range 2 {
				for dx := range 2 {
					x, y := 2*cx+dx, 2*cy+dy
					if x >= w || y >= h {
						continue
					}
					p := rgb[(y*w+x)*3:]
					cb += 128 - 0.168736*p[0] - 0.331264*p[1] + 0.5*p[2]
					cr += 128 + 0.5*p[0] - 0.418688*p[1] - 0.081312*p[2]
					n++
				}
			}
			m.Cb[cy*m.CStride+cx] = clamp(cb / n)
			m.Cr[cy*m.CStride+cx] = clamp(cr / n)
		}
	}
	return m
}

func clamp(v float64) uint8 {
	return uint8(math.Max(0, math.Min(255, math.Round(v))))
}
