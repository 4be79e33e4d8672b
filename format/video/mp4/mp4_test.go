package mp4

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video/framesize"
)

// findBox returns the offset in b of the box at path (its first
// occurrence at each level), or fails the test.
func findBox(t testing.TB, b []byte, path ...string) int {
	t.Helper()
	at, end := 0, len(b)
	for depth, typ := range path {
		found := false
		for o := at; o+8 <= end; {
			size := int(binary.BigEndian.Uint32(b[o:]))
			if size < 8 || o+size > end {
				t.Fatalf("box at %d of size %d", o, size)
			}
			if string(b[o+4:o+8]) == typ {
				if depth == len(path)-1 {
					return o
				}
				at, end, found = o+8, o+size, true
				switch typ {
				case "stsd":
					at += 8
				case "dref":
					at += 8
				}
				if strings.HasPrefix(typ, "avc") {
					at += visualEntryHeader
				}
				break
			}
			o += size
		}
		if !found {
			t.Fatalf("no box %v", path[:depth+1])
		}
	}
	return -1
}

var stbl = []string{"moov", "trak", "mdia", "minf", "stbl"}

func inStbl(box string) []string { return append(slices.Clone(stbl), box) }

// gop is a simple stream: a keyframe every 3 samples.
var gop = synth{sizes: []uint32{30, 5, 6, 31, 7, 8, 32, 9}, sync: []uint32{1, 4, 7}}

// bframes is gop with B-frames: I P B B ... in decode order, with the
// composition offsets a writer gives them (ffmpeg's, 2 frames of delay)
// and an edit of media starting at the first frame's presentation time,
// as ffmpeg writes it.
var bframes = synth{
	sizes:    []uint32{30, 5, 6, 7, 31, 8, 9, 10},
	sync:     []uint32{1, 5},
	ctts:     []int32{1024, 2048, 512, 512, 1024, 2048, 512, 512},
	edits:    []Edit{{Duration: 320, MediaTime: 1024}},
	perChunk: 3,
}

func TestSynth(t *testing.T) {
	type want struct {
		dts, pts []int64
		keys     []bool
		gops     [][2]int32
		frames   []int32 // samples in presentation order
	}
	plain := want{
		dts:    []int64{0, 512, 1024, 1536, 2048, 2560, 3072, 3584},
		pts:    []int64{0, 512, 1024, 1536, 2048, 2560, 3072, 3584},
		keys:   []bool{true, false, false, true, false, false, true, false},
		gops:   [][2]int32{{0, 3}, {3, 6}, {6, 8}},
		frames: []int32{0, 1, 2, 3, 4, 5, 6, 7},
	}
	// I0 P3 B1 B2 | I4 P7 B5 B6 in decode order, presented two frames
	// late before the edit moves the first to 0.
	withB := want{
		dts:    []int64{-1024, -512, 0, 512, 1024, 1536, 2048, 2560},
		pts:    []int64{0, 1536, 512, 1024, 2048, 3584, 2560, 3072},
		keys:   []bool{true, false, false, false, true, false, false, false},
		gops:   [][2]int32{{0, 4}, {4, 8}},
		frames: []int32{0, 2, 3, 1, 4, 6, 7, 5},
	}
	cases := []struct {
		name string
		s    synth
		want want
	}{
		{"moov last", gop, plain},
		{"moov first", func() synth { s := gop; s.moovFirst = true; return s }(), plain},
		{"co64", func() synth { s := gop; s.co64 = true; return s }(), plain},
		{"stz2", func() synth { s := gop; s.stz2 = 16; return s }(), plain},
		{"one sample a chunk", func() synth { s := gop; s.perChunk = 1; return s }(), plain},
		{"audio first", func() synth { s := gop; s.audio = true; return s }(), plain},
		{"fragmented", func() synth { s := gop; s.frag = true; return s }(), plain},
		{"no stss: every sample a sync sample", func() synth { s := gop; s.sync = nil; return s }(), want{
			dts: plain.dts, pts: plain.pts, keys: []bool{true, true, true, true, true, true, true, true},
			gops: [][2]int32{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}, {7, 8}}, frames: plain.frames,
		}},
		{"an empty stss: the first sample only", func() synth { s := gop; s.sync = []uint32{}; return s }(), want{
			dts: plain.dts, pts: plain.pts, keys: []bool{true, false, false, false, false, false, false, false},
			gops: [][2]int32{{0, 8}}, frames: plain.frames,
		}},
		{"B-frames and an edit", bframes, withB},
		{"B-frames fragmented", func() synth { s := bframes; s.frag = true; return s }(), withB},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.s.bytes()
			f, err := Index(context.Background(), Bytes(b), int64(len(b)), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			v := f.Video
			var dts, pts []int64
			var keys []bool
			for i, s := range v.Samples {
				dts, pts, keys = append(dts, s.DTS), append(pts, s.PTS), append(keys, s.Key)
				if want := byte(i + 1); s.Size != tc.s.sizes[i] || b[s.Off] != want || b[s.Off+int64(s.Size)-1] != want {
					t.Errorf("sample %d: %d bytes at %d are not its bytes", i, s.Size, s.Off)
				}
			}
			var gops [][2]int32
			for _, g := range v.GOPs {
				gops = append(gops, [2]int32{g.First, g.End})
				var n int64
				for i := g.First; i < g.End; i++ {
					n += int64(v.Samples[i].Size)
				}
				if g.Bytes != n || format.Concat(g.Ranges) != n {
					t.Errorf("GOP %v: %d bytes in %v, its samples %d", g, g.Bytes, g.Ranges, n)
				}
			}
			var frames []int32
			for _, fr := range v.Frames {
				frames = append(frames, fr.Sample)
			}
			got := fmt.Sprint(dts, pts, keys, gops, frames)
			if w := fmt.Sprint(tc.want.dts, tc.want.pts, tc.want.keys, tc.want.gops, tc.want.frames); got != w {
				t.Errorf("dts pts keys gops frames\n got %s\nwant %s", got, w)
			}
			if v.Codec != "h264" || v.Width != 64 || v.Height != 48 || v.Timescale != 12800 || v.Rotation != 0 {
				t.Errorf("track %s %d×%d 1/%d rotated %d", v.Codec, v.Width, v.Height, v.Timescale, v.Rotation)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	const one, neg = 1 << 16, -1 << 16
	cases := []struct {
		m    [9]int32
		want int
	}{
		{[9]int32{one, 0, 0, 0, one, 0, 0, 0, 1 << 30}, 0},
		{[9]int32{0, one, 0, neg, 0, 0, 0, 0, 1 << 30}, 90},
		{[9]int32{neg, 0, 0, 0, neg, 0, 0, 0, 1 << 30}, 180},
		{[9]int32{0, neg, 0, one, 0, 0, 0, 0, 1 << 30}, 270},
		{[9]int32{neg, 0, 0, 0, one, 0, 0, 0, 1 << 30}, -1}, // a mirror
		{[9]int32{}, 0},
	}
	for _, tc := range cases {
		s := gop
		s.matrix = tc.m
		b := s.bytes()
		f, err := Index(context.Background(), Bytes(b), int64(len(b)), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if f.Video.Rotation != tc.want || f.Video.Matrix != tc.m && tc.m != ([9]int32{}) {
			t.Errorf("matrix %v: rotation %d, want %d", tc.m, f.Video.Rotation, tc.want)
		}
	}
}

// mjpegESDS is the esds payload FFmpeg writes for MJPEG in MP4: an
// ES_Descriptor whose DecoderConfigDescriptor states object type 0x6C.
var mjpegESDS = []byte{0, 0, 0, 0, 0x03, 0x80, 0x80, 0x80, 0x1b, 0, 1, 0, 0x04, 0x80, 0x80, 0x80, 0x0d, 0x6c, 0x11,
	0, 0, 0, 0, 0x03, 0x0d, 0x40, 0, 0x01, 0x1d, 0xb0, 0x06, 0x80, 0x80, 0x80, 0x01, 0x02}

// TestRefused: every file Index refuses, with the kind of error and the
// words a user reads.
func TestRefused(t *testing.T) {
	patch := func(s synth, path []string, at int, v uint32) []byte {
		b := s.bytes()
		o := findBox(t, b, path...)
		binary.BigEndian.PutUint32(b[o+at:], v)
		return b
	}
	good := gop.bytes()
	goodFirst := func() []byte { s := gop; s.moovFirst = true; return s.bytes() }()
	with := func(f func(*synth)) []byte { s := gop; f(&s); return s.bytes() }
	cases := []struct {
		name string
		file []byte
		lim  Limits
		kind error
		says string
	}{
		{"not an MP4", []byte("GIF89a, not a movie at all, but long enough"), Limits{}, ErrInvalid, "not an MP4 or QuickTime file"},
		{"empty", []byte{}, Limits{}, ErrInvalid, "no moov box"},
		{"audio only", with(func(s *synth) { s.handler = "soun" }), Limits{}, ErrNoVideo, "audio (soun)"},
		{"an mp4v entry whose esds states no object type", with(func(s *synth) { s.entry = "mp4v"; s.config = []byte{0, 0, 0, 0, 5, 0} }), Limits{}, ErrUnsupported, "MPEG-4 visual (no object type stated)"},
		{"Motion JPEG in an mp4v entry", with(func(s *synth) { s.entry, s.config = "mp4v", mjpegESDS }), Limits{}, ErrUnsupported, "Motion JPEG (sample entry \"mp4v\", object type 0x6c)"},
		{"an unknown codec", with(func(s *synth) { s.entry = "xyzw" }), Limits{}, ErrUnsupported, `"xyzw"`},
		{"encrypted", with(func(s *synth) { s.entry = "encv" }), Limits{}, ErrUnsupported, "encrypted video"},
		{"16k × 16k", with(func(s *synth) { s.w, s.h = 16384, 16384 }), Limits{}, ErrLimit, "16384 × 16384"},
		{"a picture of no pixels", with(func(s *synth) { s.w, s.h = 0, 48; s.config = []byte{1} }), Limits{}, ErrInvalid, "0 × 48"},
		{"more pixels than allowed", good, Limits{Frames: framesize.Bound{Pixels: 64 * 47}}, ErrLimit, "64 × 48"},
		{"an absurd sample count", patch(gop, inStbl("stsz"), 16, 1<<31-1), Limits{}, ErrLimit, "2147483647 samples"},
		{"more samples than sizes", patch(gop, inStbl("stsz"), 16, 100), Limits{}, ErrInvalid, "states 100 sizes"},
		{"more samples than allowed", good, Limits{Samples: 7}, ErrLimit, "8 samples; at most 7"},
		{"chunks holding other samples than stsz", patch(gop, inStbl("stsc"), 20, 3), Limits{}, ErrInvalid, "hold 6 samples, its stsz 8"},
		{"stts timing fewer samples", patch(gop, inStbl("stts"), 16, 7), Limits{}, ErrInvalid, "times 7 samples"},
		{"a stts of absurd durations", patch(gop, inStbl("stts"), 20, 1<<31+5), Limits{}, ErrInvalid, "sample duration"},
		{"a box past its parent", patch(gop, inStbl("stsz"), 0, 1000), Limits{}, ErrInvalid, "runs past its parent"},
		{"a table cut short", patch(gop, inStbl("stco"), 12, 1000), Limits{}, ErrInvalid, "states 1000 entries"},
		{"a chunk offset past the file", patch(gop, inStbl("stco"), 16, 1<<30), Limits{}, ErrInvalid, "past the end of the file"},
		{"truncated before the moov ends", good[:len(good)-20], Limits{}, ErrInvalid, "truncated"},
		{"truncated in the mdat", good[:100], Limits{}, ErrInvalid, `"mdat"`},
		{"truncated media after a moov first", goodFirst[:len(goodFirst)-20], Limits{}, ErrInvalid, "truncated or its moov is damaged"},
		{"a moov over the metadata limit", good, Limits{MetaBytes: 100}, ErrLimit, "passes 100 bytes"},
		{"several edits of media", with(func(s *synth) { s.edits = []Edit{{100, 0}, {100, 1024}} }), Limits{}, ErrUnsupported, "edit list has 2 edits"},
		{"empty edits only", with(func(s *synth) { s.edits = []Edit{{100, -1}} }), Limits{}, ErrInvalid, "only empty edits"},
		{"an edit that shows nothing", with(func(s *synth) { s.edits = []Edit{{0, 0}} }), Limits{}, ErrInvalid, "discards every one"},
		{"no sample description used", patch(gop, inStbl("stsc"), 24, 2), Limits{}, ErrUnsupported, "sample description 2"},
		{"an avc1 without avcC", func() []byte {
			b := gop.bytes()
			o := findBox(t, b, "moov", "trak", "mdia", "minf", "stbl", "stsd", "avc1", "avcC")
			copy(b[o+4:], "xxxx")
			return b
		}(), Limits{}, ErrInvalid, "no \"avcC\" box"},
		{"a moof before the moov", func() []byte {
			m := findBox(t, good, "moov")
			return append(append(slices.Clone(good[:m]), mkbox("moof", mkbox("mfhd", fullbox(0, 0), be32(1)))...), good[m:]...)
		}(), Limits{}, ErrInvalid, "without a moov before it"},
		{"a second moov among fragments", func() []byte {
			b := func() synth { s := gop; s.frag = true; return s }().bytes()
			return append(b, b[findBox(t, b, "moov"):findBox(t, b, "moof")]...)
		}(), Limits{}, ErrInvalid, "second moov"},
		{"a fragment's sample past the file", func() []byte {
			b := func() synth { s := gop; s.frag = true; return s }().bytes()
			o := findBox(t, b, "moof", "traf", "trun")
			binary.BigEndian.PutUint32(b[o+16:], 1<<20) // data_offset
			return b
		}(), Limits{}, ErrInvalid, "truncated or its moof is damaged"},
		{"a fragment of a track without trex", func() []byte {
			b := func() synth { s := gop; s.frag = true; return s }().bytes()
			o := findBox(t, b, "moof", "traf", "tfhd")
			binary.BigEndian.PutUint32(b[o+12:], 7)
			return b
		}(), Limits{}, ErrInvalid, "track 7, which has no trex"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Index(context.Background(), Bytes(tc.file), int64(len(tc.file)), tc.lim)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v; want %v saying %q", err, tc.kind, tc.says)
			}
			if !errors.Is(err, format.ErrInvalid) && !errors.Is(err, format.ErrUnsupported) {
				t.Fatalf("%v is neither format.ErrInvalid nor format.ErrUnsupported", err)
			}
		})
	}
}

// TestRefusedBeforeAllocating: a file stating 2^31 samples, or a 16k ×
// 16k picture, is refused having allocated little more than its moov.
func TestRefusedBeforeAllocating(t *testing.T) {
	for _, file := range [][]byte{
		func() []byte {
			b := gop.bytes()
			binary.BigEndian.PutUint32(b[findBox(t, b, inStbl("stsz")...)+16:], 1<<31-1)
			return b
		}(),
		func() []byte { s := gop; s.w, s.h = 16384, 16384; return s.bytes() }(),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Index(context.Background(), Bytes(file), int64(len(file)), Limits{Samples: 1 << 31})
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrLimit) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("%v", err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("%v: %d bytes allocated", err, n)
		}
	}
}

// recorder is a Source that records the ranges read.
type recorder struct {
	b     Bytes
	reads []format.Range
}

func (r *recorder) ReadRange(ctx context.Context, off int64, p []byte) error {
	r.reads = append(r.reads, format.Range{Off: off, Len: int64(len(p))})
	return r.b.ReadRange(ctx, off, p)
}

// mdatPayloads are the media bytes of a file: its mdat boxes' payloads.
func mdatPayloads(b []byte) []format.Range {
	var out []format.Range
	for o := 0; o+8 <= len(b); {
		size := int64(binary.BigEndian.Uint32(b[o:]))
		hdr := int64(8)
		if size == 1 {
			size, hdr = int64(binary.BigEndian.Uint64(b[o+8:])), 16
		} else if size == 0 {
			size = int64(len(b) - o)
		}
		if string(b[o+4:o+8]) == "mdat" {
			out = append(out, format.Range{Off: int64(o) + hdr, Len: size - hdr})
		}
		o += int(size)
	}
	return out
}

// checkMetadataOnly fails the test if a read of b reached into media.
func checkMetadataOnly(t *testing.T, b []byte, reads []format.Range) {
	t.Helper()
	for _, m := range mdatPayloads(b) {
		for _, r := range reads {
			if r.Off < m.End() && m.Off < r.End() {
				t.Errorf("read %d+%d reaches into the media at %d+%d", r.Off, r.Len, m.Off, m.Len)
			}
		}
	}
}

func TestReadsMetadataOnly(t *testing.T) {
	for name, s := range map[string]synth{
		"moov last":  gop,
		"moov first": func() synth { s := gop; s.moovFirst = true; return s }(),
		"fragmented": func() synth { s := bframes; s.frag = true; return s }(),
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{b: s.bytes()}
			f, err := Index(context.Background(), r, int64(len(r.b)), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			checkMetadataOnly(t, r.b, r.reads)
			var n int64
			for _, rg := range r.reads {
				n += rg.Len
			}
			if f.Reads != len(r.reads) || f.BytesRead != n {
				t.Errorf("File says %d reads of %d bytes; the source saw %d of %d", f.Reads, f.BytesRead, len(r.reads), n)
			}
		})
	}
}

func TestRescale(t *testing.T) {
	cases := []struct{ a, b, c, want int64 }{
		{1000, 12800, 1000, 12800},
		{1, 3, 2, 2},  // 1.5 rounds away from zero
		{5, 1, 10, 1}, // 0.5 too
		{4, 1, 10, 0},
		{1 << 62, 4, 8, 1 << 61},
	}
	for _, tc := range cases {
		if got, ok := rescale(tc.a, tc.b, tc.c); !ok || got != tc.want {
			t.Errorf("rescale(%d, %d, %d) = %d, %v; want %d", tc.a, tc.b, tc.c, got, ok, tc.want)
		}
	}
	if _, ok := rescale(1<<62, 1<<62, 1); ok {
		t.Error("an overflow accepted")
	}
}

// TestNotMP4SaysNoContent: a file that is no MP4 is refused without a
// byte of it in the error, which is logged and answered to whoever asked
// (issue 66: a link to a file out of the tree had its first bytes
// echoed by `brand index`).
func TestNotMP4SaysNoContent(t *testing.T) {
	tests := []struct {
		name string
		file []byte
	}{
		{"a password file", []byte("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n")},
		{"a key", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n")},
		{"binary", []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0x3e, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Index(context.Background(), Bytes(tt.file), int64(len(tt.file)), Limits{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not an MP4 or QuickTime file") {
				t.Fatalf("%v; want ErrInvalid saying it is not an MP4", err)
			}
			msg := err.Error()
			for i := 0; i+4 <= len(tt.file); i++ {
				if w := string(tt.file[i : i+4]); strings.Contains(msg, w) || strings.Contains(msg, strings.Trim(fmt.Sprintf("%q", w), `"`)) {
					t.Fatalf("%q quotes the file's bytes %q", msg, w)
				}
			}
		})
	}
}
