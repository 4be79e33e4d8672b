package transform

import (
	"fmt"
	"runtime"
	"strconv"
	"time"
)

// GPUGeometry is where a pipeline's crop lies in one JPEG when the
// trainer's GPU decodes the image and finishes it: the box and flip
// Apply would use (the same plan, so the same draws) and the region of
// the JPEG cut for the GPU. Only pipelines that crop a box, resize it and
// perhaps flip the result — imagenet-train's shape: random_resized_crop
// then hflip; a random_crop, a center_crop or a resize alone — have one.
type GPUGeometry struct {
	// Source is the image's width and height.
	Source [2]int
	// Box is the crop box on the source image, resized to Out: the one
	// Apply resamples (the whole image when the pipeline does not crop).
	Box Rect
	// Flip mirrors the resized box left to right.
	Flip bool
	// Out is the output's width and height.
	Out [2]int
	// Cut is the region of the source cut for the GPU: the smallest one
	// holding Box whose top-left corner lies on an iMCU boundary (its
	// right and bottom edges are Box's).
	Cut Rect
}

// GPUGeometry returns the geometry of image (a JPEG's bytes) for key
// when the GPU finishes it. It reads the JPEG's header alone. An image
// the pipeline does not cut — a PNG, a pipeline of another shape, an
// image Apply would turn by its EXIF orientation — is refused with an
// error for which NotCut is true.
func (p *Pipeline) GPUGeometry(image []byte, key Key) (GPUGeometry, error) {
	g, err := p.gpuGeometry(image, key)
	if err != nil {
		return g, fmt.Errorf("pipeline %q: %w", p.name, err)
	}
	return g, nil
}

func (p *Pipeline) gpuGeometry(image []byte, key Key) (GPUGeometry, error) {
	if err := cuttable(image); err != nil {
		return GPUGeometry{}, err
	}
	hdr, err := readHeader(image, p.opt.MaxPixels, p.spec.EXIF)
	if err != nil {
		return GPUGeometry{}, err
	}
	if hdr.orientation != 1 {
		return GPUGeometry{}, fmt.Errorf("%w: the pipeline applies the image's EXIF orientation %d", errNotCut, hdr.orientation)
	}
	f := readJPEGFrame(image)
	if !f.known {
		return GPUGeometry{}, fmt.Errorf("%w: jpeg: no frame header before the first scan", ErrDecode)
	}
	mw, mh := iMCU(f.comps)
	return p.cutGeometry(hdr.w, hdr.h, mw, mh, key)
}

// iMCU is the width and height of a JPEG's interleaved MCU, in pixels:
// 8 times the largest sampling factor each way, and one block for a
// single component (coded block by block whatever factors it declares).
func iMCU(comps []jpegComponent) (int, int) {
	if len(comps) == 1 {
		return 8, 8
	}
	mh, mv := 1, 1
	for _, c := range comps {
		mh, mv = max(mh, c.h), max(mv, c.v)
	}
	return 8 * mh, 8 * mv
}

// cutGeometry is GPUGeometry for a w×h image of mw×mh iMCUs.
func (p *Pipeline) cutGeometry(w, h, mw, mh int, key Key) (GPUGeometry, error) {
	pl := p.makePlan(w, h, key)
	g := GPUGeometry{Source: [2]int{w, h}, Box: Rect{W: w, H: h}, Flip: pl.mirror, Out: [2]int{pl.outW, pl.outH}}
	switch {
	case len(pl.steps) == 0:
	case len(pl.steps) == 1 && !pl.steps[0].flip && pl.steps[0].src.inside(w, h) && pl.steps[0].win == (Rect{W: pl.outW, H: pl.outH}):
		g.Box = pl.steps[0].src
	default:
		// A flip before a crop, a crop larger than the image (padded), a
		// crop after a resize or two resizes: the GPU would need more than
		// one box and one size.
		return g, fmt.Errorf("%w: the pipeline is not one crop, one resize and a flip", errNotCut)
	}
	g.Cut = cutRegion(g.Box, mw, mh)
	return g, nil
}

// cutRegion is the smallest region holding box whose top-left corner is
// a multiple of mw×mh.
func cutRegion(box Rect, mw, mh int) Rect {
	x0, y0 := box.X-box.X%mw, box.Y-box.Y%mh
	return Rect{X: x0, Y: y0, W: box.X + box.W - x0, H: box.Y + box.H - y0}
}

// GPUCrop is what the data node sends for one image when the trainer's
// GPU decodes and finishes it: a smaller JPEG and what is left to do —
// crop Crop from the decoded JPEG, resize it to Out (bilinear,
// antialiased), mirror it when Flip.
type GPUCrop struct {
	// JPEG is dst with the cut JPEG appended (CropJPEG's).
	JPEG []byte
	// Crop is the box in the cut image's pixels: Box moved by the cut's
	// corner.
	Crop Rect
	Flip bool
	Out  [2]int
	// Geometry is the image's GPUGeometry, for figures and tests.
	Geometry GPUGeometry
	// CPU is the thread CPU time the call took, as Result.CPU.
	CPU time.Duration
}

// GPUCrop cuts image (a JPEG's bytes) for key losslessly to its
// GPUGeometry's Cut region and appends the cut JPEG to dst (a caller may
// pool it). Like Apply it is a pure function of the pipeline, the bytes
// and the key: the box and flip are Apply's. An image or pipeline it
// does not cut (NotCut, including every image in a build without the
// brand_turbojpeg tag) is for Apply; a malformed image is ErrDecode or
// ErrTooLarge, as in Apply. On error dst is returned in GPUCrop.JPEG.
func (p *Pipeline) GPUCrop(dst, image []byte, key Key) (GPUCrop, error) {
	cpu := startCPU()
	defer runtime.UnlockOSThread()
	c, err := p.gpuCrop(dst, image, key)
	c.CPU = cpu.stop()
	if err != nil {
		c.JPEG = dst
		return c, fmt.Errorf("pipeline %q: %w", p.name, err)
	}
	return c, nil
}

func (p *Pipeline) gpuCrop(dst, image []byte, key Key) (GPUCrop, error) {
	g, err := p.gpuGeometry(image, key)
	if err != nil {
		return GPUCrop{}, err
	}
	out, ox, oy, err := cutJPEG(dst, image, g.Box.X, g.Box.Y, g.Box.W, g.Box.H, false)
	if err != nil {
		return GPUCrop{}, err
	}
	// libjpeg chose the region from the frame it read; the geometry from
	// the header the Go side read. They agree, or the image is odd.
	crop := Rect{X: ox, Y: oy, W: g.Box.W, H: g.Box.H}
	if g.Box.X-ox != g.Cut.X || g.Box.Y-oy != g.Cut.Y {
		return GPUCrop{}, fmt.Errorf("%w: libjpeg cut at (%d, %d), the header's iMCUs at (%d, %d)", ErrDecode, g.Box.X-ox, g.Box.Y-oy, g.Cut.X, g.Cut.Y)
	}
	return GPUCrop{JPEG: out, Crop: crop, Flip: g.Flip, Out: g.Out, Geometry: g}, nil
}

// AppendBox appends what is left to do, the member CutNames names
// "….cut.json", to dst: one JSON object of three fields, in this order,
//
//	{"box":[x,y,w,h],"flip":false,"size":[H,W]}
//
// box is Crop (pixels of the decoded cut JPEG: left, top, width,
// height), flip whether to mirror the resized box left to right, size
// the output's height and width (torchvision's order). At most 80 bytes.
func (c GPUCrop) AppendBox(dst []byte) []byte {
	dst = append(dst, `{"box":[`...)
	for i, v := range [4]int{c.Crop.X, c.Crop.Y, c.Crop.W, c.Crop.H} {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(v), 10)
	}
	dst = append(dst, `],"flip":`...)
	dst = strconv.AppendBool(dst, c.Flip)
	dst = append(dst, `,"size":[`...)
	dst = strconv.AppendInt(dst, int64(c.Out[1]), 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(c.Out[0]), 10)
	return append(dst, "]}"...)
}
