package video

import (
	"fmt"

	"github.com/brandgw/brand/format/video/framesize"
)

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
// frames (heldFrames: as many as its parameter sets state it keeps, or
// every reference and reordering slot its codec allows where they state
// none, in the pixel layout its configuration record states, or the
// worst of the codec's when it states none) with their per-picture
// tables, its own tables, the conversion to RGB and the RGB frame handed
// to the callback. A node reserves it before decoding (Decoder does,
// from Options.Budget); a pooled decoder keeps its reservation while
// idle, since libavcodec keeps its frame pool. It is for a run whose
// reorder depth is no more than the stream's parameter sets state (a
// Decoder reserves for each run's own). Streams past the bound (its
// unset fields framesize.Default's) are ErrTooLarge, unknown codecs
// ErrCodec.
func Footprint(s Stream, bound framesize.Bound) (int64, error) {
	c, err := parseCodec(s.Codec)
	if err != nil {
		return 0, err
	}
	if err := checkSize(s, bound); err != nil {
		return 0, err
	}
	return footprint(s, c, 0), nil
}

func footprint(s Stream, c codec, reorder int) int64 {
	l := streamLayout(s, c)
	if !l.known {
		l = worstLayout
	}
	rgb := int64(s.Width) * int64(s.Height) * 3
	// libswscale's conversion: its RGB image (rows aligned to 16 bytes)
	// and, from more than 8 bits, its line buffers (a few rows of 32-bit
	// samples); then the copy handed to the callback.
	sws := rgb + int64(s.Height)*16 + 64*int64(s.Width)*4*4
	picture := l.frameBytes(s.Width, s.Height) + pictureTables(s, c)
	return heldFrames(s, c, reorder)*picture + contextBytes(s.Width, s.Height) + sws + rgb
}

// heldFrames is the most frames a decoder of the stream holds at once,
// for a run of the given reorder depth (the one its timestamps show, as
// the decoder is given it). For H.264 it is what the SPS states
// (enforcedFrames, which the decoder is held to); for the others the
// codec's most (dpbFrames).
func heldFrames(s Stream, c codec, reorder int) int64 {
	if n := enforcedFrames(s, c, reorder); n > 0 {
		return n
	}
	return dpbFrames(c)
}

// enforcedFrames is the most frames an H.264 decoder of the stream may
// hold at once, from its SPS: its reference frames (max_num_ref_frames,
// at least one), the frames waiting to be output (libavcodec's reorder
// depth: the run's, raised to the VUI's max_num_reorder_frames, or by
// one where the SPS states none, as libavcodec raises it for a B
// picture), and three in passing: the picture being decoded, the one
// waiting in libavcodec to be received, the one received and being
// converted. libavcodec's h264 decoder holds no more for a stream that
// keeps to its SPS (TestHeldFrames measures each test video's most);
// one that does not is refused at its first frame over (brand_get_buffer),
// so that Footprint stays a bound whatever the bitstream says. 0 where
// there is no such bound: another codec, or an SPS that does not parse.
func enforcedFrames(s Stream, c codec, reorder int) int64 {
	if c != codecH264 {
		return 0
	}
	sps, ok := parseAVCSPS(s.Extradata)
	if !ok || sps.refs < 0 {
		return 0
	}
	delayed := reorder + 1
	if sps.reorder >= 0 {
		delayed = max(reorder, sps.reorder)
	}
	return min(dpbFrames(c), int64(max(sps.refs, 1)+delayed+3))
}

// pictureTables is what a decoded picture holds beside its planes: for
// H.264, libavcodec's per-picture tables (h264_slice.c's pools: the
// motion vectors of both lists, 4 bytes a 4×4 block each, 128 a
// macroblock; reference indices, macroblock types and quantisers, 13 a
// macroblock; 141 in all), counted as 160 a macroblock and a row more. The other
// codecs' are within their codec's frame slots counted whole.
func pictureTables(s Stream, c codec) int64 {
	if c != codecH264 {
		return 0
	}
	return 160 * int64((s.Width+15)/16) * int64((s.Height+15)/16+1)
}

// checkSize refuses a stream whose frames are past the bound, from its
// index entry alone: the index (format/video/mp4) refused such a file
// already, by the same bound; this holds a Stream from anywhere to it.
func checkSize(s Stream, bound framesize.Bound) error {
	if s.Width <= 0 || s.Height <= 0 {
		return fmt.Errorf("%w: the stream's frames are %d×%d", ErrDecode, s.Width, s.Height)
	}
	if !bound.Fits(s.Width, s.Height) {
		return fmt.Errorf("%w: %d×%d frames (%d pixels); frames are decoded %s",
			ErrTooLarge, s.Width, s.Height, int64(s.Width)*int64(s.Height), bound)
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
	sps, ok := parseAVCSPS(x)
	if !ok {
		return layout{}
	}
	return sps.layout
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

// bits reads n ≤ 32 bits.
func (r *bitReader) bits(n int) uint32 {
	var v uint32
	for range n {
		v = v<<1 | r.bit()
	}
	return v
}

// se reads a signed Exp-Golomb code.
func (r *bitReader) se() int32 {
	k := r.ue()
	if k&1 == 1 {
		return int32(k/2 + 1)
	}
	return -int32(k / 2)
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
