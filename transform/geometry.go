package transform

import (
	"fmt"

	"github.com/brandgw/brand/internal/codec/npy"
)

// Geometry is a pipeline's geometry drawn once for one key on images of
// one size: its crop boxes, output size and flips, applied identically to
// every image given to Apply. A clip of video frames is transformed
// through one Geometry, so that each of its frames is cropped, resized and
// flipped alike, with the draws an image of the same size and key would
// get (docs/transform.md §4–§5, and package video).
//
// A Geometry is immutable and safe for concurrent use; Apply's buffers
// live in the Scratch passed to it.
type Geometry struct {
	pl   plan
	w, h int
}

// Geometry draws the pipeline's geometry for key on w×h images. Sizes
// over the pipeline's pixel bound are ErrTooLarge. The pipeline's EXIF,
// background and reduced-decode settings are about decoding images and
// play no part.
func (p *Pipeline) Geometry(w, h int, key Key) (*Geometry, error) {
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("pipeline %q: %w: a %d×%d image", p.name, ErrDecode, w, h)
	}
	if int64(w)*int64(h) > p.opt.MaxPixels {
		return nil, fmt.Errorf("pipeline %q: %w: %d×%d is over %d pixels", p.name, ErrTooLarge, w, h, p.opt.MaxPixels)
	}
	return &Geometry{pl: p.makePlan(w, h, key), w: w, h: h}, nil
}

// Size is the output's width and height.
func (g *Geometry) Size() (w, h int) { return g.pl.outW, g.pl.outH }

// GeometryDraws are a geometry's random choices, in operator order: each
// random_resized_crop's or random_crop's box on its input and each
// hflip's choice.
type GeometryDraws struct {
	Crops []Rect `json:"crops"`
	Flips []bool `json:"flips"`
}

// Draws returns the geometry's random choices (for golden vectors).
func (g *Geometry) Draws() GeometryDraws {
	d := GeometryDraws{Flips: g.pl.flips}
	for _, c := range g.pl.crops {
		d.Crops = append(d.Crops, c.Box)
	}
	return d
}

// Apply transforms one image of the geometry's size, given as packed RGB
// rows (w*3 bytes each, no padding), and returns the output's packed RGB
// rows: Pillow's bilinear resampling and the flips, exactly as Pipeline.Apply
// computes them on a decoded image. The result lives in sc (or is rgb
// itself when the geometry changes nothing) and is valid until sc's next
// use; rgb is never written. Apply does not trim sc, so a worker
// transforming the frames of a clip reuses its buffers whatever their
// size.
func (g *Geometry) Apply(sc *Scratch, rgb []byte) ([]byte, error) {
	if len(rgb) != g.w*g.h*3 {
		return nil, fmt.Errorf("%w: %d bytes for a %d×%d RGB image", ErrDecode, len(rgb), g.w, g.h)
	}
	img := image8{pix: rgb, w: g.w, h: g.h}
	owned := false
	own := func() {
		if !owned {
			c := image8{pix: grow(sc.ping, len(img.pix)), w: img.w, h: img.h}
			copy(c.pix, img.pix)
			sc.ping, sc.pong = sc.pong, c.pix
			img, owned = c, true
		}
	}
	for _, st := range g.pl.steps {
		if st.flip {
			own()
			mirror(img)
			continue
		}
		job, in, padded := stepJob(st, 1, img.w, img.h)
		src := img
		if padded {
			src = padCrop(sc.view, img, st.src)
			sc.view = src.pix
		} else {
			job.dx, job.dy = in.X, in.Y
		}
		var out image8
		out, sc.tmp = resample(sc.ping, sc.tmp, src, job)
		sc.ping, sc.pong = sc.pong, out.pix
		img, owned = out, true
	}
	if g.pl.mirror {
		own()
		mirror(img)
	}
	return img.pix, nil
}

// Work bounds the bytes Apply's Scratch holds for this geometry: two
// step outputs (or the copy a flip makes), a horizontal pass and a
// padded crop's input.
func (g *Geometry) Work() int64 {
	var out, tmp, view int64
	w, h := int64(g.w), int64(g.h)
	out = w * h * 3 // a flip's copy of the input
	for _, st := range g.pl.steps {
		if st.flip {
			continue
		}
		out = max(out, int64(st.win.W)*int64(st.win.H)*3)
		tmp = max(tmp, int64(st.src.H+2)*int64(st.win.W)*3)
		view = max(view, int64(st.src.W)*int64(st.src.H)*3)
	}
	return 2*out + tmp + view
}

// NPYHeader is the .npy (format 1.0) header of a C-order uint8 array of
// the given shape (internal/codec/npy's, as numpy.save writes it), for
// the tensors of other packages (video clips). numpy pads its header so
// that the data starts at a multiple of 64 bytes, and a tar member starts
// at a multiple of 512, so a tensor's bytes are 64-byte aligned in a
// batch read whole into an aligned buffer (what numpy.frombuffer and
// torch.from_numpy view without copying).
func NPYHeader(shape ...int) []byte {
	return appendNPYHeader(nil, shape...)
}

// appendNPYHeader appends NPYHeader(shape...) to dst.
func appendNPYHeader(dst []byte, shape ...int) []byte {
	var dims [8]int64
	s := dims[:0]
	for _, d := range shape {
		s = append(s, int64(d))
	}
	// Only a header over 64 KiB fails, thousands of dimensions: a
	// tensor has three or four.
	dst, err := npy.AppendHeader(dst, "|u1", s)
	if err != nil {
		panic(fmt.Sprintf("transform: a tensor of shape %v: %v", shape, err))
	}
	return dst
}
