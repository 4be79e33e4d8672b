package lance

import "encoding/binary"

// FastLanes bit-packing, as Lance packs integers (the fastlanes crate's
// BitPacking::unchecked_unpack): 1024 values of an unsigned type of t
// bits (8, 16, 32 or 64), each cut to w bits, are stored as 1024*w/t
// little-endian words of t bits. The 1024 values are laid out as
// 1024/t lanes of t rows, in a transposed order that lets a packer work
// on every lane at once: value i is row flRow(i) of lane i % lanes, and
// row r of a lane takes bits r*w to r*w+w of that lane's words, word k
// of lane l being word lanes*k + l.

// flOrder is FastLanes' order of 8-row groups (its own inverse).
var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// packedWords is the number of t-bit words 1024 values of w bits take.
func packedWords(t, w int) int { return 1024 * w / t }

// unpackFL unpacks the 1024 values of w bits packed in the words of t
// bits in packed (packedWords(t, w)*t/8 bytes at least) into out.
func unpackFL(t, w int, packed []byte, out *[1024]uint64) {
	lanes := 1024 / t
	word := func(k int) uint64 {
		switch t {
		case 8:
			return uint64(packed[k])
		case 16:
			return uint64(binary.LittleEndian.Uint16(packed[2*k:]))
		case 32:
			return uint64(binary.LittleEndian.Uint32(packed[4*k:]))
		}
		return binary.LittleEndian.Uint64(packed[8*k:])
	}
	if w == 0 {
		*out = [1024]uint64{}
		return
	}
	mask := uint64(1)<<w - 1
	if w == 64 {
		mask = ^uint64(0)
	}
	for i := range 1024 {
		lane := i % lanes
		s := i / 128
		row := flOrder[(i-s*128-lane)/16]*8 + s
		if w == t {
			out[i] = word(lanes*row + lane)
			continue
		}
		start := row * w
		k, shift := start/t, start%t
		v := word(lanes*k+lane) >> shift
		if t-shift < w {
			v |= word(lanes*(k+1)+lane) << (t - shift)
		}
		out[i] = v & mask
	}
}
