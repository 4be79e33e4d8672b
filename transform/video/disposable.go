package video

// Disposable packets: a picture that no later picture references can be
// left undecoded when no clip wants it, and every other frame decodes to
// the same pixels (the codecs' own rule, which temporal scalability
// relies on: a decoder may drop such pictures). Which pictures are so is
// in their NAL unit headers:
//
//   - H.264: every slice's nal_ref_idc is 0 (ITU-T H.264 §7.4.1: a
//     picture of nal_ref_idc 0 is not used for inter prediction of any
//     other). Dropping it changes no later picture's frame_num or picture
//     order count: neither counts non-reference pictures (§7.4.3,
//     §8.2.1).
//   - H.265: every slice is of a sub-layer non-reference type (TRAIL_N,
//     TSA_N, STSA_N, RADL_N, RASL_N and the reserved even types below 16)
//     in a stream of one temporal sub-layer (the hvcC's numTemporalLayers
//     is 1): with no higher sub-layer, no picture references it
//     (§3.160), and the POC of later pictures skips it (prevTid0Pic
//     excludes sub-layer non-reference pictures, §8.3.1).
//
// VP9 and AV1 mark references in their frame headers (refresh flags),
// which this package does not parse: their packets are all decoded. A
// packet whose units cannot be read (a length past its end, an empty
// unit) is decoded, so that the decoder reports what is wrong with it.

// disposableRule returns what tells a disposable packet of stream s from
// its bytes, or nil when the stream's packets are never skipped (another
// codec, a configuration record this package cannot read, an H.265
// stream of several temporal sub-layers or of an unstated number).
func disposableRule(s Stream, c codec) func(data []byte) bool {
	x := s.Extradata
	switch c {
	case codecH264:
		// avcC: configurationVersion 1, then profile, compatibility,
		// level, then 6 bits reserved and lengthSizeMinusOne.
		if len(x) < 5 || x[0] != 1 {
			return nil
		}
		n := int(x[4]&3) + 1
		return func(data []byte) bool { return h264Disposable(data, n) }
	case codecHEVC:
		// hvcC: byte 21 is constantFrameRate(2) numTemporalLayers(3)
		// temporalIdNested(1) lengthSizeMinusOne(2).
		if len(x) < 23 || x[0] != 1 || x[21]>>3&7 != 1 {
			return nil
		}
		n := int(x[21]&3) + 1
		return func(data []byte) bool { return hevcDisposable(data, n) }
	}
	return nil
}

// nalUnits calls each with every NAL unit of a length-prefixed packet
// (lengths of n bytes); false if the packet is not such units filling it
// exactly, or each returned false.
func nalUnits(data []byte, n int, each func(unit []byte) bool) bool {
	for len(data) > 0 {
		if len(data) < n {
			return false
		}
		size := 0
		for _, b := range data[:n] {
			size = size<<8 | int(b)
		}
		data = data[n:]
		if size == 0 || size > len(data) {
			return false
		}
		if !each(data[:size]) {
			return false
		}
		data = data[size:]
	}
	return true
}

// h264Disposable reports whether an H.264 packet is a picture of slices
// of nal_ref_idc 0 alone.
func h264Disposable(data []byte, n int) bool {
	slices := 0
	ok := nalUnits(data, n, func(u []byte) bool {
		switch typ := u[0] & 0x1f; {
		case typ >= 1 && typ <= 5:
			slices++
			return u[0]>>5&3 == 0
		case typ == 14 || typ == 20:
			return false // an SVC or MVC extension: layers this rule does not read
		}
		return true
	})
	return ok && slices > 0
}

// hevcDisposable reports whether an H.265 packet is a picture of slices of
// sub-layer non-reference types alone, of the base layer.
func hevcDisposable(data []byte, n int) bool {
	slices := 0
	ok := nalUnits(data, n, func(u []byte) bool {
		if len(u) < 2 {
			return false
		}
		typ, layer := u[0]>>1&0x3f, (u[0]&1)<<5|u[1]>>3
		if typ > 31 {
			return true // not a slice
		}
		slices++
		return typ < 16 && typ%2 == 0 && layer == 0
	})
	return ok && slices > 0
}
