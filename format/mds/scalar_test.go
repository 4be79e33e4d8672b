package mds

import (
	"encoding/binary"
	"math"
	"testing"
)

// scalarExtremes are stored values of e with the longest texts: the
// limits of integers, and floats with the most digits and exponents.
func scalarExtremes(e encoding) [][]byte {
	le := binary.LittleEndian
	var out [][]byte
	put := func(bits uint64) {
		b := make([]byte, e.size)
		switch e.size {
		case 1:
			b[0] = byte(bits)
		case 2:
			le.PutUint16(b, uint16(bits))
		case 4:
			le.PutUint32(b, uint32(bits))
		default:
			le.PutUint64(b, bits)
		}
		out = append(out, b)
	}
	switch e.kind {
	case intText, uintText:
		for _, v := range []uint64{0, 1, 1 << (e.bits - 1), 1<<(e.bits-1) - 1, math.MaxUint64 >> (64 - e.bits)} {
			put(v)
		}
	case floatText:
		switch e.bits {
		case 16:
			for v := range uint64(1 << 16) {
				put(v)
			}
		case 32:
			for _, f := range []float32{-1.1754944e-38, -3.4028235e38, -1e-45, -1.2345678e-12, -1e15, -1.2345678e15, float32(math.Inf(-1)), float32(math.NaN()), -0.1} {
				put(uint64(math.Float32bits(f)))
			}
		default:
			for _, f := range []float64{-2.2250738585072014e-308, -1.7976931348623157e308, -5e-324, -1.2345678901234567e-100, -1.2345678901234567e15, -0.00012345678901234567, math.Inf(-1), -0.1} {
				put(math.Float64bits(f))
			}
		}
	}
	return out
}

// Floats print as Python's repr prints them (json.dumps of a float).
func TestFloatText(t *testing.T) {
	tests := []struct {
		f    float64
		bits int
		want string
	}{
		{0, 64, "0.0"}, {math.Copysign(0, -1), 64, "-0.0"}, {1, 64, "1.0"}, {0.1, 64, "0.1"},
		{1e16, 64, "1e+16"}, {1e15, 64, "1000000000000000.0"}, {123456789.125, 64, "123456789.125"},
		{1e-4, 64, "0.0001"}, {1e-5, 64, "1e-05"}, {0.00012345, 64, "0.00012345"},
		{-2.2250738585072014e-308, 64, "-2.2250738585072014e-308"}, {5e-324, 64, "5e-324"},
		{1.7976931348623157e308, 64, "1.7976931348623157e+308"}, {math.NaN(), 64, "NaN"},
		{math.Inf(-1), 64, "-Infinity"}, {float64(float32(0.1)), 32, "0.1"}, {1e15, 32, "1000000000000000.0"},
		{float64(float32(3.4028235e38)), 32, "3.4028235e+38"}, {100, 32, "100.0"},
	}
	for _, tt := range tests {
		if got := string(appendFloat(nil, tt.f, tt.bits)); got != tt.want {
			t.Errorf("%v (%d bits): %q, want %q", tt.f, tt.bits, got, tt.want)
		}
	}
}
