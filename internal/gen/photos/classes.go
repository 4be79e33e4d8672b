package photos

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sync/errgroup"
)

// ClassTree is a class-folder tree of photos sized and weighted like
// ImageNet's training set, each of which carries its class in its colour,
// for a benchmark that trains a model on it (`brand-bench train`) and
// must check, on every step and whatever crop, resize and flip the
// images went through, that each image arrived with its own label.
//
// # Sizes
//
// With Side zero a photo's size is drawn as ImageNet's are spread: four
// in five have a long side of 500 pixels and a short side of 375 or 333
// (or another between 281 and 499), most landscape; about one in six is
// smaller (a long side of 150 to 499); and one in thirty is large, its
// long side drawn log-uniformly up to 2,000 pixels: the long tail that
// makes ImageNet's mean file (about 110 KB) weigh more than its typical
// one. Qualities run from 85 to 95. A smoke run sets Side, and each side
// is drawn between Side/2 and Side instead.
//
// # The class in the colour
//
// The luminance plane carries the picture (a smooth field, shaded
// objects with hard edges, fine texture and sensor noise, as the package
// doc says); the chroma planes carry the class: a constant (Cb, Cr)
// offset from grey, ClassChroma, under a faint zero-mean texture. Any
// crop of the image, resized, flipped and decoded by any JPEG decoder,
// has a mean chroma within a level or so of its class's, so the class is
// read back from the pixels a model sees (python/bench/train.py's
// class_of). Luminance is kept between 70 and 185 so that no colour of
// the image clips when decoded to RGB.
type ClassTree struct {
	Samples int
	Classes int // class folders; 0 means 100
	Side    int // 0: ImageNet's sizes; else each side drawn in [Side/2, Side]
	Seed    uint64
}

// chromaSpan is the (Cb, Cr) square the classes' colours tile, in levels
// either side of grey: small enough that no colour clips with luminance
// in [yMin, yMax] (1.772 × (chromaSpan + chromaTexture) + yMax ≤ 255).
const (
	chromaSpan    = 30.0
	chromaTexture = 4.0
	yMin, yMax    = 70.0, 185.0
)

func (tr ClassTree) classes() int {
	if tr.Classes <= 0 {
		return 100
	}
	return tr.Classes
}

// Key is sample i's key: its class folder and name.
func (tr ClassTree) Key(i int) string {
	return fmt.Sprintf("n%08d/img_%08d", tr.Class(i), i)
}

// Class is sample i's class.
func (tr ClassTree) Class(i int) int { return i % tr.classes() }

// ClassChroma is the (Cb, Cr) offset from grey (128) that the photos of
// class c of n are coloured with: the classes tile a grid of ⌈√n⌉ × ⌈√n⌉
// cells over [-chromaSpan, chromaSpan]², class c at row c / ⌈√n⌉ (Cb),
// column c mod ⌈√n⌉ (Cr), each at its cell's centre. The cells are 60 / ⌈√n⌉
// levels wide: 6 at 100 classes, 1.9 at 1,000 (where a decoder's
// rounding starts to matter; the benchmark's default is 100).
func ClassChroma(c, n int) (cb, cr float64) {
	g := gridSide(n)
	step := 2 * chromaSpan / float64(g)
	return -chromaSpan + (float64(c/g)+0.5)*step, -chromaSpan + (float64(c%g)+0.5)*step
}

func gridSide(n int) int { return int(math.Ceil(math.Sqrt(float64(max(n, 1))))) }

// Photo returns sample i's JPEG; the same tree and i always give the same
// bytes.
func (tr ClassTree) Photo(i int) (Photo, error) {
	if tr.Side != 0 && tr.Side < minSide {
		return Photo{}, fmt.Errorf("photos: Side %d is below %d pixels", tr.Side, minSide)
	}
	r := rand.New(rand.NewPCG(tr.Seed, uint64(i)))
	var w, h int
	if tr.Side != 0 {
		w, h = tr.Side/2+r.IntN(tr.Side-tr.Side/2+1), tr.Side/2+r.IntN(tr.Side-tr.Side/2+1)
	} else {
		w, h = imagenetSize(r)
	}
	q := 85 + r.IntN(11)
	cb, cr := ClassChroma(tr.Class(i), tr.classes())
	m := renderClass(r, w, h, cb, cr)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
		return Photo{}, fmt.Errorf("photos: encoding photo %d: %w", i, err)
	}
	return Photo{Name: fmt.Sprintf("img_%08d.jpg", i), JPEG: b.Bytes(), W: w, H: h, Quality: q}, nil
}

// imagenetSize draws a width and height as ImageNet's training images
// are spread (the type's doc).
func imagenetSize(r *rand.Rand) (w, h int) {
	var long, short int
	switch u := r.Float64(); {
	case u < 0.80:
		long = 500
		switch v := r.Float64(); {
		case v < 0.50:
			short = 375
		case v < 0.85:
			short = 333
		default:
			short = 281 + r.IntN(219)
		}
	case u < 0.967:
		long = 150 + r.IntN(350)
		short = long * 3 / 4
	default:
		long = int(math.Round(math.Exp(math.Log(501) + r.Float64()*(math.Log(2000)-math.Log(501)))))
		short = int(float64(long) * (0.6 + 0.2*r.Float64()))
	}
	if r.Float64() < 0.25 {
		return short, long
	}
	return long, short
}

// Texture and noise of the luminance, chosen so that ImageNet-sized
// photos weigh about 110 KB on average (TestClassTreeSizes bounds it).
const (
	classTextureAmp = 55.0
	classNoiseAmp   = 29.0
)

// renderClass draws the luminance as render does, within [yMin, yMax],
// and the chroma as the class's (cb, cr) under a faint value-noise
// texture.
func renderClass(r *rand.Rand, w, h int, cb, cr float64) *image.YCbCr {
	const g = 5
	var grid [g][g]float64
	for y := range g {
		for x := range g {
			grid[y][x] = 95 + 65*r.Float64()
		}
	}
	type blob struct{ cx, cy, rx, ry, shade, lum float64 }
	blobs := make([]blob, 3+r.IntN(5))
	for i := range blobs {
		blobs[i] = blob{cx: r.Float64() * float64(w), cy: r.Float64() * float64(h),
			rx: 8 + r.Float64()*float64(w)/3, ry: 8 + r.Float64()*float64(h)/3, shade: 0.2 + r.Float64()*0.5,
			lum: 90 + 80*r.Float64()}
	}
	const cell = 3
	texture := valueNoise(r, w, h, cell)
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	for y := range h {
		gy := float64(y) / float64(max(h-1, 1)) * (g - 1)
		y0 := min(int(gy), g-2)
		fy := gy - float64(y0)
		for x := range w {
			gx := float64(x) / float64(max(w-1, 1)) * (g - 1)
			x0 := min(int(gx), g-2)
			fx := gx - float64(x0)
			top := grid[y0][x0]*(1-fx) + grid[y0][x0+1]*fx
			bot := grid[y0+1][x0]*(1-fx) + grid[y0+1][x0+1]*fx
			v := top*(1-fy) + bot*fy
			for _, b := range blobs {
				dx, dy := (float64(x)-b.cx)/b.rx, (float64(y)-b.cy)/b.ry
				if d := dx*dx + dy*dy; d < 1 {
					v = b.lum * (1 - b.shade*d)
				}
			}
			v += classTextureAmp*texture(x, y) + classNoiseAmp*(r.Float64()*2-1)
			m.Y[y*m.YStride+x] = clamp(math.Max(yMin, math.Min(yMax, v)))
		}
	}
	cw, ch := (w+1)/2, (h+1)/2
	tb, tr := valueNoise(r, cw, ch, cell), valueNoise(r, cw, ch, cell)
	for y := range ch {
		for x := range cw {
			m.Cb[y*m.CStride+x] = clamp(128 + cb + chromaTexture*tb(x, y))
			m.Cr[y*m.CStride+x] = clamp(128 + cr + chromaTexture*tr(x, y))
		}
	}
	return m
}

// valueNoise is value noise in [-1, 1] over a w×h plane: uniform values on
// a lattice cell pixels apart, bilinearly interpolated.
func valueNoise(r *rand.Rand, w, h, cell int) func(x, y int) float64 {
	lw, lh := w/cell+2, h/cell+2
	lattice := make([]float64, lw*lh)
	for i := range lattice {
		lattice[i] = r.Float64()*2 - 1
	}
	return func(x, y int) float64 {
		lx, ly := x/cell, y/cell
		tx, ty := float64(x%cell)/float64(cell), float64(y%cell)/float64(cell)
		return (lattice[ly*lw+lx]*(1-tx)+lattice[ly*lw+lx+1]*tx)*(1-ty) +
			(lattice[(ly+1)*lw+lx]*(1-tx)+lattice[(ly+1)*lw+lx+1]*tx)*ty
	}
}

// Write writes the tree under dir (dir/n00000003/img_00000013.jpg and a
// .cls label beside it, as Tree does), making the photos on as many
// goroutines as the process has processors, and returns the JPEGs'
// total size.
func (tr ClassTree) Write(ctx context.Context, dir string) (int64, error) {
	if tr.Samples <= 0 {
		return 0, fmt.Errorf("photos: need a positive number of samples, got %d", tr.Samples)
	}
	for c := range min(tr.classes(), tr.Samples) {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("n%08d", c)), 0o755); err != nil {
			return 0, fmt.Errorf("photos: %w", err)
		}
	}
	sizes := make([]int64, tr.Samples)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range tr.Samples {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			p, err := tr.Photo(i)
			if err != nil {
				return err
			}
			sizes[i] = int64(len(p.JPEG))
			base := filepath.Join(dir, filepath.FromSlash(tr.Key(i)))
			if err := os.WriteFile(base+".jpg", p.JPEG, 0o644); err != nil {
				return fmt.Errorf("photos: %w", err)
			}
			if err := os.WriteFile(base+".cls", []byte(strconv.Itoa(tr.Class(i))), 0o644); err != nil {
				return fmt.Errorf("photos: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	return total, ctx.Err()
}
