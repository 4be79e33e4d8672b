package video

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// TestAVCSPS holds the SPS fields Footprint counts frames by to
// ffprobe's reading of the same stream (libavcodec's parser): the
// reference frames (refs) and the reorder depth the VUI states
// (has_b_frames), on streams libx264 writes with every part of the SPS
// that comes before them or among them: 4:4:4 and 10-bit (the high
// profiles' fields), a cropped frame, interlacing, HRD parameters.
// (libx264 writes its scaling matrices in the PPS: TestAVCSPSScaling
// holds the SPS's.)
func TestAVCSPS(t *testing.T) {
	ffmpeg, _ := videotest.Tools(t)
	// has: fields the SPS must hold for the case to test what it says
	// (every one is cropped: 52 rows are coded as 64).
	cases := []struct {
		name string
		args []string
		has  map[string]int
	}{
		{"ultrafast", []string{"-preset", "ultrafast"}, map[string]int{"max_num_ref_frames": 1, "frame_cropping_flag": 1}},
		{"one reference, no B", []string{"-bf", "0", "-refs", "1"}, nil},
		{"B pyramid", []string{"-bf", "3", "-refs", "4"}, map[string]int{"max_num_reorder_frames": 2}},
		{"one B, no pyramid", []string{"-bf", "1", "-refs", "2", "-x264-params", "b-pyramid=none"}, map[string]int{"max_num_reorder_frames": 1}},
		{"16 references", []string{"-bf", "2", "-x264-params", "ref=16"}, map[string]int{"max_num_ref_frames": 16}},
		{"4:4:4", []string{"-bf", "2", "-pix_fmt", "yuv444p"}, map[string]int{"chroma_format_idc": 3}},
		{"10-bit", []string{"-bf", "2", "-pix_fmt", "yuv420p10le"}, map[string]int{"bit_depth_luma_minus8": 2}},
		{"interlaced", []string{"-bf", "2", "-flags", "+ildct+ilme", "-x264-params", "interlaced=1"}, map[string]int{"frame_mbs_only_flag": 0}},
		{"HRD", []string{"-bf", "2", "-b:v", "200k", "-maxrate", "200k", "-bufsize", "400k", "-x264-params", "nal-hrd=vbr"}, map[string]int{"nal_hrd_parameters_present_flag": 1}},
	}
	dir := t.TempDir()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strconv.Itoa(i)+".mp4")
			args := []string{"-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i", "testsrc2=size=66x52:rate=25:duration=1",
				"-c:v", "libx264"}
			if !strings.Contains(strings.Join(tc.args, " "), "pix_fmt") {
				args = append(args, "-pix_fmt", "yuv420p")
			}
			videotest.Run(t, ffmpeg, append(append(args, tc.args...), path)...)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := mp4.Index(context.Background(), mp4.Bytes(b), int64(len(b)), mp4.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			fields := traceHeaders(t, ffmpeg, path)
			for k, v := range tc.has {
				if got, ok := fields[k]; !ok || got != v {
					t.Fatalf("the SPS's %s is %d (%v), want %d: the case tests nothing", k, got, ok, v)
				}
			}
			refs, hasB := fields["max_num_ref_frames"], fields["max_num_reorder_frames"]
			sps, ok := parseAVCSPS(f.Video.Extradata)
			if _, ok := fields["max_num_reorder_frames"]; !ok {
				hasB = -1 // no bitstream restriction
			}
			if !ok || sps.refs != refs || sps.reorder != hasB {
				t.Fatalf("parsed %+v (%v); FFmpeg's trace_headers: max_num_ref_frames %d, max_num_reorder_frames %d", sps, ok, refs, hasB)
			}
		})
	}
}

// traceHeaders is the first value of each field FFmpeg's trace_headers
// bitstream filter logs for a file's first packet and its parameter
// sets, as libavcodec's CBS reads them.
func traceHeaders(t *testing.T, ffmpeg, path string) map[string]int {
	out, err := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "info", "-nostdin", "-i", path,
		"-c", "copy", "-bsf:v", "trace_headers", "-frames:v", "1", "-f", "null", "-").CombinedOutput()
	if err != nil {
		t.Fatalf("trace_headers: %v\n%s", err, out)
	}
	fields := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "[trace_headers" || f[len(f)-2] != "=" {
			continue
		}
		n, err := strconv.Atoi(f[len(f)-1])
		name := f[len(f)-4] // [trace_headers @ ADDR] BIT NAME BITS = VALUE
		if _, seen := fields[name]; err == nil && !seen {
			fields[name] = n
		}
	}
	return fields
}

// bitWriter writes an SPS's fields MSB first.
type bitWriter struct {
	b []byte
	n int
}

func (w *bitWriter) bits(v uint32, n int) {
	for i := n - 1; i >= 0; i-- {
		if w.n%8 == 0 {
			w.b = append(w.b, 0)
		}
		w.b[len(w.b)-1] |= byte(v>>i&1) << (7 - w.n%8)
		w.n++
	}
}

func (w *bitWriter) ue(v uint32) {
	n := 0
	for (v+1)>>n > 1 {
		n++
	}
	w.bits(0, n)
	w.bits(v+1, n+1)
}

func (w *bitWriter) se(v int32) {
	if v > 0 {
		w.ue(uint32(2*v - 1))
	} else {
		w.ue(uint32(-2 * v))
	}
}

// escapeNAL inserts the emulation prevention bytes (00 00 0x → 00 00 03
// 0x for x ≤ 3), as an encoder writes a NAL unit.
func escapeNAL(b []byte) []byte {
	var out []byte
	zeros := 0
	for _, c := range b {
		if zeros >= 2 && c <= 3 {
			out = append(out, 3)
			zeros = 0
		}
		out = append(out, c)
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	return out
}

// TestAVCSPSScaling: an SPS with scaling lists (4×4 and 8×8, one ending
// early with a delta to 0), pic_order_cnt_type 1 with its cycle, and a
// VUI of every optional part, read to its references and reorder depth.
func TestAVCSPSScaling(t *testing.T) {
	for _, chroma := range []uint32{1, 3} {
		w := &bitWriter{}
		w.bits(0x67, 8)
		w.bits(100, 8) // profile_idc: High
		w.bits(0, 8)
		w.bits(40, 8)
		w.ue(0)      // seq_parameter_set_id
		w.ue(chroma) // chroma_format_idc
		if chroma == 3 {
			w.bits(0, 1)
		}
		w.ue(0)
		w.ue(0)
		w.bits(0, 1) // qpprime_y_zero_transform_bypass_flag
		w.bits(1, 1) // seq_scaling_matrix_present_flag
		lists := map[uint32]int{1: 8, 3: 12}[chroma]
		for i := range lists {
			w.bits(1, 1)
			size := map[bool]int{true: 16, false: 64}[i < 6]
			if i == 1 {
				w.se(-8) // to 0 at once: the default list, no more deltas
				continue
			}
			for j := range size {
				w.se(int32(j%5 - 2))
			}
		}
		w.ue(0)      // log2_max_frame_num_minus4
		w.ue(1)      // pic_order_cnt_type
		w.bits(0, 1) // delta_pic_order_always_zero_flag
		w.se(-3)
		w.se(2)
		w.ue(3)
		w.se(1)
		w.se(-1)
		w.se(4)
		w.ue(5)      // max_num_ref_frames
		w.bits(0, 1) // gaps
		w.ue(119)
		w.ue(67)
		w.bits(1, 1) // frame_mbs_only_flag
		w.bits(1, 1) // direct_8x8
		w.bits(1, 1) // frame_cropping_flag
		w.ue(0)
		w.ue(0)
		w.ue(0)
		w.ue(4)
		w.bits(1, 1) // vui_parameters_present_flag
		w.bits(1, 1)
		w.bits(255, 8)
		w.bits(0x00010001, 32)
		w.bits(1, 1)
		w.bits(1, 1)
		w.bits(1, 1)
		w.bits(5, 3)
		w.bits(0, 1)
		w.bits(1, 1)
		w.bits(0x010101, 24)
		w.bits(1, 1)
		w.ue(1)
		w.ue(1)
		w.bits(1, 1)
		w.bits(1001, 32)
		w.bits(60000, 32)
		w.bits(1, 1)
		for range 2 { // nal and vcl hrd
			w.bits(1, 1)
			w.ue(1) // two cpbs
			w.bits(0x44, 8)
			for range 2 {
				w.ue(1000)
				w.ue(2000)
				w.bits(0, 1)
			}
			w.bits(0, 20)
		}
		w.bits(0, 1) // low_delay_hrd_flag
		w.bits(0, 1) // pic_struct_present_flag
		w.bits(1, 1) // bitstream_restriction_flag
		w.bits(1, 1)
		w.ue(2)
		w.ue(1)
		w.ue(16)
		w.ue(16)
		w.ue(3) // max_num_reorder_frames
		w.ue(6)
		w.bits(1, 1) // rbsp stop bit
		sps := escapeNAL(w.b)
		avcc := append([]byte{1, 100, 0, 40, 0xff, 0xe1, byte(len(sps) >> 8), byte(len(sps))}, sps...)
		got, ok := parseAVCSPS(avcc)
		if !ok || got.refs != 5 || got.reorder != 3 || got.layout != makeLayout(int(chroma), 8) {
			t.Errorf("chroma %d: %+v %v; want 5 references, reorder 3", chroma, got, ok)
		}
		// Cut before the VUI's end: the references stand, the reorder
		// depth is unknown.
		avcc = append([]byte{1, 100, 0, 40, 0xff, 0xe1, byte((len(sps) - 3) >> 8), byte(len(sps) - 3)}, sps[:len(sps)-3]...)
		if got, ok := parseAVCSPS(avcc); !ok || got.refs != 5 || got.reorder != -1 {
			t.Errorf("chroma %d, cut: %+v %v", chroma, got, ok)
		}
	}
}
