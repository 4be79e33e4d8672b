package video

import "testing"

// avcc and hvcc are configuration records holding only what the rule
// reads: the NAL length size (and, for H.265, the temporal layers).
func avcc(lengthSize int) []byte { return []byte{1, 0x64, 0, 0x1f, 0xfc | byte(lengthSize-1)} }

func hvcc(lengthSize, layers int) []byte {
	x := make([]byte, 23)
	x[0] = 1
	x[21] = byte(layers)<<3 | byte(lengthSize-1)
	return x
}

// units writes NAL units length-prefixed with n bytes.
func units(n int, us ...[]byte) []byte {
	var out []byte
	for _, u := range us {
		for i := n - 1; i >= 0; i-- {
			out = append(out, byte(len(u)>>(8*i)))
		}
		out = append(out, u...)
	}
	return out
}

func TestDisposable(t *testing.T) {
	h264 := Stream{Codec: "h264", Extradata: avcc(4)}
	hevc := Stream{Codec: "hevc", Extradata: hvcc(4, 1)}
	nal264 := func(refIdc, typ byte) []byte { return []byte{refIdc<<5 | typ, 0x88, 0x84} }
	nal265 := func(typ, layer, tid byte) []byte { return []byte{typ<<1 | layer>>5, layer<<3 | tid, 0xaf} }
	for _, tc := range []struct {
		name string
		s    Stream
		data []byte
		want bool
	}{
		{"h264 non-reference B slice", h264, units(4, nal264(0, 1)), true},
		{"h264 SEI and a non-reference slice", h264, units(4, []byte{0x06, 5, 1}, nal264(0, 1)), true},
		{"h264 reference slice", h264, units(4, nal264(2, 1)), false},
		{"h264 one slice of two a reference", h264, units(4, nal264(0, 1), nal264(1, 1)), false},
		{"h264 IDR", h264, units(4, nal264(3, 5)), false},
		{"h264 no slice", h264, units(4, []byte{0x09, 0xf0}), false},
		{"h264 MVC extension", h264, units(4, nal264(0, 1), nal264(0, 20)), false},
		{"h264 a length past the packet", h264, append(units(4, nal264(0, 1)), 0, 0, 0, 9, 1), false},
		{"h264 two-byte lengths", Stream{Codec: "avc1", Extradata: avcc(2)}, units(2, nal264(0, 1)), true},
		{"h265 TRAIL_N", hevc, units(4, nal265(0, 0, 1)), true},
		{"h265 RASL_N with a prefix SEI", hevc, units(4, nal265(39, 0, 1), nal265(8, 0, 1)), true},
		{"h265 TRAIL_R", hevc, units(4, nal265(1, 0, 1)), false},
		{"h265 CRA", hevc, units(4, nal265(21, 0, 1)), false},
		{"h265 TRAIL_N of another layer", hevc, units(4, nal265(0, 1, 1)), false},
		{"h265 of two temporal sub-layers", Stream{Codec: "hevc", Extradata: hvcc(4, 2)}, units(4, nal265(0, 0, 1)), false},
		{"h265 of an unstated number of sub-layers", Stream{Codec: "hevc", Extradata: hvcc(4, 0)}, units(4, nal265(0, 0, 1)), false},
		{"vp9", Stream{Codec: "vp9"}, []byte{0x82, 0x49, 0x83}, false},
		{"av1", Stream{Codec: "av1", Extradata: []byte{0x81, 0, 0, 0}}, []byte{0x12, 0}, false},
		{"h264 without a configuration record", Stream{Codec: "h264"}, units(4, nal264(0, 1)), false},
	} {
		c, err := parseCodec(tc.s.Codec)
		if err != nil {
			t.Fatal(err)
		}
		rule := disposableRule(tc.s, c)
		got := rule != nil && rule(tc.data)
		if got != tc.want {
			t.Errorf("%s: disposable %v, want %v", tc.name, got, tc.want)
		}
	}
}
