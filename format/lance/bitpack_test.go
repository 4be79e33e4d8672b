package lance

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// unpackScalar is FastLanes' unpack written value by value from the
// layout's definition (bitpack.go): the reference unpackFL is held to
// for every word type and width, beside the fixtures Lance wrote.
func unpackScalar(t, w int, packed []byte, out *[1024]uint64) {
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
	for i := range 1024 {
		if w == 0 {
			out[i] = 0
			continue
		}
		lane := i % lanes
		s := i / 128
		row := flOrder[(i-s*128-lane)/16]*8 + s
		start := row * w
		var v uint64
		for b := range w {
			k, bit := (start+b)/t, (start+b)%t
			v |= (word(lanes*k+lane) >> bit & 1) << b
		}
		out[i] = v
	}
}

func TestUnpackFL(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 99))
	for _, tb := range []int{8, 16, 32, 64} {
		for w := 0; w <= tb; w++ {
			packed := make([]byte, packedWords(tb, w)*tb/8)
			for i := range packed {
				packed[i] = byte(r.Uint32())
			}
			var got, want [1024]uint64
			got[5] = 7 // a width of 0 clears what was there
			unpackFL(tb, w, packed, &got)
			unpackScalar(tb, w, packed, &want)
			if got != want {
				t.Fatalf("t=%d w=%d: unpackFL differs from the scalar unpack", tb, w)
			}
		}
	}
}

func BenchmarkUnpackFL(b *testing.B) {
	for _, c := range []struct{ t, w int }{{64, 17}, {32, 11}, {16, 3}, {8, 5}} {
		packed := make([]byte, packedWords(c.t, c.w)*c.t/8)
		var out [1024]uint64
		b.Run("", func(b *testing.B) {
			b.SetBytes(1024 * int64(c.t) / 8)
			for b.Loop() {
				unpackFL(c.t, c.w, packed, &out)
			}
		})
	}
}
