package transform

import "math"

// Resampling is PIL's: Image.resize(size, BILINEAR) as Pillow's
// Resample.c computes it for 8-bit images, which is what torchvision's
// Resize and RandomResizedCrop call on PIL images. It is a separable
// triangle filter whose support widens with the downscaling factor (so
// downscaling averages every source pixel under the output pixel: the
// antialiasing), with coefficients computed in doubles, normalised, then
// rounded to 22-bit fixed point, a horizontal pass over the rows the
// vertical pass needs, then the vertical pass, each rounding to 8 bits.
// Given the same source pixels the output is bit for bit Pillow's
// (TestResamplePIL); the algorithm is reproduced, not approximated.
//
// One generalisation: an output window. The value of each output pixel
// depends only on its own coefficients, so computing columns [x0, x1) and
// rows [y0, y1) of a resize alone gives exactly those pixels of the full
// resize. Resize(256) followed by CenterCrop(224) computes the 224×224
// window and never the rest.

// precisionBits is Pillow's PRECISION_BITS for 8-bit images.
const precisionBits = 32 - 8 - 2

// coeffs are one axis's filter: output i (of the window) reads source
// indices [start[i], start[i]+n[i]) with weights k[i*ksize:].
type coeffs struct {
	start, n []int
	k        []int32
	ksize    int
}

// precompute is Pillow's precompute_coeffs and normalize_coeffs_8bpc for
// outputs [first, first+count) of a resize of the source interval [in0,
// in1) (in source pixels; inSize pixels exist) to outSize pixels.
func precompute(inSize int, in0, in1 float64, outSize, first, count int) coeffs {
	scale := (in1 - in0) / float64(outSize)
	filterscale := max(scale, 1.0)
	support := 1.0 * filterscale // the bilinear filter's support is 1
	ksize := int(math.Ceil(support))*2 + 1
	c := coeffs{start: make([]int, count), n: make([]int, count), k: make([]int32, count*ksize), ksize: ksize}
	w := make([]float64, ksize)
	for i := range count {
		xx := first + i
		center := in0 + (float64(xx)+0.5)*scale
		ss := 1.0 / filterscale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), inSize) - xmin
		ww := 0.0
		for x := range xmax {
			t := math.Abs((float64(x+xmin) - center + 0.5) * ss)
			v := 0.0
			if t < 1 {
				v = 1 - t
			}
			w[x] = v
			ww += v
		}
		k := c.k[i*ksize : (i+1)*ksize]
		for x := range xmax {
			v := w[x]
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				k[x] = int32(-0.5 + v*(1<<precisionBits))
			} else {
				k[x] = int32(0.5 + v*(1<<precisionBits))
			}
		}
		c.start[i], c.n[i] = xmin, max(xmax, 0)
	}
	return c
}

// clip8 is Pillow's clip8: the fixed-point sum to a byte, saturating.
func clip8(v int32) uint8 {
	v >>= precisionBits
	if uint32(v) <= 255 { // the usual case, one comparison
		return uint8(v)
	}
	if v < 0 {
		return 0
	}
	return 255
}

// resampleJob describes one resize. Its input is a box of inW×inH pixels
// (Pillow's whole input image: filters clamp at its edges), whose pixel
// (0, 0) is pixel (dx, dy) of the src image passed to resample: src may be
// a larger image holding the box (no crop is copied) or only the part of
// it the window's filters read (a partly decoded image). The box
// [x0, x1)×[y0, y1) of the input (fractional after a reduced-size decode)
// is resized to outW×outH, of which window win is computed.
type resampleJob struct {
	inW, inH       int
	dx, dy         int
	x0, y0, x1, y1 float64
	outW, outH     int
	win            Rect
}

// needH and needV are Pillow's tests for whether an axis is resampled at
// all (an identity pass is skipped).
func (j resampleJob) needH() bool {
	return j.outW != j.inW || j.x0 != 0 || j.x1 != float64(j.outW)
}

func (j resampleJob) needV() bool {
	return j.outH != j.inH || j.y0 != 0 || j.y1 != float64(j.outH)
}

// reads returns the input pixels the window's filters read, in input
// coordinates: what a partial decode must provide.
func (j resampleJob) reads() Rect {
	r := j.win
	if j.needH() {
		first := precompute(j.inW, j.x0, j.x1, j.outW, j.win.X, 1)
		last := precompute(j.inW, j.x0, j.x1, j.outW, j.win.X+j.win.W-1, 1)
		r.X, r.W = first.start[0], last.start[0]+last.n[0]-first.start[0]
	}
	if j.needV() {
		first := precompute(j.inH, j.y0, j.y1, j.outH, j.win.Y, 1)
		last := precompute(j.inH, j.y0, j.y1, j.outH, j.win.Y+j.win.H-1, 1)
		r.Y, r.H = first.start[0], last.start[0]+last.n[0]-first.start[0]
	}
	return r
}

// resample computes job on src into dst's storage (grown as needed),
// using tmp for the horizontal pass. It returns the window's pixels. src
// must hold every input pixel job.reads() names.
func resample(dst, tmp []byte, src image8, job resampleJob) (image8, []byte) {
	win := job.win
	needH, needV := job.needH(), job.needV()
	out := image8{w: win.W, h: win.H, pix: grow(dst, win.W*win.H*3)}

	// The vertical filter decides which input rows the horizontal pass
	// must produce.
	var cv coeffs
	rowFirst, rowLast := win.Y, win.Y+win.H
	if needV {
		cv = precompute(job.inH, job.y0, job.y1, job.outH, win.Y, win.H)
		rowFirst = cv.start[0]
		rowLast = cv.start[win.H-1] + cv.n[win.H-1]
	}

	// mid holds input rows from midFirst on, columns from midCol on.
	mid, midFirst, midCol := src, -job.dy, job.dx+win.X
	if needH {
		ch := precompute(job.inW, job.x0, job.x1, job.outW, win.X, win.W)
		rows := rowLast - rowFirst
		tmp = grow(tmp, rows*win.W*3)
		mid = image8{pix: tmp, w: win.W, h: rows}
		horizontal(mid, src, rowFirst+job.dy, job.dx, ch)
		midFirst, midCol = rowFirst, 0
	}
	if !needV {
		// The window's rows, as they are.
		for y := range win.H {
			s := ((win.Y+y-midFirst)*mid.w + midCol) * 3
			copy(out.pix[y*win.W*3:(y+1)*win.W*3], mid.pix[s:s+win.W*3])
		}
		return out, tmp
	}
	for i := range cv.start {
		cv.start[i] -= midFirst
	}
	vertical(out, mid, midCol, cv, make([]int32, win.W*3))
	return out, tmp
}

// horizontal is Pillow's ImagingResampleHorizontal_8bpc for 3 bands over
// src rows [first, first+dst.h), the filters' column 0 being src column
// col. (The loops walk slices forward so that the compiler drops their
// bounds checks.)
func horizontal(dst, src image8, first, col int, c coeffs) {
	const half = int32(1 << (precisionBits - 1))
	ks := c.ksize
	w3 := src.w * 3
	for y := range dst.h {
		in := src.pix[(first+y)*w3 : (first+y+1)*w3]
		o := dst.pix[y*dst.w*3 : (y+1)*dst.w*3]
		for x := range dst.w {
			n := c.n[x]
			k := c.k[x*ks : x*ks+n]
			p := in[(col+c.start[x])*3 : (col+c.start[x]+n)*3]
			// Red and blue share a 64-bit sum, a 32-bit lane each: the
			// triangle filter's weights are never negative and sum to
			// 2^22, so a lane never exceeds 255·2^22 + 2^21 < 2^31 and
			// never carries into the other. Same sums, fewer multiplies.
			rb := uint64(half) | uint64(half)<<32
			g := half
			for len(k) >= 2 && len(p) >= 6 {
				k0, k1 := k[0], k[1]
				rb += (uint64(p[0])|uint64(p[2])<<32)*uint64(k0) + (uint64(p[3])|uint64(p[5])<<32)*uint64(k1)
				g += int32(p[1])*k0 + int32(p[4])*k1
				k, p = k[2:], p[6:]
			}
			for len(k) > 0 && len(p) >= 3 {
				kv := k[0]
				rb += (uint64(p[0]) | uint64(p[2])<<32) * uint64(kv)
				g += int32(p[1]) * kv
				k, p = k[1:], p[3:]
			}
			s0, s1, s2 := int32(uint32(rb)), g, int32(rb>>32)
			q := o[x*3 : x*3+3]
			q[0], q[1], q[2] = clip8(s0), clip8(s1), clip8(s2)
		}
	}
}

// vertical is Pillow's ImagingResampleVertical_8bpc for 3 bands, over src
// columns from col on, summed a source row at a time into acc (same sums,
// same order per pixel, so the same result) to read memory in order.
func vertical(dst, src image8, col int, c coeffs, acc []int32) {
	const half = int32(1 << (precisionBits - 1))
	ks := c.ksize
	stride := src.w * 3
	n := dst.w * 3
	acc = acc[:n]
	for y := range dst.h {
		for i := range acc {
			acc[i] = half
		}
		for i, kv := range c.k[y*ks : y*ks+c.n[y]] {
			row := src.pix[(c.start[y]+i)*stride+col*3:]
			row = row[:len(acc)]
			for x, v := range row {
				acc[x] += int32(v) * kv
			}
		}
		o := dst.pix[y*n : (y+1)*n]
		o = o[:len(acc)]
		for x, a := range acc {
			o[x] = clip8(a)
		}
	}
}
