package video

import "fmt"

// DefaultMaxPixels bounds a stream's width × height: 8K UHD (7680×4320)
// rounded up to whole 64-pixel blocks, 35.7 million pixels. A 16k×16k
// stream (268 million) is refused from its index entry, before a decoder
// is opened or a frame allocated. The bound is also given to libavcodec
// (max_pixels), so a bitstream whose own headers claim more than its index
// does is refused by the decoder before it allocates the frame.
const DefaultMaxPixels = 7680 * 4352

// MaxSide bounds either side: H.265's and VP9's largest (16384).
const MaxSide = 1 << 14

// chroma is a pixel layout's planes relative to luma, in quarter
// samples per pixel (4:2:0 is 6: four luma and two chroma quarters).
type layout struct {
	quarters int // samples per pixel × 4: 4 gray, 6 4:2:0, 8 4:2:2, 12 4:4:4
	bytes    int // bytes per sample: 1 for 8 bits, 2 for 9–16
	known    bool
}

// worstLayout is the largest any stream of the codecs here decodes to:
// 4:4:4 at 16-bit samples.
var worstLayout = layout{quarters: 12, bytes: 2}

func (l layout) String() string {
	if !l.known {
		return "unknown (assumed 4:4:4, 16-bit)"
	}
	c := map[int]string{4: "4:0:0", 6: "4:2:0", 8: "4:2:2", 12: "4:4:4"}[l.quarters]
	return fmt.Sprintf("%s, %d-byte samples", c, l.bytes)
}

// frameBytes is one decoded frame of w×h pixels in layout l, padded as
// libavcodec's frame pool pads it (whole 64-pixel blocks and a block's
// margin each way: more than any decoder here aligns to).
func (l layout) frameBytes(w, h int) int64 {
	pw, ph := int64((w+63)/64*64+64), int64((h+63)/64*64+64)
	return pw * ph * int64(l.quarters*l.bytes) / 4
}

// dpbFrames is the most decoded frames a libavcodec decoder of the codec
// holds at once, by the decoder's own limits whatever the stream says:
// H.264's 36 picture slots (H264_MAX_PICTURE_COUNT), HEVC's 32 (its DPB
// array), VP9's 8 references and 3 frames in flight, AV1's (libdav1d) 8
// references and its frame in flight, each plus one being returned.
func dpbFrames(c codec) int64 {
	switch c {
	case codecH264:
		return 36 + 1
	case codecHEVC:
		return 32 + 1
	case codecVP9:
		return 8 + 3 + 1
	default:
		return 8 + 2 + 1
	}
}

// contextBytes is a decoder context's own tables beside its frames
// (per-macroblock state, entropy tables, slice buffers): measured under
// 3 MiB at 640×360 and a few hundred bytes a 16×16 block; bounded here
// by 8 MiB and 1 KiB a block.
func contextBytes(w, h int) int64 {
	return 8<<20 + 1024*int64((w+15)/16)*int64((h+15)/16)
}

// Footprint is the memory a decode of the stream holds at most, known
// from its index entry before any packet is decoded: the decoder's
// frames (every reference and reordering slot its codec allows, in the
// pixel layout its configuration record states, or the worst of the
// codec's when it states none), its tables, the conversion to RGB and
// the RGB frame handed to the callback. A node reserves it before
// decoding (Decoder does, from Options.Budget); a pooled decoder keeps
// its reservation while idle, since libavcodec keeps its frame pool.
// Streams over the pixel bound are ErrTooLarge, unknown codecs ErrCodec.
func Footprint(s Stream, maxPixels int64) (int64, error) {
	c, err := parseCodec(s.Codec)
	if err != nil {
		return 0, err
	}
	if err := checkSize(s, maxPixels); err != nil {
		return 0, err
	}
	return footprint(s, c), nil
}

func footprint(s Stream, c codec) int64 {
	l := streamLayout(s, c)
	if !l.known {
		l = worstLayout
	}
	rgb := int64(s.Width) * int64(s.Height) * 3
	// libswscale's conversion: its RGB image (rows aligned to 16 bytes)
	// and, from more than 8 bits, its line buffers (a few rows of 32-bit
	// samples); then the copy handed to the callback.
	sws := rgb + int64(s.Height)*16 + 64*int64(s.Width)*4*4
	return dpbFrames(c)*l.frameBytes(s.Width, s.Height) + contextBytes(s.Width, s.Height) + sws + rgb
}

// checkSize refuses a stream whose frames are over the bounds, from its
// index entry alone.
func checkSize(s Stream, maxPixels int64) error {
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
	}
	if s.Width <= 0 || s.Height <= 0 {
		return fmt.Errorf("%w: the stream's frames are %d×%d", ErrDecode, s.Width, s.Height)
	}
	if s.Width > MaxSide || s.Height > MaxSide || int64(s.Width)*int64(s.Height) > maxPixels {
		return fmt.Errorf("%w: %d×%d frames (%d pixels) over the bound of %d pixels and %d a side",
			ErrTooLarge, s.Width, s.Height, int64(s.Width)*int64(s.Height), maxPixels, MaxSide)
	}
	return nil
}

// streamLayout reads the decoded pixel layout a stream's configuration
// record states: H.264's from the SPS in avcC (chroma_format_idc,
// bit_depth), H.265's hvcC and AV1's av1C fields, VP9's vpcC when given.
// A record that states none, or one that does not parse, is unknown.
func streamLayout(s Stream, c codec) layout {
	x := s.Extradata
	switch c {
	case codecH264:
		return avcLayout(x)
	case codecHEVC:
		// hvcC: ... byte 16 low 2 bits chromaFormat, byte 17 low 3 bits
		// bitDepthLumaMinus8, byte 18 bitDepthChromaMinus8.
		if len(x) < 23 || x[0] != 1 {
			return layout{}
		}
		return makeLayout(int(x[16]&3), 8+int(max(x[17]&7, x[18]&7)))
	case codecVP9:
		// vpcC (a full box: version and flags first): profile, level,
		// then bitDepth (4 bits), chromaSubsampling (3), full range (1).
		if len(x) < 7 || x[0] != 1 {
			return layout{}
		}
		depth := int(x[6] >> 4)
		switch x[6] >> 1 & 7 {
		case 0, 1:
			return makeLayout(1, depth)
		case 2:
			return makeLayout(2, depth)
		case 3:
			return makeLayout(3, depth)
		}
		return layout{}
	case codecAV1:
		// av1C: marker and version, profile and level, then
		// tier, high_bitdepth, twelve_bit, mono_chrome,
		// chroma_subsampling_x, chroma_subsampling_y.
		if len(x) < 4 || x[0] != 0x81 {
			return layout{}
		}
		b := x[2]
		depth := 8
		if b&0x40 != 0 {
			depth = 10
			if b&0x20 != 0 {
				depth = 12
			}
		}
		sx, sy := b>>3&1, b>>2&1
		switch {
		case b&0x10 != 0:
			return makeLayout(0, depth)
		case sx == 1 && sy == 1:
			return makeLayout(1, depth)
		case sx == 1:
			return makeLayout(2, depth)
		}
		return makeLayout(3, depth)
	}
	return layout{}
}

// makeLayout is the layout of a chroma format (0 gray, 1 4:2:0, 2 4:2:2,
// 3 4:4:4) at a bit depth.
func makeLayout(chromaFormat, depth int) layout {
	if depth < 8 || depth > 16 {
		return layout{}
	}
	l := layout{quarters: [4]int{4, 6, 8, 12}[chromaFormat&3], bytes: 1, known: true}
	if depth > 8 {
		l.bytes = 2
	}
	return l
}

// avcLayout reads chroma_format_idc and the bit depths from the first SPS
// of an avcC record. Profiles without them are 4:2:0, 8-bit.
func avcLayout(x []byte) layout {
	if len(x) < 8 || x[0] != 1 || x[5]&0x1f == 0 {
		return layout{}
	}
	n := int(x[6])<<8 | int(x[7])
	if n < 4 || 8+n > len(x) {
		return layout{}
	}
	sps := unescapeNAL(x[8 : 8+n])
	if len(sps) < 4 || sps[0]&0x1f != 7 {
		return layout{}
	}
	switch sps[1] { // profile_idc: only these state a chroma format and bit depth
	case 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135:
	default:
		return makeLayout(1, 8)
	}
	r := bitReader{b: sps[4:]}
	r.ue() // seq_parameter_set_id
	chroma := int(r.ue())
	if chroma == 3 {
		r.bit() // separate_colour_plane_flag
	}
	depth := 8 + int(max(r.ue(), r.ue()))
	if r.bad || chroma > 3 {
		return layout{}
	}
	return makeLayout(chroma, depth)
}

// unescapeNAL drops the emulation prevention bytes (00 00 03 → 00 00).
func unescapeNAL(b []byte) []byte {
	out := make([]byte, 0, len(b))
	zeros := 0
	for _, c := range b {
		if zeros >= 2 && c == 3 {
			zeros = 0
			continue
		}
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
		out = append(out, c)
	}
	return out
}

// bitReader reads Exp-Golomb codes MSB first; past the end it sets bad.
type bitReader struct {
	b   []byte
	pos int
	bad bool
}

func (r *bitReader) bit() uint32 {
	if r.pos >= len(r.b)*8 {
		r.bad = true
		return 0
	}
	v := r.b[r.pos/8] >> (7 - r.pos%8) & 1
	r.pos++
	return uint32(v)
}

func (r *bitReader) ue() uint32 {
	zeros := 0
	for r.bit() == 0 {
		if r.bad || zeros > 31 {
			r.bad = true
			return 0
		}
		zeros++
	}
	v := uint32(1)
	for range zeros {
		v = v<<1 | r.bit()
	}
	return v - 1
}
