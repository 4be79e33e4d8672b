//go:build cgo && brand_libav

package video

import (
	"bytes"
	"context"
	"errors"
	"github.com/brandgw/brand/format/video/framesize"
	"strings"
	"testing"
)

// TestBadInput: streams and runs that must not become frames are
// refused with their own errors, naming what is wrong, and nothing that
// differs from PyAV's decode is ever handed out.
func TestBadInput(t *testing.T) {
	h264 := fixtureNamed(t, "h264-b-1s")
	hevc := fixtureNamed(t, "hevc-1s")
	av1 := fixtureNamed(t, "av1-1s")
	group := func(d *dump) Run { return d.run(Span{Start: 0, End: 25, First: true}) }
	all := func(r Run) []int64 {
		var w []int64
		for _, p := range r.Packets {
			w = append(w, p.PTS)
		}
		return w
	}
	cut := func(d *dump, k int) Run {
		r := group(d)
		r.Packets[k].Data = r.Packets[k].Data[:len(r.Packets[k].Data)/2]
		return r
	}
	cases := []struct {
		name string
		opt  Options
		run  func() Run
		want func(Run) []int64
		err  error
		says string
	}{
		{name: "16k×16k", err: ErrTooLarge, says: "16384×16384", run: func() Run {
			r := group(h264)
			r.Stream.Width, r.Stream.Height = 16384, 16384
			return r
		}},
		{name: "over a side", err: ErrTooLarge, says: "20000×8", run: func() Run {
			r := group(h264)
			r.Stream.Width, r.Stream.Height = 20000, 8
			return r
		}},
		{name: "index smaller than the frames", err: ErrDecode, says: "176×100", run: func() Run {
			r := group(h264)
			r.Stream.Width, r.Stream.Height = 88, 50
			return r
		}},
		{name: "frames over the decoder's pixel bound", opt: Options{Frames: framesize.Bound{Pixels: 88 * 50}}, err: ErrDecode, says: "image parameters invalid", run: func() Run {
			r := group(h264)
			r.Stream.Width, r.Stream.Height = 88, 50
			return r
		}},
		{name: "h264 packet cut short", err: ErrDecode, says: "packet 3", run: func() Run { return cut(h264, 3) }},
		{name: "hevc packet cut short", err: ErrDecode, says: "packet 5", run: func() Run { return cut(hevc, 5) }},
		{name: "av1 keyframe cut short", err: ErrDecode, says: "packet 0", run: func() Run { return cut(av1, 0) }},
		{name: "hevc packets as h264", err: ErrDecode, run: func() Run {
			r := group(hevc)
			r.Stream = h264.stream()
			return r
		}},
		{name: "empty packet", err: ErrDecode, says: "empty", run: func() Run {
			r := group(h264)
			r.Packets[4].Data = nil
			return r
		}},
		{name: "not from a keyframe", err: ErrRun, says: "not a keyframe", run: func() Run {
			r := group(h264)
			r.Packets = r.Packets[1:]
			return r
		}},
		{name: "a frame not in the run", err: ErrRun, says: "pts 999999", run: func() Run { return group(h264) },
			want: func(r Run) []int64 { return []int64{r.Packets[2].PTS, 999999} }},
		{name: "one pts twice", err: ErrRun, says: "one pts", run: func() Run {
			r := group(h264)
			r.Packets[3].PTS = r.Packets[2].PTS
			return r
		}},
		{name: "unsupported codec", err: ErrCodec, says: `"mpeg2video"`, run: func() Run {
			r := group(h264)
			r.Stream.Codec = "mpeg2video"
			return r
		}},
		{name: "empty run", err: ErrRun, run: func() Run { return Run{Stream: h264.stream()} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dec := NewDecoder(c.opt)
			run := c.run()
			want := all(run)
			if c.want != nil {
				want = c.want(run)
			}
			heap := cHeap()
			err := dec.Decode(context.Background(), run, want, func(f Frame) error {
				for _, d := range []*dump{h264, hevc, av1} {
					if ref, ok := d.frame(f.PTS); ok && len(ref) == len(f.RGB) && bytes.Equal(ref, f.RGB) {
						return nil
					}
				}
				t.Errorf("frame pts %d handed out, unlike PyAV's", f.PTS)
				return nil
			})
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v, want %v saying %q", err, c.err, c.says)
			}
			if c.err == ErrTooLarge || c.err == ErrRun || c.err == ErrCodec {
				if s := dec.Stats(); s.Opened != 0 {
					t.Fatalf("refused after opening a decoder: %+v", s)
				}
				if grew := cHeap() - heap; grew > 1<<20 {
					t.Fatalf("refused after allocating %d bytes", grew)
				}
			}
			dec.Close()
			if s := dec.Stats(); s.Live != 0 {
				t.Fatalf("%d decoders live after Close", s.Live)
			}
			t.Log(err)
		})
	}
}

// TestDamage: every packet of a group, in turn, cut to half its length:
// H.264, H.265 and AV1 refuse the run each time (their packets carry
// their units' lengths). VP9's last tile has no length, so a cut VP9
// packet decodes to other pixels without an error — measured and logged
// here, with the share of runs refused when a third of a packet is
// overwritten or one bit flipped, which no decoder catches every time
// (docs/transform.md §12.6).
func TestDamage(t *testing.T) {
	dec := NewDecoder(Options{})
	defer dec.Close()
	for _, name := range []string{"h264-b-1s", "hevc-1s", "av1-1s", "vp9-1s"} {
		d := fixtureNamed(t, name)
		for _, mode := range []string{"cut", "overwrite", "flip"} {
			refused, wrong, same := 0, 0, 0
			for k := range 25 {
				run := d.run(Span{Start: 0, End: 25, First: true})
				var want []int64
				for _, p := range run.Packets {
					want = append(want, p.PTS)
				}
				data := bytes.Clone(run.Packets[k].Data)
				switch mode {
				case "cut":
					data = data[:len(data)/2]
				case "overwrite":
					for i := len(data) / 3; i < len(data)*2/3; i++ {
						data[i] = byte(i * 7)
					}
				case "flip":
					data[len(data)*2/3] ^= 0x10
				}
				run.Packets[k].Data = data
				differs := false
				err := dec.Decode(context.Background(), run, want, func(f Frame) error {
					if ref, _ := d.frame(f.PTS); !bytes.Equal(ref, f.RGB) {
						differs = true
					}
					return nil
				})
				switch {
				case err != nil:
					if !errors.Is(err, ErrDecode) {
						t.Fatalf("%s %s packet %d: %v, want ErrDecode", name, mode, k, err)
					}
					refused++
				case differs:
					wrong++
				default:
					same++
				}
			}
			if mode == "cut" && name != "vp9-1s" && refused != 25 {
				t.Errorf("%s: %d of 25 packets cut short were refused", name, refused)
			}
			t.Logf("%s, %s: %d of 25 runs refused, %d decoded to other pixels, %d unharmed", name, mode, refused, wrong, same)
		}
	}
}
