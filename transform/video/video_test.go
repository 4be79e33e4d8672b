package video

import (
	"errors"
	"fmt"
	"github.com/brandgw/brand/format/video/framesize"
	"testing"

	"github.com/brandgw/brand/internal/server/memory"
)

// TestCover: runs start at the keyframe before each wanted frame (the
// one before that for a leading picture), end at the last wanted frame's
// packet, and merge when they overlap or touch.
func TestCover(t *testing.T) {
	// Decode order of two open GOPs and a closed one:
	//   0 I(pts 0)  1 P(30)  2 B(10)  3 B(20)  4 I(60)  5 B(40)  6 B(50)
	//   7 P(90)  8 B(70)  9 B(80)  10 I(100)  11 P(110)
	ps := []PacketInfo{
		{PTS: 0, Key: true}, {PTS: 30}, {PTS: 10}, {PTS: 20},
		{PTS: 60, Key: true}, {PTS: 40}, {PTS: 50}, {PTS: 90}, {PTS: 70}, {PTS: 80},
		{PTS: 100, Key: true}, {PTS: 110},
	}
	cases := []struct {
		want []int64
		runs string
		err  error
	}{
		{want: []int64{0}, runs: "[{0 1 true}]"},
		{want: []int64{20}, runs: "[{0 4 true}]"},
		{want: []int64{60}, runs: "[{4 5 false}]"},
		{want: []int64{70}, runs: "[{4 9 false}]"},
		// A leading picture of the second keyframe: from the first.
		{want: []int64{40}, runs: "[{0 6 true}]"},
		{want: []int64{110}, runs: "[{10 12 false}]"},
		{want: []int64{70, 110}, runs: "[{4 9 false} {10 12 false}]"},
		// Touching runs merge: the second group continues the first.
		{want: []int64{80, 100}, runs: "[{4 11 false}]"},
		// Runs a packet apart stay apart.
		{want: []int64{110, 10, 90}, runs: "[{0 3 true} {4 8 false} {10 12 false}]"},
		{want: []int64{55}, err: ErrRun},
	}
	for _, c := range cases {
		got, err := Cover(ps, c.want)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%v: %v, want %v", c.want, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != c.runs {
			t.Errorf("%v: %v %v, want %s", c.want, got, err, c.runs)
		}
	}
	// Frames before the first keyframe, and a leading picture of a first
	// keyframe that follows them, are refused.
	pre := []PacketInfo{{PTS: 5}, {PTS: 30, Key: true}, {PTS: 20}}
	for _, w := range []int64{5, 20} {
		if _, err := Cover(pre, []int64{w}); !errors.Is(err, ErrRun) {
			t.Errorf("pts %d of a stream starting without a keyframe: %v", w, err)
		}
	}
	if got, err := Cover(pre, []int64{30}); err != nil || fmt.Sprint(got) != "[{1 2 false}]" {
		t.Errorf("%v %v", got, err)
	}
	if _, err := Cover([]PacketInfo{{PTS: 0, Key: true}, {PTS: 0}}, []int64{0}); !errors.Is(err, ErrRun) {
		t.Errorf("one pts twice: %v", err)
	}
}

// TestRunFrames: a run gives every frame but its first keyframe's leading
// pictures, unless it starts the stream.
func TestRunFrames(t *testing.T) {
	r := Run{Packets: []Packet{{PTS: 60, Key: true}, {PTS: 40}, {PTS: 50}, {PTS: 90}, {PTS: 70}}}
	_, exact, err := runFrames(r)
	if err != nil || fmt.Sprint(exact) != "[true false false true true]" {
		t.Fatalf("%v %v", exact, err)
	}
	r.First = true
	if _, exact, _ = runFrames(r); fmt.Sprint(exact) != "[true true true true true]" {
		t.Fatalf("from the stream's start: %v", exact)
	}
	if d := reorderDepth(r.Packets); d != 1 {
		t.Fatalf("reorder depth %d, want 1", d)
	}
	// A B-pyramid: I0 P8 B4 b2 b6: b2 follows 8 and 4 in decode order.
	pyramid := []Packet{{PTS: 0}, {PTS: 8}, {PTS: 4}, {PTS: 2}, {PTS: 6}}
	if d := reorderDepth(pyramid); d != 2 {
		t.Fatalf("pyramid's reorder depth %d, want 2", d)
	}
}

// TestStreamLayout: the pixel layout each codec's configuration record
// states, which Footprint counts; records that state none are the worst
// case.
func TestStreamLayout(t *testing.T) {
	// avcC of a High 4:4:4 Predictive SPS (profile 244): chroma_format_idc
	// 3, separate planes 0, bit depths 8 and 10 → 4:4:4, 2 bytes.
	// SPS: 67 f4 00 1e | ue(0)=1 ue(3)=00100 u(1)=0 ue(0)=1 ue(2)=011 → 1 00100 0 1 011 = 1001 0001 011x
	sps := []byte{0x67, 0xf4, 0x00, 0x1e, 0x91, 0x60}
	avcc := append([]byte{1, 0xf4, 0, 0x1e, 0xff, 0xe1, 0, byte(len(sps))}, sps...)
	hvcc := make([]byte, 23)
	hvcc[0], hvcc[16], hvcc[17], hvcc[18] = 1, 0xfc|1, 0xf8|2, 0xf8|2
	vpcc := []byte{1, 0, 0, 0, 0, 10, 10<<4 | 1<<1, 0}
	av1c := []byte{0x81, 0, 0x40 | 0x08 | 0x04, 0}
	cases := []struct {
		codec codec
		extra []byte
		want  string
	}{
		{codecH264, avcc, "4:4:4, 2-byte samples"},
		{codecH264, []byte{1, 66, 0, 30, 0xff, 0xe1, 0, 4, 0x67, 66, 0, 30}, "4:2:0, 1-byte samples"},
		{codecH264, nil, "unknown (assumed 4:4:4, 16-bit)"},
		{codecHEVC, hvcc, "4:2:0, 2-byte samples"},
		{codecVP9, vpcc, "4:2:0, 2-byte samples"},
		{codecVP9, nil, "unknown (assumed 4:4:4, 16-bit)"},
		{codecAV1, av1c, "4:2:0, 2-byte samples"},
		{codecAV1, []byte{0x81, 0, 0x10}, "unknown (assumed 4:4:4, 16-bit)"},
	}
	for _, c := range cases {
		if got := streamLayout(Stream{Extradata: c.extra}, c.codec).String(); got != c.want {
			t.Errorf("%s %x: %s, want %s", c.codec, c.extra, got, c.want)
		}
	}
}

// TestBounds: the pixel bound refuses a 16k×16k stream from its index
// entry (Footprint and Decode alike), before anything is opened.
func TestBounds(t *testing.T) {
	big := Stream{Codec: "avc1", Width: 16384, Height: 16384}
	if _, err := Footprint(big, framesize.Bound{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Footprint of 16k×16k: %v", err)
	}
	dec := NewDecoder(Options{})
	defer dec.Close()
	err := dec.Decode(t.Context(), Run{Stream: big, Packets: []Packet{{Key: true, Data: []byte{0}}}}, []int64{0}, nil)
	if !errors.Is(err, ErrTooLarge) || dec.Stats().Opened != 0 {
		t.Fatalf("Decode of 16k×16k: %v, %+v", err, dec.Stats())
	}
	// 8K with no configuration record: every slot of the worst layout.
	n, err := Footprint(Stream{Codec: "h264", Width: 7680, Height: 4320}, framesize.Bound{})
	if err != nil || n < 37*7680*4320*3/2 {
		t.Fatalf("8K: %d, %v", n, err)
	}
	if _, err := Footprint(Stream{Codec: "prores", Width: 64, Height: 64}, framesize.Bound{}); !errors.Is(err, ErrCodec) {
		t.Fatalf("prores: %v", err)
	}
}

// The node's memory manager's decodes account is a Budget: what the
// gateway's transform stage gives a Decoder.
var _ Budget = (*memory.Account)(nil)
