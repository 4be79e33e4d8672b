package video

// avcSPS is what Footprint reads of an H.264 stream's first sequence
// parameter set (ISO/IEC 14496-10 7.3.2.1.1 and E.1.1): its pixel layout
// and how many frames a decoder of it holds.
type avcSPS struct {
	layout layout
	// refs is max_num_ref_frames, the reference frames the stream
	// keeps; -1 when the SPS is cut off or damaged before it.
	refs int
	// reorder is the VUI's max_num_reorder_frames, -1 when the SPS has
	// no bitstream restriction (libavcodec then raises its reorder depth
	// only as the pictures' order shows it).
	reorder int
}

// parseAVCSPS reads the first SPS of an avcC record, as far as it goes;
// false if there is none or its layout does not parse.
func parseAVCSPS(x []byte) (avcSPS, bool) {
	if len(x) < 8 || x[0] != 1 || x[5]&0x1f == 0 {
		return avcSPS{}, false
	}
	n := int(x[6])<<8 | int(x[7])
	if n < 4 || 8+n > len(x) {
		return avcSPS{}, false
	}
	sps := unescapeNAL(x[8 : 8+n])
	if len(sps) < 4 || sps[0]&0x1f != 7 {
		return avcSPS{}, false
	}
	out := avcSPS{layout: makeLayout(1, 8), refs: -1, reorder: -1}
	r := bitReader{b: sps[4:]}
	r.ue()          // seq_parameter_set_id
	switch sps[1] { // profile_idc: only these state a chroma format and bit depth
	case 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135:
		chroma := int(r.ue())
		if chroma == 3 {
			r.bit() // separate_colour_plane_flag
		}
		depth := 8 + int(max(r.ue(), r.ue()))
		if r.bad || chroma > 3 {
			return avcSPS{}, false
		}
		out.layout = makeLayout(chroma, depth)
		r.bit()           // qpprime_y_zero_transform_bypass_flag
		if r.bit() == 1 { // seq_scaling_matrix_present_flag
			lists := 8
			if chroma == 3 {
				lists = 12
			}
			for i := range lists {
				if r.bit() == 1 {
					r.scalingList(map[bool]int{true: 16, false: 64}[i < 6])
				}
			}
		}
	}
	r.ue()          // log2_max_frame_num_minus4
	switch r.ue() { // pic_order_cnt_type
	case 0:
		r.ue() // log2_max_pic_order_cnt_lsb_minus4
	case 1:
		r.bit()         // delta_pic_order_always_zero_flag
		r.se()          // offset_for_non_ref_pic
		r.se()          // offset_for_top_to_bottom_field
		cycle := r.ue() // num_ref_frames_in_pic_order_cnt_cycle
		if cycle > 255 {
			return out, true
		}
		for range cycle {
			r.se()
		}
	}
	refs := r.ue() // max_num_ref_frames
	if r.bad || refs > 16 {
		return out, true
	}
	out.refs = int(refs)
	r.bit()           // gaps_in_frame_num_value_allowed_flag
	r.ue()            // pic_width_in_mbs_minus1
	r.ue()            // pic_height_in_map_units_minus1
	if r.bit() == 0 { // frame_mbs_only_flag
		r.bit() // mb_adaptive_frame_field_flag
	}
	r.bit()           // direct_8x8_inference_flag
	if r.bit() == 1 { // frame_cropping_flag
		r.ue()
		r.ue()
		r.ue()
		r.ue()
	}
	if r.bit() == 1 { // vui_parameters_present_flag
		if reorder, ok := r.vuiReorder(); ok {
			out.reorder = reorder
		}
	}
	if r.bad {
		// The fields past max_num_ref_frames are cut off: the reorder
		// depth is unknown, the rest stands.
		out.reorder = -1
	}
	return out, true
}

// vuiReorder reads the VUI parameters to max_num_reorder_frames; false
// without a bitstream restriction.
func (r *bitReader) vuiReorder() (int, bool) {
	if r.bit() == 1 { // aspect_ratio_info_present_flag
		if r.bits(8) == 255 { // Extended_SAR
			r.bits(32)
		}
	}
	if r.bit() == 1 { // overscan_info_present_flag
		r.bit()
	}
	if r.bit() == 1 { // video_signal_type_present_flag
		r.bits(4)         // video_format, video_full_range_flag
		if r.bit() == 1 { // colour_description_present_flag
			r.bits(24)
		}
	}
	if r.bit() == 1 { // chroma_loc_info_present_flag
		r.ue()
		r.ue()
	}
	if r.bit() == 1 { // timing_info_present_flag
		r.bits(32)
		r.bits(32)
		r.bit()
	}
	nal := r.bit() == 1 && r.hrd()
	vcl := r.bit() == 1 && r.hrd()
	if nal || vcl {
		r.bit() // low_delay_hrd_flag
	}
	r.bit()           // pic_struct_present_flag
	if r.bit() == 0 { // bitstream_restriction_flag
		return 0, false
	}
	r.bit() // motion_vectors_over_pic_boundaries_flag
	r.ue()  // max_bytes_per_pic_denom
	r.ue()  // max_bits_per_mb_denom
	r.ue()  // log2_max_mv_length_horizontal
	r.ue()  // log2_max_mv_length_vertical
	reorder := r.ue()
	if r.bad || reorder > 16 {
		return 0, false
	}
	return int(reorder), true
}

// hrd skips hrd_parameters; true (it is always present when called).
func (r *bitReader) hrd() bool {
	cpbs := r.ue() + 1 // cpb_cnt_minus1
	if cpbs > 32 {
		r.bad = true
		return true
	}
	r.bits(8) // bit_rate_scale, cpb_size_scale
	for range cpbs {
		r.ue()
		r.ue()
		r.bit()
	}
	r.bits(20) // four 5-bit lengths
	return true
}

// scalingList skips a scaling_list of n deltas (stopping where a delta
// makes the next scale 0, as the syntax does).
func (r *bitReader) scalingList(n int) {
	last, next := int32(8), int32(8)
	for range n {
		if next != 0 {
			next = (last + r.se() + 256) % 256
		}
		if next != 0 {
			last = next
		}
		if r.bad {
			return
		}
	}
}
