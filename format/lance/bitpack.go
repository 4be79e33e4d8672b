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
// bits in packed (packedWords(t, w)*t/8 bytes at least) into out. The
// words are read once, each lane then walked row by row: a value is one
// shift and mask of a word, or of two where it straddles them.
func unpackFL(t, w int, packed []byte, out *[1024]uint64) {
	if w == 0 {
		*out = [1024]uint64{}
		return
	}
	var words [1024]uint64
	n := packedWords(t, w)
	switch t {
	case 8:
		for k, b := range packed[:n] {
			words[k] = uint64(b)
		}
	case 16:
		for k := range n {
			words[k] = uint64(binary.LittleEndian.Uint16(packed[2*k:]))
		}
	case 32:
		for k := range n {
			words[k] = uint64(binary.LittleEndian.Uint32(packed[4*k:]))
		}
	default:
		for k := range n {
			words[k] = binary.LittleEndian.Uint64(packed[8*k:])
		}
	}
	lanes := 1024 / t
	mask := uint64(1)<<w - 1
	if w == 64 {
		mask = ^uint64(0)
	}
	// Row r of a lane is value (r%8)*128 + flOrder[r/8]*16 + lane.
	var at [64]int
	for r := range t {
		at[r] = r%8*128 + flOrder[r/8]*16
	}
	for lane := range lanes {
		lw := words[lane:]
		for r := range t {
			start := r * w
			k, shift := start/t, start%t
			v := lw[lanes*k] >> shift
			if t-shift < w {
				v |= lw[lanes*(k+1)] << (t - shift)
			}
			out[at[r]+lane] = v & mask
		}
	}
}
