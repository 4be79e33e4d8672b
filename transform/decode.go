package transform

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
)

// image8 is a packed 8-bit RGB image: row y is pix[3wy : 3w(y+1)].
type image8 struct {
	pix  []byte
	w, h int
}

// grow returns b resliced to n bytes when its capacity allows, else a new
// slice: the pipeline's buffers are reused from one image to the next.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}

// DefaultMaxPixels is the default pixel bound: an 8K image of 8192×8192.
const DefaultMaxPixels = 8192 * 8192

type format int

const (
	formatJPEG format = iota + 1
	formatPNG
)

func (f format) String() string {
	if f == formatPNG {
		return "png"
	}
	return "jpeg"
}

// header is what decoding needs to know before touching a pixel.
type header struct {
	format      format
	w, h        int  // as stored
	orientation int  // EXIF orientation to apply, 1 for none
	cmyk        bool // a 4-component JPEG (CMYK or YCCK)
	// What decoding it takes (Footprint): read only for an estimate.
	jpeg jpegFrame
	png  pngInfo
}

// size is the image's size as the operators see it (after orientation).
func (h header) size() (int, int) {
	if swapsAxes(h.orientation) {
		return h.h, h.w
	}
	return h.w, h.h
}

// readHeader sniffs the format, reads the header alone and refuses an
// image whose header claims more than maxPixels pixels, so that a
// "pixel bomb" (a few bytes declaring 65535×65535) costs nothing.
func readHeader(b []byte, maxPixels int64, exif Orientation) (header, error) {
	var h header
	var cfg image.Config
	var err error
	switch {
	case len(b) >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff:
		h.format = formatJPEG
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	case len(b) >= 8 && string(b[:8]) == "\x89PNG\r\n\x1a\n":
		h.format = formatPNG
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	default:
		return h, fmt.Errorf("%w: neither JPEG nor PNG (first bytes %q)", ErrDecode, b[:min(len(b), 8)])
	}
	if err != nil {
		return h, fmt.Errorf("%w: %s header: %w", ErrDecode, h.format, err)
	}
	h.w, h.h = cfg.Width, cfg.Height
	if h.w < 1 || h.h < 1 {
		return h, fmt.Errorf("%w: %s of %d×%d pixels", ErrDecode, h.format, h.w, h.h)
	}
	if int64(h.w)*int64(h.h) > maxPixels {
		return h, fmt.Errorf("%w: %s of %d×%d pixels, more than %d", ErrTooLarge, h.format, h.w, h.h, maxPixels)
	}
	h.cmyk = cfg.ColorModel == color.CMYKModel
	h.orientation = 1
	if exif == ApplyEXIF && h.format == formatJPEG {
		h.orientation = jpegOrientation(b)
	}
	return h, nil
}

// A JPEGDecoder turns a JPEG into packed 8-bit RGB, at a reduced size and
// only in part when asked and able. Decoders differ in pixel values (IDCT)
// within docs/transform.md §6's bound, never in size, so the pipeline's
// geometry is the same whichever decodes.
//
// Implementations must be safe for concurrent use.
type JPEGDecoder interface {
	// Name names the decoder in figures and errors.
	Name() string
	// DecodeJPEG decodes a JPEG whose header h has been read and checked,
	// at 1/denom of its size (denom is 1, 2, 4 or 8; a side of n pixels
	// becomes ceil(n/denom)), into buf's storage when large enough. need
	// is the part of the (scaled) image the caller will read; a decoder
	// may decode only a region containing it, or the whole image. It
	// returns the region and the denominator it applied: 1 when it cannot
	// scale, and the pipeline then resamples from the full size.
	DecodeJPEG(buf, data []byte, h header, denom int, need Rect) (Region, int, error)
	// work bounds what DecodeJPEG holds for the same arguments (h with
	// its frame read): its own memory, and the size of the region of
	// RGB pixels it returns.
	work(h header, denom int, need Rect) (own int64, regionW, regionH int)
}

// Region is part of a decoded image: Image holds its pixels, whose
// top-left pixel is (X, Y) of the whole (scaled) image.
type Region struct {
	Image image8
	X, Y  int
}

// StdJPEG is the pure-Go decoder: image/jpeg, with colour conversion as
// libjpeg's (so that its pixels are close to PIL's), and no reduced-size
// decoding (image/jpeg has none).
type StdJPEG struct{}

// Name implements JPEGDecoder.
func (StdJPEG) Name() string { return "go" }

// DecodeJPEG implements JPEGDecoder.
func (StdJPEG) DecodeJPEG(buf, data []byte, h header, denom int, need Rect) (Region, int, error) {
	if denom != 1 {
		// image/jpeg cannot scale: need is in the scaled image's pixels,
		// and the answer is the full size, which the pipeline resamples
		// from (as with reduced_decode off).
		need = Rect{W: h.w, H: h.h}
	}
	m, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return Region{}, 0, fmt.Errorf("%w: jpeg: %w", ErrDecode, err)
	}
	// The common case, YCbCr, is converted only where needed; the rest
	// of the image was decoded (image/jpeg has no partial decoding) but
	// costs no upsampling or colour conversion.
	if y, ok := m.(*image.YCbCr); ok && need.W > 0 && need.H > 0 && need.inside(h.w, h.h) && y.Rect == image.Rect(0, 0, h.w, h.h) {
		out := image8{w: need.W, h: need.H, pix: grow(buf, need.W*need.H*3)}
		ycbcrToRGB(out, y, need)
		return Region{Image: out, X: need.X, Y: need.Y}, 1, nil
	}
	out, err := toRGB(buf, m, nil)
	return Region{Image: out}, 1, err
}

// decodePNG decodes a PNG with image/png (the only PNG decoder: training
// sets are JPEG, and PNG is here for completeness, not speed).
func decodePNG(buf, data []byte, bg *[3]uint8) (image8, error) {
	m, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return image8{}, fmt.Errorf("%w: png: %w", ErrDecode, err)
	}
	return toRGB(buf, m, bg)
}

// toRGB converts a decoded image to packed RGB:
//   - YCbCr with libjpeg's fixed-point formula and nearest chroma;
//   - gray replicated to the three channels;
//   - CMYK as PIL's convert("RGB"): c' = (255−k) − c(255−k)/255;
//   - 16-bit samples by their high byte, as PIL reads 16-bit colour PNGs;
//   - alpha dropped (the colour as stored, PIL's convert("RGB")), or
//     composited on bg when bg is set:
//     c' = (c·a + bg·(255−a) + 127) / 255 with 8-bit c and a.
func toRGB(buf []byte, m image.Image, bg *[3]uint8) (image8, error) {
	r := m.Bounds()
	w, h := r.Dx(), r.Dy()
	out := image8{w: w, h: h, pix: grow(buf, w*h*3)}
	put := func(i int, cr, cg, cb, a uint8) {
		if bg != nil && a != 255 {
			cr = blend(cr, bg[0], a)
			cg = blend(cg, bg[1], a)
			cb = blend(cb, bg[2], a)
		}
		out.pix[i], out.pix[i+1], out.pix[i+2] = cr, cg, cb
	}
	switch m := m.(type) {
	case *image.YCbCr:
		ycbcrToRGB(out, m, Rect{W: w, H: h})
	case *image.Gray:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			o := out.pix[y*w*3:]
			for x, v := range row {
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		}
	case *image.Gray16:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+2*w]
			o := out.pix[y*w*3:]
			for x := range w {
				v := row[2*x]
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		}
	case *image.CMYK:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			o := out.pix[y*w*3:]
			for x := range w {
				c, mm, yy, k := row[4*x], row[4*x+1], row[4*x+2], row[4*x+3]
				nk := 255 - int(k)
				o[3*x] = uint8(nk - muldiv255(int(c), nk))
				o[3*x+1] = uint8(nk - muldiv255(int(mm), nk))
				o[3*x+2] = uint8(nk - muldiv255(int(yy), nk))
			}
		}
	case *image.Paletted:
		// The palette's own colours: with a tRNS chunk image/png gives
		// non-premultiplied entries, which "drop" must keep as stored.
		pal := make([][4]uint8, len(m.Palette))
		for i, c := range m.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			if nc, ok := c.(color.NRGBA); ok {
				n = nc
			}
			pal[i] = [4]uint8{n.R, n.G, n.B, n.A}
		}
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			for x, ix := range row {
				c := pal[0]
				if int(ix) < len(pal) {
					c = pal[ix]
				}
				put((y*w+x)*3, c[0], c[1], c[2], c[3])
			}
		}
	case *image.RGBA:
		// image/png's opaque true colour and image/jpeg's RGB: stored
		// colour is the colour. A pixel that is not opaque (no decoder
		// here makes one) goes through the colour model as below.
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := range w {
				if a := row[4*x+3]; a != 255 {
					c := color.NRGBA64Model.Convert(m.RGBAAt(r.Min.X+x, r.Min.Y+y)).(color.NRGBA64)
					put((y*w+x)*3, uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8), uint8(c.A>>8))
					continue
				}
				put((y*w+x)*3, row[4*x], row[4*x+1], row[4*x+2], 255)
			}
		}
	case *image.RGBA64:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+8*w]
			for x := range w {
				if row[8*x+6] != 255 || row[8*x+7] != 255 {
					c := color.NRGBA64Model.Convert(m.RGBA64At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA64)
					put((y*w+x)*3, uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8), uint8(c.A>>8))
					continue
				}
				put((y*w+x)*3, row[8*x], row[8*x+2], row[8*x+4], 255)
			}
		}
	case *image.NRGBA:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := range w {
				put((y*w+x)*3, row[4*x], row[4*x+1], row[4*x+2], row[4*x+3])
			}
		}
	case *image.NRGBA64:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+8*w]
			for x := range w {
				put((y*w+x)*3, row[8*x], row[8*x+2], row[8*x+4], row[8*x+6])
			}
		}
	default:
		// Anything else, through the non-premultiplied colour model so
		// that "drop" keeps the stored colour. (It allocates a colour a
		// pixel: the decoders' own image types are above.)
		for y := range h {
			for x := range w {
				c := color.NRGBA64Model.Convert(m.At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA64)
				put((y*w+x)*3, uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8), uint8(c.A>>8))
			}
		}
	}
	return out, nil
}

func blend(c, bg, a uint8) uint8 {
	return uint8((int(c)*int(a) + int(bg)*(255-int(a)) + 127) / 255)
}

// muldiv255 is PIL's MULDIV255: a·b/255 rounded, without a division.
func muldiv255(a, b int) int {
	t := a*b + 128
	return ((t >> 8) + t) >> 8
}

// ycbcrToRGB converts with libjpeg's arithmetic, which PIL's decoder
// uses, rather than image/color's, so that the pure-Go decoder's pixels
// differ from PIL's by image/jpeg's IDCT alone: chroma subsampled 2:1
// horizontally (4:2:2) or both ways (4:2:0) is upsampled by libjpeg's
// "fancy" triangle filter (jdsample.c, h2v1 and h2v2, the default PIL
// keeps), and YCbCr becomes RGB by jdcolor.c's 16-bit fixed point. Other
// subsamplings (rare) take the nearest chroma sample.
//
// Only rows and columns r of the image (whose Rect starts at 0, 0) are
// converted, into out (r.W×r.H); the chroma rows are upsampled whole, so
// the result is exactly that part of the whole conversion.
func ycbcrToRGB(out image8, m *image.YCbCr, r Rect) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	cbRow := make([]byte, w+1)
	crRow := make([]byte, w+1)
	cw := (w + 1) / 2 // downsampled width for 2:1 horizontally
	ch := (h + 1) / 2
	for y := r.Y; y < r.Y+r.H; y++ {
		switch m.SubsampleRatio {
		case image.YCbCrSubsampleRatio420:
			// The nearer chroma row weighs 3, the further 1; rows beyond
			// the edge repeat the edge row, as libjpeg's context rows.
			near := y / 2
			far := near - 1
			if y%2 == 1 {
				far = near + 1
			}
			far = min(max(far, 0), ch-1)
			fancyH2V2(cbRow, m.Cb[near*m.CStride:], m.Cb[far*m.CStride:], cw)
			fancyH2V2(crRow, m.Cr[near*m.CStride:], m.Cr[far*m.CStride:], cw)
		case image.YCbCrSubsampleRatio422:
			fancyH2V1(cbRow, m.Cb[y*m.CStride:], cw)
			fancyH2V1(crRow, m.Cr[y*m.CStride:], cw)
		default:
			for x := r.X; x < r.X+r.W; x++ {
				ci := m.COffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
				cbRow[x], crRow[x] = m.Cb[ci], m.Cr[ci]
			}
		}
		oy := y - r.Y
		yccRow(out.pix[oy*r.W*3:(oy+1)*r.W*3], m.Y[y*m.YStride+r.X:y*m.YStride+r.X+r.W],
			cbRow[r.X:r.X+r.W], crRow[r.X:r.X+r.W])
	}
}

// fancyH2V2 is libjpeg's h2v2_fancy_upsample for one output row: column
// sums 3·near + far, then 3/4 of the nearer sum and 1/4 of the further,
// rounding alternately up (+8) and down (+7). out holds 2n bytes (at least
// the row's width, which may be one less).
func fancyH2V2(out, near, far []byte, n int) {
	if n == 1 {
		v := byte((int(near[0])*3 + int(far[0]) + 2) >> 2)
		out[0], out[1] = v, v
		return
	}
	this := int(near[0])*3 + int(far[0])
	next := int(near[1])*3 + int(far[1])
	out[0] = byte((this*4 + 8) >> 4)
	out[1] = byte((this*3 + next + 7) >> 4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = int(near[i+1])*3 + int(far[i+1])
		out[2*i] = byte((this*3 + last + 8) >> 4)
		out[2*i+1] = byte((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	out[2*n-2] = byte((this*3 + last + 8) >> 4)
	out[2*n-1] = byte((this*4 + 7) >> 4)
}

// fancyH2V1 is libjpeg's h2v1_fancy_upsample: 3/4 nearer, 1/4 further,
// rounding alternately down (+1) and up (+2).
func fancyH2V1(out, in []byte, n int) {
	if n == 1 {
		out[0], out[1] = in[0], in[0]
		return
	}
	out[0] = in[0]
	out[1] = byte((int(in[0])*3 + int(in[1]) + 2) >> 2)
	for i := 1; i < n-1; i++ {
		v := int(in[i]) * 3
		out[2*i] = byte((v + int(in[i-1]) + 1) >> 2)
		out[2*i+1] = byte((v + int(in[i+1]) + 2) >> 2)
	}
	out[2*n-2] = byte((int(in[n-1])*3 + int(in[n-2]) + 1) >> 2)
	out[2*n-1] = in[n-1]
}

// yccRow is jdcolor.c's ycc_rgb_convert for one row.
func yccRow(o, ys, cbs, crs []byte) {
	const (
		half = 1 << 15
		crR  = 91881  // FIX(1.40200)
		cbB  = 116130 // FIX(1.77200)
		crG  = 46802  // FIX(0.71414)
		cbG  = 22554  // FIX(0.34414)
	)
	o = o[:len(ys)*3]
	cbs, crs = cbs[:len(ys)], crs[:len(ys)]
	for x, yv := range ys {
		yy := int(yv)
		cb := int(cbs[x]) - 128
		cr := int(crs[x]) - 128
		o[3*x] = clamp8(yy + (crR*cr+half)>>16)
		o[3*x+1] = clamp8(yy + (-cbG*cb-crG*cr+half)>>16)
		o[3*x+2] = clamp8(yy + (cbB*cb+half)>>16)
	}
}

func clamp8(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// Dims returns an image's width and height as its header claims them,
// stored pixels (EXIF ignored), with no pixel decoded: what a caller that
// sizes its output by the image (package vision's dynamic resolution)
// knows before Apply. It refuses what Apply refuses from the header
// alone: not a JPEG or PNG, a header that does not decode (ErrDecode),
// more pixels than maxPixels (ErrTooLarge; 0 is DefaultMaxPixels).
func Dims(image []byte, maxPixels int64) (w, h int, err error) {
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
	}
	hdr, err := readHeader(image, maxPixels, IgnoreEXIF)
	if err != nil {
		return 0, 0, err
	}
	return hdr.w, hdr.h, nil
}

// DisplayedDims is Dims with a JPEG's EXIF orientation applied: the
// size a viewer shows, and PIL's ImageOps.exif_transpose gives (an
// orientation of 5 to 8 swaps width and height; a PNG has none). It reads
// the header alone, and the markers before the first scan for the
// orientation, so a prefix of the image holding its frame header and its
// APP segments gives the image's answer. The pixel bound is on the stored
// pixels, as Dims's (the same product either way).
func DisplayedDims(image []byte, maxPixels int64) (w, h int, err error) {
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
	}
	hdr, err := readHeader(image, maxPixels, ApplyEXIF)
	if err != nil {
		return 0, 0, err
	}
	w, h = hdr.size()
	return w, h, nil
}
