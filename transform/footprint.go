package transform

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/brandgw/brand/internal/codec/npy"
)

// Footprint is what applying a pipeline to one image takes, known from
// the image's header and the draws before any pixel is decoded, so that
// a server can reserve both before it decodes.
type Footprint struct {
	// Out is the length of the .npy member Apply appends (Size).
	Out int
	// Work bounds the memory Apply holds while it runs beyond its
	// output: the decoder's own (a progressive JPEG's coefficients, the
	// planes image/jpeg and image/png decode into), the decoded RGB
	// pixels, an EXIF-oriented copy and each resampling step's buffers.
	// It is an upper bound of what was measured for every kind of image
	// (docs/transform.md §10, TestWorkBound): it counts the buffers a
	// worker's Scratch may already hold, and never the garbage the
	// collector takes back during the call.
	Work int64
}

// Footprint returns what Apply takes for image and key: Size's output and
// the working memory Work. An image whose header Apply refuses is refused
// here with the same error.
func (p *Pipeline) Footprint(image []byte, key Key) (Footprint, error) {
	hdr, err := readHeader(image, p.opt.MaxPixels, p.spec.EXIF)
	if err != nil {
		return Footprint{}, fmt.Errorf("pipeline %q: %w", p.name, err)
	}
	if hdr.format == formatJPEG {
		hdr.jpeg = readJPEGFrame(image)
	} else {
		hdr.png = readPNGInfo(image)
	}
	w, h := hdr.size()
	pl := p.makePlan(w, h, key)
	return Footprint{Out: npy.HeaderLen("|u1", []int64{3, int64(pl.outH), int64(pl.outW)}) + 3*pl.outW*pl.outH, Work: p.work(hdr, pl)}, nil
}

// MaxWork is the most working memory (Footprint.Work) one image within
// the pixel bound can take with any of the set's pipelines: the largest
// of every kind of image a decoder takes — progressive JPEGs of every
// sampling, CMYK and RGB ones, 16-bit interlaced PNGs with alpha — at
// the bound's size, square and at 4:3 and 16:9 either way, turned by
// EXIF where a pipeline applies it. A server admits decodes against at
// least this much, so that no image within its pixel bound is too large
// for its budget.
func (s *Set) MaxWork() int64 {
	var most int64
	for _, p := range s.byName {
		for _, shape := range [][2]float64{{1, 1}, {4, 3}, {3, 4}, {16, 9}, {9, 16}} {
			// w×h of shape's aspect within the bound.
			h := int(math.Sqrt(float64(p.opt.MaxPixels) * shape[1] / shape[0]))
			w := int(float64(p.opt.MaxPixels) / float64(max(h, 1)))
			if w < 1 || h < 1 {
				continue
			}
			for _, hdr := range worstHeaders(w, h) {
				if p.spec.EXIF == ApplyEXIF && hdr.format == formatJPEG {
					hdr.orientation = 6 // a turned copy beside the decoded one
				}
				ow, oh := hdr.size()
				most = max(most, p.work(hdr, p.makePlan(ow, oh, Key{})))
			}
		}
	}
	return most
}

// worstHeaders are the headers of w×h images that cost the decoders most.
func worstHeaders(w, h int) []header {
	one := []jpegComponent{{1, 1}}
	three := []jpegComponent{{1, 1}, {1, 1}, {1, 1}}
	four := []jpegComponent{{1, 1}, {1, 1}, {1, 1}, {1, 1}}
	return []header{
		{format: formatJPEG, w: w, h: h, orientation: 1, jpeg: jpegFrame{known: true, progressive: true, comps: three, rgb: true}},
		{format: formatJPEG, w: w, h: h, orientation: 1, jpeg: jpegFrame{known: true, progressive: true, comps: one}},
		{format: formatJPEG, w: w, h: h, orientation: 1, cmyk: true, jpeg: jpegFrame{known: true, progressive: true, comps: four}},
		{format: formatPNG, w: w, h: h, orientation: 1, png: pngInfo{known: true, bytesPerPixel: 8, rawBytesPerPixel: 8, interlaced: true}},
	}
}

// work is what Apply holds for an image of header hdr under plan pl.
func (p *Pipeline) work(hdr header, pl plan) int64 {
	w, h := hdr.size()
	var n int64
	var region int64 // the decoded pixels the steps read
	var regionW, regionH int
	want := 1 // the JPEG's decode scale
	if hdr.format == formatJPEG {
		if p.spec.reducedDecode() && !hdr.cmyk {
			want = decodeDenom(pl, w, h)
		}
		need := Rect{W: ceilDiv(hdr.w, want), H: ceilDiv(hdr.h, want)}
		if hdr.orientation == 1 {
			need = firstNeed(pl, w, h, want)
		}
		var own int64
		own, regionW, regionH = p.opt.JPEG.work(hdr, want, need)
		n += own
	} else {
		n += pngWork(hdr)
		regionW, regionH = hdr.w, hdr.h
	}
	region = 3 * int64(regionW) * int64(regionH)
	n += region
	if hdr.orientation != 1 {
		n += region // the turned copy
	}
	// Each step: its input's padded copy (a crop reaching outside), the
	// horizontal pass (at most its input's rows), its output, and its
	// filters' coefficients.
	inH := regionH
	for i, st := range pl.steps {
		if st.flip {
			continue
		}
		win := st.win
		n += 3 * int64(win.W) * int64(win.H)
		if !st.src.inside(w, h) {
			n += 3 * int64(st.src.W) * int64(st.src.H)
			inH = st.src.H
		}
		scaled := i == 0 && want > 1 // fractional boxes: both passes run
		if scaled || st.outW != st.src.W {
			n += 3 * int64(win.W) * int64(min(inH, st.src.H)+2)
		}
		ks := func(in, out int) int64 { return int64(math.Ceil(max(float64(in)/float64(max(out, 1)), 1)))*2 + 1 }
		if scaled || st.resizes() {
			n += int64(win.W)*(4*ks(st.src.W, st.outW)+16) + int64(win.H)*(4*ks(st.src.H, st.outH)+16) + 12*int64(win.W)
		}
		inH = win.H
	}
	// Tables, windows, slice headers, and the runtime's own growth with
	// the heap.
	return n + n/512 + workSlack
}

// workSlack and a 512th of the rest are what no plane accounts for:
// Huffman and quantisation tables, zlib's window, row buffers, the
// runtime's metadata of a larger heap. Beyond the planes, under 0.5 MB
// was measured for small images (TestWorkBound) and up to 3.4 MB for a
// progressive CMYK JPEG of 8192×8192 (1.8 GB; TestWorkPeak).
const workSlack = 1 << 20

// jpegComponent is a JPEG component's sampling factors.
type jpegComponent struct{ h, v int }

// jpegFrame is what a JPEG's markers before its first scan say about the
// memory decoding it takes.
type jpegFrame struct {
	known       bool // the frame was read; otherwise the worst is assumed
	progressive bool // SOF2 (and the other progressive frames)
	// multiScan: the first scan holds fewer components than the frame, so
	// a sequential JPEG comes in several scans (libjpeg then buffers
	// every coefficient, as for a progressive one).
	multiScan bool
	comps     []jpegComponent
	// rgb: image/jpeg will decode the three components as RGB (no JFIF
	// marker, and Adobe's transform 0 or components named R, G, B), into
	// an RGBA image beside its planes.
	rgb bool
}

// readJPEGFrame walks a JPEG's markers up to its first scan, within each
// segment's length; a JPEG it cannot read is taken for the worst kind.
func readJPEGFrame(b []byte) jpegFrame {
	var f jpegFrame
	jfif, adobe := false, -1
	var ids []byte
	i := 2
	for i+4 <= len(b) {
		if b[i] != 0xff {
			break
		}
		marker := b[i+1]
		if marker == 0xff {
			i++
			continue
		}
		if marker >= 0xd0 && marker <= 0xd7 || marker == 0x01 {
			i += 2
			continue
		}
		if marker == 0xd9 {
			break
		}
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if n < 2 || i+2+n > len(b) {
			break
		}
		seg := b[i+4 : i+2+n]
		switch {
		case marker == 0xe0 && len(seg) >= 5 && string(seg[:5]) == "JFIF\x00":
			jfif = true
		case marker == 0xee && len(seg) >= 12 && string(seg[:5]) == "Adobe":
			adobe = int(seg[11])
		case marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc:
			if len(seg) < 6 || len(seg) < 6+3*int(seg[5]) || seg[5] == 0 {
				return worstFrame()
			}
			f.progressive = marker == 0xc2 || marker == 0xc6 || marker == 0xca || marker == 0xce
			for c := range int(seg[5]) {
				hv := seg[6+3*c+1]
				f.comps = append(f.comps, jpegComponent{max(int(hv>>4), 1), max(int(hv&15), 1)})
				ids = append(ids, seg[6+3*c])
			}
		case marker == 0xda:
			if f.comps == nil || len(seg) < 1 {
				return worstFrame()
			}
			f.multiScan = int(seg[0]) < len(f.comps)
			f.known = true
			f.rgb = len(f.comps) == 3 && !jfif && (adobe == 0 || string(ids) == "RGB")
			return f
		}
		i += 2 + n
	}
	return worstFrame()
}

// worstFrame is what is assumed of a JPEG whose frame cannot be read.
func worstFrame() jpegFrame {
	return jpegFrame{progressive: true, multiScan: true, rgb: true,
		comps: []jpegComponent{{1, 1}, {1, 1}, {1, 1}, {1, 1}}}
}

// mcus is the JPEG's MCUs across and down, image/jpeg's mxx and myy: the
// first component's sampling sets the MCU's size.
func (f jpegFrame) mcus(w, h int) (int64, int64) {
	c := jpegComponent{1, 1}
	if len(f.comps) > 0 {
		c = f.comps[0]
	}
	for _, o := range f.comps {
		c.h, c.v = max(c.h, o.h), max(c.v, o.v)
	}
	return int64(ceilDiv(w, 8*c.h)), int64(ceilDiv(h, 8*c.v))
}

// blocks is the 8×8 blocks of every component, padded to whole MCUs: what
// a decoder buffering the whole image's coefficients keeps.
func (f jpegFrame) blocks(w, h int) int64 {
	mx, my := f.mcus(w, h)
	var n int64
	for _, c := range f.comps {
		n += mx * my * int64(c.h*c.v)
	}
	return n
}

// work implements JPEGDecoder: image/jpeg decodes the whole image into
// planes padded to whole MCUs (a progressive one first into every
// block's 64 coefficients, 4 bytes each), a 4-component or RGB one then
// into a 4-byte-a-pixel image, and the pipeline converts the part it
// needs (all of it, but for YCbCr) to RGB.
func (StdJPEG) work(hdr header, denom int, need Rect) (int64, int, int) {
	if denom != 1 {
		need = Rect{W: hdr.w, H: hdr.h} // as DecodeJPEG: image/jpeg cannot scale
	}
	f := hdr.jpeg
	mx, my := f.mcus(hdr.w, hdr.h)
	var n int64
	for _, c := range f.comps {
		n += 64 * mx * my * int64(c.h*c.v) // the plane, 8×8 a block
	}
	if f.progressive {
		n += 256 * f.blocks(hdr.w, hdr.h)
	}
	if len(f.comps) == 4 || f.rgb {
		n += 4 * int64(hdr.w) * int64(hdr.h)
	}
	if len(f.comps) == 3 && !f.rgb && need.W > 0 && need.H > 0 && need.inside(hdr.w, hdr.h) {
		return n + 2*int64(hdr.w+1), need.W, need.H
	}
	return n, hdr.w, hdr.h
}

// pngWork is what image/png holds for a PNG: the image it decodes into
// (twice for an interlaced one: each pass's image, then the whole) and
// two rows of raw pixels.
func pngWork(hdr header) int64 {
	pi := hdr.png
	img := int64(pi.bytesPerPixel) * int64(hdr.w) * int64(hdr.h)
	n := img + 2*(int64(pi.rawBytesPerPixel)*int64(hdr.w)+1)
	if pi.interlaced {
		n += img
	}
	return n
}

// pngInfo is what a PNG's header and the chunks before its data say about
// the image image/png decodes it into.
type pngInfo struct {
	known bool
	// bytesPerPixel of image/png's image: 1 (Gray, Paletted), 2 (Gray16),
	// 4 (RGBA, NRGBA), 8 (RGBA64, NRGBA64); rawBytesPerPixel of a row as
	// stored (at most 8).
	bytesPerPixel, rawBytesPerPixel int
	interlaced                      bool
}

// readPNGInfo reads IHDR and looks for tRNS (which makes image/png decode
// a gray or true-colour image with alpha) before the first IDAT; a PNG it
// cannot read is taken for the worst kind.
func readPNGInfo(b []byte) pngInfo {
	worst := pngInfo{bytesPerPixel: 8, rawBytesPerPixel: 8, interlaced: true}
	if len(b) < 33 || string(b[12:16]) != "IHDR" {
		return worst
	}
	depth, ctype, interlace := int(b[24]), b[25], b[28]
	trns := false
	for i := 33; i+8 <= len(b); {
		n := int64(binary.BigEndian.Uint32(b[i:]))
		kind := string(b[i+4 : i+8])
		if kind == "IDAT" {
			break
		}
		if kind == "tRNS" {
			trns = true
		}
		if n > int64(len(b)) {
			break
		}
		i += 12 + int(n)
	}
	wide := depth == 16
	pi := pngInfo{known: true, interlaced: interlace != 0}
	switch ctype {
	case 0: // gray
		pi.bytesPerPixel, pi.rawBytesPerPixel = 1, 1
		if wide {
			pi.bytesPerPixel, pi.rawBytesPerPixel = 2, 2
		}
		if trns {
			pi.bytesPerPixel = 4
			if wide {
				pi.bytesPerPixel = 8
			}
		}
	case 2: // true colour
		pi.bytesPerPixel, pi.rawBytesPerPixel = 4, 3
		if wide {
			pi.bytesPerPixel, pi.rawBytesPerPixel = 8, 6
		}
	case 3: // paletted
		pi.bytesPerPixel, pi.rawBytesPerPixel = 1, 1
	case 4: // gray and alpha
		pi.bytesPerPixel, pi.rawBytesPerPixel = 4, 2
		if wide {
			pi.bytesPerPixel, pi.rawBytesPerPixel = 8, 4
		}
	case 6: // true colour and alpha
		pi.bytesPerPixel, pi.rawBytesPerPixel = 4, 4
		if wide {
			pi.bytesPerPixel, pi.rawBytesPerPixel = 8, 8
		}
	default:
		return worst
	}
	return pi
}
